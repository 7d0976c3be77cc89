/* program.c - runs a compiled program: a list of kernel calls over buffer slots (program inputs,
 * program outputs, offsets in one caller-allocated arena, constants), all in one call (issue #16).
 * Python compiles a group of nodes into one (edge/neon/program.py); the program and everything
 * it points to are only read here, so threads may run one program at once with their own arenas. */
#include "oxk.h"

static float* slot_ptr(const oxk_program* p, int s, void* const* inputs, void* const* outputs,
                       unsigned char* arena, int* bad) {
    const oxk_slot* sl;
    if (s < 0) return NULL;
    if (s >= p->n_slots) { *bad = 1; return NULL; }
    sl = &p->slots[s];
    switch (sl->kind) {
    case OXK_SLOT_INPUT: return inputs ? (float*)inputs[sl->index] : NULL;
    case OXK_SLOT_OUTPUT: return outputs ? (float*)outputs[sl->index] : NULL;
    case OXK_SLOT_ARENA: return arena ? (float*)(arena + sl->offset) : NULL;
    case OXK_SLOT_CONST: return (float*)sl->data;
    default: *bad = 1; return NULL;
    }
}

static int run_gemm(const oxk_instr* in, const float* a, const float* b, float* c) {
    const oxk_gemm_args* g = (const oxk_gemm_args*)in->args;
    int i, rc;
    if (!g || !g->plan || g->batch < 1) return OXK_EARG;
    for (i = 0; i < g->batch; i++) {
        rc = oxk_sgemm_run(g->plan, in->n, a + (size_t)i * g->stride_a,
                           b ? b + (size_t)i * g->stride_b : NULL, c + (size_t)i * g->stride_c);
        if (rc) return rc;
    }
    return 0;
}

/* ext: the pointers of slot[3..7] (NULL where -1), for ops with more than three operands. */
static int run_one(const oxk_instr* in, const float* a, const float* b, float* y, float* const* ext) {
    if (!a || !y) return OXK_EARG;
    switch (in->op) {
    case OXK_OP_SGEMM: return run_gemm(in, a, b, y);
    case OXK_OP_CONV2D: return in->args ? oxk_conv2d_run_z((const oxk_conv_plan*)in->args, in->n, a, b, y) : OXK_EARG;
    case OXK_OP_POOL2D: return in->args ? oxk_pool2d_run((const oxk_pool_plan*)in->args, in->n, a, y) : OXK_EARG;
    case OXK_OP_CONVT:
        return in->args ? oxk_conv_transpose2d_run((const oxk_convt_plan*)in->args, in->n, a, y) : OXK_EARG;
    case OXK_OP_GLOBAL_POOL: {
        const oxk_global_pool_args* g = (const oxk_global_pool_args*)in->args;
        return g ? oxk_global_pool(a, in->n, g->hw, g->kind, y) : OXK_EARG;
    }
    case OXK_OP_ACT: {
        const oxk_epilogue* e = (const oxk_epilogue*)in->args;
        return e ? oxk_act(a, in->n, e->act, e->p0, e->p1, y) : OXK_EARG;
    }
    case OXK_OP_BINARY: return b ? oxk_binary((const oxk_binary_args*)in->args, a, b, y) : OXK_EARG;
    case OXK_OP_SOFTMAX:
    case OXK_OP_LOGSOFTMAX: {
        const oxk_softmax_args* s = (const oxk_softmax_args*)in->args;
        return s ? oxk_softmax(a, in->n, s->cols, in->op == OXK_OP_LOGSOFTMAX, y) : OXK_EARG;
    }
    case OXK_OP_ATTENTION:
        return oxk_attention((const oxk_attention_args*)in->args, a, b, ext[0], ext[1], ext[2], y);
    case OXK_OP_MATMUL:
        return oxk_matmul((const oxk_matmul_args*)in->args, in->n, a, b, y);
    case OXK_OP_RNN:
        return oxk_rnn((const oxk_rnn_args*)in->args, a, b, ext[0], y, ext[1], ext[2], ext[3]);
    case OXK_OP_NORM: return oxk_norm((const oxk_norm_args*)in->args, in->n, a, b, ext[0], y);
    case OXK_OP_BATCHNORM:
        return oxk_batchnorm((const oxk_batchnorm_args*)in->args, in->n, a, b, ext[0], ext[1], ext[2], y);
    case OXK_OP_REDUCE: return oxk_reduce((const oxk_reduce_args*)in->args, in->n, a, y);
    case OXK_OP_COPY:
        if (in->n < 0) return OXK_EARG;
        if (a != y && in->n > 0) memcpy(y, a, (size_t)in->n * sizeof(float));
        return 0;
    case OXK_OP_QCONV: return oxk_qconv_run((const oxk_qconv_plan*)in->args, in->n, a, b, y);
    case OXK_OP_QGEMM: return oxk_qgemm_run((const oxk_qgemm_plan*)in->args, in->n, a, b, y);
    case OXK_OP_QUANTIZE: return oxk_quantize((const oxk_quant_args*)in->args, in->n, a, y);
    case OXK_OP_DEQUANTIZE: return oxk_dequantize((const oxk_quant_args*)in->args, in->n, a, y);
    case OXK_OP_QGLOBAL_POOL: return oxk_qglobal_pool((const oxk_qpool_args*)in->args, in->n, a, y);
    case OXK_OP_DQL: {
        const oxk_dql_args* d = (const oxk_dql_args*)in->args;
        if (!d || d->part < 0 || d->part > 2) return OXK_EARG;
        return oxk_dynamic_quantize(a, in->n, d->part == 0 ? (uint8_t*)y : NULL, d->part == 1 ? y : NULL,
                                    d->part == 2 ? (uint8_t*)y : NULL);
    }
    case OXK_OP_STRIDED: return oxk_strided_copy((const oxk_copy_args*)in->args, a, y);
    case OXK_OP_GATHER: return oxk_gather((const oxk_gather_args*)in->args, a, b, y);
    case OXK_OP_RESAMPLE: return oxk_resample((const oxk_resample_args*)in->args, a, y);
    default: return OXK_EARG;
    }
}

int oxk_program_run(const oxk_program* p, void* const* inputs, void* const* outputs, void* arena) {
    int i, rc;
    if (!p || p->n_instr < 0 || (p->n_instr > 0 && !p->instr)) return OXK_EARG;
    for (i = 0; i < p->n_instr; i++) {
        const oxk_instr* in = &p->instr[i];
        int bad = 0, j;
        float* ext[OXK_INSTR_SLOTS - 3];
        const float* a = slot_ptr(p, in->slot[0], inputs, outputs, (unsigned char*)arena, &bad);
        const float* b = slot_ptr(p, in->slot[1], inputs, outputs, (unsigned char*)arena, &bad);
        float* y = slot_ptr(p, in->slot[2], inputs, outputs, (unsigned char*)arena, &bad);
        for (j = 3; j < OXK_INSTR_SLOTS; j++)
            ext[j - 3] = slot_ptr(p, in->slot[j], inputs, outputs, (unsigned char*)arena, &bad);
        if (bad) return OXK_EARG;
        rc = run_one(in, a, b, y, ext);
        if (rc) return rc;
    }
    return 0;
}
