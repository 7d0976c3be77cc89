/* conv.c - 2-D convolution (NCHW, float32) with a fused bias + activation epilogue.
 * Paths: im2col + SGEMM (any group/stride/dilation/pad; the im2col rows are written straight
 * into the GEMM's packed B panels, and a 1x1 stride-1 unpadded conv skips im2col), a depthwise
 * path (group == C == Cout; 16 outputs per row in registers over the taps), and a direct 3x3
 * stride-1 path (forced only: im2col + the register-tiled GEMM needs fewer instructions even with
 * 3 input channels). Weights may be pre-packed once (oxk_conv_pack) as the A operand of the
 * per-group GEMM. Padded inputs and panels live in the calling thread's scratch. */
#include "oxk.h"
#include "vec.h"
#include "gemm_isa.h"

typedef struct {
    const float* x; int N, C, H, W;
    const float* Wt; int Cout, kh, kw, group;
    int sh, sw, dh, dw, pt, pl, pb, pr;
    const float* bias; int act; float p0, p1;
    float* y; int OH, OW;
    float* xpad; int Hp, Wp;          /* padded input of one image (C planes) */
    const float* xin;                 /* what im2col reads: xpad, or the image when no pad is needed */
    float* cols;                      /* packed im2col panels of one image and group */
    int n, g, Kg;
    int nr;                           /* the SGEMM core's panel width (gemm_isa.h) */
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

/* im2col straight into packed B panels (oxk_pack_b's layout) for image n, group g: panel t holds
 * output positions [t*NR, t*NR + NR), one row of NR values per (channel, tap). It reads j->xin,
 * the image's planes padded to Hp x Wp so that every window lies inside: no bounds checks.
 * NR is the SGEMM core's (VEC_NR, or the x86-64 core chosen at load). */
#if defined(OXK_X86_GEMM)
#  define CONV_NR (j->nr)
#else
#  define CONV_NR VEC_NR
#endif
static void im2col_panel(void* ctx, int t) {
    conv_job* j = (conv_job*)ctx;
    int Cin_g = j->C / j->group, P = j->OH * j->OW, p0 = t * CONV_NR;
    int nv = P - p0 < CONV_NR ? P - p0 : CONV_NR, oh0 = p0 / j->OW, ow0 = p0 % j->OW;
    size_t plane = (size_t)j->Hp * j->Wp;
    const float* planes = j->xin + (size_t)j->g * Cin_g * plane;
    float* dst = j->cols + (size_t)t * j->Kg * CONV_NR;
    int c, i, k, e;
    if (nv == CONV_NR && ow0 + CONV_NR <= j->OW) {   /* one output row: one input row segment */
        const float* base = planes + (size_t)oh0 * j->sh * j->Wp + (size_t)ow0 * j->sw;
        const int kh = j->kh, kw = j->kw, sw = j->sw;
        const size_t rstep = (size_t)j->dh * j->Wp, kstep = (size_t)j->dw;
        for (c = 0; c < Cin_g; c++, base += plane) {
            const float* src = base;
            for (i = 0; i < kh; i++, src += rstep) {
                const float* s = src;
                if (sw == 1) {
                    for (k = 0; k < kw; k++, s += kstep, dst += CONV_NR)
                        for (e = 0; e < CONV_NR; e += 8) {
                            vf4 v0 = vf_load(s + e), v1 = vf_load(s + e + 4);
                            vf_store(dst + e, v0);
                            vf_store(dst + e + 4, v1);
                        }
                } else {
                    for (k = 0; k < kw; k++, s += kstep, dst += CONV_NR)
                        for (e = 0; e < CONV_NR; e++) dst[e] = s[(size_t)e * sw];
                }
            }
        }
        return;
    }
    {
        /* the panel's positions in runs that stay inside one output row: run s covers panel
         * columns [beg[s], beg[s] + len[s]) and reads a plane from off[s] on, stride sw */
        int beg[OXK_SGEMM_NR_MAX], len[OXK_SGEMM_NR_MAX], runs = 0, s, sw = j->sw;
        size_t off[OXK_SGEMM_NR_MAX];
        for (e = 0; e < nv; e += len[runs++]) {
            int p = p0 + e, ow = p % j->OW;
            beg[runs] = e;
            len[runs] = nv - e < j->OW - ow ? nv - e : j->OW - ow;
            off[runs] = (size_t)(p / j->OW) * j->sh * j->Wp + (size_t)ow * sw;
        }
        for (c = 0; c < Cin_g; c++, planes += plane) {
            for (i = 0; i < j->kh; i++) {
                for (k = 0; k < j->kw; k++, dst += CONV_NR) {
                    const float* src = planes + (size_t)i * j->dh * j->Wp + (size_t)k * j->dw;
                    for (s = 0; s < runs; s++) {
                        const float* q = src + off[s];
                        float* d = dst + beg[s];
                        if (sw == 1)
                            for (e = 0; e < len[s]; e++) d[e] = q[e];
                        else
                            for (e = 0; e < len[s]; e++) d[e] = q[(size_t)e * sw];
                    }
                    for (e = nv; e < CONV_NR; e++) dst[e] = 0.f;
                }
            }
        }
    }
}

static void pad_plane(void* ctx, int c);
static void padded_size(conv_job* j);

/* im2col + SGEMM per image and group; a 1x1 stride-1 unpadded conv is a plain GEMM on NCHW
 * (out[co, hw] = W[co, ci] @ X[ci, hw]); weights are the GEMM's A (row-major, or packW). */
static int conv_im2col(conv_job* j, const float* packW) {
    int Cin_g = j->C / j->group, Cg = j->Cout / j->group, K = Cin_g * j->kh * j->kw;
    int P = j->OH * j->OW, nr = OXK_SGEMM_NR, panels = (P + nr - 1) / nr, rc = 0, need_pad;
    int pointwise = j->kh == 1 && j->kw == 1 && j->sh == 1 && j->sw == 1 &&
                    !j->pt && !j->pl && !j->pb && !j->pr && j->OH == j->H && j->OW == j->W;
    size_t per = oxk_pack_a_size(Cg, K);
    j->Kg = K;
    j->nr = nr;
    padded_size(j);
    need_pad = j->Hp != j->H || j->Wp != j->W || j->pt || j->pl;
    if (!pointwise) {
        j->cols = (float*)oxk_scratch(OXK_SCRATCH_PANELS, (size_t)panels * nr * K * sizeof(float));
        j->xpad = need_pad ? (float*)oxk_scratch(OXK_SCRATCH_PAD, (size_t)j->C * j->Hp * j->Wp * sizeof(float)) : NULL;
        if (!j->cols || (need_pad && !j->xpad)) return OXK_ENOMEM;
    }
    for (j->n = 0; j->n < j->N && !rc; j->n++) {
        const float* xn = j->x + (size_t)j->n * j->C * j->H * j->W;
        if (!pointwise) {
            if (need_pad) oxk_parallel_for(j->C, pad_plane, j);
            j->xin = need_pad ? j->xpad : xn;
        }
        for (j->g = 0; j->g < j->group && !rc; j->g++) {
            float* yg = j->y + ((size_t)j->n * j->Cout + (size_t)j->g * Cg) * P;
            if (!pointwise) oxk_parallel_for(panels, im2col_panel, j);
            rc = oxk_sgemm(0, 0, Cg, P, K, 1.f,
                           j->Wt + (size_t)j->g * Cg * K, K, packW ? packW + (size_t)j->g * per : NULL,
                           pointwise ? xn + (size_t)j->g * Cin_g * P : NULL, P,
                           pointwise ? NULL : j->cols, 0.f, yg, P,
                           j->bias ? j->bias + (size_t)j->g * Cg : NULL,
                           j->bias ? OXK_BIAS_ROW : OXK_BIAS_NONE, j->act, j->p0, j->p1);
        }
    }
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

/* Outputs [ow, ow + 4 * NV) of one row of a stride-1 depthwise conv, NV vectors in registers over
 * every tap. */
#define DW_CHUNK(NV)                                                                              \
    {                                                                                             \
        vf4 acc[NV];                                                                              \
        int v_, i_, k_;                                                                           \
        for (v_ = 0; v_ < NV; v_++) acc[v_] = vb;                                                 \
        for (i_ = 0; i_ < kh; i_++) {                                                             \
            const float* s_ = in + (size_t)i_ * rstep + ow;                                       \
            for (k_ = 0; k_ < kw; k_++, s_ += dw) {                                               \
                vf4 wv = vf_dup(w[i_ * kw + k_]);                                                 \
                for (v_ = 0; v_ < NV; v_++) acc[v_] = vf_fma(acc[v_], vf_load(s_ + 4 * v_), wv); \
            }                                                                                     \
        }                                                                                         \
        for (v_ = 0; v_ < NV; v_++) vf_store(orow + ow + 4 * v_, acc[v_]);                        \
    }

/* Depthwise: one task per channel c of image n; the padded plane c is its only input. Stride 1
 * along W keeps 16 outputs in registers over the taps; other strides add one tap row at a time. */
static void depthwise_plane(void* ctx, int c) {
    conv_job* j = (conv_job*)ctx;
    const float* xp = j->xpad + (size_t)c * j->Hp * j->Wp;
    const float* w = j->Wt + (size_t)c * j->kh * j->kw;
    float* out = j->y + ((size_t)j->n * j->Cout + c) * j->OH * j->OW;
    const int kh = j->kh, kw = j->kw, dw = j->dw, OW = j->OW;
    const float bias = j->bias ? j->bias[c] : 0.f;
    const size_t rstep = (size_t)j->dh * j->Wp;
    const vf4 vb = vf_dup(bias);
    int oh, i, k;
    pad_plane(ctx, c);
    for (oh = 0; oh < j->OH; oh++) {
        float* orow = out + (size_t)oh * OW;
        const float* in = xp + (size_t)oh * j->sh * j->Wp;
        if (j->sw == 1) {
            int ow = 0;
            for (; ow + 16 <= OW; ow += 16) DW_CHUNK(4)
            for (; ow + 4 <= OW; ow += 4) DW_CHUNK(1)
            for (; ow < OW; ow++) {
                float acc = bias;
                for (i = 0; i < kh; i++)
                    for (k = 0; k < kw; k++) acc += w[i * kw + k] * in[(size_t)i * rstep + ow + (size_t)k * dw];
                orow[ow] = acc;
            }
        } else {
            fill_bias(orow, (size_t)OW, bias);
            for (i = 0; i < kh; i++)
                for (k = 0; k < kw; k++)
                    axpy_row(orow, in + (size_t)i * rstep + (size_t)k * dw, w[i * kw + k], OW, j->sw);
        }
        oxk_act_row(orow, OW, j->act, j->p0, j->p1);
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

/* Hp x Wp: the padded planes, large enough for every window (also windows that run past the
 * bottom/right pad). */
static void padded_size(conv_job* j) {
    j->Hp = j->H + j->pt + j->pb; j->Wp = j->W + j->pl + j->pr;
    if ((j->OH - 1) * j->sh + (j->kh - 1) * j->dh + 1 > j->Hp) j->Hp = (j->OH - 1) * j->sh + (j->kh - 1) * j->dh + 1;
    if ((j->OW - 1) * j->sw + (j->kw - 1) * j->dw + 1 > j->Wp) j->Wp = (j->OW - 1) * j->sw + (j->kw - 1) * j->dw + 1;
}

static int conv_padded(conv_job* j, oxk_task_fn fn, int per_image_tasks, int pad_in_task) {
    padded_size(j);
    j->xpad = (float*)oxk_scratch(OXK_SCRATCH_PAD, (size_t)j->C * j->Hp * j->Wp * sizeof(float));
    if (!j->xpad) return OXK_ENOMEM;
    for (j->n = 0; j->n < j->N; j->n++) {
        if (!pad_in_task) oxk_parallel_for(j->C, pad_plane, j);
        oxk_parallel_for(per_image_tasks, fn, j);
    }
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
    j.y = y; j.OH = OH; j.OW = OW; j.xpad = NULL; j.xin = NULL; j.cols = NULL;
    depthwise = group == C && Cout == C;
    direct = kh == 3 && kw == 3 && sh == 1 && sw == 1 && dh == 1 && dw == 1 && group == 1;
    if (path == OXK_CONV_AUTO)
        path = depthwise ? OXK_CONV_DEPTHWISE : OXK_CONV_IM2COL;
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

int oxk_conv2d_run(const oxk_conv_plan* p, int N, const float* x, float* y) {
    if (!p) return OXK_EARG;
    return oxk_conv2d(x, N, p->C, p->H, p->W, p->weight, p->packW, p->Cout, p->kh, p->kw, p->group,
                      p->sh, p->sw, p->dh, p->dw, p->pt, p->pl, p->pb, p->pr, p->bias, p->act, p->p0, p->p1,
                      y, p->OH, p->OW, p->path);
}
