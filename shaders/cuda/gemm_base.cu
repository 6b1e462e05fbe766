{# The frame of every GEMM kernel family (gemm.cu, gemm_mma.cu, gemm_dmma.cu,
   gemm_wgmma.cu, gemm_wgmma_ps.cu extend it), CLBlast's ordered kernel parts:
   a family fills the blocks, the frame keeps their order and what they share.
     needs       a first line naming the architecture variant the family
                 needs (compiler.arch_for reads it), or nothing
     kind        the hardware path, in the title line
     about       what the family computes and how (comment lines)
     constants   its constexpr header: tile sizes, copies, the K_G split's
                 grain and count (KGRAN, KG), stage sizes
     helpers     includes and device functions before the kernel
     bounds      the minimum blocks per SM of __launch_bounds__, if any
     prologue    the kernel's start: shared memory, the thread's place, its
                 block's work (block_range.cu), accumulators, copy lambdas
     main_loop   the stages over K
     epilogue    C = alpha acc + beta C, or the K_G split's partial to W
   After the epilogue, the K_G dispatch tail: with KR the last block of each
   tile reduces the partials in this launch (splitk_last_block.cu), else a
   split config (KG > 1) gets the reduce kernel after this one
   (splitk_reduce.cu). With stream-K (SK > 0) the prologue .. epilogue run
   once per segment of this block's work units, in a loop that
   streamk_loop.cu opens and streamk_fixup.cu (the partials' sum) closes.
   Needs T, trans_a, trans_b, config_text, KG, KR, SK. #}
{% block needs %}{% endblock %}
// shadertune generated GEMM (CUDA, {% block kind %}{% endblock %}): C = alpha * op(A) * op(B) + beta * C
// row-major {{ T }}; A stored {{ "K x M (op = T)" if trans_a else "M x K (op = N)" }}, B stored {{ "N x K (op = T)" if trans_b else "K x N (op = N)" }}.
// config: {{ config_text }}
//
{% block about %}{% endblock %}
{% block constants %}{% endblock %}
{% block helpers %}{% endblock %}
extern "C" __global__ void __launch_bounds__(THREADS{% block bounds %}{% endblock %})
{% include "cuda/signature.cu" %}
{
{% if SK %}
{% include "cuda/streamk_loop.cu" %}
{% endif %}
{% block prologue %}{% endblock %}
{% block main_loop %}{% endblock %}
{% block epilogue %}{% endblock %}
{% if KR %}
{% include "cuda/splitk_last_block.cu" %}
{% endif %}
{% if SK %}
{% include "cuda/streamk_fixup.cu" %}
{% endif %}
}
{% if KG > 1 and not KR %}
{% include "cuda/splitk_reduce.cu" %}
{% endif %}
