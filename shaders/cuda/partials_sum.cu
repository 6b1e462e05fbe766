{# The last block's sum of a tile's partials and its write of C, shared by the
   in-launch K_G reduction (splitk_last_block.cu: the KG splits' slices of W) and
   stream-K's fixup (streamk_fixup.cu: the segments' slots, indented there).
   The includer sets partial_loop (the loop over the partials, a pragma and its
   header; the body ends with the loop's closing brace here) and partial_at (the
   address of partial's element e of the tile, o of C). Needs tid, m0, n0, M,
   N, BM, BN, THREADS, FV, frag_t, W, C, alpha, beta in scope. #}
{% if c_vec %}
    constexpr int RV = FV;        // N % FV == 0: a fragment is all in or all out
    typedef frag_t rv_t;
{% else %}
    constexpr int RV = 1;
    typedef T rv_t;
{% endif %}
    for (int e = tid * RV; e < BM * BN; e += THREADS * RV) {
        const int gm = m0 + e / BN, gn = n0 + e % BN;
        if (gm >= M || gn >= N) continue;
        const size_t o = (size_t)gm * N + gn;
        T s[RV];
#pragma unroll
        for (int v = 0; v < RV; ++v) s[v] = T(0);
{{ partial_loop }}
            const rv_t w = __ldcg(reinterpret_cast<const rv_t*>({{ partial_at }}));   // L2: other blocks wrote it
{% if c_vec %}
{% for v in range(FV) %}
            s[{{ v }}] += w{{ fcomp[v] }};
{% endfor %}
{% else %}
            s[0] += w;
{% endif %}
        }
#pragma unroll
        for (int v = 0; v < RV; ++v)
            C[o + v] = alpha * s[v] + (beta != T(0) ? beta * C[o + v] : T(0));
    }
