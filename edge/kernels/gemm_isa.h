/* gemm_isa.h - the SGEMM kernels chosen at run time on x86-64 (internal to the library).
 *
 * The x86-64 host library is compiled for the baseline ISA (SSE2), so it loads on any x86-64 CPU.
 * Wider SGEMM cores live in translation units of their own, each compiled with its ISA's flags:
 *   matmul_avx2.c    -mavx2 -mfma     6 x 16 register tile (ymm)     "avx2+fma"
 *   matmul_avx512.c  -mavx512f ...   12 x 32 register tile (zmm)     "avx512f"
 * matmul.c picks one when the library loads (__builtin_cpu_supports, and the OXK_ISA environment
 * variable: sse2 | avx2 | avx512, never above what the CPU has) and every public SGEMM entry
 * (oxk_sgemm, oxk_pack_a/b and their sizes) goes through it, so packed panels always have the
 * chosen core's MR / NR. Conv builds B panels itself and asks for NR with OXK_SGEMM_NR.
 * Other targets (aarch64, wasm32, the generic build) have no choice: NR is VEC_NR. */
#ifndef OXK_GEMM_ISA_H
#define OXK_GEMM_ISA_H

#include "oxk.h"

#if defined(__x86_64__) && !defined(OXK_FORCE_GENERIC)
#  define OXK_X86_GEMM 1
#endif

#if defined(OXK_X86_GEMM)
/* One SGEMM core: its name (oxk_backend), register tile, packing and the GEMM itself. sgemm gets
 * arguments oxk_sgemm has already checked, with M, N > 0. */
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
