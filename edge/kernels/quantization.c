/* quantization.c - integer convolution and GEMM with onnxruntime's requantization, QuantizeLinear /
 * DequantizeLinear, the quantized global average pool and DynamicQuantizeLinear (issue #17).
 *
 * Both matrix ops run one int16 kernel: out[r][c] = sum_k U[r][k] * V[k][c], where U (rows of K,
 * padded to even K and to whole 4-row tiles) is broadcast two k at a time and V is stored in
 * k-pairs ([K/2][cols][2], cols padded to whole 8-column tiles), so SSE2's pmaddwd (NEON's
 * vmlal) adds two products per lane. Zero points are subtracted while packing (8-bit values
 * minus their zero point fit int16 exactly; padding is 0), so no correction terms follow. The
 * convolution is U = W (packed once) and V = im2col of x (per call); the GEMM is U = A (per call)
 * and V = B (packed once). Integer sums are exact, so every path and thread count gives the same
 * bits; requantization is float32 multiply, clamp, round half to even (the current rounding
 * mode, as MLAS's cvtps / magic-number rounding), add zero point. */
#include "oxk.h"
#if defined(__SSE2__) && !defined(OXK_FORCE_GENERIC)
#include <emmintrin.h>
#define QK_SSE2 1
#elif defined(__ARM_NEON) && !defined(OXK_FORCE_GENERIC)
#include <arm_neon.h>
#define QK_NEON 1
#endif

#define QR 4        /* U rows per tile */
#define QC 16       /* V columns per tile */
#define QCHUNK 64   /* columns per parallel task */

static int even(int k) { return (k + 1) & ~1; }
static int up(int n, int m) { return (n + m - 1) / m * m; }

static int in_value(const void* x, int type, size_t i) {
    switch (type) {
    case OXK_QT_INT8: return ((const int8_t*)x)[i];
    case OXK_QT_UINT8: return ((const uint8_t*)x)[i];
    default: return ((const int32_t*)x)[i];
    }
}

static int zero_of(const void* runtime, int type, int plan_zero) {
    return runtime ? in_value(runtime, type, 0) : plan_zero;
}

/* ---------------------------------------------------------------- packing */

size_t oxk_qpack_rows_size(int rows, int K) { return (size_t)(up(rows, QR) + QR) * even(K) * sizeof(int16_t); }

/* U layout: rows of even(K) int16 values, W - zero, then zero rows up to a whole tile past the
 * end (a group's last tile may start at any row). */
int oxk_qpack_rows(const void* W, int w_type, int rows, int K, int stride_r, int stride_k,
                   const int32_t* zero, int zero_per_row, int8_t* packed) {
    int16_t* u = (int16_t*)packed;
    int r, k, K2 = even(K), R4 = up(rows, QR) + QR;
    if (!W || !packed || !zero || rows < 0 || K < 0 || (w_type != OXK_QT_INT8 && w_type != OXK_QT_UINT8))
        return OXK_EARG;
    for (r = 0; r < R4; r++) {
        int16_t* dst = u + (size_t)r * K2;
        int z = r < rows ? zero[zero_per_row ? r : 0] : 0;
        for (k = 0; k < K2; k++)
            dst[k] = (int16_t)(r < rows && k < K
                               ? in_value(W, w_type, (size_t)r * stride_r + (size_t)k * stride_k) - z : 0);
    }
    return 0;
}

/* V layout for a constant B: [K/2][up(N, 8)][2] int16, B[k * stride_k + n * stride_n] - zero. */
static size_t qpack_cols_size(int N, int K) { return (size_t)even(K) * up(N, QC) * sizeof(int16_t); }

static void qpack_cols(const void* B, int type, int N, int K, int stride_k, int stride_n,
                       const int32_t* zero, int zero_per_col, int16_t* v) {
    int kp, n, j, N8 = up(N, QC);
    for (kp = 0; kp < even(K) / 2; kp++)
        for (n = 0; n < N8; n++)
            for (j = 0; j < 2; j++) {
                int k = 2 * kp + j;
                v[((size_t)kp * N8 + n) * 2 + j] = (int16_t)(n < N && k < K
                    ? in_value(B, type, (size_t)k * stride_k + (size_t)n * stride_n) - zero[zero_per_col ? n : 0] : 0);
            }
}

/* ---------------------------------------------------------------- the kernel */

#if defined(__x86_64__) && !defined(OXK_FORCE_GENERIC)
#include <stdlib.h>
#define QK_AVX2 1
void oxk_qtile_avx2(int KP, const int16_t* u, int K2, const int16_t* v, int ldv, int32_t t[QR][QC]);
/* 1 when the AVX2 tile runs (the CPU has AVX2 and OXK_ISA does not ask for sse2), decided once. */
static int use_avx2(void) {
    static int state = -1;
    if (state < 0) {
        const char* isa = getenv("OXK_ISA");
        state = __builtin_cpu_supports("avx2") && !(isa && isa[0] == 's') ? 1 : 0;
    }
    return state;
}
#endif

/* t[r][c] = sum over KP k-pairs of U rows (u, row stride K2) by V columns (v, column stride 2,
 * k-pair stride ldv), one 4 x 16 tile (done as two 4 x 8 halves below AVX2). */
static void tile(int KP, const int16_t* u, int K2, const int16_t* v, int ldv, int32_t t[QR][QC]) {
    int kp, r, h;
#if defined(QK_AVX2)
    if (use_avx2()) { oxk_qtile_avx2(KP, u, K2, v, ldv, t); return; }
#endif
#if defined(QK_SSE2)
    for (h = 0; h < QC; h += 8) {
        __m128i acc[QR][2];
        for (r = 0; r < QR; r++) acc[r][0] = acc[r][1] = _mm_setzero_si128();
        for (kp = 0; kp < KP; kp++) {
            const int16_t* vk = v + (size_t)kp * ldv * 2 + 2 * h;
            __m128i v0 = _mm_loadu_si128((const __m128i*)vk), v1 = _mm_loadu_si128((const __m128i*)(vk + 8));
            for (r = 0; r < QR; r++) {
                int32_t pair;
                __m128i w;
                memcpy(&pair, u + (size_t)r * K2 + 2 * kp, sizeof(pair));
                w = _mm_set1_epi32(pair);
                acc[r][0] = _mm_add_epi32(acc[r][0], _mm_madd_epi16(w, v0));
                acc[r][1] = _mm_add_epi32(acc[r][1], _mm_madd_epi16(w, v1));
            }
        }
        for (r = 0; r < QR; r++) {
            _mm_storeu_si128((__m128i*)(t[r] + h), acc[r][0]);
            _mm_storeu_si128((__m128i*)(t[r] + h + 4), acc[r][1]);
        }
    }
#elif defined(QK_NEON)
    for (h = 0; h < QC; h += 8) {
        int32x4_t acc[QR][2];
        for (r = 0; r < QR; r++) acc[r][0] = acc[r][1] = vdupq_n_s32(0);
        for (kp = 0; kp < KP; kp++) {
            int16x8x2_t x = vld2q_s16(v + (size_t)kp * ldv * 2 + 2 * h);   /* val[0]: k even, [1]: k odd */
            for (r = 0; r < QR; r++) {
                int16_t w0 = u[(size_t)r * K2 + 2 * kp], w1 = u[(size_t)r * K2 + 2 * kp + 1];
                acc[r][0] = vmlal_n_s16(vmlal_n_s16(acc[r][0], vget_low_s16(x.val[0]), w0), vget_low_s16(x.val[1]), w1);
                acc[r][1] = vmlal_n_s16(vmlal_n_s16(acc[r][1], vget_high_s16(x.val[0]), w0), vget_high_s16(x.val[1]), w1);
            }
        }
        for (r = 0; r < QR; r++) { vst1q_s32(t[r] + h, acc[r][0]); vst1q_s32(t[r] + h + 4, acc[r][1]); }
    }
#else
    (void)h;
    int c;
    for (r = 0; r < QR; r++)
        for (c = 0; c < QC; c++) t[r][c] = 0;
    for (kp = 0; kp < KP; kp++) {
        const int16_t* vk = v + (size_t)kp * ldv * 2;
        for (r = 0; r < QR; r++) {
            int32_t w0 = u[(size_t)r * K2 + 2 * kp], w1 = u[(size_t)r * K2 + 2 * kp + 1];
            for (c = 0; c < QC; c++) t[r][c] += w0 * vk[2 * c] + w1 * vk[2 * c + 1];
        }
    }
#endif
}

/* Where a tile goes: y[r * ldy + c] of y_type; bias and scale per row or per column. */
typedef struct {
    void* y;
    int ldy, y_type, zero, per_col;
    const int32_t* bias;
    const float* scale;
    int per_channel;
    float lo, hi;
} qstore;

static int32_t requant(int32_t acc, float scale, float lo, float hi) {
    union { float f; int32_t i; } u;
    float f = (float)acc * scale;
    f = f < lo ? lo : f;
    f = f > hi ? hi : f;
    u.f = f + 12582912.0f;          /* 1.5 * 2^23: rounds half to even in the current mode */
    return u.i - 0x4B400000;
}

#if defined(QK_SSE2)
/* y = clamp(f * scale) rounded (cvtps: the current mode, round half to even, as requant) + zero,
 * 8 values of i0:i1 packed into int8/uint8 (in range already, so the packs do not saturate). */
static void store8f(void* y, int y_type, __m128 f0, __m128 f1, __m128 lo, __m128 hi, __m128i zero) {
    __m128i p;
    f0 = _mm_min_ps(_mm_max_ps(f0, lo), hi);
    f1 = _mm_min_ps(_mm_max_ps(f1, lo), hi);
    p = _mm_packs_epi32(_mm_add_epi32(_mm_cvtps_epi32(f0), zero), _mm_add_epi32(_mm_cvtps_epi32(f1), zero));
    _mm_storel_epi64((__m128i*)y, y_type == OXK_QT_INT8 ? _mm_packs_epi16(p, p) : _mm_packus_epi16(p, p));
}

static void store8(void* y, int y_type, __m128i i0, __m128i i1, __m128 s0, __m128 s1, __m128 lo, __m128 hi,
                   __m128i zero) {
    store8f(y, y_type, _mm_mul_ps(_mm_cvtepi32_ps(i0), s0), _mm_mul_ps(_mm_cvtepi32_ps(i1), s1), lo, hi, zero);
}
#endif

static void store(const qstore* s, int32_t t[QR][QC], int r0, int nr, int c0, int nc) {
    int r, c, nv = 0;
#if defined(QK_SSE2)
    if (s->y_type != OXK_QT_INT32) {   /* whole groups of 8 columns: vectors */
        __m128 lo = _mm_set1_ps(s->lo), hi = _mm_set1_ps(s->hi), s0 = _mm_set1_ps(s->scale[0]), s1 = s0;
        __m128i zero = _mm_set1_epi32(s->zero), b0 = _mm_setzero_si128(), b1 = b0;
        int h;
        nv = nc / 8 * 8;
        for (h = 0; h < nv; h += 8) {
            int C0 = c0 + h;
            if (s->per_col) {
                if (s->bias) {
                    b0 = _mm_loadu_si128((const __m128i*)(s->bias + C0));
                    b1 = _mm_loadu_si128((const __m128i*)(s->bias + C0 + 4));
                }
                if (s->per_channel) { s0 = _mm_loadu_ps(s->scale + C0); s1 = _mm_loadu_ps(s->scale + C0 + 4); }
            }
            for (r = 0; r < nr; r++) {
                int R = r0 + r;
                if (!s->per_col) {
                    b0 = b1 = _mm_set1_epi32(s->bias ? s->bias[R] : 0);
                    if (s->per_channel) s0 = s1 = _mm_set1_ps(s->scale[R]);
                }
                store8((char*)s->y + (size_t)R * s->ldy + C0, s->y_type,
                       _mm_add_epi32(_mm_loadu_si128((const __m128i*)(t[r] + h)), b0),
                       _mm_add_epi32(_mm_loadu_si128((const __m128i*)(t[r] + h + 4)), b1), s0, s1, lo, hi, zero);
            }
        }
    }
#endif
    for (r = 0; r < nr; r++) {
        int R = r0 + r;
        size_t at = (size_t)R * s->ldy + c0;
        if (s->y_type == OXK_QT_INT32) {
            int32_t* y = (int32_t*)s->y + at;
            for (c = 0; c < nc; c++) y[c] = t[r][c] + (s->bias ? s->bias[s->per_col ? c0 + c : R] : 0);
            continue;
        }
        for (c = nv; c < nc; c++) {
            int i = s->per_col ? c0 + c : R;
            int32_t v = requant(t[r][c] + (s->bias ? s->bias[i] : 0), s->scale[s->per_channel ? i : 0],
                                s->lo, s->hi) + s->zero;
            if (s->y_type == OXK_QT_INT8) ((int8_t*)s->y)[at + c] = (int8_t)v;
            else ((uint8_t*)s->y)[at + c] = (uint8_t)v;
        }
    }
}

typedef struct {
    int R, C, KP, K2, ldv;
    const int16_t *u, *v;
    const qstore* s;
} qjob;

static void run_chunk(void* ctx, int i) {
    const qjob* q = (const qjob*)ctx;
    int c0, r0, cend = (i + 1) * QCHUNK < q->C ? (i + 1) * QCHUNK : q->C;
    int32_t t[QR][QC];
    for (c0 = i * QCHUNK; c0 < cend; c0 += QC) {
        int nc = cend - c0 < QC ? cend - c0 : QC;
        for (r0 = 0; r0 < q->R; r0 += QR) {
            tile(q->KP, q->u + (size_t)r0 * q->K2, q->K2, q->v + (size_t)c0 * 2, q->ldv, t);
            store(q->s, t, r0, q->R - r0 < QR ? q->R - r0 : QR, c0, nc);
        }
    }
}

static void qmatmul(int R, int C, int K, const int16_t* u, const int16_t* v, int ldv, const qstore* s) {
    qjob q;
    q.R = R; q.C = C; q.KP = even(K) / 2; q.K2 = even(K); q.ldv = ldv; q.u = u; q.v = v; q.s = s;
    oxk_parallel_for((C + QCHUNK - 1) / QCHUNK, run_chunk, &q);
}

static int out_bounds(int y_type, int zero, int qmin, int qmax, qstore* s) {
    int lo = y_type == OXK_QT_INT8 ? -128 : 0, hi = y_type == OXK_QT_INT8 ? 127 : 255;
    if (y_type == OXK_QT_INT32) return 0;
    if (y_type != OXK_QT_INT8 && y_type != OXK_QT_UINT8) return OXK_EARG;
    if (qmin < lo) qmin = lo;
    if (qmax > hi) qmax = hi;
    if (zero < lo || zero > hi || qmin > qmax) return OXK_EARG;
    s->lo = (float)(qmin - zero);
    s->hi = (float)(qmax - zero);
    return 0;
}

static int bad_type(int t) { return t != OXK_QT_INT8 && t != OXK_QT_UINT8; }

/* ---------------------------------------------------------------- convolution */

int oxk_qconv_run(const oxk_qconv_plan* p, int N, const void* x, const void* x_zero, void* y) {
    int n, g, Cg, Rg, K, K2, P, P8, Hp, Wp, zx, rc;
    size_t plane, ysz;
    int16_t *xp, *v;
    qstore s;
    if (!p || !x || !y || !p->packW || N < 0 || p->group < 1 || p->C % p->group || p->Cout % p->group ||
        p->OH < 1 || p->OW < 1 || p->kh < 1 || p->kw < 1 || p->sh < 1 || p->sw < 1 || p->dh < 1 || p->dw < 1 ||
        p->pt < 0 || p->pl < 0 || p->pb < 0 || p->pr < 0 || bad_type(p->x_type) || (p->y_type != OXK_QT_INT32 && !p->scale))
        return OXK_EARG;
    memset(&s, 0, sizeof(s));
    if ((rc = out_bounds(p->y_type, p->y_zero, p->qmin, p->qmax, &s)) != 0) return rc;
    Cg = p->C / p->group; Rg = p->Cout / p->group;
    K = Cg * p->kh * p->kw; K2 = even(K);
    P = p->OH * p->OW; P8 = up(P, QC);
    Hp = p->H + p->pt + p->pb; Wp = p->W + p->pl + p->pr;
    if ((p->OH - 1) * p->sh + (p->kh - 1) * p->dh >= Hp || (p->OW - 1) * p->sw + (p->kw - 1) * p->dw >= Wp)
        return OXK_EARG;
    zx = zero_of(x_zero, p->x_type, p->x_zero);
    plane = (size_t)Hp * Wp;
    xp = (int16_t*)oxk_scratch(OXK_SCRATCH_PAD, (size_t)p->C * plane * sizeof(int16_t));
    v = (int16_t*)oxk_scratch(OXK_SCRATCH_PANELS, (size_t)K2 * P8 * sizeof(int16_t));
    if (!xp || !v) return OXK_ENOMEM;
    ysz = p->y_type == OXK_QT_INT32 ? 4 : 1;
    s.y_type = p->y_type; s.zero = p->y_zero; s.per_col = 0; s.scale = p->scale; s.per_channel = p->per_channel;
    s.ldy = P;
    for (n = 0; n < N; n++) {
        size_t xoff = (size_t)n * p->C * p->H * p->W;
        int c, h, w;
        /* x - zero, padded with 0 */
        for (c = 0; c < p->C; c++) {
            int16_t* dst = xp + (size_t)c * plane;
            for (h = 0; h < Hp; h++) {
                int ih = h - p->pt;
                int16_t* row = dst + (size_t)h * Wp;
                if (ih < 0 || ih >= p->H) { memset(row, 0, (size_t)Wp * sizeof(int16_t)); continue; }
                for (w = 0; w < p->pl; w++) row[w] = 0;
                if (p->x_type == OXK_QT_INT8) {
                    const int8_t* src = (const int8_t*)x + xoff + ((size_t)c * p->H + ih) * p->W;
                    for (w = 0; w < p->W; w++) row[p->pl + w] = (int16_t)(src[w] - zx);
                } else {
                    const uint8_t* src = (const uint8_t*)x + xoff + ((size_t)c * p->H + ih) * p->W;
                    for (w = 0; w < p->W; w++) row[p->pl + w] = (int16_t)(src[w] - zx);
                }
                for (w = p->pl + p->W; w < Wp; w++) row[w] = 0;
            }
        }
        for (g = 0; g < p->group; g++) {
            int kp;
            /* im2col in k-pairs: v[kp][p][j] = xp[c][oh*sh + ki*dh][ow*sw + kj*dw], k = 2kp + j */
            for (kp = 0; kp < K2 / 2; kp++) {
                const int16_t* src[2];
                int16_t* dst = v + (size_t)kp * P8 * 2;
                int j, oh, ow, sw = p->sw;
                for (j = 0; j < 2; j++) {
                    int k = 2 * kp + j;
                    if (k < K) {
                        int cc = g * Cg + k / (p->kh * p->kw), ki = k / p->kw % p->kh, kj = k % p->kw;
                        src[j] = xp + (size_t)cc * plane + (size_t)ki * p->dh * Wp + (size_t)kj * p->dw;
                    } else {
                        src[j] = NULL;
                    }
                }
                for (oh = 0; oh < p->OH; oh++) {
                    int16_t* d = dst + (size_t)oh * p->OW * 2;
                    const int16_t* s0 = src[0] + (size_t)oh * p->sh * Wp;
                    if (src[1]) {
                        const int16_t* s1 = src[1] + (size_t)oh * p->sh * Wp;
                        for (ow = 0; ow < p->OW; ow++) { d[2 * ow] = s0[ow * sw]; d[2 * ow + 1] = s1[ow * sw]; }
                    } else {
                        for (ow = 0; ow < p->OW; ow++) { d[2 * ow] = s0[ow * sw]; d[2 * ow + 1] = 0; }
                    }
                }
                memset(dst + (size_t)P * 2, 0, (size_t)(P8 - P) * 2 * sizeof(int16_t));
            }
            s.y = (char*)y + ((size_t)n * p->Cout + (size_t)g * Rg) * P * ysz;
            s.bias = p->bias ? p->bias + (size_t)g * Rg : NULL;
            s.scale = p->scale + (p->per_channel ? (size_t)g * Rg : 0);
            qmatmul(Rg, P, K, (const int16_t*)p->packW + (size_t)g * Rg * K2, v, P8, &s);
        }
    }
    return 0;
}

/* ---------------------------------------------------------------- GEMM */

size_t oxk_qpack_cols_size(int N, int K) { return qpack_cols_size(N, K); }

int oxk_qpack_cols(const void* B, int b_type, int N, int K, int stride_k, int stride_n,
                   const int32_t* zero, int zero_per_col, int8_t* packed) {
    if (!B || !packed || !zero || N < 0 || K < 0 || bad_type(b_type)) return OXK_EARG;
    qpack_cols(B, b_type, N, K, stride_k, stride_n, zero, zero_per_col, (int16_t*)packed);
    return 0;
}

int oxk_qgemm_run(const oxk_qgemm_plan* p, int M, const void* A, const void* a_zero, void* y) {
    int m, k, K2, M4, za, rc;
    int16_t* u;
    qstore s;
    if (!p || !A || !y || !p->packB || M < 0 || p->N < 0 || p->K < 0 || bad_type(p->a_type) ||
        (p->y_type != OXK_QT_INT32 && !p->scale))
        return OXK_EARG;
    memset(&s, 0, sizeof(s));
    if ((rc = out_bounds(p->y_type, p->y_zero, p->qmin, p->qmax, &s)) != 0) return rc;
    if (M == 0 || p->N == 0) return 0;
    K2 = even(p->K); M4 = up(M, QR);
    za = zero_of(a_zero, p->a_type, p->a_zero);
    u = (int16_t*)oxk_scratch(OXK_SCRATCH_PAD, (size_t)M4 * K2 * sizeof(int16_t));
    if (!u) return OXK_ENOMEM;
    for (m = 0; m < M4; m++) {
        int16_t* dst = u + (size_t)m * K2;
        if (m >= M) { memset(dst, 0, (size_t)K2 * sizeof(int16_t)); continue; }
        if (p->a_type == OXK_QT_INT8) {
            const int8_t* src = (const int8_t*)A + (size_t)m * p->K;
            for (k = 0; k < p->K; k++) dst[k] = (int16_t)(src[k] - za);
        } else {
            const uint8_t* src = (const uint8_t*)A + (size_t)m * p->K;
            for (k = 0; k < p->K; k++) dst[k] = (int16_t)(src[k] - za);
        }
        for (; k < K2; k++) dst[k] = 0;
    }
    s.y = y; s.ldy = p->N; s.y_type = p->y_type; s.zero = p->y_zero; s.per_col = 1;
    s.bias = p->bias; s.scale = p->scale; s.per_channel = p->per_channel;
    qmatmul(M, p->N, p->K, u, (const int16_t*)p->packB, up(p->N, QC), &s);
    return 0;
}

/* ---------------------------------------------------------------- elementwise */

int oxk_quantize(const oxk_quant_args* q, int n, const float* x, void* y) {
    int i;
    float lo, hi, scale;
    if (!q || n < 0 || (n && (!x || !y)) || bad_type(q->type)) return OXK_EARG;
    lo = (float)((q->type == OXK_QT_INT8 ? -128 : 0) - q->zero);
    hi = (float)((q->type == OXK_QT_INT8 ? 127 : 255) - q->zero);
    scale = q->scale;
    i = 0;
#if defined(QK_SSE2)
    {
        __m128 vs = _mm_set1_ps(scale), vlo = _mm_set1_ps(lo), vhi = _mm_set1_ps(hi);
        __m128i zero = _mm_set1_epi32(q->zero);
        for (; i + 8 <= n; i += 8)   /* x / scale as a division, as MLAS (not a reciprocal) */
            store8f((char*)y + i, q->type, _mm_div_ps(_mm_loadu_ps(x + i), vs),
                    _mm_div_ps(_mm_loadu_ps(x + i + 4), vs), vlo, vhi, zero);
    }
#endif
    for (; i < n; i++) {
        union { float f; int32_t i; } u;
        float f = x[i] / scale;
        f = f < lo ? lo : f;
        f = f > hi ? hi : f;
        u.f = f + 12582912.0f;
        if (q->type == OXK_QT_INT8) ((int8_t*)y)[i] = (int8_t)(u.i - 0x4B400000 + q->zero);
        else ((uint8_t*)y)[i] = (uint8_t)(u.i - 0x4B400000 + q->zero);
    }
    return 0;
}

int oxk_dequantize(const oxk_quant_args* q, int n, const void* x, float* y) {
    int i;
    if (!q || n < 0 || (n && (!x || !y))) return OXK_EARG;
    switch (q->type) {
    case OXK_QT_INT8: for (i = 0; i < n; i++) y[i] = (float)(((const int8_t*)x)[i] - q->zero) * q->scale; break;
    case OXK_QT_UINT8: for (i = 0; i < n; i++) y[i] = (float)(((const uint8_t*)x)[i] - q->zero) * q->scale; break;
    case OXK_QT_INT32:
        for (i = 0; i < n; i++) y[i] = (float)(((const int32_t*)x)[i] - q->zero) * q->scale;
        break;
    case OXK_QT_INT64:
        for (i = 0; i < n; i++) y[i] = (float)(((const int64_t*)x)[i] - q->zero) * q->scale;
        break;
    default: return OXK_EARG;
    }
    return 0;
}

int oxk_qglobal_pool(const oxk_qpool_args* q, int NC, const void* x, void* y) {
    int c, i, rc;
    qstore s;
    if (!q || NC < 0 || q->hw < 1 || (NC && (!x || !y)) || bad_type(q->x_type)) return OXK_EARG;
    memset(&s, 0, sizeof(s));
    if ((rc = out_bounds(q->x_type, q->y_zero, q->qmin, q->qmax, &s)) != 0) return rc;
    for (c = 0; c < NC; c++) {
        int32_t sum = -q->x_zero * q->hw;
        size_t at = (size_t)c * q->hw;
        if (q->x_type == OXK_QT_INT8) for (i = 0; i < q->hw; i++) sum += ((const int8_t*)x)[at + i];
        else for (i = 0; i < q->hw; i++) sum += ((const uint8_t*)x)[at + i];
        sum = requant(sum, q->scale, s.lo, s.hi) + q->y_zero;
        if (q->x_type == OXK_QT_INT8) ((int8_t*)y)[c] = (int8_t)sum;
        else ((uint8_t*)y)[c] = (uint8_t)sum;
    }
    return 0;
}

/* onnxruntime's DynamicQuantizeLinear: the range [min(x, 0), max(x, 0)] over 0..255; scale 1 when
 * the range is empty; zero point round(clamp(0 - min / scale, 0, 255)). */
static void dql_params(const float* x, int n, float* scale, int* zero) {
    int i;
    float lo = 0.0f, hi = 0.0f, z;
    union { float f; int32_t i; } u;
    for (i = 0; i < n; i++) {
        lo = x[i] < lo ? x[i] : lo;
        hi = x[i] > hi ? x[i] : hi;
    }
    *scale = hi == lo ? 1.0f : (hi - lo) / 255.0f;
    z = 0.0f - lo / *scale;
    z = z < 0.0f ? 0.0f : z > 255.0f ? 255.0f : z;
    u.f = z + 12582912.0f;
    *zero = u.i - 0x4B400000;
}

int oxk_dynamic_quantize(const float* x, int n, uint8_t* y, float* scale, uint8_t* zero) {
    float s;
    int z;
    oxk_quant_args q;
    if (n < 0 || (n && !x)) return OXK_EARG;
    dql_params(x, n, &s, &z);
    if (scale) *scale = s;
    if (zero) *zero = (uint8_t)z;
    if (!y) return 0;
    q.type = OXK_QT_UINT8; q.zero = z; q.scale = s;
    return oxk_quantize(&q, n, x, y);
}
