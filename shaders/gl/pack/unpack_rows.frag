#version 330 core
// GPU unpacking: 4 floats a texel (rows padded to whole texels) back to one float a
// texel of a u_cols-wide one-channel target, whose bytes are the row-major array.
uniform sampler2D P;
out float value;

void main() {
    ivec2 p = ivec2(gl_FragCoord.xy);
    value = texelFetch(P, ivec2(p.x >> 2, p.y), 0)[p.x & 3];
}
