/* ref.c - scalar reference kernels: the plainest loops for each optimized kernel, no tiling,
 * no SIMD, no threads. Tests check every optimized path against these and against numpy. */
#include "oxk.h"

int oxk_ref_sgemm(int transA, int transB, int M, int N, int K, float alpha,
                  const float* A, int lda, const float* B, int ldb, float beta, float* C, int ldc,
                  const float* bias, int bias_kind, int act, float p0, float p1) {
    int m, n, k;
    if (M < 0 || N < 0 || K < 0 || !C) return OXK_EARG;
    for (m = 0; m < M; m++) {
        for (n = 0; n < N; n++) {
            double s = 0;
            float v;
            for (k = 0; k < K; k++)
                s += (double)(transA ? A[(size_t)k * lda + m] : A[(size_t)m * lda + k]) *
                     (double)(transB ? B[(size_t)n * ldb + k] : B[(size_t)k * ldb + n]);
            v = alpha * (float)s + (beta != 0.f ? beta * C[(size_t)m * ldc + n] : 0.f);
            if (bias_kind == OXK_BIAS_ROW) v += bias[m];
            if (bias_kind == OXK_BIAS_COL) v += bias[n];
            C[(size_t)m * ldc + n] = oxk_act_scalar(v, act, p0, p1);
        }
    }
    return 0;
}

int oxk_ref_conv2d(const float* x, int N, int C, int H, int Wd, const float* W, int Cout,
                   int kh, int kw, int group, int sh, int sw, int dh, int dw,
                   int pt, int pl, int pb, int pr, const float* bias, int act, float p0, float p1,
                   float* y, int OH, int OW) {
    int n, oc, oh, ow, c, i, k, Cin_g, Cg;
    (void)pb; (void)pr;
    if (group <= 0 || C % group || Cout % group) return OXK_EARG;
    Cin_g = C / group; Cg = Cout / group;
    for (n = 0; n < N; n++)
        for (oc = 0; oc < Cout; oc++)
            for (oh = 0; oh < OH; oh++)
                for (ow = 0; ow < OW; ow++) {
                    double s = bias ? bias[oc] : 0.f;
                    int g = oc / Cg;
                    for (c = 0; c < Cin_g; c++)
                        for (i = 0; i < kh; i++)
                            for (k = 0; k < kw; k++) {
                                int ih = oh * sh - pt + i * dh, iw = ow * sw - pl + k * dw;
                                if (ih < 0 || iw < 0 || ih >= H || iw >= Wd) continue;
                                s += (double)x[(((size_t)n * C + g * Cin_g + c) * H + ih) * Wd + iw] *
                                     W[(((size_t)oc * Cin_g + c) * kh + i) * kw + k];
                            }
                    y[(((size_t)n * Cout + oc) * OH + oh) * OW + ow] = oxk_act_scalar((float)s, act, p0, p1);
                }
    return 0;
}

int oxk_ref_pool2d(const float* x, int NC, int H, int Wd, int kind, int kh, int kw,
                   int sh, int sw, int dh, int dw, int pt, int pl, int pb, int pr,
                   int count_include_pad, float* y, int OH, int OW) {
    int p, oh, ow, i, k;
    for (p = 0; p < NC; p++)
        for (oh = 0; oh < OH; oh++)
            for (ow = 0; ow < OW; ow++) {
                float m = -OXK_INFINITY;
                double s = 0;
                int n = 0, padded = 0;
                for (i = 0; i < kh; i++)
                    for (k = 0; k < kw; k++) {
                        int ih = oh * sh - pt + i * dh, iw = ow * sw - pl + k * dw;
                        if (ih >= H + pb || iw >= Wd + pr) continue;
                        padded++;
                        if (ih < 0 || iw < 0 || ih >= H || iw >= Wd) continue;
                        {
                            float v = x[((size_t)p * H + ih) * Wd + iw];
                            m = v > m ? v : m;
                            s += v;
                            n++;
                        }
                    }
                y[((size_t)p * OH + oh) * OW + ow] = kind == 0 ? m
                    : (float)(s / (count_include_pad ? (padded ? padded : 1) : (n ? n : 1)));
            }
    return 0;
}

int oxk_ref_qgemm(int M, int N, int K, const void* A, int a_signed, const int32_t* za, int za_per_row,
                  const void* B, int b_signed, const int32_t* zb, int zb_per_col, int32_t* C) {
    int m, n, k;
    for (m = 0; m < M; m++)
        for (n = 0; n < N; n++) {
            int32_t s = 0;
            for (k = 0; k < K; k++) {
                int32_t a = a_signed ? ((const int8_t*)A)[(size_t)m * K + k] : ((const uint8_t*)A)[(size_t)m * K + k];
                int32_t b = b_signed ? ((const int8_t*)B)[(size_t)k * N + n] : ((const uint8_t*)B)[(size_t)k * N + n];
                s += (a - (za_per_row ? za[m] : za[0])) * (b - (zb_per_col ? zb[n] : zb[0]));
            }
            C[(size_t)m * N + n] = s;
        }
    return 0;
}
