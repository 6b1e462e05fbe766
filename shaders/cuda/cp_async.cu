{# cp.async helpers (sm_80+), shared by gemm.cu (ST > 0) and gemm_mma.cu. #}
// cp.async (sm_80+): a copy of BYTES from global to shared memory that skips
// the registers; a source outside the matrix copies 0 bytes and zero-fills.
// 16-byte copies bypass L1 (.cg); smaller ones must go through it (.ca).
template <int BYTES>
__device__ __forceinline__ void cp_async(void* dst, const void* src, const bool ok)
{
    const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(dst));
    if constexpr (BYTES == 16)
        asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" :: "r"(s), "l"(src), "r"(ok ? 16 : 0));
    else
        asm volatile("cp.async.ca.shared.global [%0], [%1], %2, %3;\n" :: "r"(s), "l"(src), "n"(BYTES), "r"(ok ? BYTES : 0));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int PENDING>
__device__ __forceinline__ void cp_async_wait() { asm volatile("cp.async.wait_group %0;\n" :: "n"(PENDING) : "memory"); }
