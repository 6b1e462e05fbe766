#version 430 core
// GL arrays: a fragment kernel's result texels back into a strided region of floats on the
// GPU, the inverse of pack.comp.j2: the source's texel (x, y) is texel (u_ox + x, u_oy + y)
// of the whole packing (a render target holds one block of it), whose channel ch holds the
// matrix's element (row * u_rh + ch / u_cw, column * u_cw + ch % u_cw); padding is dropped.
layout(local_size_x = 16, local_size_y = 16) in;

layout(binding = 0) uniform sampler2D src;
layout(std430, binding = 1) writeonly buffer Dst { float dst[]; };

uniform int u_w;         // texels of the source read
uniform int u_h;
uniform int u_ox;        // where the source's texel (0, 0) lies in the whole packing
uniform int u_oy;
uniform int u_rh;
uniform int u_cw;
uniform int u_rows;      // the matrix
uniform int u_cols;
uniform int u_do;        // its element (r, c) goes to u_do + r * u_dr + c * u_dc
uniform int u_dr;
uniform int u_dc;

void main() {
    const int step_x = int(gl_NumWorkGroups.x * gl_WorkGroupSize.x);
    const int step_y = int(gl_NumWorkGroups.y * gl_WorkGroupSize.y);
    for (int y = int(gl_GlobalInvocationID.y); y < u_h; y += step_y) {
        for (int x = int(gl_GlobalInvocationID.x); x < u_w; x += step_x) {
            const vec4 t = texelFetch(src, ivec2(x, y), 0);
            for (int ch = 0; ch < 4; ++ch) {
                const int r = (u_oy + y) * u_rh + ch / u_cw;
                const int c = (u_ox + x) * u_cw + ch % u_cw;
                if (ch < u_rh * u_cw && r < u_rows && c < u_cols)
                    dst[u_do + r * u_dr + c * u_dc] = t[ch];
            }
        }
    }
}
