#version 330 core
// Hand-written baseline in the style of TensorFlow.js's packed WebGL matmul
// (MatMulPackedProgram): every texel a 2x2 block, one 2x2 output block per
// fragment, result += a.xxzz * b.xyxy + a.yyww * b.zwzw over the shared dimension.
// layout: {"mc": "2x2", "ka": 2, "kb": 2, "mrt_h": 1, "mrt_w": 1}
uniform sampler2D A;        // texel (k/2, m/2) = A[m:m+2, k:k+2] row-major
uniform sampler2D B;        // texel (n/2, k/2) = B[k:k+2, n:n+2] row-major
uniform sampler2D Cin;
uniform sampler2D P0;
uniform int u_k0;
uniform int u_steps;        // 2-k steps in this pass
uniform bool u_first;
uniform bool u_last;
uniform float u_alpha;
uniform float u_beta;
layout(location = 0) out vec4 out0;

void main() {
    ivec2 rc = ivec2(gl_FragCoord.xy);
    vec4 result = u_first ? vec4(0.0) : texelFetch(P0, rc, 0);
    for (int i = u_k0; i < u_k0 + u_steps; i++) {
        vec4 a = texelFetch(A, ivec2(i, rc.y), 0);
        vec4 b = texelFetch(B, ivec2(rc.x, i), 0);
        result += (a.xxzz * b.xyxy) + (a.yyww * b.zwzw);
    }
    if (u_last) {
        result *= u_alpha;
        if (u_beta != 0.0) result += u_beta * texelFetch(Cin, rc, 0);
    }
    out0 = result;
}
