/* matmul_avx2.c - the AVX2 + FMA SGEMM core (6 x 16 tile of ymm accumulators); compiled only for
 * x86-64 with -mavx2 -mfma and chosen at run time by matmul.c (see gemm_isa.h). */
#include <immintrin.h>
#define GEMM_ISA oxk_gemm_avx2
#define GEMM_NAME "avx2+fma"
#define VT __m256
#define VW 8
/* conv_lanes: most positions per tile (RT x 2 accumulators, 2 weight vectors) */
#define RT 6
#define MR 6
#define V_LOAD(p) _mm256_loadu_ps(p)
#define V_STORE(p, v) _mm256_storeu_ps(p, v)
#define V_SET1(x) _mm256_set1_ps(x)
#define V_ZERO() _mm256_setzero_ps()
#define V_FMA(a, b, acc) _mm256_fmadd_ps(a, b, acc)
#define V_ADD(a, b) _mm256_add_ps(a, b)
#define V_MAX(a, b) _mm256_max_ps(a, b)
#define V_MIN(a, b) _mm256_min_ps(a, b)
/* lanes [lo, lo + n) */
#define V_MASK_T __m256i
#define V_MASK(lo, n) _mm256_and_si256(_mm256_cmpgt_epi32(_mm256_set1_epi32((lo) + (n)), \
                                                        _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7)), \
                                       _mm256_cmpgt_epi32(_mm256_setr_epi32(1, 2, 3, 4, 5, 6, 7, 8), \
                                                          _mm256_set1_epi32(lo)))
#define V_MASKSTORE(p, m, v) _mm256_maskstore_ps(p, m, v)
#include "matmul_x86_impl.h"
