#version 430 core
// GL arrays: one strided region of floats into another, on the GPU (or a value into it).
// dst[u_do + i * u_dr + j * u_dc] = u_fill ? u_value : u_scale * src[u_so + i * u_sr + j * u_sc]
// for i < u_rows, j < u_cols.  Source and destination may be one buffer (the caller never
// lets the two regions overlap, except for a fill or a scale in place: each invocation reads
// only the element it writes).  The grid may be smaller than the region: it strides over it.
layout(local_size_x = 16, local_size_y = 16) in;

layout(std430, binding = 0) readonly buffer Src { float src[]; };
layout(std430, binding = 1) buffer Dst { float dst[]; };

uniform int u_rows;
uniform int u_cols;
uniform int u_so;        // the source's element (0, 0), its row and column strides
uniform int u_sr;
uniform int u_sc;
uniform int u_do;        // the destination's
uniform int u_dr;
uniform int u_dc;
uniform bool u_fill;
uniform float u_value;
uniform float u_scale;

void main() {
    const int step_j = int(gl_NumWorkGroups.x * gl_WorkGroupSize.x);
    const int step_i = int(gl_NumWorkGroups.y * gl_WorkGroupSize.y);
    for (int i = int(gl_GlobalInvocationID.y); i < u_rows; i += step_i) {
        for (int j = int(gl_GlobalInvocationID.x); j < u_cols; j += step_j) {
            const int d = u_do + i * u_dr + j * u_dc;
            dst[d] = u_fill ? u_value : u_scale * src[u_so + i * u_sr + j * u_sc];
        }
    }
}
