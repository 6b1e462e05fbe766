#version 330
// One triangle that covers the viewport (no vertex buffer: positions from gl_VertexID),
// so every pixel of the framebuffer runs the fragment shader exactly once.
void main() {
    vec2 p = vec2((gl_VertexID << 1) & 2, gl_VertexID & 2);
    gl_Position = vec4(p * 2.0 - 1.0, 0.0, 1.0);
}
