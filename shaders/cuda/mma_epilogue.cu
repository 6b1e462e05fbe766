{# The tensor-core kernels' epilogue (gemm_mma.cu, gemm_wgmma.cu): a warp's
   MI x NI m16n8 accumulator fragments acc[i][j][q] at rows m0 + wm0 + 16 i,
   columns n0 + wn0 + 8 j. Needs gid, tig, acc, MI, NI, wm0, wn0, m0, n0, M,
   N, C, W, alpha, beta (and with SK sk_whole, sk_slot) in scope. #}
{% if SK %}
    // Epilogue (stream-K): a segment covering its whole tile writes C = alpha * acc
    // + beta * C (C is not read when beta == 0); another writes its raw partial
    // sum to its slot of W, BM x BN row-major, for the fixup (streamk_fixup.cu).
    // c0, c1: row gid, columns 2 tig, 2 tig + 1; c2, c3: row gid + 8.
    T* const out = sk_whole ? C + (size_t)m0 * N + n0 : W + (size_t)sk_slot * (BM * BN);
    const size_t ldo = sk_whole ? (size_t)N : (size_t)BN;
    const T scale = sk_whole ? alpha : T(1), keep = sk_whole ? beta : T(0);
#pragma unroll
    for (int i = 0; i < MI; ++i)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            const int r = wm0 + i * 16 + gid + h * 8;
            if (m0 + r >= M) continue;
#pragma unroll
            for (int j = 0; j < NI; ++j) {
                const int c = wn0 + j * 8 + 2 * tig;
                T* const p = out + r * ldo + c;
{% if n_even %}
                if (n0 + c < N) {   // N even: both columns are in, aligned to the pair
                    {{ pair_t }} v = make_{{ pair_t }}(scale * acc[i][j][2 * h], scale * acc[i][j][2 * h + 1]);
                    if (keep != T(0)) {
                        const {{ pair_t }} o = *reinterpret_cast<const {{ pair_t }}*>(p);
                        v.x += keep * o.x;
                        v.y += keep * o.y;
                    }
                    *reinterpret_cast<{{ pair_t }}*>(p) = v;
                }
{% else %}
#pragma unroll
                for (int q = 0; q < 2; ++q) {
                    if (n0 + c + q >= N) break;
                    p[q] = scale * acc[i][j][2 * h + q] + (keep != T(0) ? keep * p[q] : T(0));
                }
{% endif %}
            }
        }
{% else %}
    // Epilogue: {{ "raw partial sums to this split's slice of W (the reduction applies alpha, beta)" if KG > 1 else "C = alpha * acc + beta * C; C is not read when beta == 0 (BLAS)" }}.
    // c0, c1: row gid, columns 2 tig, 2 tig + 1; c2, c3: row gid + 8.
{% if KG > 1 %}
    T* const out = W + (size_t)blockIdx.z * {{ wsplit }};
{% else %}
    T* const out = C;
{% endif %}
#pragma unroll
    for (int i = 0; i < MI; ++i)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            const int gm = m0 + wm0 + i * 16 + gid + h * 8;
            if (gm >= M) continue;
#pragma unroll
            for (int j = 0; j < NI; ++j) {
                const int gn = n0 + wn0 + j * 8 + 2 * tig;
{% if n_even %}
                if (gn < N) {   // N even: both columns are in, aligned to the pair
                    {{ pair_t }} v = make_{{ pair_t }}({{ "acc[i][j][2 * h], acc[i][j][2 * h + 1]" if KG > 1 else "alpha * acc[i][j][2 * h], alpha * acc[i][j][2 * h + 1]" }});
{% if KG == 1 %}
                    if (beta != T(0)) {
                        const {{ pair_t }} o = *reinterpret_cast<const {{ pair_t }}*>(out + (size_t)gm * N + gn);
                        v.x += beta * o.x;
                        v.y += beta * o.y;
                    }
{% endif %}
                    *reinterpret_cast<{{ pair_t }}*>(out + (size_t)gm * N + gn) = v;
                }
{% else %}
#pragma unroll
                for (int c = 0; c < 2; ++c) {
                    if (gn + c >= N) break;
                    T* const p = out + (size_t)gm * N + gn + c;
{% if KG > 1 %}
                    *p = acc[i][j][2 * h + c];
{% else %}
                    *p = alpha * acc[i][j][2 * h + c] + (beta != T(0) ? beta * *p : T(0));
{% endif %}
                }
{% endif %}
            }
        }
{% endif %}
