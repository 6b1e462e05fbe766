{# The wgmma helpers of gemm_wgmma.cu and gemm_wgmma_ps.cu: TF32 rounding and
   the split (the in-loop split and the pack kernel's: one rounding), the
   shared-memory matrix descriptor (needs LBO, SBO), the wgmma with both operands
   in shared memory (NI accumulator fragments), its fences. #}
// x to TF32, round to nearest (ties away from zero): see gemm_mma.cu.
__device__ __forceinline__ float tf32_rna(const float x)
{
    return __uint_as_float((__float_as_uint(x) + 0x1000u) & 0xffffe000u);
}

// Four elements split into big and small halves, stored 16 bytes each.
__device__ __forceinline__ void store_split(const float4 v, float* big, float* small)
{
    const float4 b = make_float4(tf32_rna(v.x), tf32_rna(v.y), tf32_rna(v.z), tf32_rna(v.w));
    *reinterpret_cast<float4*>(big) = b;
    *reinterpret_cast<float4*>(small) = make_float4(tf32_rna(v.x - b.x), tf32_rna(v.y - b.y),
                                                    tf32_rna(v.z - b.z), tf32_rna(v.w - b.w));
}

// A shared-memory matrix descriptor: K-major, no swizzle (PTX ISA, "Matrix
// Descriptor Format"): start, leading and stride byte offsets, each >> 4.
__device__ __forceinline__ unsigned long long smem_desc(const unsigned addr)
{
    return (unsigned long long)((addr & 0x3ffffu) >> 4) | ((unsigned long long)(LBO >> 4) << 16)
         | ((unsigned long long)(SBO >> 4) << 32);
}

// d (+)= a (64 x 8, K-major) * b (8 x WN, K-major); SCALE_D = 0: d = a * b.
template <int SCALE_D>
__device__ __forceinline__ void wgmma_tf32(float (&d)[NI][4], const unsigned long long da, const unsigned long long db)
{
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %{{ wgmma_nreg + 2 }}, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n{{ WN }}k8.f32.tf32.tf32 {{ '{' }}{{ wgmma_regs }}{{ '}' }}, %{{ wgmma_nreg }}, %{{ wgmma_nreg + 1 }}, p, 1, 1;\n}\n"
                 : {{ wgmma_outs }}
                 : "l"(da), "l"(db), "n"(SCALE_D));
}
__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
template <int PENDING>
__device__ __forceinline__ void wgmma_wait() { asm volatile("wgmma.wait_group.sync.aligned %0;\n" :: "n"(PENDING) : "memory"); }
// The compiler must not move accesses of registers a wgmma is writing across
// the asm statements that issue and wait for it.
__device__ __forceinline__ void fence_regs(float (&d)[NI][4])
{
#pragma unroll
    for (int j = 0; j < NI; ++j)
#pragma unroll
        for (int q = 0; q < 4; ++q) asm volatile("" : "+f"(d[j][q]) :: "memory");
}
