#version 330 core
// Hand-written baseline, the stand-in for GPUbench's expert code: a 4x4 block of C
// per fragment, RGBA-packed (B four columns per texel, A four k per texel) across
// four render targets (one row of the block each), k unrolled by hand four at a time.
// layout: {"mc": "1x4", "ka": 4, "kb": 1, "mrt_h": 4, "mrt_w": 1}
uniform sampler2D A;        // texel (k/4, m) = A[m, k:k+4]
uniform sampler2D B;        // texel (n/4, k) = B[k, n:n+4]
uniform sampler2D Cin;
uniform sampler2D P0;
uniform sampler2D P1;
uniform sampler2D P2;
uniform sampler2D P3;
uniform int u_k0;
uniform int u_steps;        // 4-k steps in this pass
uniform int u_hc;           // rows of texels per render target
uniform bool u_first;
uniform bool u_last;
uniform float u_alpha;
uniform float u_beta;
layout(location = 0) out vec4 out0;
layout(location = 1) out vec4 out1;
layout(location = 2) out vec4 out2;
layout(location = 3) out vec4 out3;

void main() {
    ivec2 p = ivec2(gl_FragCoord.xy);
    vec4 c0 = vec4(0.0), c1 = vec4(0.0), c2 = vec4(0.0), c3 = vec4(0.0);
    if (!u_first) {
        c0 = texelFetch(P0, p, 0); c1 = texelFetch(P1, p, 0);
        c2 = texelFetch(P2, p, 0); c3 = texelFetch(P3, p, 0);
    }
    for (int k = u_k0; k < u_k0 + u_steps; ++k) {
        vec4 b0 = texelFetch(B, ivec2(p.x, 4 * k + 0), 0);
        vec4 b1 = texelFetch(B, ivec2(p.x, 4 * k + 1), 0);
        vec4 b2 = texelFetch(B, ivec2(p.x, 4 * k + 2), 0);
        vec4 b3 = texelFetch(B, ivec2(p.x, 4 * k + 3), 0);
        vec4 a0 = texelFetch(A, ivec2(k, p.y), 0);
        vec4 a1 = texelFetch(A, ivec2(k, p.y + u_hc), 0);
        vec4 a2 = texelFetch(A, ivec2(k, p.y + 2 * u_hc), 0);
        vec4 a3 = texelFetch(A, ivec2(k, p.y + 3 * u_hc), 0);
        c0 += a0.x * b0 + a0.y * b1 + a0.z * b2 + a0.w * b3;
        c1 += a1.x * b0 + a1.y * b1 + a1.z * b2 + a1.w * b3;
        c2 += a2.x * b0 + a2.y * b1 + a2.z * b2 + a2.w * b3;
        c3 += a3.x * b0 + a3.y * b1 + a3.z * b2 + a3.w * b3;
    }
    if (u_last) {
        c0 *= u_alpha; c1 *= u_alpha; c2 *= u_alpha; c3 *= u_alpha;
        if (u_beta != 0.0) {
            c0 += u_beta * texelFetch(Cin, p, 0);
            c1 += u_beta * texelFetch(Cin, p + ivec2(0, u_hc), 0);
            c2 += u_beta * texelFetch(Cin, p + ivec2(0, 2 * u_hc), 0);
            c3 += u_beta * texelFetch(Cin, p + ivec2(0, 3 * u_hc), 0);
        }
    }
    out0 = c0; out1 = c1; out2 = c2; out3 = c3;
}
