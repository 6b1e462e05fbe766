#version 430
// Fragment storage-buffer load rate, vec4 (16 B), cache-resident: the second ceiling
// of the image path, whose operands may come from storage buffers instead of textures.
// The buffer holds {{ tex_size }} x {{ tex_size }} vec4 in rows, as an operand does, and
// the addresses follow fetch.frag's matmul pattern: half the loads walk the fragment's
// row (A-like: one row per fragment row), half its column (B-like: neighbouring
// fragments read neighbouring vec4s of one row, so a warp's load is one coalesced line).
// loads per fragment = iters * {{ fetches }}.
layout(std430, binding = 0) readonly restrict buffer Src { vec4 src[]; };
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
{% if f % 2 == 0 %}
        s{{ f }} += src[(p.y & MASK) * {{ tex_size }} + ((i * {{ fetches }} + {{ f }}) & MASK)];
{% else %}
        s{{ f }} += src[((i * {{ fetches }} + {{ f }}) & MASK) * {{ tex_size }} + (p.x & MASK)];
{% endif %}
{% endfor %}
    }
    frag = {% for f in range(fetches) %}s{{ f }}{{ " + " if not loop.last }}{% endfor %};
}
