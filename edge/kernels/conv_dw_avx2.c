/* conv_dw_avx2.c - the depthwise inner loop (conv_dw.h) with AVX2 + FMA (ymm); compiled only for
 * x86-64 with -mavx2 -mfma and chosen by conv.c when the library chose the AVX2 SGEMM core. */
#include <immintrin.h>
#define DW_NAME oxk_dw_rows_avx2
#define DW3_NAME oxk_dw3_avx2
#define VT __m256
#define VW 8
#define V_LOAD(p) _mm256_loadu_ps(p)
#define V_STORE(p, v) _mm256_storeu_ps(p, v)
#define V_SET1(x) _mm256_set1_ps(x)
#define V_FMA(a, b, acc) _mm256_fmadd_ps(a, b, acc)
#define V_MAX(a, b) _mm256_max_ps(a, b)
#define V_MIN(a, b) _mm256_min_ps(a, b)
/* e, o = the even and odd of p[0 .. 2 VW) */
#define V_LOAD_DEINT(p, e, o)                                                                     \
    do {                                                                                          \
        const __m256 lo_ = _mm256_loadu_ps(p), hi_ = _mm256_loadu_ps((p) + 8);                   \
        (e) = _mm256_castpd_ps(_mm256_permute4x64_pd(                                             \
            _mm256_castps_pd(_mm256_shuffle_ps(lo_, hi_, _MM_SHUFFLE(2, 0, 2, 0))), _MM_SHUFFLE(3, 1, 2, 0))); \
        (o) = _mm256_castpd_ps(_mm256_permute4x64_pd(                                             \
            _mm256_castps_pd(_mm256_shuffle_ps(lo_, hi_, _MM_SHUFFLE(3, 1, 3, 1))), _MM_SHUFFLE(3, 1, 2, 0))); \
    } while (0)
#include "conv_dw_impl.h"
