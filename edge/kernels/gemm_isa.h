/* gemm_isa.h - the SGEMM kernels chosen at run time on x86-64 (internal to the library).
 *
 * The x86-64 host library is compiled for the baseline ISA (SSE2), so it loads on any x86-64 CPU.
 * Wider SGEMM cores live in translation units of their own, each compiled with its ISA's flags:
 *   matmul_avx2.c    -mavx2 -mfma     6 x 16 register tile (ymm)     "avx2+fma"
 *   matmul_avx512.c  -mavx512f ...   12 x 32 register tile (zmm)     "avx512f"
 * matmul.c picks one when the library loads (__builtin_cpu_supports, and the OXK_ISA environment
 * variable: sse2 | avx2 | avx512, never above what the CPU has) and every public SGEMM entry
 * (oxk_sgemm, oxk_pack_a/b and their sizes) goes through it, so packed panels always have the
 * chosen core's MR / NR. Conv builds B panels itself and asks for NR with OXK_SGEMM_NR, or (wide
 * output rows) runs the core's implicit GEMM, conv_direct.
 * Other targets (aarch64, wasm32, the generic build) have no choice: NR is VEC_NR. */
#ifndef OXK_GEMM_ISA_H
#define OXK_GEMM_ISA_H

#include "oxk.h"

#if defined(__x86_64__) && !defined(OXK_FORCE_GENERIC)
#  define OXK_X86_GEMM 1
#endif

#if defined(OXK_X86_GEMM)
/* The implicit-GEMM convs' software prefetch distance in K steps: their koff tables hold this many
 * entries past K (copies of koff[K - 1]) so a tile reads a later step's offset without a bound
 * check. */
#define OXK_KOFF_AHEAD 8

/* An implicit-GEMM convolution (conv.c's direct path): out[m, p] = sum_k A[m, k] x[koff[k] + f(p)]
 * with the weights A packed as the core's A panels (oxk_conv_pack) and the B operand read straight
 * from the padded input's phases, NR consecutive "flat" positions f = oh * Wq + ow at a time (the
 * flat positions with ow >= OW fall in the padding and are computed but not stored). Each output
 * sums all K steps in order in registers, then takes bias (per row) and the activation, and is
 * stored at y[m * ldy + oh * OW + ow]. The call
 * covers rows [0, M) and flat positions [f_beg, f_end) (f_beg a multiple of NR); it reads x up to
 * 2 NR floats past koff[K - 1] + F. */
typedef struct {
    int M, K;
    const float* pa;
    const float* x;
    const int* koff;
    int F, Wq, OW;            /* F = (OH - 1) * Wq + OW flat positions */
    float* y;
    int ldy;
    const float* bias;
    int act;
    float p0, p1;
    int f_beg, f_end;
} oxk_conv_direct;

/* The other orientation (conv.c's lanes path, for small images with many output channels): output
 * channels along the vector lanes, output positions broadcast. The weights are packed as the
 * core's B panels (NR channels per panel, K steps of NR values: pack_b of W_g transposed, at plan
 * time), the positions read straight from the padded phases: a tile is R <= RT consecutive
 * positions of one output row (segment), x[koff[k] + oh * Wq + ow + r], so no position is wasted.
 * Each output sums all K steps in order in registers, then takes bias, the residual z (same
 * layout as y; NULL: none) and the activation, and is stored transposed into y[m * ldy + oh * OW +
 * ow]. The call covers channel panels [c_beg, c_end) and segments [s_beg, s_end) (segment s: output
 * row s / segs, piece s % segs of it). */
typedef struct {
    int M, K;                 /* output channels of the group, K = Cin_g * taps */
    const float* pb;
    const float* x;
    const int* koff;
    int Wq, OW, segs;         /* output row pieces: segs per row, each at most RT positions */
    float* y;
    const float* z;
    int ldy;
    const float* bias;
    int act;
    float p0, p1;
    int c_beg, c_end, s_beg, s_end;
} oxk_conv_lanes;

/* One SGEMM core: its name (oxk_backend), register tile, packing and the GEMM itself. sgemm gets
 * arguments oxk_sgemm has already checked, with M, N > 0; conv_direct runs oxk_conv_direct. */
typedef struct {
    const char* name;
    int mr, nr;
    int (*pack_a)(int transA, int M, int K, const float* A, int lda, float* packed);
    int (*pack_b)(int transB, int N, int K, const float* B, int ldb, float* packed);
    int (*sgemm)(int transA, int transB, int M, int N, int K, float alpha,
                 const float* A, int lda, const float* packA,
                 const float* B, int ldb, const float* packB,
                 float beta, float* C, int ldc,
                 const float* bias, int bias_kind, int act, float p0, float p1);
    void (*conv_direct)(const oxk_conv_direct* d);
    int rt;                   /* conv_lanes' most positions per tile */
    void (*conv_lanes)(const oxk_conv_lanes* d);
} oxk_gemm_isa;

extern const oxk_gemm_isa oxk_gemm_avx2;
extern const oxk_gemm_isa oxk_gemm_avx512;

/* The chosen core's name and panel width (the baseline SSE core: "sse2", 8). */
const char* oxk_sgemm_isa_name(void);
int oxk_sgemm_nr(void);
#  define OXK_SGEMM_NR oxk_sgemm_nr()
#  define OXK_SGEMM_NR_MAX 32
#else
#  define OXK_SGEMM_NR VEC_NR
#  define OXK_SGEMM_NR_MAX VEC_NR
#endif

#endif /* OXK_GEMM_ISA_H */
