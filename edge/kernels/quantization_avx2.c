/* quantization_avx2.c - the quantized kernels' 4 x 16 int16 tile with AVX2 (vpmaddwd on ymm: two
 * k per product, 8 columns per register); compiled only for x86-64 with -mavx2 and chosen at run
 * time by quantization.c. Integer sums are exact: it gives the SSE2 tile's bits. */
#include <immintrin.h>
#include "oxk.h"

void oxk_qtile_avx2(int KP, const int16_t* u, int K2, const int16_t* v, int ldv, int32_t t[4][16]);
void oxk_qtile_avx2(int KP, const int16_t* u, int K2, const int16_t* v, int ldv, int32_t t[4][16]) {
    __m256i a00 = _mm256_setzero_si256(), a01 = a00, a10 = a00, a11 = a00, a20 = a00, a21 = a00, a30 = a00,
            a31 = a00;
    const int16_t *u0 = u, *u1 = u + K2, *u2 = u + 2 * (size_t)K2, *u3 = u + 3 * (size_t)K2;
    int kp;
    for (kp = 0; kp < KP; kp++) {
        const int16_t* vk = v + (size_t)kp * ldv * 2;
        __m256i v0 = _mm256_loadu_si256((const __m256i*)vk), v1 = _mm256_loadu_si256((const __m256i*)(vk + 16));
        int32_t p0, p1, p2, p3;
        __m256i w;
        memcpy(&p0, u0 + 2 * kp, 4); memcpy(&p1, u1 + 2 * kp, 4);
        memcpy(&p2, u2 + 2 * kp, 4); memcpy(&p3, u3 + 2 * kp, 4);
        w = _mm256_set1_epi32(p0);
        a00 = _mm256_add_epi32(a00, _mm256_madd_epi16(w, v0)); a01 = _mm256_add_epi32(a01, _mm256_madd_epi16(w, v1));
        w = _mm256_set1_epi32(p1);
        a10 = _mm256_add_epi32(a10, _mm256_madd_epi16(w, v0)); a11 = _mm256_add_epi32(a11, _mm256_madd_epi16(w, v1));
        w = _mm256_set1_epi32(p2);
        a20 = _mm256_add_epi32(a20, _mm256_madd_epi16(w, v0)); a21 = _mm256_add_epi32(a21, _mm256_madd_epi16(w, v1));
        w = _mm256_set1_epi32(p3);
        a30 = _mm256_add_epi32(a30, _mm256_madd_epi16(w, v0)); a31 = _mm256_add_epi32(a31, _mm256_madd_epi16(w, v1));
    }
    _mm256_storeu_si256((__m256i*)t[0], a00); _mm256_storeu_si256((__m256i*)(t[0] + 8), a01);
    _mm256_storeu_si256((__m256i*)t[1], a10); _mm256_storeu_si256((__m256i*)(t[1] + 8), a11);
    _mm256_storeu_si256((__m256i*)t[2], a20); _mm256_storeu_si256((__m256i*)(t[2] + 8), a21);
    _mm256_storeu_si256((__m256i*)t[3], a30); _mm256_storeu_si256((__m256i*)(t[3] + 8), a31);
}
