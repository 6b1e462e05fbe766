{# Address helpers of the mma.sync kernels' copy (mma_copy.cu): included by
   gemm_mma.cu, gemm_dmma.cu and gemm_wgmma.cu after cp_async.cu. #}
// Keeps x in a register from here on: the compiler may no longer recompute it
// where it is used (it does that to save registers, at the cost of the
// instructions that computed it, on every use).
__device__ __forceinline__ void pin(unsigned& x) { asm volatile("" : "+r"(x)); }
__device__ __forceinline__ void pin(unsigned long long& x) { asm volatile("" : "+l"(x)); }

// A pointer the compiler takes as given: an address off it is then one
// multiply-add of the offset, not the offset folded into a 64-bit index first.
template <typename P>
__device__ __forceinline__ P* pinned(P* p)
{
    unsigned long long x = reinterpret_cast<unsigned long long>(p);
    pin(x);
    return reinterpret_cast<P*>(x);
}

// cp_async to a shared-memory address (cvta'd once by the caller), unconditional.
template <int BYTES>
__device__ __forceinline__ void cp_async_to(const unsigned s, const void* src)
{
    if constexpr (BYTES == 16)
        asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" :: "r"(s), "l"(src));
    else
        asm volatile("cp.async.ca.shared.global [%0], [%1], %2;\n" :: "r"(s), "l"(src), "n"(BYTES));
}
