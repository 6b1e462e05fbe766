#version 330 core
// Hand-written baseline: the straightforward mapping (Jiang, slide "GPU algorithms
// for matrix multiply"). One output per fragment, one float per texel (only .r
// used), one row of A and one column of B fetched per output, the whole K in one pass.
// layout: {"mc": "1x1", "ka": 1, "kb": 1, "mrt_h": 1, "mrt_w": 1}
uniform sampler2D A;        // texel (k, m) = A[m, k]
uniform sampler2D B;        // texel (n, k) = B[k, n]
uniform sampler2D Cin;
uniform sampler2D P0;
uniform int u_k0;
uniform int u_steps;        // k-values in this pass
uniform bool u_first;
uniform bool u_last;
uniform float u_alpha;
uniform float u_beta;
layout(location = 0) out vec4 out0;

void main() {
    ivec2 p = ivec2(gl_FragCoord.xy);
    float c = u_first ? 0.0 : texelFetch(P0, p, 0).r;
    for (int k = u_k0; k < u_k0 + u_steps; ++k)
        c += texelFetch(A, ivec2(k, p.y), 0).r * texelFetch(B, ivec2(p.x, k), 0).r;
    if (u_last) {
        c *= u_alpha;
        if (u_beta != 0.0) c += u_beta * texelFetch(Cin, p, 0).r;
    }
    out0 = vec4(c, 0.0, 0.0, 0.0);
}
