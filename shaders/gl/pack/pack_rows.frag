#version 330 core
// GPU packing: a row-major array uploaded as is (one float a texel of S, u_cols x u_rows)
// becomes 4 floats a texel, rows padded with zeros to whole texels and, past u_rows,
// zero rows (B's k rows past K).  The render target is the packed texture.
uniform sampler2D S;
uniform int u_cols;
uniform int u_rows;
out vec4 texel;

void main() {
    ivec2 p = ivec2(gl_FragCoord.xy);
    vec4 v = vec4(0.0);
    if (p.y < u_rows) {
        for (int c = 0; c < 4; ++c) {
            int x = 4 * p.x + c;
            if (x < u_cols)
                v[c] = texelFetch(S, ivec2(x, p.y), 0).r;
        }
    }
    texel = v;
}
