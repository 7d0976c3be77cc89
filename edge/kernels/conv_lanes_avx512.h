/* conv_lanes_avx512.h - a 16 x 16 float transpose in AVX-512 registers (internal to the library), for
 * the kernels that move 16 channels between planes and lanes: the lanes conv's store
 * (matmul_x86_impl.h) and the 16-channel depthwise blocks (conv_dw_avx512.c). Include only from
 * units compiled with -mavx512f. */
#ifndef OXK_CONV_LANES_AVX512_H
#define OXK_CONV_LANES_AVX512_H

#include <immintrin.h>

/* r[i] lane j <- r[j] lane i. */
static inline __attribute__((always_inline)) void oxk_transpose16(__m512 r[16]) {
    __m512 t[16];
    int i;
#pragma GCC unroll 8
    for (i = 0; i < 16; i += 2) {
        t[i] = _mm512_unpacklo_ps(r[i], r[i + 1]);
        t[i + 1] = _mm512_unpackhi_ps(r[i], r[i + 1]);
    }
#pragma GCC unroll 4
    for (i = 0; i < 16; i += 4) {
        r[i] = _mm512_shuffle_ps(t[i], t[i + 2], 0x44);
        r[i + 1] = _mm512_shuffle_ps(t[i], t[i + 2], 0xEE);
        r[i + 2] = _mm512_shuffle_ps(t[i + 1], t[i + 3], 0x44);
        r[i + 3] = _mm512_shuffle_ps(t[i + 1], t[i + 3], 0xEE);
    }
#pragma GCC unroll 2
    for (i = 0; i < 16; i += 8) {
        t[i] = _mm512_shuffle_f32x4(r[i], r[i + 4], 0x88);
        t[i + 1] = _mm512_shuffle_f32x4(r[i + 1], r[i + 5], 0x88);
        t[i + 2] = _mm512_shuffle_f32x4(r[i + 2], r[i + 6], 0x88);
        t[i + 3] = _mm512_shuffle_f32x4(r[i + 3], r[i + 7], 0x88);
        t[i + 4] = _mm512_shuffle_f32x4(r[i], r[i + 4], 0xDD);
        t[i + 5] = _mm512_shuffle_f32x4(r[i + 1], r[i + 5], 0xDD);
        t[i + 6] = _mm512_shuffle_f32x4(r[i + 2], r[i + 6], 0xDD);
        t[i + 7] = _mm512_shuffle_f32x4(r[i + 3], r[i + 7], 0xDD);
    }
#pragma GCC unroll 8
    for (i = 0; i < 8; i++) {
        r[i] = _mm512_shuffle_f32x4(t[i], t[i + 8], 0x88);
        r[i + 8] = _mm512_shuffle_f32x4(t[i], t[i + 8], 0xDD);
    }
}

/* n >= 16: all 16 lanes; else the first n. */
static inline __mmask16 oxk_first_lanes(int n) { return (__mmask16)(n >= 16 ? 0xFFFFu : (1u << n) - 1u); }

#endif /* OXK_CONV_LANES_AVX512_H */
