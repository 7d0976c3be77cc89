/* layout.c - the layout of every public struct of oxk.h, exported so that each binding (ctypes
 * natively, the JS bridge in the page) builds or checks its declarations against the compiled
 * library instead of restating them (issue #16). */
#include "oxk.h"

#define OXK_OFFSETOF(T, f) ((int)__builtin_offsetof(T, f))
#define STRUCT(T) { #T, "", 0, (int)sizeof(T), 's' }
#define FIELD(T, f, k) { #T, #f, OXK_OFFSETOF(T, f), (int)sizeof(((T*)0)->f), k }

static const oxk_field g_layout[] = {
    STRUCT(oxk_field),
    FIELD(oxk_field, type, 'p'), FIELD(oxk_field, field, 'p'), FIELD(oxk_field, offset, 'i'),
    FIELD(oxk_field, size, 'i'), FIELD(oxk_field, kind, 'i'),

    STRUCT(oxk_epilogue),
    FIELD(oxk_epilogue, act, 'i'), FIELD(oxk_epilogue, p0, 'f'), FIELD(oxk_epilogue, p1, 'f'),

    STRUCT(oxk_sgemm_plan),
    FIELD(oxk_sgemm_plan, transA, 'i'), FIELD(oxk_sgemm_plan, transB, 'i'), FIELD(oxk_sgemm_plan, N, 'i'),
    FIELD(oxk_sgemm_plan, K, 'i'), FIELD(oxk_sgemm_plan, alpha, 'f'), FIELD(oxk_sgemm_plan, beta, 'f'),
    FIELD(oxk_sgemm_plan, packA, 'p'), FIELD(oxk_sgemm_plan, packB, 'p'), FIELD(oxk_sgemm_plan, bias, 'p'),
    FIELD(oxk_sgemm_plan, bias_kind, 'i'), FIELD(oxk_sgemm_plan, act, 'i'), FIELD(oxk_sgemm_plan, p0, 'f'),
    FIELD(oxk_sgemm_plan, p1, 'f'),

    STRUCT(oxk_conv_plan),
    FIELD(oxk_conv_plan, C, 'i'), FIELD(oxk_conv_plan, H, 'i'), FIELD(oxk_conv_plan, W, 'i'),
    FIELD(oxk_conv_plan, Cout, 'i'), FIELD(oxk_conv_plan, kh, 'i'), FIELD(oxk_conv_plan, kw, 'i'),
    FIELD(oxk_conv_plan, group, 'i'), FIELD(oxk_conv_plan, sh, 'i'), FIELD(oxk_conv_plan, sw, 'i'),
    FIELD(oxk_conv_plan, dh, 'i'), FIELD(oxk_conv_plan, dw, 'i'), FIELD(oxk_conv_plan, pt, 'i'),
    FIELD(oxk_conv_plan, pl, 'i'), FIELD(oxk_conv_plan, pb, 'i'), FIELD(oxk_conv_plan, pr, 'i'),
    FIELD(oxk_conv_plan, OH, 'i'), FIELD(oxk_conv_plan, OW, 'i'), FIELD(oxk_conv_plan, act, 'i'),
    FIELD(oxk_conv_plan, path, 'i'), FIELD(oxk_conv_plan, p0, 'f'), FIELD(oxk_conv_plan, p1, 'f'),
    FIELD(oxk_conv_plan, weight, 'p'), FIELD(oxk_conv_plan, packW, 'p'), FIELD(oxk_conv_plan, bias, 'p'),

    STRUCT(oxk_pool_plan),
    FIELD(oxk_pool_plan, H, 'i'), FIELD(oxk_pool_plan, W, 'i'), FIELD(oxk_pool_plan, kind, 'i'),
    FIELD(oxk_pool_plan, kh, 'i'), FIELD(oxk_pool_plan, kw, 'i'), FIELD(oxk_pool_plan, sh, 'i'),
    FIELD(oxk_pool_plan, sw, 'i'), FIELD(oxk_pool_plan, dh, 'i'), FIELD(oxk_pool_plan, dw, 'i'),
    FIELD(oxk_pool_plan, pt, 'i'), FIELD(oxk_pool_plan, pl, 'i'), FIELD(oxk_pool_plan, pb, 'i'),
    FIELD(oxk_pool_plan, pr, 'i'), FIELD(oxk_pool_plan, count_include_pad, 'i'), FIELD(oxk_pool_plan, OH, 'i'),
    FIELD(oxk_pool_plan, OW, 'i'),

    STRUCT(oxk_slot),
    FIELD(oxk_slot, kind, 'i'), FIELD(oxk_slot, index, 'i'), FIELD(oxk_slot, offset, 'z'),
    FIELD(oxk_slot, data, 'p'),

    STRUCT(oxk_instr),
    FIELD(oxk_instr, op, 'i'), FIELD(oxk_instr, n, 'i'), FIELD(oxk_instr, args, 'p'), FIELD(oxk_instr, slot, 'i'),

    STRUCT(oxk_gemm_args),
    FIELD(oxk_gemm_args, plan, 'p'), FIELD(oxk_gemm_args, batch, 'i'), FIELD(oxk_gemm_args, stride_a, 'i'),
    FIELD(oxk_gemm_args, stride_b, 'i'), FIELD(oxk_gemm_args, stride_c, 'i'),

    STRUCT(oxk_global_pool_args),
    FIELD(oxk_global_pool_args, kind, 'i'), FIELD(oxk_global_pool_args, hw, 'i'),

    STRUCT(oxk_binary_args),
    FIELD(oxk_binary_args, op, 'i'), FIELD(oxk_binary_args, d0, 'i'), FIELD(oxk_binary_args, d1, 'i'),
    FIELD(oxk_binary_args, d2, 'i'), FIELD(oxk_binary_args, sa0, 'i'), FIELD(oxk_binary_args, sa1, 'i'),
    FIELD(oxk_binary_args, sa2, 'i'), FIELD(oxk_binary_args, sb0, 'i'), FIELD(oxk_binary_args, sb1, 'i'),
    FIELD(oxk_binary_args, sb2, 'i'),

    STRUCT(oxk_softmax_args),
    FIELD(oxk_softmax_args, cols, 'i'),

    STRUCT(oxk_attention_args),
    FIELD(oxk_attention_args, batch, 'i'), FIELD(oxk_attention_args, heads, 'i'),
    FIELD(oxk_attention_args, q_seq, 'i'), FIELD(oxk_attention_args, kv_seq, 'i'),
    FIELD(oxk_attention_args, head_size, 'i'), FIELD(oxk_attention_args, v_head_size, 'i'),
    FIELD(oxk_attention_args, scale, 'f'), FIELD(oxk_attention_args, nan_to_zero, 'i'),
    FIELD(oxk_attention_args, mask_stride, 'i'),

    STRUCT(oxk_matmul_args),
    FIELD(oxk_matmul_args, plan, 'p'), FIELD(oxk_matmul_args, d0, 'i'), FIELD(oxk_matmul_args, d1, 'i'),
    FIELD(oxk_matmul_args, d2, 'i'), FIELD(oxk_matmul_args, sa0, 'i'), FIELD(oxk_matmul_args, sa1, 'i'),
    FIELD(oxk_matmul_args, sa2, 'i'), FIELD(oxk_matmul_args, sb0, 'i'), FIELD(oxk_matmul_args, sb1, 'i'),
    FIELD(oxk_matmul_args, sb2, 'i'),

    STRUCT(oxk_rnn_args),
    FIELD(oxk_rnn_args, kind, 'i'), FIELD(oxk_rnn_args, seq, 'i'), FIELD(oxk_rnn_args, batch, 'i'),
    FIELD(oxk_rnn_args, input, 'i'), FIELD(oxk_rnn_args, hidden, 'i'), FIELD(oxk_rnn_args, dirs, 'i'),
    FIELD(oxk_rnn_args, reverse, 'i'), FIELD(oxk_rnn_args, linear_before_reset, 'i'),
    FIELD(oxk_rnn_args, has_clip, 'i'), FIELD(oxk_rnn_args, clip, 'f'), FIELD(oxk_rnn_args, plans, 'p'),
    FIELD(oxk_rnn_args, peep, 'p'),

    STRUCT(oxk_copy_args),
    FIELD(oxk_copy_args, rank, 'i'), FIELD(oxk_copy_args, dims, 'i'), FIELD(oxk_copy_args, sa, 'i'),
    FIELD(oxk_copy_args, sy, 'i'), FIELD(oxk_copy_args, a_off, 'i'), FIELD(oxk_copy_args, y_off, 'i'),
    FIELD(oxk_copy_args, a_len, 'i'), FIELD(oxk_copy_args, y_len, 'i'),

    STRUCT(oxk_gather_args),
    FIELD(oxk_gather_args, outer, 'i'), FIELD(oxk_gather_args, axis, 'i'), FIELD(oxk_gather_args, inner, 'i'),
    FIELD(oxk_gather_args, count, 'i'), FIELD(oxk_gather_args, wide, 'i'), FIELD(oxk_gather_args, index, 'p'),

    STRUCT(oxk_resample_args),
    FIELD(oxk_resample_args, planes, 'i'), FIELD(oxk_resample_args, ih, 'i'), FIELD(oxk_resample_args, iw, 'i'),
    FIELD(oxk_resample_args, oh, 'i'), FIELD(oxk_resample_args, ow, 'i'), FIELD(oxk_resample_args, ty, 'i'),
    FIELD(oxk_resample_args, tx, 'i'), FIELD(oxk_resample_args, iy, 'p'), FIELD(oxk_resample_args, wy, 'p'),
    FIELD(oxk_resample_args, ix, 'p'), FIELD(oxk_resample_args, wx, 'p'),

    STRUCT(oxk_norm_args),
    FIELD(oxk_norm_args, groups, 'i'), FIELD(oxk_norm_args, cpg, 'i'), FIELD(oxk_norm_args, inner, 'i'),
    FIELD(oxk_norm_args, rms, 'i'), FIELD(oxk_norm_args, per_group, 'i'), FIELD(oxk_norm_args, epsilon, 'f'),

    STRUCT(oxk_batchnorm_args),
    FIELD(oxk_batchnorm_args, channels, 'i'), FIELD(oxk_batchnorm_args, inner, 'i'),
    FIELD(oxk_batchnorm_args, epsilon, 'f'),

    STRUCT(oxk_reduce_args),
    FIELD(oxk_reduce_args, kind, 'i'), FIELD(oxk_reduce_args, r, 'i'), FIELD(oxk_reduce_args, inner, 'i'),

    STRUCT(oxk_convt_plan),
    FIELD(oxk_convt_plan, C, 'i'), FIELD(oxk_convt_plan, H, 'i'), FIELD(oxk_convt_plan, W, 'i'),
    FIELD(oxk_convt_plan, Cout, 'i'), FIELD(oxk_convt_plan, kh, 'i'), FIELD(oxk_convt_plan, kw, 'i'),
    FIELD(oxk_convt_plan, group, 'i'), FIELD(oxk_convt_plan, sh, 'i'), FIELD(oxk_convt_plan, sw, 'i'),
    FIELD(oxk_convt_plan, dh, 'i'), FIELD(oxk_convt_plan, dw, 'i'), FIELD(oxk_convt_plan, pt, 'i'),
    FIELD(oxk_convt_plan, pl, 'i'), FIELD(oxk_convt_plan, OH, 'i'), FIELD(oxk_convt_plan, OW, 'i'),
    FIELD(oxk_convt_plan, act, 'i'), FIELD(oxk_convt_plan, p0, 'f'), FIELD(oxk_convt_plan, p1, 'f'),
    FIELD(oxk_convt_plan, weight, 'p'), FIELD(oxk_convt_plan, packW, 'p'), FIELD(oxk_convt_plan, bias, 'p'),

    STRUCT(oxk_qconv_plan),
    FIELD(oxk_qconv_plan, C, 'i'), FIELD(oxk_qconv_plan, H, 'i'), FIELD(oxk_qconv_plan, W, 'i'),
    FIELD(oxk_qconv_plan, Cout, 'i'), FIELD(oxk_qconv_plan, kh, 'i'), FIELD(oxk_qconv_plan, kw, 'i'),
    FIELD(oxk_qconv_plan, group, 'i'), FIELD(oxk_qconv_plan, sh, 'i'), FIELD(oxk_qconv_plan, sw, 'i'),
    FIELD(oxk_qconv_plan, dh, 'i'), FIELD(oxk_qconv_plan, dw, 'i'), FIELD(oxk_qconv_plan, pt, 'i'),
    FIELD(oxk_qconv_plan, pl, 'i'), FIELD(oxk_qconv_plan, pb, 'i'), FIELD(oxk_qconv_plan, pr, 'i'),
    FIELD(oxk_qconv_plan, OH, 'i'), FIELD(oxk_qconv_plan, OW, 'i'), FIELD(oxk_qconv_plan, x_type, 'i'),
    FIELD(oxk_qconv_plan, x_zero, 'i'), FIELD(oxk_qconv_plan, y_type, 'i'), FIELD(oxk_qconv_plan, y_zero, 'i'),
    FIELD(oxk_qconv_plan, qmin, 'i'), FIELD(oxk_qconv_plan, qmax, 'i'), FIELD(oxk_qconv_plan, per_channel, 'i'),
    FIELD(oxk_qconv_plan, packW, 'p'), FIELD(oxk_qconv_plan, bias, 'p'), FIELD(oxk_qconv_plan, scale, 'p'),

    STRUCT(oxk_qgemm_plan),
    FIELD(oxk_qgemm_plan, N, 'i'), FIELD(oxk_qgemm_plan, K, 'i'), FIELD(oxk_qgemm_plan, a_type, 'i'),
    FIELD(oxk_qgemm_plan, a_zero, 'i'), FIELD(oxk_qgemm_plan, y_type, 'i'), FIELD(oxk_qgemm_plan, y_zero, 'i'),
    FIELD(oxk_qgemm_plan, qmin, 'i'), FIELD(oxk_qgemm_plan, qmax, 'i'), FIELD(oxk_qgemm_plan, per_channel, 'i'),
    FIELD(oxk_qgemm_plan, packB, 'p'), FIELD(oxk_qgemm_plan, bias, 'p'), FIELD(oxk_qgemm_plan, scale, 'p'),

    STRUCT(oxk_quant_args),
    FIELD(oxk_quant_args, type, 'i'), FIELD(oxk_quant_args, zero, 'i'), FIELD(oxk_quant_args, scale, 'f'),

    STRUCT(oxk_qpool_args),
    FIELD(oxk_qpool_args, hw, 'i'), FIELD(oxk_qpool_args, x_type, 'i'), FIELD(oxk_qpool_args, x_zero, 'i'),
    FIELD(oxk_qpool_args, y_zero, 'i'), FIELD(oxk_qpool_args, qmin, 'i'), FIELD(oxk_qpool_args, qmax, 'i'),
    FIELD(oxk_qpool_args, scale, 'f'),

    STRUCT(oxk_dql_args),
    FIELD(oxk_dql_args, part, 'i'),

    STRUCT(oxk_program),
    FIELD(oxk_program, n_instr, 'i'), FIELD(oxk_program, n_slots, 'i'), FIELD(oxk_program, instr, 'p'),
    FIELD(oxk_program, slots, 'p'),
};

const oxk_field* oxk_layout(int* count) {
    if (count) *count = (int)(sizeof(g_layout) / sizeof(g_layout[0]));
    return g_layout;
}
