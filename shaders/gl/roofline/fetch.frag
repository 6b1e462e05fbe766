#version 330
// Fragment texelFetch rate, RGBA32F, cache-resident: the ceiling that bounds a
// matmul fragment shader (Brook-style roofline = fetch rate x flops per fetch).
// The texture is {{ tex_size }}x{{ tex_size }} texels (small, so it stays in the
// texture cache); addresses move with the pixel and the loop trip, and neighbouring
// fragments read neighbouring texels as matmul fragments do.
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
        s{{ f }} += texelFetch(tex, ivec2(p.x + {{ f }}, p.y + i) & MASK, 0);
{% endfor %}
    }
    frag = {% for f in range(fetches) %}s{{ f }}{{ " + " if not loop.last }}{% endfor %};
}
