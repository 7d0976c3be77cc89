/* oxk.h - the public C API of onnxedge's kernel library (libonnxedge_kernels).
 *
 * Every tensor is float32 (int8/uint8/int32 for qgemm), row-major, contiguous unless a leading
 * dimension says otherwise. Functions return 0 on success and a negative OXK_E* code on bad
 * arguments or when memory runs out; they never abort. Threads: oxk_set_num_threads sizes the
 * library's pool (process-wide).
 */
#ifndef OXK_H
#define OXK_H

#include "oxk_libc.h"

#define OXK_API __attribute__((visibility("default")))
#define OXK_EARG (-1)
#define OXK_ENOMEM (-2)

/* Epilogue activations, applied after bias: y = act(acc + bias); also the elementwise functions of
 * OXK_OP_ACT (issue #17, elementwise.c: the unary math ops too). Parameters p0, p1: Clip's bounds,
 * LeakyRelu's and Elu's alpha, HardSigmoid's alpha and beta. GELU is the erf form (GELU_TANH the
 * tanh form), SILU x * sigmoid(x), HARD_SWISH x * HardSigmoid(x, 1/6, 1/2), SOFTPLUS log(1 + e^x). */
enum { OXK_ACT_NONE = 0, OXK_ACT_RELU = 1, OXK_ACT_CLIP = 2, OXK_ACT_SIGMOID = 3,
       OXK_ACT_GELU_TANH = 4, OXK_ACT_LEAKY_RELU = 5, OXK_ACT_TANH = 6,
       OXK_ACT_EXP = 7, OXK_ACT_LOG = 8, OXK_ACT_SQRT = 9, OXK_ACT_ABS = 10, OXK_ACT_NEG = 11,
       OXK_ACT_RECIPROCAL = 12, OXK_ACT_ERF = 13, OXK_ACT_HARD_SIGMOID = 14, OXK_ACT_HARD_SWISH = 15,
       OXK_ACT_ELU = 16, OXK_ACT_SOFTPLUS = 17, OXK_ACT_GELU = 18, OXK_ACT_SILU = 19 };
#define OXK_ACT_LAST OXK_ACT_SILU
/* Where the bias vector lies: one value per row of C, per column, or none. */
enum { OXK_BIAS_NONE = 0, OXK_BIAS_ROW = 1, OXK_BIAS_COL = 2 };
/* Convolution paths (OXK_CONV_AUTO picks one; the others force a path, for tests). */
enum { OXK_CONV_AUTO = 0, OXK_CONV_IM2COL = 1, OXK_CONV_DIRECT3X3 = 2, OXK_CONV_DEPTHWISE = 3,
       OXK_CONV_LANES = 4, OXK_CONV_DEPTHWISE_PHASES = 5 /* depthwise without the 3x3 stride-1 direct rows */,
       OXK_CONV_LANES_PACKED = 6 /* the lanes path on packW from oxk_conv_pack_lanes */,
       OXK_CONV_WINOGRAD = 7 /* 3x3 stride 1 by F(2x2, 3x3) on packW from oxk_conv_pack_winograd */ };

typedef struct { int act; float p0, p1; } oxk_epilogue;

OXK_API int oxk_version(void);
OXK_API const char* oxk_backend(void);
OXK_API int oxk_set_num_threads(int n);
OXK_API int oxk_get_num_threads(void);

/* SGEMM: C = alpha * op(A) @ op(B) + beta * C, then bias and activation.
 * op(A) is M x K, op(B) is K x N. packA/packB (from oxk_pack_a/oxk_pack_b with the same
 * transpose flag) replace A/B when not NULL. beta == 0 never reads C. */
OXK_API size_t oxk_pack_a_size(int M, int K);
OXK_API size_t oxk_pack_b_size(int N, int K);
OXK_API int oxk_pack_a(int transA, int M, int K, const float* A, int lda, float* packed);
OXK_API int oxk_pack_b(int transB, int N, int K, const float* B, int ldb, float* packed);
OXK_API int oxk_sgemm(int transA, int transB, int M, int N, int K, float alpha,
                      const float* A, int lda, const float* packA,
                      const float* B, int ldb, const float* packB,
                      float beta, float* C, int ldc,
                      const float* bias, int bias_kind, int act, float p0, float p1);

/* A compiled GEMM: every argument of oxk_sgemm but M and the three matrices, bound once (a
 * session binds one per node), so a call converts five arguments. A, B, C are contiguous: lda is
 * K (M when transA), ldb is N (K when transB), ldc is N. The plan is only read: one plan may serve
 * several threads at once. */
typedef struct {
    int transA, transB, N, K;
    float alpha, beta;
    const float* packA;
    const float* packB;
    const float* bias;
    int bias_kind, act;
    float p0, p1;
} oxk_sgemm_plan;
OXK_API int oxk_sgemm_run(const oxk_sgemm_plan* p, int M, const float* A, const float* B, float* C);

/* 2-D convolution, NCHW. W is (Cout, C/group, kh, kw); packW (optional) is oxk_conv_pack's
 * output for W. pads: top, left, bottom, right. y is (N, Cout, OH, OW). */
OXK_API size_t oxk_conv_pack_size(int Cout, int Cin_g, int kh, int kw, int group);
OXK_API int oxk_conv_pack(const float* W, int Cout, int Cin_g, int kh, int kw, int group, float* packed);
/* Pointwise convs (1x1, stride 1, no pads, group 1) on few positions run faster with output
 * channels along the lanes (x86-64 AVX-512): oxk_conv_lanes_1x1 gives the size of the weights
 * packed for that (oxk_conv_pack_lanes, then path OXK_CONV_LANES_PACKED), or 0 where this library
 * and CPU keep the GEMM. */
OXK_API size_t oxk_conv_lanes_1x1(int Cout, int Cin, int positions);
OXK_API int oxk_conv_pack_lanes(const float* W, int Cout, int Cin, float* packed);
/* 3x3 stride-1 undilated convolutions of group 1 by Winograd's F(2x2, 3x3) (conv_winograd.c):
 * oxk_conv_winograd_size gives, for a conv's geometry and output size, the size of the weights
 * transformed and packed for that (oxk_conv_pack_winograd, then path OXK_CONV_WINOGRAD), or 0 where
 * the path does not apply or the direct paths are faster (few channels or outputs);
 * oxk_conv_winograd_pack_size is that size whatever the choice (for a forced path). The result is
 * the direct sum's to a few roundings, not its bits. */
OXK_API size_t oxk_conv_winograd_size(int Cout, int Cin_g, int kh, int kw, int group, int sh, int sw,
                                      int dh, int dw, int OH, int OW);
OXK_API size_t oxk_conv_winograd_pack_size(int Cout, int Cin);
OXK_API int oxk_conv_pack_winograd(const float* W, int Cout, int Cin, float* packed);
OXK_API int oxk_conv2d(const float* x, int N, int C, int H, int Wd,
                       const float* W, const float* packW, int Cout, int kh, int kw, int group,
                       int sh, int sw, int dh, int dw, int pt, int pl, int pb, int pr,
                       const float* bias, int act, float p0, float p1,
                       float* y, int OH, int OW, int path);

/* A compiled convolution for one input geometry: oxk_conv2d's arguments but the batch, x and y. */
typedef struct {
    int C, H, W, Cout, kh, kw, group, sh, sw, dh, dw, pt, pl, pb, pr, OH, OW, act, path;
    float p0, p1;
    const float* weight;
    const float* packW;
    const float* bias;
} oxk_conv_plan;
OXK_API int oxk_conv2d_run(const oxk_conv_plan* p, int N, const float* x, float* y);
/* With a residual (FusedConv's Z): y = act(conv(x) + bias + z), z shaped like y and not y itself;
 * rounded as conv + bias, + z, then the activation: the bits of a plan without the activation, an
 * Add and the activation. z NULL: oxk_conv2d_run. */
OXK_API int oxk_conv2d_run_z(const oxk_conv_plan* p, int N, const float* x, const float* z, float* y);

/* Pooling over (N*C) planes of H x W: kind 0 max, 1 average. */
OXK_API int oxk_pool2d(const float* x, int NC, int H, int Wd, int kind, int kh, int kw,
                       int sh, int sw, int dh, int dw, int pt, int pl, int pb, int pr,
                       int count_include_pad, float* y, int OH, int OW);
OXK_API int oxk_global_pool(const float* x, int NC, int HW, int kind, float* y);
/* A compiled windowed pool for one input geometry: oxk_pool2d's arguments but NC, x and y. */
typedef struct {
    int H, W, kind, kh, kw, sh, sw, dh, dw, pt, pl, pb, pr, count_include_pad, OH, OW;
} oxk_pool_plan;
OXK_API int oxk_pool2d_run(const oxk_pool_plan* p, int NC, const float* x, float* y);

/* int8 GEMM: C[M,N] (int32) = sum_k (A[m,k] - za[m]) * (B[k,n] - zb[n]).
 * a_signed/b_signed: 1 for int8 data, 0 for uint8. za has M entries (or 1 when za_per_row == 0),
 * zb has N entries (or 1). packB is oxk_qpack_b's output. */
OXK_API size_t oxk_qpack_b_size(int N, int K);
OXK_API int oxk_qpack_b(int N, int K, const void* B, int b_signed, int8_t* packed);
OXK_API int oxk_qgemm(int M, int N, int K, const void* A, int a_signed, const int32_t* za, int za_per_row,
                      const void* B, int b_signed, const int8_t* packB, const int32_t* zb, int zb_per_col,
                      int32_t* C);
OXK_API int oxk_qgemm_has_dotprod(void);

/* Scalar reference kernels (plain loops, no tiling, no threads): what the tests trust. */
OXK_API int oxk_ref_sgemm(int transA, int transB, int M, int N, int K, float alpha,
                          const float* A, int lda, const float* B, int ldb, float beta, float* C, int ldc,
                          const float* bias, int bias_kind, int act, float p0, float p1);
OXK_API int oxk_ref_conv2d(const float* x, int N, int C, int H, int Wd, const float* W, int Cout,
                           int kh, int kw, int group, int sh, int sw, int dh, int dw,
                           int pt, int pl, int pb, int pr, const float* bias, int act, float p0, float p1,
                           float* y, int OH, int OW);
OXK_API int oxk_ref_pool2d(const float* x, int NC, int H, int Wd, int kind, int kh, int kw,
                           int sh, int sw, int dh, int dw, int pt, int pl, int pb, int pr,
                           int count_include_pad, float* y, int OH, int OW);
OXK_API int oxk_ref_qgemm(int M, int N, int K, const void* A, int a_signed, const int32_t* za, int za_per_row,
                          const void* B, int b_signed, const int32_t* zb, int zb_per_col, int32_t* C);

/* Internal: the thread pool and the activation of one value. */
typedef void (*oxk_task_fn)(void* ctx, int i);
void oxk_parallel_for(int n, oxk_task_fn fn, void* ctx);
float oxk_act_scalar(float v, int act, float p0, float p1);
/* The general merge of an (mv x nv) tile (row stride `stride`) into C (at the tile's corner,
 * row stride ldc): alpha, beta on the first K block (`first`), accumulation on later ones, bias
 * (ROW: one per tile row, COL: one per column, from `bias` on) and the activation on the last
 * (`last`). Every SGEMM core's edge tiles go through it. */
void oxk_store_tile(const float* tile, int stride, int mv, int nv, float* C, int ldc,
                    float alpha, float beta, const float* bias, int bias_kind, int act,
                    float p0, float p1, int first, int last);
void oxk_act_row(float* y, int n, int act, float p0, float p1);
void* oxk_aligned_alloc(size_t bytes);
void oxk_aligned_free(void* p);
/* The calling thread's scratch block `slot`, at least `bytes` long (64-byte aligned, contents
 * undefined, valid until the same thread asks for the same slot again); NULL when out of memory.
 * Slots: sgemm packs A in 0 and B in 1, conv pads the input in 2 and builds B panels in 3. */
#define OXK_SCRATCH_SLOTS 4
enum { OXK_SCRATCH_PACK_A = 0, OXK_SCRATCH_PACK_B = 1, OXK_SCRATCH_PAD = 2, OXK_SCRATCH_PANELS = 3 };
void* oxk_scratch(int slot, size_t bytes);
/* OXK_CONV_WINOGRAD's run (conv_winograd.c), its arguments checked by oxk_conv2d. */
int oxk_conv_winograd_run(const float* x, int N, int C, int H, int W, const float* packU, int Cout,
                          int pt, int pl, const float* bias, const float* z, int act, float p0, float p1,
                          float* y, int OH, int OW);
/* Builds without pthreads: which thread runs this (0: the caller's, the main instance; i + 1: Web
 * Worker i of the wasm threads build), so per-thread state (the scratch blocks) needs no TLS. */
#define OXK_THREAD_SLOTS 64
int oxk_thread_slot(void);

/* ---- Layouts and programs (issue #16). ---------------------------------------------------------
 * oxk_layout: every public struct's size and each field's name, offset, size and kind ('i' int32,
 * 'f' float32, 'p' pointer, 'z' size_t; an array field has size = count * element size). A struct's
 * own row has field "" and its size; rows of one struct follow it. Bindings build or check their
 * struct declarations from it, so oxk.h states each layout once. */
typedef struct { const char* type; const char* field; int offset; int size; int kind; } oxk_field;
OXK_API const oxk_field* oxk_layout(int* count);

/* A program: instructions run in order by one oxk_program_run call. Each instruction names its
 * buffers by slot (index into `slots`, -1 for none): a program input, a program output, a byte
 * offset in the caller's arena, or a constant the program points to. Returns 0 or the first
 * non-zero kernel code (the failing instruction's index is not reported; programs are checked when
 * compiled). */
enum { OXK_SLOT_INPUT = 0, OXK_SLOT_OUTPUT = 1, OXK_SLOT_ARENA = 2, OXK_SLOT_CONST = 3 };
enum { OXK_OP_SGEMM = 1, OXK_OP_CONV2D = 2, OXK_OP_POOL2D = 3, OXK_OP_GLOBAL_POOL = 4, OXK_OP_ACT = 5,
       OXK_OP_BINARY = 6, OXK_OP_SOFTMAX = 7, OXK_OP_LOGSOFTMAX = 8, OXK_OP_COPY = 9 };
/* Pow: C's powf rules (a negative base needs an integer exponent); Max/Min propagate NaN. */
enum { OXK_BIN_ADD = 0, OXK_BIN_SUB = 1, OXK_BIN_MUL = 2, OXK_BIN_DIV = 3, OXK_BIN_POW = 4, OXK_BIN_MAX = 5,
       OXK_BIN_MIN = 6 };
typedef struct { int kind, index; size_t offset; const void* data; } oxk_slot;
/* n: SGEMM M, CONV2D batch, POOL2D/GLOBAL_POOL N*C, ACT/COPY element count, SOFTMAX rows.
 * args: SGEMM oxk_gemm_args, CONV2D oxk_conv_plan, POOL2D oxk_pool_plan, GLOBAL_POOL
 * oxk_global_pool_args, ACT oxk_epilogue, BINARY oxk_binary_args, SOFTMAX/LOGSOFTMAX
 * oxk_softmax_args, COPY none. slot: inputs a, b (b: SGEMM's B when the plan has no packB, BINARY's
 * second operand, CONV2D's residual z: oxk_conv2d_run_z) and the output y in slot[0..2];
 * slot[3..7] are an op's further operands (more inputs, then more outputs, as the op states; -1
 * for none): kernels with up to 8 operands
 * (attention's Q, K, V, mask; LSTM's states) take them from there. */
#define OXK_INSTR_SLOTS 8
typedef struct { int op, n; const void* args; int slot[OXK_INSTR_SLOTS]; } oxk_instr;
/* batch GEMMs of one plan; operand b (when used) and the others advance by their strides (floats). */
typedef struct { const oxk_sgemm_plan* plan; int batch, stride_a, stride_b, stride_c; } oxk_gemm_args;
typedef struct { int kind, hw; } oxk_global_pool_args;
/* y[i,j,k] = a[i*sa0 + j*sa1 + k*sa2] op b[i*sb0 + j*sb1 + k*sb2] over dims d0 x d1 x d2 (a stride
 * of 0 broadcasts that operand along the axis); y is contiguous. */
typedef struct { int op, d0, d1, d2, sa0, sa1, sa2, sb0, sb1, sb2; } oxk_binary_args;
typedef struct { int cols; } oxk_softmax_args;
typedef struct { int n_instr, n_slots; const oxk_instr* instr; const oxk_slot* slots; } oxk_program;
OXK_API int oxk_program_run(const oxk_program* p, void* const* inputs, void* const* outputs, void* arena);
/* The program ops on their own (tests; Python's numpy-free paths). */
OXK_API int oxk_binary(const oxk_binary_args* a, const float* x, const float* y, float* out);
OXK_API int oxk_softmax(const float* x, int rows, int cols, int log, float* y);
OXK_API int oxk_act(const float* x, int n, int act, float p0, float p1, float* y);

/* ---- Data movement (issue #17, movement.c): opcodes 30-39. ------------------------------------
 * STRIDED (args oxk_copy_args): y[y_off + sum_k i_k*sy[k]] = a[a_off + sum_k i_k*sa[k]] for every
 * index i < dims over the first `rank` axes (strides in floats, signed; a source stride of 0 repeats
 * one value: Expand, Tile, Pad's fill from a one-value constant). Every offset reached must lie in
 * [0, a_len) and [0, y_len) (OXK_EARG otherwise). Transpose, Slice, Concat (one instruction per
 * input), Split (one per output), DepthToSpace/SpaceToDepth and Pad are such copies.
 * GATHER (oxk_gather_args): y[o, q, i] = a[o, index[q], i] over (outer, count, inner), a of
 * (outer, axis, inner). `index` is a table of int32 in [0, axis), or NULL: the indices are operand
 * b (int32, int64 when `wide`), negative ones counted from the end, checked at run time.
 * RESAMPLE (oxk_resample_args): planes of (ih, iw) to (oh, ow); output row oy reads rows
 * iy[oy*ty + t] with weights wy[oy*ty + t], column ox columns ix[ox*tx + t] with weights
 * wx[ox*tx + t]: y = sum_t wx * (sum_s wy * a), rows first, taps in order (Resize's tables).
 * n is unused (0) for the three. */
#define OXK_COPY_RANK 6
enum { OXK_OP_STRIDED = 30, OXK_OP_GATHER = 31, OXK_OP_RESAMPLE = 32 };
typedef struct {
    int rank;
    int dims[OXK_COPY_RANK];
    int sa[OXK_COPY_RANK];
    int sy[OXK_COPY_RANK];
    int a_off, y_off, a_len, y_len;
} oxk_copy_args;
typedef struct { int outer, axis, inner, count, wide; const int32_t* index; } oxk_gather_args;
typedef struct {
    int planes, ih, iw, oh, ow, ty, tx;
    const int32_t* iy;
    const float* wy;
    const int32_t* ix;
    const float* wx;
} oxk_resample_args;
OXK_API int oxk_strided_copy(const oxk_copy_args* g, const float* a, float* y);
OXK_API int oxk_gather(const oxk_gather_args* g, const float* a, const void* index, float* y);
OXK_API int oxk_resample(const oxk_resample_args* g, const float* a, float* y);

/* ---- Attention (attention.c) and MatMul with both operands computed (matmul.c), issue #17 -----
 * OXK_OP_ATTENTION: com.onnxedge MultiHeadAttention. n: unused; args oxk_attention_args; slots
 * a = Q [batch, q_seq, heads * head_size], b = K [batch, kv_seq, heads * head_size], y = out
 * [batch, q_seq, heads * v_head_size], slot[3] = V [batch, kv_seq, heads * v_head_size], slot[4] =
 * the additive mask (-1: none) read at b * mask_stride[0] + h * mask_stride[1] + i * mask_stride[2]
 * + j * mask_stride[3] (floats; 0 broadcasts), slot[5] = scratch of oxk_attention_scratch_size
 * floats (the scores). Per head: softmax(scale * Q K^T + mask) V, NaN probabilities 0 when
 * nan_to_zero. OXK_OP_MATMUL: n = M; args oxk_matmul_args; a = A, b = B (the plan's operands,
 * B unpacked), y = C: d0 x d1 x d2 GEMMs, A and B at i0 * sa0 + i1 * sa1 + i2 * sa2 (floats;
 * 0 broadcasts), C contiguous (M x plan N each). */
enum { OXK_OP_ATTENTION = 40, OXK_OP_MATMUL = 41 };
typedef struct {
    int batch, heads, q_seq, kv_seq, head_size, v_head_size;
    float scale;
    int nan_to_zero;
    int mask_stride[4];
} oxk_attention_args;
typedef struct { const oxk_sgemm_plan* plan; int d0, d1, d2, sa0, sa1, sa2, sb0, sb1, sb2; } oxk_matmul_args;
OXK_API size_t oxk_attention_scratch_size(const oxk_attention_args* a);
OXK_API int oxk_attention(const oxk_attention_args* a, const float* q, const float* k, const float* v,
                          const float* mask, float* scratch, float* y);
OXK_API int oxk_matmul(const oxk_matmul_args* m, int M, const float* A, const float* B, float* C);

/* ---- Recurrent (issue #17): LSTM and GRU over a whole sequence, opcode OXK_OP_RNN. ----------------
 * X is [seq, batch, input] (ONNX layout 0); h0, c0 (NULL: zeros) [dirs, batch, hidden]; y (NULL:
 * not written) [seq, dirs, batch, hidden]; yh, yc (NULL: not written) [dirs, batch, hidden].
 * plans: three per direction (oxk_sgemm_plan, packed constant B, contiguous C): 0 the projection
 * x @ W^T + bias (N = gates * hidden, K = input; the bias is W's plus R's where R's adds straight
 * in), 1 h @ R^T (LSTM: N = 4 * hidden; GRU: z and r, N = 2 * hidden), 2 GRU's h @ Rh^T (with
 * bias Rbh when linear_before_reset; (r * h) @ Rh^T without bias otherwise). reverse (dirs 1): run
 * the sequence backwards; dirs 2 runs forward then reverse. peep: LSTM's P [dirs, 3 * hidden] or
 * NULL. Activations are the defaults (sigmoid, tanh); every batch entry runs the whole sequence.
 * scratch: oxk_rnn_scratch_floats(a) floats. In a program: a = X, b = h0, y = Y, slot[3] c0,
 * slot[4] Y_h, slot[5] Y_c, slot[6] scratch. */
enum { OXK_OP_RNN = 60 };
enum { OXK_RNN_LSTM = 0, OXK_RNN_GRU = 1 };
typedef struct {
    int kind, seq, batch, input, hidden, dirs, reverse, linear_before_reset, has_clip;
    float clip;
    const oxk_sgemm_plan* plans;
    const float* peep;
} oxk_rnn_args;
OXK_API size_t oxk_rnn_scratch_floats(const oxk_rnn_args* a);
OXK_API int oxk_rnn(const oxk_rnn_args* a, const float* x, const float* h0, const float* c0,
                    float* y, float* yh, float* yc, float* scratch);

/* ---- Normalizations and reductions (issue #17; normalization.c) ------------------------------
 * OXK_OP_NORM: n = rows; args oxk_norm_args; slots a = x (rows x cpg * inner), b =
 * scale, y, slot[3] = bias (scale and bias -1 for none). Each row of cpg * inner floats is normalized by
 * its own mean and variance (rms: by its root mean square, no centring), then scaled and shifted:
 * with groups == 1, inner == 1 and !per_group one scale/bias value per column (LayerNormalization,
 * SimplifiedLayerNormalization / RMSNormalization); otherwise the row is channel (r % groups) *
 * cpg + c of cpg channels of inner values, scale/bias per channel, or per group (r % groups) when
 * per_group (InstanceNormalization: groups = C, cpg = 1; GroupNormalization).
 * OXK_OP_BATCHNORM: n = outer; args oxk_batchnorm_args; a = x (outer x channels x inner), b =
 * scale, y, slot[3..5] = bias, mean, var (per channel; inference BatchNormalization).
 * OXK_OP_REDUCE: n = outer; args oxk_reduce_args; a = x (outer x r x inner), y (outer x inner):
 * OXK_RED_* of the r values (an empty set gives 0, -inf for max, +inf for min). */
enum { OXK_OP_NORM = 10, OXK_OP_BATCHNORM = 11, OXK_OP_REDUCE = 12 };
enum { OXK_RED_SUM = 0, OXK_RED_MEAN = 1, OXK_RED_MAX = 2, OXK_RED_MIN = 3, OXK_RED_L1 = 4, OXK_RED_L2 = 5,
       OXK_RED_SUMSQ = 6 };
typedef struct { int groups, cpg, inner, rms, per_group; float epsilon; } oxk_norm_args;
typedef struct { int channels, inner; float epsilon; } oxk_batchnorm_args;
typedef struct { int kind, r, inner; } oxk_reduce_args;
OXK_API int oxk_norm(const oxk_norm_args* a, int rows, const float* x, const float* scale, const float* bias,
                     float* y);
OXK_API int oxk_batchnorm(const oxk_batchnorm_args* a, int outer, const float* x, const float* scale,
                          const float* bias, const float* mean, const float* var, float* y);
OXK_API int oxk_reduce(const oxk_reduce_args* a, int outer, const float* x, float* y);

/* ---- Quantized ops (issue #17; quantization.c): opcodes 50-55. ----------------------------------
 * Integer tensors are OXK_QT_INT8, OXK_QT_UINT8 or OXK_QT_INT32. Requantization (QLinearConv,
 * QLinearMatMul, QGemm, QLinearGlobalAveragePool, as onnxruntime's MLAS does it): the int32 sum
 * (plus the int32 bias) times the float32 multiplier, clamped to [qmin - zero, qmax - zero],
 * rounded half to even, plus the output zero point. A runtime zero point (DynamicQuantizeLinear's)
 * is passed as a pointer to one value of the input's type and replaces the plan's.
 * QCONV (oxk_qconv_plan): n = batch; a = x (N, C, H, W), b = x's runtime zero point (-1: the
 * plan's), y = (N, Cout, OH, OW) of y_type. W is packed by oxk_qpack_rows as Cout rows of
 * K = C/group * kh * kw values. QGEMM (oxk_qgemm_plan): n = M; a = A (M x K), b = A's runtime zero
 * point, y = (M x N); B packed as N rows of K. QUANTIZE / DEQUANTIZE (oxk_quant_args): n elements;
 * float32 a to integer y (round half to even, saturate) and back ((q - zero) * scale; scale 1,
 * zero 0 is Cast to float32; as Cast, DEQUANTIZE also reads OXK_QT_INT64, and bool as
 * OXK_QT_UINT8). QGLOBAL_POOL (oxk_qpool_args): n = N*C planes of hw values of type x_type into
 * one value each. DQL (oxk_dql_args): DynamicQuantizeLinear of a (n floats) to
 * uint8: part 0 writes y (n values), part 1 the scale (one float), part 2 the zero point (one
 * uint8). Scratch: the quantized kernels use slots OXK_SCRATCH_PAD (packed patches / rows). */
enum { OXK_OP_QCONV = 50, OXK_OP_QGEMM = 51, OXK_OP_QUANTIZE = 52, OXK_OP_DEQUANTIZE = 53,
       OXK_OP_QGLOBAL_POOL = 54, OXK_OP_DQL = 55 };
enum { OXK_QT_INT32 = 0, OXK_QT_INT8 = 1, OXK_QT_UINT8 = 2, OXK_QT_INT64 = 3 };   /* INT64: DEQUANTIZE only */
typedef struct {
    int C, H, W, Cout, kh, kw, group, sh, sw, dh, dw, pt, pl, pb, pr, OH, OW;
    int x_type, x_zero, y_type, y_zero, qmin, qmax, per_channel;
    const int8_t* packW;
    const int32_t* bias;
    const float* scale;
} oxk_qconv_plan;
typedef struct {
    int N, K, a_type, a_zero, y_type, y_zero, qmin, qmax, per_channel;
    const int8_t* packB;
    const int32_t* bias;
    const float* scale;
} oxk_qgemm_plan;
typedef struct { int type, zero; float scale; } oxk_quant_args;
typedef struct { int hw, x_type, x_zero, y_zero, qmin, qmax; float scale; } oxk_qpool_args;
typedef struct { int part; } oxk_dql_args;
/* Pack `rows` rows of K integer values W[r * stride_r + k * stride_k] (type w_type, int8 or uint8)
 * minus their zero points (one per row when zero_per_row, else zero[0]) as int16 rows of K rounded
 * up to even, then a tile (4 rows) of zeros and more up to a multiple of 4. */
OXK_API size_t oxk_qpack_rows_size(int rows, int K);
OXK_API int oxk_qpack_rows(const void* W, int w_type, int rows, int K, int stride_r, int stride_k,
                           const int32_t* zero, int zero_per_row, int8_t* packed);
/* V layout of a constant B (GEMM): N columns of K values B[k * stride_k + n * stride_n] minus
 * their zero points, in k-pairs. */
OXK_API size_t oxk_qpack_cols_size(int N, int K);
OXK_API int oxk_qpack_cols(const void* B, int b_type, int N, int K, int stride_k, int stride_n,
                           const int32_t* zero, int zero_per_col, int8_t* packed);
OXK_API int oxk_qconv_run(const oxk_qconv_plan* p, int N, const void* x, const void* x_zero, void* y);
OXK_API int oxk_qgemm_run(const oxk_qgemm_plan* p, int M, const void* A, const void* a_zero, void* y);
OXK_API int oxk_quantize(const oxk_quant_args* q, int n, const float* x, void* y);
OXK_API int oxk_dequantize(const oxk_quant_args* q, int n, const void* x, float* y);
OXK_API int oxk_qglobal_pool(const oxk_qpool_args* q, int NC, const void* x, void* y);
OXK_API int oxk_dynamic_quantize(const float* x, int n, uint8_t* y, float* scale, uint8_t* zero);

/* ---- Transposed convolution (issues #16/#17, conv.c), opcode OXK_OP_CONVT. -----------------------
 * y (N, Cout, OH, OW) = ConvTranspose(x (N, C, H, W), W (C, Cout/group, kh, kw)): input position
 * (h, w) tap (i, k) adds into output (h sh - pt + i dh, w sw - pl + k dw) when that lies inside
 * OH x OW (pt/pl: the pad begins; OH/OW already hold the pad ends, output_padding or output_shape),
 * then bias and the activation. Per image and group a GEMM makes the columns (Cout/group kh kw x
 * H W = W_g^T @ x_g) and one task per output channel adds its taps in order (col2im), so the result
 * does not depend on the thread count. packW (optional): oxk_convt_pack's W_g^T panels. 1-D: H = 1.
 * OXK_OP_CONVT: n = batch; args oxk_convt_plan; a = x, y. */
typedef struct {
    int C, H, W, Cout, kh, kw, group, sh, sw, dh, dw, pt, pl, OH, OW, act;
    float p0, p1;
    const float* weight;
    const float* packW;
    const float* bias;
} oxk_convt_plan;
OXK_API size_t oxk_convt_pack_size(int C, int Cout_g, int kh, int kw, int group);
OXK_API int oxk_convt_pack(const float* W, int C, int Cout_g, int kh, int kw, int group, float* packed);
OXK_API int oxk_conv_transpose2d_run(const oxk_convt_plan* p, int N, const float* x, float* y);
enum { OXK_OP_CONVT = 45 };

#endif /* OXK_H */
