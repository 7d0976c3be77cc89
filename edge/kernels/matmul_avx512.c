/* matmul_avx512.c - the AVX-512F SGEMM core (12 x 32 tile of zmm accumulators, A broadcast from
 * memory); compiled only for x86-64 with -mavx512f and chosen at run time by matmul.c (see
 * gemm_isa.h). */
#include <immintrin.h>
#define GEMM_ISA oxk_gemm_avx512
#define GEMM_NAME "avx512f"
#define VT __m512
#define VW 16
/* conv_lanes: most positions per tile (RT x 2 accumulators, 2 weight vectors) */
#define RT 14
#define MR 12
#define V_LOAD(p) _mm512_loadu_ps(p)
#define V_STORE(p, v) _mm512_storeu_ps(p, v)
#define V_SET1(x) _mm512_set1_ps(x)
#define V_ZERO() _mm512_setzero_ps()
#define V_FMA(a, b, acc) _mm512_fmadd_ps(a, b, acc)
#define V_ADD(a, b) _mm512_add_ps(a, b)
#define V_MAX(a, b) _mm512_max_ps(a, b)
#define V_MIN(a, b) _mm512_min_ps(a, b)
/* lanes [lo, lo + n) */
#define V_MASK_T __mmask16
#define V_MASK(lo, n) ((__mmask16)(((1u << (n)) - 1u) << (lo)))
#define V_MASKSTORE(p, m, v) _mm512_mask_storeu_ps(p, m, v)
#include "matmul_x86_impl.h"
