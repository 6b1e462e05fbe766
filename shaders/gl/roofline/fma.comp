#version 430
// GL compute-shader FMA peak: the same {{ chains }} independent vec4 chains as
// fma.frag, so the two peaks differ only in how the driver schedules the work
// (on Hopper, pixel work runs on a few SMs; compute work on all of them).
layout(local_size_x = {{ local_size }}) in;
layout(std430, binding = 0) buffer Out { vec4 result[]; };
uniform int iters;
uniform vec4 a;
uniform vec4 b;

void main() {
    uint gid = gl_GlobalInvocationID.x;
    vec4 seed = vec4(float(gid) * 1e-6);
{% for c in range(chains) %}
    vec4 x{{ c }} = seed + vec4({{ c }}.0);
{% endfor %}
    for (int i = 0; i < iters; ++i) {
{% for u in range(unroll) %}
{% for c in range(chains) %}
        x{{ c }} = x{{ c }} * a + b;
{% endfor %}
{% endfor %}
    }
    result[gid] = {% for c in range(chains) %}x{{ c }}{{ " + " if not loop.last }}{% endfor %};
}
