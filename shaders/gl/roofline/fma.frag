#version 330
// Fragment-shader FMA peak (Volkov: measure the arithmetic peak first).
// {{ chains }} independent vec4 chains give the ILP that hides ALU latency;
// each loop trip does {{ unroll }} multiply-adds per chain.  `iters` is a uniform
// and a, b are uniforms, so the compiler can neither fold nor shorten the loop.
// flops per fragment = iters * {{ unroll }} * {{ chains }} * 4 lanes * 2.
uniform int iters;
uniform vec4 a;     // close to 1 and
uniform vec4 b;     // close to 0: values stay finite for any iters
out vec4 frag;

void main() {
    vec4 seed = gl_FragCoord.xyxy * 1e-3;
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
    // Every chain reaches the output, so none is dead code.
    frag = {% for c in range(chains) %}x{{ c }}{{ " + " if not loop.last }}{% endfor %};
}
