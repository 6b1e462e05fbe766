{# The K_G reduction kernel (KG > 1, KR = 0), after every GEMM kernel of a
   split config (gemm_base.cu): the second launch of a split config. #}

// K_G reduction: C = alpha * sum_z W[z] + beta * C over the {{ KG }} splits.
// A block is RX elements x RZ lanes of z ({{ rx * rz }} threads); lane y sums
// z = y, y + RZ, ... (KG / RZ independent loads, unrolled) and the RZ partial
// sums meet in shared memory in a fixed order (deterministic). RZ > 1 only
// where M * N is too small to fill the GPU with one thread per element.
constexpr int RX = {{ rx }}, RZ = {{ rz }};
extern "C" __global__ void __launch_bounds__(RX * RZ)
{{ kernel }}_reduce(const T* __restrict__ W, T* __restrict__ C, const long long MN,
                  const T alpha, const T beta)
{
    const long long e = (long long)blockIdx.x * RX + threadIdx.x;
    T s = T(0);
    if (e < MN) {
#pragma unroll
        for (int i = 0; i < KG / RZ; ++i) s += W[(i * RZ + (int)threadIdx.y) * MN + e];
    }
{% if rz > 1 %}
    __shared__ T part[RZ][RX];
    part[threadIdx.y][threadIdx.x] = s;
    __syncthreads();
    if (threadIdx.y != 0 || e >= MN) return;
#pragma unroll
    for (int y = 1; y < RZ; ++y) s += part[y][threadIdx.x];
{% else %}
    if (e >= MN) return;
{% endif %}
    C[e] = alpha * s + (beta != T(0) ? beta * C[e] : T(0));
}
