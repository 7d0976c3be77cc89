/* conv.c - 2-D convolution (NCHW, float32) with a fused bias + activation epilogue.
 * Paths: im2col + SGEMM (any group/stride/dilation/pad; a 1x1 stride-1 unpadded conv skips
 * im2col), a direct 3x3 stride-1 path (few input channels, where im2col's K is too short for
 * the GEMM tile), and a depthwise path (group == C == Cout). Weights may be pre-packed once
 * (oxk_conv_pack) as the A operand of the per-group GEMM. */
#include "oxk.h"
#include "vec.h"

typedef struct {
    const float* x; int N, C, H, W;
    const float* Wt; int Cout, kh, kw, group;
    int sh, sw, dh, dw, pt, pl, pb, pr;
    const float* bias; int act; float p0, p1;
    float* y; int OH, OW;
    float* xpad; int Hp, Wp;          /* padded input of one image (C planes) */
    float* cols;                      /* im2col matrix of one image and group */
    int n, g, Kg;
} conv_job;

size_t oxk_conv_pack_size(int Cout, int Cin_g, int kh, int kw, int group) {
    if (group <= 0 || Cout % group) return 0;
    return (size_t)group * oxk_pack_a_size(Cout / group, Cin_g * kh * kw);
}

int oxk_conv_pack(const float* W, int Cout, int Cin_g, int kh, int kw, int group, float* packed) {
    int g, Cg, K;
    size_t per;
    if (!W || !packed || group <= 0 || Cout % group) return OXK_EARG;
    Cg = Cout / group; K = Cin_g * kh * kw;
    per = oxk_pack_a_size(Cg, K);
    for (g = 0; g < group; g++)
        oxk_pack_a(0, Cg, K, W + (size_t)g * Cg * K, K, packed + (size_t)g * per);
    return 0;
}

/* One row of cols: input channel c (of the group), tap (i, j), every output position. */
static void im2col_row(void* ctx, int row) {
    conv_job* j = (conv_job*)ctx;
    int Cin_g = j->C / j->group, taps = j->kh * j->kw;
    int c = j->g * Cin_g + row / taps, i = (row % taps) / j->kw, k = row % j->kw;
    const float* plane = j->x + ((size_t)j->n * j->C + c) * j->H * j->W;
    float* dst = j->cols + (size_t)row * j->OH * j->OW;
    int oh, ow;
    for (oh = 0; oh < j->OH; oh++) {
        int ih = oh * j->sh - j->pt + i * j->dh;
        if (ih < 0 || ih >= j->H) {
            memset(dst, 0, j->OW * sizeof(float));
        } else {
            const float* src = plane + (size_t)ih * j->W;
            int iw0 = -j->pl + k * j->dw;
            if (j->sw == 1 && iw0 >= 0 && iw0 + j->OW <= j->W) {
                memcpy(dst, src + iw0, j->OW * sizeof(float));
            } else {
                for (ow = 0; ow < j->OW; ow++) {
                    int iw = iw0 + ow * j->sw;
                    dst[ow] = (iw >= 0 && iw < j->W) ? src[iw] : 0.f;
                }
            }
        }
        dst += j->OW;
    }
}

static int conv_im2col(conv_job* j, const float* packW) {
    int Cin_g = j->C / j->group, Cg = j->Cout / j->group, K = Cin_g * j->kh * j->kw;
    int P = j->OH * j->OW, rc = 0;
    int pointwise = j->kh == 1 && j->kw == 1 && j->sh == 1 && j->sw == 1 &&
                    !j->pt && !j->pl && !j->pb && !j->pr;
    size_t per = oxk_pack_a_size(Cg, K);
    j->Kg = K;
    j->cols = pointwise ? NULL : (float*)oxk_aligned_alloc((size_t)K * P * sizeof(float));
    if (!pointwise && !j->cols) return OXK_ENOMEM;
    for (j->n = 0; j->n < j->N && !rc; j->n++) {
        for (j->g = 0; j->g < j->group && !rc; j->g++) {
            const float* B;
            float* yg = j->y + ((size_t)j->n * j->Cout + (size_t)j->g * Cg) * P;
            if (pointwise) {
                B = j->x + ((size_t)j->n * j->C + (size_t)j->g * Cin_g) * P;
            } else {
                oxk_parallel_for(K, im2col_row, j);
                B = j->cols;
            }
            rc = oxk_sgemm(0, 0, Cg, P, K, 1.f,
                           j->Wt + (size_t)j->g * Cg * K, K, packW ? packW + (size_t)j->g * per : NULL,
                           B, P, NULL, 0.f, yg, P,
                           j->bias ? j->bias + (size_t)j->g * Cg : NULL,
                           j->bias ? OXK_BIAS_ROW : OXK_BIAS_NONE, j->act, j->p0, j->p1);
        }
    }
    oxk_aligned_free(j->cols);
    return rc;
}

/* Copy image n into the zero-padded buffer (C planes of Hp x Wp). */
static void pad_plane(void* ctx, int c) {
    conv_job* j = (conv_job*)ctx;
    const float* src = j->x + ((size_t)j->n * j->C + c) * j->H * j->W;
    float* dst = j->xpad + (size_t)c * j->Hp * j->Wp;
    int h;
    memset(dst, 0, (size_t)j->Hp * j->Wp * sizeof(float));
    for (h = 0; h < j->H; h++)
        memcpy(dst + (size_t)(h + j->pt) * j->Wp + j->pl, src + (size_t)h * j->W, j->W * sizeof(float));
}

/* out[ow] += w * in[ow * stride] for one output row. */
static void axpy_row(float* out, const float* in, float w, int n, int stride) {
    int i = 0;
    if (stride == 1) {
        vf4 vw = vf_dup(w);
        for (; i + 4 <= n; i += 4) vf_store(out + i, vf_fma(vf_load(out + i), vw, vf_load(in + i)));
    }
    for (; i < n; i++) out[i] += w * in[(size_t)i * stride];
}

static void fill_bias(float* out, size_t n, float b) {
    size_t i;
    for (i = 0; i < n; i++) out[i] = b;
}

/* Depthwise: one task per channel c of image n; the padded plane c is its only input. */
static void depthwise_plane(void* ctx, int c) {
    conv_job* j = (conv_job*)ctx;
    const float* xp = j->xpad + (size_t)c * j->Hp * j->Wp;
    const float* w = j->Wt + (size_t)c * j->kh * j->kw;
    float* out = j->y + ((size_t)j->n * j->Cout + c) * j->OH * j->OW;
    int oh, i, k;
    pad_plane(ctx, c);
    fill_bias(out, (size_t)j->OH * j->OW, j->bias ? j->bias[c] : 0.f);
    for (oh = 0; oh < j->OH; oh++) {
        float* orow = out + (size_t)oh * j->OW;
        for (i = 0; i < j->kh; i++) {
            const float* irow = xp + (size_t)(oh * j->sh + i * j->dh) * j->Wp;
            for (k = 0; k < j->kw; k++)
                axpy_row(orow, irow + k * j->dw, w[i * j->kw + k], j->OW, j->sw);
        }
        oxk_act_row(orow, j->OW, j->act, j->p0, j->p1);
    }
}

/* Direct 3x3, stride 1, dilation 1, group 1: one task per output channel of image n. */
static void direct3x3_channel(void* ctx, int oc) {
    conv_job* j = (conv_job*)ctx;
    float* out = j->y + ((size_t)j->n * j->Cout + oc) * j->OH * j->OW;
    int c, oh, i, k;
    fill_bias(out, (size_t)j->OH * j->OW, j->bias ? j->bias[oc] : 0.f);
    for (c = 0; c < j->C; c++) {
        const float* xp = j->xpad + (size_t)c * j->Hp * j->Wp;
        const float* w = j->Wt + ((size_t)oc * j->C + c) * 9;
        for (oh = 0; oh < j->OH; oh++)
            for (i = 0; i < 3; i++)
                for (k = 0; k < 3; k++)
                    axpy_row(out + (size_t)oh * j->OW, xp + (size_t)(oh + i) * j->Wp + k, w[i * 3 + k], j->OW, 1);
    }
    for (oh = 0; oh < j->OH; oh++) oxk_act_row(out + (size_t)oh * j->OW, j->OW, j->act, j->p0, j->p1);
}

static int conv_padded(conv_job* j, oxk_task_fn fn, int per_image_tasks, int pad_in_task) {
    j->Hp = j->H + j->pt + j->pb; j->Wp = j->W + j->pl + j->pr;
    /* the padded buffer must also cover windows that run past the bottom/right pad */
    if ((j->OH - 1) * j->sh + (j->kh - 1) * j->dh + 1 > j->Hp) j->Hp = (j->OH - 1) * j->sh + (j->kh - 1) * j->dh + 1;
    if ((j->OW - 1) * j->sw + (j->kw - 1) * j->dw + 1 > j->Wp) j->Wp = (j->OW - 1) * j->sw + (j->kw - 1) * j->dw + 1;
    j->xpad = (float*)oxk_aligned_alloc((size_t)j->C * j->Hp * j->Wp * sizeof(float));
    if (!j->xpad) return OXK_ENOMEM;
    for (j->n = 0; j->n < j->N; j->n++) {
        if (!pad_in_task) oxk_parallel_for(j->C, pad_plane, j);
        oxk_parallel_for(per_image_tasks, fn, j);
    }
    oxk_aligned_free(j->xpad);
    return 0;
}

int oxk_conv2d(const float* x, int N, int C, int H, int Wd,
               const float* W, const float* packW, int Cout, int kh, int kw, int group,
               int sh, int sw, int dh, int dw, int pt, int pl, int pb, int pr,
               const float* bias, int act, float p0, float p1,
               float* y, int OH, int OW, int path) {
    conv_job j;
    int depthwise, direct;
    if (!x || !W || !y || N < 0 || C <= 0 || H <= 0 || Wd <= 0 || Cout <= 0 || kh <= 0 || kw <= 0 ||
        group <= 0 || C % group || Cout % group || sh <= 0 || sw <= 0 || dh <= 0 || dw <= 0 ||
        pt < 0 || pl < 0 || pb < 0 || pr < 0 || OH <= 0 || OW <= 0)
        return OXK_EARG;
    j.x = x; j.N = N; j.C = C; j.H = H; j.W = Wd; j.Wt = W; j.Cout = Cout; j.kh = kh; j.kw = kw;
    j.group = group; j.sh = sh; j.sw = sw; j.dh = dh; j.dw = dw;
    j.pt = pt; j.pl = pl; j.pb = pb; j.pr = pr; j.bias = bias; j.act = act; j.p0 = p0; j.p1 = p1;
    j.y = y; j.OH = OH; j.OW = OW; j.xpad = NULL; j.cols = NULL;
    depthwise = group == C && Cout == C;
    direct = kh == 3 && kw == 3 && sh == 1 && sw == 1 && dh == 1 && dw == 1 && group == 1;
    if (path == OXK_CONV_AUTO)
        path = depthwise ? OXK_CONV_DEPTHWISE : (direct && C <= 4) ? OXK_CONV_DIRECT3X3 : OXK_CONV_IM2COL;
    if (path == OXK_CONV_DEPTHWISE) {
        if (!depthwise) return OXK_EARG;
        return conv_padded(&j, depthwise_plane, C, 1);
    }
    if (path == OXK_CONV_DIRECT3X3) {
        if (!direct) return OXK_EARG;
        return conv_padded(&j, direct3x3_channel, Cout, 0);
    }
    if (path != OXK_CONV_IM2COL) return OXK_EARG;
    return conv_im2col(&j, packW);
}
