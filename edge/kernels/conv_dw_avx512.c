/* conv_dw_avx512.c - the depthwise inner loop (conv_dw.h) with AVX-512F (zmm); compiled only for
 * x86-64 with -mavx512f and chosen by conv.c when the library chose the AVX-512 SGEMM core. */
#include <immintrin.h>
#define DW_NAME oxk_dw_rows_avx512
#define DW3_NAME oxk_dw3_avx512
#define VT __m512
#define VW 16
#define V_LOAD(p) _mm512_loadu_ps(p)
#define V_STORE(p, v) _mm512_storeu_ps(p, v)
#define V_SET1(x) _mm512_set1_ps(x)
#define V_FMA(a, b, acc) _mm512_fmadd_ps(a, b, acc)
#define V_MAX(a, b) _mm512_max_ps(a, b)
#define V_MIN(a, b) _mm512_min_ps(a, b)
/* e, o = the even and odd of p[0 .. 2 VW) */
#define V_LOAD_DEINT(p, e, o)                                                                     \
    do {                                                                                          \
        const __m512 lo_ = _mm512_loadu_ps(p), hi_ = _mm512_loadu_ps((p) + 16);                  \
        (e) = _mm512_permutex2var_ps(lo_, _mm512_set_epi32(30, 28, 26, 24, 22, 20, 18, 16, 14,    \
                                                            12, 10, 8, 6, 4, 2, 0), hi_);         \
        (o) = _mm512_permutex2var_ps(lo_, _mm512_set_epi32(31, 29, 27, 25, 23, 21, 19, 17, 15,    \
                                                            13, 11, 9, 7, 5, 3, 1), hi_);         \
    } while (0)
#include "conv_dw_impl.h"
