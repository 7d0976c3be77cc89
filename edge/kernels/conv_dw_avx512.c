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
/* masked loads (lanes not in m read as zero and are not touched): the 3x3 rows' border vectors */
#define V_MASKZ_LOAD(p, m) _mm512_maskz_loadu_ps((__mmask16)(m), p)
#define V_LOAD_DEINT_MASKZ(p, mlo, mhi, e, o)                                                     \
    do {                                                                                          \
        const __m512 lo_ = V_MASKZ_LOAD(p, mlo), hi_ = V_MASKZ_LOAD((p) + 16, mhi);               \
        (e) = _mm512_permutex2var_ps(lo_, _mm512_set_epi32(30, 28, 26, 24, 22, 20, 18, 16, 14,    \
                                                            12, 10, 8, 6, 4, 2, 0), hi_);         \
        (o) = _mm512_permutex2var_ps(lo_, _mm512_set_epi32(31, 29, 27, 25, 23, 21, 19, 17, 15,    \
                                                            13, 11, 9, 7, 5, 3, 1), hi_);         \
    } while (0)
#include "conv_dw_impl.h"
#include "conv_lanes_avx512.h"

/* ---------------------------------------------------------------- 16 channels along the lanes */

void oxk_dw16_avx512(const float* x, size_t xs, int nch, int H, int W, int kh, int kw, int sh, int sw,
                     int dh, int dw, int pt, int pl, const float* w, const float* bias, int act, float p0,
                     float p1, float* y, size_t ys, int OH, int OW, float* buf, int Hp, int Wp) {
    const int taps = kh * kw, HW = H * W, P = OH * OW;
    const __m512 zero = _mm512_setzero_ps();
    const __m512 lo = _mm512_set1_ps(act == OXK_ACT_CLIP ? p0 : 0.f), hi = _mm512_set1_ps(p1);
    float* ob = buf + (size_t)Hp * Wp * 16;
    __m512 wv[DW16_MAX_TAPS], vb, r[16];
    float lane[16] __attribute__((aligned(64)));
    int t, i, q, h, c, oh, ow, at;
    for (t = 0; t < taps; t++) {
        for (i = 0; i < 16; i++) lane[i] = i < nch ? w[(size_t)i * taps + t] : 0.f;
        wv[t] = _mm512_load_ps(lane);
    }
    for (i = 0; i < 16; i++) lane[i] = bias && i < nch ? bias[i] : 0.f;
    vb = _mm512_load_ps(lane);
    /* the border positions: rows above and below the input, columns left and right of it */
    for (h = 0; h < Hp; h++) {
        const int inside = h >= pt && h < pt + H;
        for (c = 0; c < Wp; c++)
            if (!inside || c < pl || c >= pl + W) _mm512_storeu_ps(buf + ((size_t)h * Wp + c) * 16, zero);
    }
    /* the input, 16 positions of every channel at a time, transposed to 16 channels a position */
    for (at = 0, h = 0, c = 0; at < HW; at += 16) {   /* (h, c): the input position at + q */
        const int n = HW - at < 16 ? HW - at : 16;
        const __mmask16 m = oxk_first_lanes(n);
#pragma GCC unroll 16
        for (i = 0; i < 16; i++) r[i] = i < nch ? _mm512_maskz_loadu_ps(m, x + (size_t)i * xs + at) : zero;
        oxk_transpose16(r);
        for (q = 0; q < n; q++) {
            _mm512_storeu_ps(buf + ((size_t)(h + pt) * Wp + c + pl) * 16, r[q]);
            if (++c == W) { c = 0; h++; }
        }
    }
    /* each output position: bias, then the taps in row-major order; four positions at a time
     * (four independent FMA chains) */
    for (oh = 0; oh < OH; oh++)
        for (ow = 0; ow < OW; ow += q) {
            __m512 acc[4];
            q = OW - ow < 4 ? 1 : 4;
            for (t = 0; t < q; t++) acc[t] = vb;
            for (i = 0; i < kh; i++) {
                const float* row = buf + ((size_t)(oh * sh + i * dh) * Wp + (size_t)ow * sw) * 16;
                for (c = 0; c < kw; c++) {
                    const float* at_c = row + (size_t)c * dw * 16;
                    const __m512 wt = wv[i * kw + c];
                    if (q == 4) {
                        acc[0] = _mm512_fmadd_ps(_mm512_loadu_ps(at_c), wt, acc[0]);
                        acc[1] = _mm512_fmadd_ps(_mm512_loadu_ps(at_c + (size_t)sw * 16), wt, acc[1]);
                        acc[2] = _mm512_fmadd_ps(_mm512_loadu_ps(at_c + (size_t)2 * sw * 16), wt, acc[2]);
                        acc[3] = _mm512_fmadd_ps(_mm512_loadu_ps(at_c + (size_t)3 * sw * 16), wt, acc[3]);
                    } else {
                        acc[0] = _mm512_fmadd_ps(_mm512_loadu_ps(at_c), wt, acc[0]);
                    }
                }
            }
            for (t = 0; t < q; t++) {
                __m512 v = acc[t];
                if (act == OXK_ACT_RELU) v = _mm512_max_ps(v, lo);
                else if (act == OXK_ACT_CLIP) v = _mm512_min_ps(_mm512_max_ps(v, lo), hi);
                _mm512_storeu_ps(ob + ((size_t)oh * OW + ow + t) * 16, v);
            }
        }
    /* back: 16 positions of every channel at a time */
    for (at = 0; at < P; at += 16) {
        const int n = P - at < 16 ? P - at : 16;
        const __mmask16 m = oxk_first_lanes(n);
#pragma GCC unroll 16
        for (q = 0; q < 16; q++) r[q] = q < n ? _mm512_loadu_ps(ob + ((size_t)at + q) * 16) : zero;
        oxk_transpose16(r);
        for (i = 0; i < nch; i++) _mm512_mask_storeu_ps(y + (size_t)i * ys + at, m, r[i]);
    }
}
