#version 330
// Fragment texelFetch rate, RGBA32F, cache-resident: the ceiling that bounds a
// matmul fragment shader (Brook-style roofline = fetch rate x flops per fetch).
// The texture is {{ tex_size }}x{{ tex_size }} texels (small, so it stays in the
// texture cache).  The address pattern matters to the texture units, so it is a
// parameter ({{ pattern }}):
//   matmul   - as a matmul fragment fetches: half the fetches walk the fragment's
//              row (A-like), half its column (B-like), so the 4 fragments of a 2x2
//              quad read 2 distinct texels per fetch.  The roofline uses this one.
//   distinct - every fragment its own texel (4 distinct per quad).
//   quad     - one texel per 2x2 quad.
// fetches per fragment = iters * {{ fetches }}.
uniform sampler2D tex;
uniform int iters;
out vec4 frag;

void main() {
    const int MASK = {{ tex_size - 1 }};
    ivec2 p = ivec2(gl_FragCoord.xy);
{% for f in range(fetches) %}
    vec4 s{{ f }} = vec4(0.0);
{% endfor %}
    for (int i = 0; i < iters; ++i) {
{% for f in range(fetches) %}
{% if pattern == "matmul" and f % 2 == 0 %}
        s{{ f }} += texelFetch(tex, ivec2(i * {{ fetches }} + {{ f }}, p.y) & MASK, 0);
{% elif pattern == "matmul" %}
        s{{ f }} += texelFetch(tex, ivec2(p.x, i * {{ fetches }} + {{ f }}) & MASK, 0);
{% elif pattern == "quad" %}
        s{{ f }} += texelFetch(tex, ivec2((p.x >> 1) + {{ f }}, (p.y >> 1) + i) & MASK, 0);
{% else %}
        s{{ f }} += texelFetch(tex, ivec2(p.x + {{ f }}, p.y + i) & MASK, 0);
{% endif %}
{% endfor %}
    }
    frag = {% for f in range(fetches) %}s{{ f }}{{ " + " if not loop.last }}{% endfor %};
}
