/* conv.c - 2-D convolution (NCHW, float32) with a fused bias + activation epilogue; 1-D
 * convolutions are 2-D ones with H = 1.
 *
 * The padded input is laid out in stride phases (polyphase, see conv_dw.h): phase (r, s) of a
 * channel holds the padded plane's rows r, r + sh, ... and columns s, s + sw, ..., so every tap
 * of every output position reads contiguous memory whatever the stride or dilation.
 * Paths:
 *  - implicit GEMM (x86-64 AVX2 / AVX-512 cores, packed weights, a kernel larger than 1x1, output
 *    rows filling >= 90% of the padded phase rows): the core's micro-kernel loads its B vectors
 *    straight from the padded phases, NR consecutive "flat" positions oh * Wq + ow through a
 *    per-K offset table, and stores each flat row's run under a lane mask; no im2col (which
 *    writes K x P floats: 15-20% of a 56x56 ResNet conv).
 *  - im2col + SGEMM (any group/stride/dilation/pad): the im2col rows are written straight into
 *    the GEMM's packed B panels; a 1x1 stride-1 unpadded conv skips im2col (a plain GEMM on NCHW).
 *    With packed weights and a large image the panels are built and multiplied a chunk at a time
 *    (one task per chunk), so they stay in the cache instead of going through memory; K is never
 *    split, so the result does not depend on the chunking or the thread count.
 *  - depthwise (group == C == Cout): one task per run of (image, channel)s (several on small
 *    planes, their phases zeroed once), each channel's taps summed as
 *    shifted streams over its flat phase planes (conv_dw.h), vectorized with the chosen ISA
 *    (AVX2+FMA / AVX-512F on x86-64, like the SGEMM cores; NEON, wasm simd128, SSE2 otherwise).
 *  - Winograd F(2x2, 3x3) (conv_winograd.c) for 3x3 stride-1 convs with many channels, on the
 *    weights oxk_conv_pack_winograd transformed (the caller chooses it: oxk_conv_winograd_size).
 *  - a direct 3x3 stride-1 path (forced only: im2col + the register-tiled GEMM needs fewer
 *    instructions even with 3 input channels).
 * Weights may be pre-packed once (oxk_conv_pack) as the A operand of the per-group GEMM. Padded
 * inputs and panels live in the calling thread's scratch. */
#include "oxk.h"
#include "vec.h"
#include "gemm_isa.h"
#include "conv_dw.h"

/* The depthwise inner loop with this target's 4-lane vectors (conv_dw_impl.h). */
#define DW_NAME dw_rows_vec
#define DW3_NAME dw3_vec
#define VT vf4
#define VW 4
#define V_LOAD(p) vf_load(p)
#define V_STORE(p, v) vf_store(p, v)
#define V_SET1(x) vf_dup(x)
#define V_FMA(a, b, acc) vf_fma(acc, a, b)
#define V_MAX(a, b) vf_max(a, b)
#define V_MIN(a, b) vf_min(a, b)
#define V_LOAD_DEINT(p, e, o) vf_load_deint(p, &(e), &(o))
void dw_rows_vec(const float* base, const size_t* off, int taps, const float* w, float bias,
                 int act, float p0, float p1, float* out, int n);
int dw3_vec(const float* x, int H, int W, int stride, int pt, int pl, const float* w, float bias,
            int act, float p0, float p1, float* out, int OH, int OW);
#include "conv_dw_impl.h"
#undef DW_NAME
#undef DW3_NAME
#undef VT
#undef VW

typedef struct {
    const float* x; int N, C, H, W;
    const float* Wt; int Cout, kh, kw, group;
    int sh, sw, dh, dw, pt, pl, pb, pr;
    const float* bias; int act; float p0, p1;
    float* y; int OH, OW;
    int Hp, Wp;                       /* the padded plane, large enough for every window */
    int Hq, Wq;                       /* one stride phase of it */
    size_t phase, cstride;            /* floats per phase, per channel (all phases + slack) */
    size_t* toff;                     /* per tap (i, k): its offset in a channel's phases */
    float* xpad;                      /* padded phases of one image (C channels) */
    const float* xin;                 /* what im2col reads: xpad, or the image when no pad is needed */
    float* cols;                      /* packed im2col panels of one image and group */
    const float* packW;
    int n, g, Kg, chunk, panels;
    int nr;                           /* the SGEMM core's panel width (gemm_isa.h) */
    int rc;                           /* a task's failure (ENOMEM) */
    const float* z;                   /* the residual added before the activation, or NULL */
    oxk_dw_rows_fn dw_fn;             /* the depthwise inner loop (dw_rows) */
    oxk_dw3_fn dw3_fn;                /* the 3x3 depthwise straight from the plane, or NULL */
    oxk_dw16_fn dw16_fn;              /* 16 channels along the lanes (small planes), or NULL */
    int dw3;                          /* dw3_fn allowed (not OXK_CONV_DEPTHWISE_PHASES) */
    int dw_chans;                     /* (image, channel)s per depthwise task */
} conv_job;

/* The lanes path's shortest K (below it the transposed store outweighs the multiply), and the
 * fewest positions per tile it is chosen with. */
#define LANES_MIN_K 64
#define LANES_MIN_RT 8

/* ------------------------------------------------------------------ packed weights */
#if defined(OXK_X86_GEMM)
/* The chosen SGEMM core when it has the implicit-GEMM convs (AVX2, AVX-512), else NULL. */
static const oxk_gemm_isa* direct_isa(void) {
    const char* isa = oxk_sgemm_isa_name();
    if (!strcmp(isa, oxk_gemm_avx512.name)) return &oxk_gemm_avx512;
    if (!strcmp(isa, oxk_gemm_avx2.name)) return &oxk_gemm_avx2;
    return NULL;
}

/* The core when the lanes path fits Cg output channels per group over K steps: whole panels of NR
 * channels and a long enough K for the transposed store; AVX-512 only (AVX2's tiles of 6 positions
 * x 16 channels measured no faster than its flat-row and im2col paths; forced, the path runs there
 * too). */
static const oxk_gemm_isa* lanes_fit(int Cg, size_t K) {
    const oxk_gemm_isa* isa = direct_isa();
    return isa && isa->rt >= LANES_MIN_RT && Cg > 0 && Cg % isa->nr == 0 && K >= LANES_MIN_K ? isa : NULL;
}

/* Weights the lanes path takes on its own (and oxk_conv_pack packs as its B panels): a real
 * kernel that fits (pointwise convs go there through oxk_conv_lanes_1x1 only). */
static const oxk_gemm_isa* lanes_isa(int Cout, int Cin_g, int kh, int kw, int group) {
    return kh * kw > 1 && group > 0 ? lanes_fit(Cout / group, (size_t)Cin_g * kh * kw) : NULL;
}
#endif

/* The most output positions a pointwise conv takes the lanes path with (measured on AVX-512:
 * 7 x 7 planes 1.3-1.4x faster than the GEMM, 14 x 14 even or slower). */
#define LANES_1X1_MAX_P 64

size_t oxk_conv_lanes_1x1(int Cout, int Cin, int positions) {
#if defined(OXK_X86_GEMM)
    if (positions > 0 && positions <= LANES_1X1_MAX_P && Cin > 0 && lanes_fit(Cout, (size_t)Cin))
        return oxk_pack_b_size(Cout, Cin);
#endif
    return 0;
}

int oxk_conv_pack_lanes(const float* W, int Cout, int Cin, float* packed) {
    if (!W || !packed || Cout <= 0 || Cin <= 0) return OXK_EARG;
#if defined(OXK_X86_GEMM)
    if (!direct_isa()) return OXK_EARG;
    return oxk_pack_b(1, Cout, Cin, W, Cin, packed);
#else
    return OXK_EARG;
#endif
}

/* Per group: the lanes path's B panels (x86-64 AVX2/AVX-512, lanes_isa) or the GEMM's A panels. */
static size_t pack_per_group(int Cout, int Cin_g, int kh, int kw, int group, int* lanes) {
    const int Cg = Cout / group, K = Cin_g * kh * kw;
    *lanes = 0;
#if defined(OXK_X86_GEMM)
    if (lanes_isa(Cout, Cin_g, kh, kw, group)) {
        *lanes = 1;
        return oxk_pack_b_size(Cg, K);
    }
#endif
    return oxk_pack_a_size(Cg, K);
}

size_t oxk_conv_pack_size(int Cout, int Cin_g, int kh, int kw, int group) {
    int lanes;
    if (group <= 0 || Cout % group || Cin_g <= 0 || kh <= 0 || kw <= 0) return 0;
    return (size_t)group * pack_per_group(Cout, Cin_g, kh, kw, group, &lanes);
}

int oxk_conv_pack(const float* W, int Cout, int Cin_g, int kh, int kw, int group, float* packed) {
    int g, Cg, K, lanes;
    size_t per;
    if (!W || !packed || group <= 0 || Cout % group || Cin_g <= 0 || kh <= 0 || kw <= 0) return OXK_EARG;
    Cg = Cout / group; K = Cin_g * kh * kw;
    per = pack_per_group(Cout, Cin_g, kh, kw, group, &lanes);
    for (g = 0; g < group; g++) {
        if (lanes) oxk_pack_b(1, Cg, K, W + (size_t)g * Cg * K, K, packed + (size_t)g * per);
        else oxk_pack_a(0, Cg, K, W + (size_t)g * Cg * K, K, packed + (size_t)g * per);
    }
    return 0;
}

/* ------------------------------------------------------------------ padded phases */

/* Hp x Wp: the padded planes, large enough for every window (also windows that run past the
 * bottom/right pad); Hq x Wq: one stride phase; `slack` floats after a channel's phases (what the
 * depthwise loop reads past its last output). Fills toff (kh * kw offsets). */
static void phase_layout(conv_job* j, size_t slack) {
    int i, k;
    j->Hp = j->H + j->pt + j->pb; j->Wp = j->W + j->pl + j->pr;
    if ((j->OH - 1) * j->sh + (j->kh - 1) * j->dh + 1 > j->Hp) j->Hp = (j->OH - 1) * j->sh + (j->kh - 1) * j->dh + 1;
    if ((j->OW - 1) * j->sw + (j->kw - 1) * j->dw + 1 > j->Wp) j->Wp = (j->OW - 1) * j->sw + (j->kw - 1) * j->dw + 1;
    j->Hq = (j->Hp + j->sh - 1) / j->sh;
    j->Wq = (j->Wp + j->sw - 1) / j->sw;
    j->phase = (size_t)j->Hq * j->Wq;
    j->cstride = (j->phase * j->sh * j->sw + slack + 15) & ~(size_t)15;
    for (i = 0; i < j->kh; i++)
        for (k = 0; k < j->kw; k++) {
            int r = i * j->dh, s = k * j->dw;
            j->toff[i * j->kw + k] = ((size_t)(r % j->sh) * j->sw + s % j->sw) * j->phase +
                                     (size_t)(r / j->sh) * j->Wq + s / j->sw;
        }
}

/* The image itself serves as its phases: stride 1, no padding, no window past the edge. */
static int image_is_phases(const conv_job* j) {
    return j->sh == 1 && j->sw == 1 && !j->pt && !j->pl && j->Hp == j->H && j->Wp == j->W;
}

/* dst[0, n) = src[0, n): short rows (small planes) inline, in place of a memcpy call per row. */
static inline void copy_row(float* dst, const float* src, int n) {
    int i = 0;
    if (n >= 64) { memcpy(dst, src, (size_t)n * sizeof(float)); return; }
    for (; i + 4 <= n; i += 4) vf_store(dst + i, vf_load(src + i));
    for (; i < n; i++) dst[i] = src[i];
}

/* Channel plane `src` (H x W) into its phases at dst (cstride floats), zeroed first when `zero`
 * (else dst already holds a channel's phases: the pad positions are zero, the rest is
 * overwritten). A 1x1 kernel reads phase (0, 0) only: the others are left alone. */
static void pad_channel(const conv_job* j, const float* src, float* dst, int zero) {
    const int sh = j->sh, sw = j->sw, only0 = j->kh == 1 && j->kw == 1;
    int cp;
    if (zero) memset(dst, 0, (only0 ? j->phase : j->cstride) * sizeof(float));
    if (sw == 2 && !only0) {   /* both column phases in one pass over each row */
        int h, m, w, rp = j->pt % sh, rq = j->pt / sh;
        float* de0 = dst + (size_t)(j->pl & 1) * j->phase + (j->pl >> 1);
        float* do0 = dst + (size_t)((j->pl + 1) & 1) * j->phase + ((j->pl + 1) >> 1);
        for (h = 0; h < j->H; h++, src += j->W) {
            size_t row = (size_t)rp * sw * j->phase + (size_t)rq * j->Wq;
            float *de = de0 + row, *dd = do0 + row;
            for (m = 0; 2 * m + 8 <= j->W; m += 4) {
                vf4 ev, od;
                vf_load_deint(src + 2 * m, &ev, &od);
                vf_store(de + m, ev);
                vf_store(dd + m, od);
            }
            for (w = 2 * m; w < j->W; w++) (w & 1 ? dd : de)[w >> 1] = src[w];
            if (++rp == sh) { rp = 0; rq++; }
        }
        return;
    }
    for (cp = 0; cp < (only0 ? 1 : sw); cp++) {   /* column phase cp: padded columns cp, cp + sw, ... */
        int w0 = ((cp - j->pl) % sw + sw) % sw, h, e, rp = j->pt % sh, rq = j->pt / sh;
        int cnt = w0 < j->W ? (j->W - w0 + sw - 1) / sw : 0;
        const float* s = src + w0;
        float* d0 = dst + (size_t)cp * j->phase + (w0 + j->pl) / sw;
        for (h = 0; h < j->H; h++, s += j->W) {
            float* d = d0 + (size_t)rp * sw * j->phase + (size_t)rq * j->Wq;
            if (!only0 || rp == 0) {
                if (sw == 1) copy_row(d, s, cnt);
                else if (sw == 2) for (e = 0; e < cnt; e++) d[e] = s[2 * e];
                else for (e = 0; e < cnt; e++) d[e] = s[(size_t)e * sw];
            }
            if (++rp == sh) { rp = 0; rq++; }
        }
    }
}

static void pad_task(void* ctx, int c) {
    conv_job* j = (conv_job*)ctx;
    pad_channel(j, j->x + ((size_t)j->n * j->C + c) * j->H * j->W, j->xpad + (size_t)c * j->cstride, 1);
}

/* ------------------------------------------------------------------ im2col + SGEMM */

/* im2col straight into packed B panels (oxk_pack_b's layout) for image n, group g: panel t holds
 * output positions [t*NR, t*NR + NR), one row of NR values per (channel, tap), written at dst.
 * NR is the SGEMM core's (VEC_NR, or the x86-64 core chosen at load). */
#if defined(OXK_X86_GEMM)
#  define CONV_NR (j->nr)
#else
#  define CONV_NR VEC_NR
#endif
static void im2col_panel(const conv_job* j, int t, float* dst) {
    int Cin_g = j->C / j->group, P = j->OH * j->OW, p0 = t * CONV_NR, taps = j->kh * j->kw;
    int nv = P - p0 < CONV_NR ? P - p0 : CONV_NR, oh0 = p0 / j->OW, ow0 = p0 % j->OW;
    const float* planes = j->xin + (size_t)j->g * Cin_g * j->cstride;
    const size_t* toff = j->toff;
    int c, tp, e;
    if (nv == CONV_NR && ow0 + CONV_NR <= j->OW) {   /* one output row: contiguous in every phase */
        const float* base = planes + (size_t)oh0 * j->Wq + ow0;
        for (c = 0; c < Cin_g; c++, base += j->cstride)
            for (tp = 0; tp < taps; tp++, dst += CONV_NR) {
                const float* s = base + toff[tp];
                for (e = 0; e < CONV_NR; e += 8) {
                    vf4 v0 = vf_load(s + e), v1 = vf_load(s + e + 4);
                    vf_store(dst + e, v0);
                    vf_store(dst + e + 4, v1);
                }
            }
        return;
    }
    {
        /* the panel's positions in runs that stay inside one output row: run s covers panel
         * columns [beg[s], beg[s] + len[s]) and reads a phase from off[s] on */
        int beg[OXK_SGEMM_NR_MAX], len[OXK_SGEMM_NR_MAX], runs = 0, s;
        size_t off[OXK_SGEMM_NR_MAX];
        for (e = 0; e < nv; e += len[runs++]) {
            int p = p0 + e, ow = p % j->OW;
            beg[runs] = e;
            len[runs] = nv - e < j->OW - ow ? nv - e : j->OW - ow;
            off[runs] = (size_t)(p / j->OW) * j->Wq + ow;
        }
        for (c = 0; c < Cin_g; c++, planes += j->cstride)
            for (tp = 0; tp < taps; tp++, dst += CONV_NR) {
                const float* src = planes + toff[tp];
                for (s = 0; s < runs; s++) memcpy(dst + beg[s], src + off[s], (size_t)len[s] * sizeof(float));
                for (e = nv; e < CONV_NR; e++) dst[e] = 0.f;
            }
    }
}

static void im2col_task(void* ctx, int t) {
    conv_job* j = (conv_job*)ctx;
    im2col_panel(j, t, j->cols + (size_t)t * j->Kg * CONV_NR);
}

static float* group_out(const conv_job* j) {
    return j->y + ((size_t)j->n * j->Cout + (size_t)j->g * (j->Cout / j->group)) * j->OH * j->OW;
}

static int group_gemm(const conv_job* j, int col0, int ncols, const float* B, int ldb, const float* packB) {
    int Cg = j->Cout / j->group, P = j->OH * j->OW;
    size_t per = oxk_pack_a_size(Cg, j->Kg);
    return oxk_sgemm(0, 0, Cg, ncols, j->Kg, 1.f,
                     j->Wt + (size_t)j->g * Cg * j->Kg, j->Kg, j->packW ? j->packW + (size_t)j->g * per : NULL,
                     B, ldb, packB, 0.f, group_out(j) + col0, P,
                     j->bias ? j->bias + (size_t)j->g * Cg : NULL,
                     j->bias ? OXK_BIAS_ROW : OXK_BIAS_NONE, j->act, j->p0, j->p1);
}

/* One chunk of panels: im2col into this thread's scratch, then its GEMM (nested: runs inline). */
static void chunk_task(void* ctx, int ct) {
    conv_job* j = (conv_job*)ctx;
    int t0 = ct * j->chunk, np = j->panels - t0 < j->chunk ? j->panels - t0 : j->chunk, t, rc;
    int col0 = t0 * CONV_NR, P = j->OH * j->OW, ncols = P - col0 < np * CONV_NR ? P - col0 : np * CONV_NR;
    float* cols = (float*)oxk_scratch(OXK_SCRATCH_PANELS, (size_t)np * CONV_NR * j->Kg * sizeof(float));
    if (!cols) { j->rc = OXK_ENOMEM; return; }
    for (t = 0; t < np; t++) im2col_panel(j, t0 + t, cols + (size_t)t * j->Kg * CONV_NR);
    rc = group_gemm(j, col0, ncols, NULL, 0, cols);
    if (rc) j->rc = rc;
}

/* ------------------------------------------------------------------ implicit GEMM (x86-64) */
#if defined(OXK_X86_GEMM)

typedef struct {
    oxk_conv_direct d;        /* the current image and group's call, less its flat range */
    const oxk_gemm_isa* isa;
    int span;                 /* flat positions per task, a multiple of NR */
} direct_job;

static void direct_task(void* ctx, int t) {
    const direct_job* dj = (const direct_job*)ctx;
    oxk_conv_direct d = dj->d;
    d.f_beg = t * dj->span;
    d.f_end = d.F - d.f_beg < dj->span ? d.F : d.f_beg + dj->span;
    dj->isa->conv_direct(&d);
}

/* The implicit-GEMM convs' per-K input offsets (channel c, tap t: c * cstride + toff[t]), with
 * OXK_KOFF_AHEAD copies of the last past K; NULL when out of memory. */
static int* tap_offsets(const conv_job* j, int Cin_g, int taps) {
    const int K = Cin_g * taps;
    int* koff = (int*)oxk_aligned_alloc(((size_t)K + OXK_KOFF_AHEAD) * sizeof(int));
    int c, t;
    if (!koff) return NULL;
    for (c = 0; c < Cin_g; c++)
        for (t = 0; t < taps; t++) koff[c * taps + t] = (int)((size_t)c * j->cstride + j->toff[t]);
    for (t = 0; t < OXK_KOFF_AHEAD; t++) koff[K + t] = koff[K - 1];
    return koff;
}

/* Worth it where im2col would cost most: a real kernel (1x1 convs are plain GEMMs already) over
 * output rows that nearly fill the flat rows (the flat positions in the padding are wasted work). */
static int direct_fits(const conv_job* j, const oxk_gemm_isa* isa) {
    return isa && j->packW && j->kh * j->kw > 1 && (size_t)j->OW * 10 >= (size_t)j->Wq * 9 &&
           (size_t)j->C * j->cstride + 2 * (size_t)isa->nr < (size_t)0x7fffffff;
}

/* The implicit GEMM per image and group: B read from the padded phases through per-K offsets,
 * tasks over runs of flat positions (every output sums its K steps in one order: the bits do not
 * depend on the tasks or threads). */
static int conv_direct_gemm(conv_job* j, const oxk_gemm_isa* isa) {
    const int Cin_g = j->C / j->group, Cg = j->Cout / j->group, taps = j->kh * j->kw;
    const int K = Cin_g * taps, P = j->OH * j->OW;
    const size_t per = oxk_pack_a_size(Cg, K), slack = 2 * (size_t)isa->nr;
    direct_job dj;
    int* koff;
    int tasks;
    j->xpad = (float*)oxk_scratch(OXK_SCRATCH_PAD, ((size_t)j->C * j->cstride + slack) * sizeof(float));
    koff = tap_offsets(j, Cin_g, taps);
    if (!j->xpad || !koff) { oxk_aligned_free(koff); return OXK_ENOMEM; }
    memset(j->xpad + (size_t)j->C * j->cstride, 0, slack * sizeof(float));
    memset(&dj, 0, sizeof(dj));
    dj.isa = isa;
    dj.span = 8 * isa->nr;
    dj.d.M = Cg; dj.d.K = K; dj.d.koff = koff;
    dj.d.F = (j->OH - 1) * j->Wq + j->OW; dj.d.Wq = j->Wq; dj.d.OW = j->OW; dj.d.ldy = P;
    dj.d.act = j->act; dj.d.p0 = j->p0; dj.d.p1 = j->p1;
    tasks = (dj.d.F + dj.span - 1) / dj.span;
    for (j->n = 0; j->n < j->N; j->n++) {
        oxk_parallel_for(j->C, pad_task, j);
        for (j->g = 0; j->g < j->group; j->g++) {
            size_t out = ((size_t)j->n * j->Cout + (size_t)j->g * Cg) * P;
            dj.d.pa = j->packW + (size_t)j->g * per;
            dj.d.x = j->xpad + (size_t)j->g * Cin_g * j->cstride;
            dj.d.y = j->y + out;
            dj.d.bias = j->bias ? j->bias + (size_t)j->g * Cg : NULL;
            oxk_parallel_for(tasks, direct_task, &dj);
        }
    }
    oxk_aligned_free(koff);
    return 0;
}

typedef struct {
    oxk_conv_lanes d;         /* the current image and group's call, less its ranges */
    const oxk_gemm_isa* isa;
    int chunks, span, total;  /* per channel panel: `chunks` tasks of `span` of `total` row segments */
} lanes_job;

static void lanes_task(void* ctx, int t) {
    const lanes_job* lj = (const lanes_job*)ctx;
    oxk_conv_lanes d = lj->d;
    const int total = lj->total;
    d.c_beg = t / lj->chunks; d.c_end = d.c_beg + 1;
    d.s_beg = (t % lj->chunks) * lj->span;
    d.s_end = total - d.s_beg < lj->span ? total : d.s_beg + lj->span;
    if (d.s_beg < d.s_end) lj->isa->conv_lanes(&d);
}

/* Output channels along the lanes (small images, many channels): per image and group, tasks over
 * (channel panel, run of row segments), panel-major so one thread keeps a panel's weights in L2.
 * Every output sums its K steps in one order: the bits do not depend on the tasks or threads.
 * pb: the weights as lanes B panels (oxk_conv_pack), or NULL: packed here from W. */
static int conv_lanes_gemm(conv_job* j, const oxk_gemm_isa* isa, const float* pb) {
    const int Cin_g = j->C / j->group, Cg = j->Cout / j->group, taps = j->kh * j->kw;
    const int K = Cin_g * taps, P = j->OH * j->OW, panels = (Cg + isa->nr - 1) / isa->nr;
    const size_t per = oxk_pack_b_size(Cg, K);
    lanes_job lj;
    int* koff;
    float* packed = NULL;
    int segs_total, want;
    /* stride 1, no padding (the pointwise convs): the image is its own phase, read in place */
    const int in_place = image_is_phases(j);
    if (in_place) j->cstride = (size_t)j->H * j->W;
    j->xpad = in_place ? NULL : (float*)oxk_scratch(OXK_SCRATCH_PAD, (size_t)j->C * j->cstride * sizeof(float));
    if (!pb) {
        int g;
        packed = (float*)oxk_scratch(OXK_SCRATCH_PANELS, (size_t)j->group * per * sizeof(float));
        if (!packed) return OXK_ENOMEM;
        for (g = 0; g < j->group; g++)
            isa->pack_b(1, Cg, K, j->Wt + (size_t)g * Cg * K, K, packed + (size_t)g * per);
        pb = packed;
    }
    koff = tap_offsets(j, Cin_g, taps);
    if ((!in_place && !j->xpad) || !koff) { oxk_aligned_free(koff); return OXK_ENOMEM; }
    memset(&lj, 0, sizeof(lj));
    lj.isa = isa;
    lj.d.M = Cg; lj.d.K = K; lj.d.koff = koff;
    lj.d.Wq = j->Wq; lj.d.OW = j->OW; lj.d.segs = (j->OW + isa->rt - 1) / isa->rt; lj.d.ldy = P;
    lj.d.act = j->act; lj.d.p0 = j->p0; lj.d.p1 = j->p1;
    segs_total = lj.total = j->OH * lj.d.segs;
    /* at least 8 tasks where the segments allow (2 threads stay busy) */
    want = (8 + panels - 1) / panels;
    lj.chunks = want < segs_total ? want : segs_total;
    lj.span = (segs_total + lj.chunks - 1) / lj.chunks;
    for (j->n = 0; j->n < j->N; j->n++) {
        const float* xn = in_place ? j->x + (size_t)j->n * j->C * j->cstride : j->xpad;
        if (!in_place) oxk_parallel_for(j->C, pad_task, j);
        for (j->g = 0; j->g < j->group; j->g++) {
            size_t out = ((size_t)j->n * j->Cout + (size_t)j->g * Cg) * P;
            lj.d.pb = pb + (size_t)j->g * per;
            lj.d.x = xn + (size_t)j->g * Cin_g * j->cstride;
            lj.d.y = j->y + out;
            lj.d.z = j->z ? j->z + out : NULL;
            lj.d.bias = j->bias ? j->bias + (size_t)j->g * Cg : NULL;
            oxk_parallel_for(panels * lj.chunks, lanes_task, &lj);
        }
    }
    oxk_aligned_free(koff);
    return 0;
}
#endif

/* Bytes of panels per chunk, and the largest packed weights (per group) chunking is used for:
 * both together stay in a core's L2 cache. */
#define CHUNK_BYTES (256 << 10)
#define CHUNK_MAX_A (1 << 20)

/* im2col + SGEMM per image and group; a 1x1 conv is a plain GEMM on NCHW (out[co, hw] =
 * W[co, ci] @ X[ci, hw]), on the image itself (stride 1, unpadded) or on the phase (0, 0) planes
 * of the padded input (OH x OW: ldb is the channel stride); weights are the GEMM's A (row-major,
 * or packW). */
static int conv_im2col(conv_job* j) {
    int Cin_g = j->C / j->group, Cg = j->Cout / j->group, K = Cin_g * j->kh * j->kw;
    int P = j->OH * j->OW, nr = OXK_SGEMM_NR, need_pad, pointwise, one, chunks = 0;
    size_t panel_bytes = (size_t)nr * K * sizeof(float);
    j->Kg = K;
    j->nr = nr;
    j->panels = (P + nr - 1) / nr;
    j->rc = 0;
    phase_layout(j, 0);
    one = j->kh == 1 && j->kw == 1;   /* then Hq x Wq == OH x OW */
    pointwise = one && image_is_phases(j);
    need_pad = !image_is_phases(j);
#if defined(OXK_X86_GEMM)
    if (!one && direct_fits(j, direct_isa())) return conv_direct_gemm(j, direct_isa());
#endif
    if (!need_pad) j->cstride = (size_t)j->H * j->W;   /* the image's channels */
    if (one && need_pad) {
        j->xpad = (float*)oxk_scratch(OXK_SCRATCH_PAD, (size_t)j->C * j->cstride * sizeof(float));
        if (!j->xpad) return OXK_ENOMEM;
    } else if (!pointwise) {
        if (j->packW && (size_t)j->panels * panel_bytes > 2 * (size_t)CHUNK_BYTES &&
            (size_t)Cg * K * sizeof(float) <= CHUNK_MAX_A) {
            j->chunk = (int)(CHUNK_BYTES / panel_bytes);
            if (j->chunk < 1) j->chunk = 1;
            chunks = (j->panels + j->chunk - 1) / j->chunk;
        } else {
            j->cols = (float*)oxk_scratch(OXK_SCRATCH_PANELS, (size_t)j->panels * panel_bytes);
            if (!j->cols) return OXK_ENOMEM;
        }
        j->xpad = need_pad ? (float*)oxk_scratch(OXK_SCRATCH_PAD, (size_t)j->C * j->cstride * sizeof(float)) : NULL;
        if (need_pad && !j->xpad) return OXK_ENOMEM;
    }
    for (j->n = 0; j->n < j->N && !j->rc; j->n++) {
        const float* xn = j->x + (size_t)j->n * j->C * j->H * j->W;
        if (need_pad) oxk_parallel_for(j->C, pad_task, j);
        j->xin = need_pad ? j->xpad : xn;
        for (j->g = 0; j->g < j->group && !j->rc; j->g++) {
            if (one) {
                j->rc = group_gemm(j, 0, P, j->xin + (size_t)j->g * Cin_g * j->cstride, (int)j->cstride, NULL);
            } else if (chunks) {
                oxk_parallel_for(chunks, chunk_task, j);
            } else {
                oxk_parallel_for(j->panels, im2col_task, j);
                j->rc = group_gemm(j, 0, P, NULL, 0, j->cols);
            }
        }
    }
    return j->rc;
}

/* ------------------------------------------------------------------ depthwise */

/* The depthwise loops of the ISA the library chose (conv_dw.h): the phases' flat rows, the 3x3
 * direct rows and the channels-along-the-lanes blocks (AVX-512 only; else NULL). */
static void dw_loops(oxk_dw_rows_fn* rows, oxk_dw3_fn* dw3, oxk_dw16_fn* dw16) {
    *dw16 = NULL;
#if defined(OXK_X86_GEMM)
    {
        const char* isa = oxk_sgemm_isa_name();
        if (!strcmp(isa, oxk_gemm_avx512.name)) {
            *rows = oxk_dw_rows_avx512; *dw3 = oxk_dw3_avx512; *dw16 = oxk_dw16_avx512;
            return;
        }
        if (!strcmp(isa, oxk_gemm_avx2.name)) { *rows = oxk_dw_rows_avx2; *dw3 = oxk_dw3_avx2; return; }
    }
#endif
    *rows = dw_rows_vec;
    *dw3 = dw3_vec;
}

/* Whether the 3x3 direct rows `fn` load their border vectors masked (AVX-512). */
static int dw3_masked(oxk_dw3_fn fn) {
#if defined(OXK_X86_GEMM)
    return fn == oxk_dw3_avx512;
#else
    (void)fn;
    return 0;
#endif
}

/* Depthwise with 16 channels along the lanes: one task per (image, block of 16 channels). */
static void dw16_task(void* ctx, int t) {
    conv_job* j = (conv_job*)ctx;
    const int blocks = (j->C + 15) / 16, n = t / blocks, c0 = t % blocks * 16;
    const int nch = j->C - c0 < 16 ? j->C - c0 : 16, taps = j->kh * j->kw, P = j->OH * j->OW;
    float* buf = (float*)oxk_scratch(OXK_SCRATCH_PAD, ((size_t)j->Hp * j->Wp + P) * 16 * sizeof(float));
    float* out = j->y + ((size_t)n * j->Cout + c0) * P;
    int c;
    if (!buf) { j->rc = OXK_ENOMEM; return; }
    j->dw16_fn(j->x + ((size_t)n * j->C + c0) * j->H * j->W, (size_t)j->H * j->W, nch, j->H, j->W,
               j->kh, j->kw, j->sh, j->sw, j->dh, j->dw, j->pt, j->pl, j->Wt + (size_t)c0 * taps,
               j->bias ? j->bias + c0 : NULL, j->act, j->p0, j->p1, out, (size_t)P, j->OH, j->OW,
               buf, j->Hp, j->Wp);
    if (j->act != OXK_ACT_NONE && j->act != OXK_ACT_RELU && j->act != OXK_ACT_CLIP)
        for (c = 0; c < nch; c++) oxk_act_row(out + (size_t)c * P, P, j->act, j->p0, j->p1);
}

/* Depthwise: one task per run of dw_chans (image, channel)s: each channel's phases and flat
 * outputs (OH x Wq, the columns past OW dropped on the copy out) in this thread's scratch, the
 * phases zeroed once per task (every channel writes the same positions). */
static void depthwise_task(void* ctx, int t) {
    conv_job* j = (conv_job*)ctx;
    int taps = j->kh * j->kw, flat = j->OH * j->Wq, oh, nc, nc_end = (t + 1) * j->dw_chans;
    size_t flat_len = ((size_t)flat + DW_BLOCK - 1) / DW_BLOCK * DW_BLOCK;
    float* buf = NULL;
    if (nc_end > j->N * j->C) nc_end = j->N * j->C;
    for (nc = t * j->dw_chans; nc < nc_end; nc++) {
        int c = nc % j->C, n = nc / j->C;
        const float* src = j->x + ((size_t)n * j->C + c) * j->H * j->W;
        float* out = j->y + ((size_t)n * j->Cout + c) * j->OH * j->OW;
        const float bias = j->bias ? j->bias[c] : 0.f;
        if (!(j->dw3_fn && j->dw3_fn(src, j->H, j->W, j->sh, j->pt, j->pl, j->Wt + (size_t)c * taps, bias,
                                     j->act, j->p0, j->p1, out, j->OH, j->OW))) {
            const int zero = !buf;   /* the phases' pad positions stay zero over the task */
            if (!buf) buf = (float*)oxk_scratch(OXK_SCRATCH_PAD, (j->cstride + flat_len) * sizeof(float));
            if (!buf) { j->rc = OXK_ENOMEM; return; }
            pad_channel(j, src, buf, zero);
            j->dw_fn(buf, j->toff, taps, j->Wt + (size_t)c * taps, bias, j->act, j->p0, j->p1,
                     buf + j->cstride, flat);
            for (oh = 0; oh < j->OH; oh++)
                copy_row(out + (size_t)oh * j->OW, buf + j->cstride + (size_t)oh * j->Wq, j->OW);
        }
        if (j->act != OXK_ACT_NONE && j->act != OXK_ACT_RELU && j->act != OXK_ACT_CLIP)
            oxk_act_row(out, j->OH * j->OW, j->act, j->p0, j->p1);
    }
}

/* The narrowest output rows the 3x3 direct rows take: below, their border copies cost more than
 * the phases' padded copy (measured on x86-64 AVX2: 112 and 56 wide faster, 40 and less slower).
 * With masked border loads (AVX-512) the border costs one vector: measured against the phases
 * 1.15x faster at 28 wide, 1.47x at 32, 1.04x at 40, 1.6-2x at 56 and 112; 20 wide 0.96x. */
#define DW3_MIN_OW 48
#define DW3_MIN_OW_MASKED 24

/* Flat outputs per depthwise task: small planes share a task (its scratch and zeroing). */
#define DW_TASK_FLAT 4096

/* The most output positions a plane takes the 16-channel blocks with: there a channel's padded
 * copy and flat loop cost more than its taps (measured on AVX-512: 7 x 7 outputs 1.4-1.6x
 * faster, 14 x 14 even, 28 x 28 slower). The padded input may hold 16 times that many positions
 * (a strided or dilated window's), which keeps a block's buffer under 100 KB. */
#define DW16_MAX_P 64

static int conv_depthwise(conv_job* j) {
    int flat, total = j->N * j->C;
    /* the flat loop reads up to one phase row and one block past a channel's last phase */
    phase_layout(j, 0);
    j->cstride = (j->phase * j->sh * j->sw + j->Wq + DW_BLOCK + 15) & ~(size_t)15;
    j->rc = 0;
    dw_loops(&j->dw_fn, &j->dw3_fn, &j->dw16_fn);
    if (!(j->kh == 3 && j->kw == 3 && j->sh == j->sw && j->sh <= 2 && j->dh == 1 && j->dw == 1 &&
          j->OW >= (dw3_masked(j->dw3_fn) ? DW3_MIN_OW_MASKED : DW3_MIN_OW) && j->dw3))
        j->dw3_fn = NULL;
    if (j->dw16_fn && j->dw3 && !j->dw3_fn && j->C >= 16 && j->kh * j->kw <= DW16_MAX_TAPS &&
        j->OH * j->OW <= DW16_MAX_P && (size_t)j->Hp * j->Wp <= 16 * DW16_MAX_P) {
        oxk_parallel_for(j->N * ((j->C + 15) / 16), dw16_task, j);
        return j->rc;
    }
    flat = j->OH * j->Wq;
    j->dw_chans = flat >= DW_TASK_FLAT ? 1 : DW_TASK_FLAT / flat;
    if (j->dw_chans > (total + 15) / 16) j->dw_chans = (total + 15) / 16;   /* >= 16 tasks */
    if (j->dw_chans < 1) j->dw_chans = 1;
    oxk_parallel_for((total + j->dw_chans - 1) / j->dw_chans, depthwise_task, j);
    return j->rc;
}

/* ------------------------------------------------------------------ direct 3x3 (forced only) */

/* out[ow] += w * in[ow] for one output row. */
static void axpy_row(float* out, const float* in, float w, int n) {
    int i = 0;
    vf4 vw = vf_dup(w);
    for (; i + 4 <= n; i += 4) vf_store(out + i, vf_fma(vf_load(out + i), vw, vf_load(in + i)));
    for (; i < n; i++) out[i] += w * in[i];
}

/* Direct 3x3, stride 1, dilation 1, group 1: one task per output channel of image n. */
static void direct3x3_channel(void* ctx, int oc) {
    conv_job* j = (conv_job*)ctx;
    float* out = j->y + ((size_t)j->n * j->Cout + oc) * j->OH * j->OW;
    float b = j->bias ? j->bias[oc] : 0.f;
    int c, oh, i, k;
    size_t e;
    for (e = 0; e < (size_t)j->OH * j->OW; e++) out[e] = b;
    for (c = 0; c < j->C; c++) {
        const float* xp = j->xpad + (size_t)c * j->cstride;
        const float* w = j->Wt + ((size_t)oc * j->C + c) * 9;
        for (oh = 0; oh < j->OH; oh++)
            for (i = 0; i < 3; i++)
                for (k = 0; k < 3; k++)
                    axpy_row(out + (size_t)oh * j->OW, xp + (size_t)(oh + i) * j->Wq + k, w[i * 3 + k], j->OW);
    }
    oxk_act_row(out, j->OH * j->OW, j->act, j->p0, j->p1);
}

static int conv_direct3x3(conv_job* j) {
    phase_layout(j, 0);
    j->xpad = (float*)oxk_scratch(OXK_SCRATCH_PAD, (size_t)j->C * j->cstride * sizeof(float));
    if (!j->xpad) return OXK_ENOMEM;
    for (j->n = 0; j->n < j->N; j->n++) {
        oxk_parallel_for(j->C, pad_task, j);
        oxk_parallel_for(j->Cout, direct3x3_channel, j);
    }
    return 0;
}

/* ------------------------------------------------------------------ entry points */

typedef struct {
    const float* z;
    float* y;
    int n, act;
    float p0, p1;
} residual_job;

/* One output plane: + z, then the activation (the paths without z in their store). */
static void residual_task(void* ctx, int t) {
    const residual_job* r = (const residual_job*)ctx;
    float* y = r->y + (size_t)t * r->n;
    const float* z = r->z + (size_t)t * r->n;
    int i;
    for (i = 0; i < r->n; i++) y[i] = y[i] + z[i];
    if (r->act != OXK_ACT_NONE) oxk_act_row(y, r->n, r->act, r->p0, r->p1);
}

/* oxk_conv2d with the residual z (NULL: none): y = act(conv + bias + z), rounded in that order.
 * The lanes path adds z in its store; the others store conv + bias and add z, then the
 * activation, over each plane after. */
static int conv2d_impl(const float* x, int N, int C, int H, int Wd,
                       const float* W, const float* packW, int Cout, int kh, int kw, int group,
                       int sh, int sw, int dh, int dw, int pt, int pl, int pb, int pr,
                       const float* bias, int act, float p0, float p1,
                       float* y, int OH, int OW, int path, const float* z) {
    conv_job j;
    int depthwise, direct, rc, lanes_packed = 0;
    if (!x || !W || !y || N < 0 || C <= 0 || H <= 0 || Wd <= 0 || Cout <= 0 || kh <= 0 || kw <= 0 ||
        group <= 0 || C % group || Cout % group || sh <= 0 || sw <= 0 || dh <= 0 || dw <= 0 ||
        pt < 0 || pl < 0 || pb < 0 || pr < 0 || OH <= 0 || OW <= 0)
        return OXK_EARG;
    memset(&j, 0, sizeof(j));
    j.x = x; j.N = N; j.C = C; j.H = H; j.W = Wd; j.Wt = W; j.packW = packW; j.Cout = Cout;
    j.kh = kh; j.kw = kw; j.group = group; j.sh = sh; j.sw = sw; j.dh = dh; j.dw = dw;
    j.pt = pt; j.pl = pl; j.pb = pb; j.pr = pr; j.bias = bias; j.act = act; j.p0 = p0; j.p1 = p1;
    j.y = y; j.OH = OH; j.OW = OW;
    depthwise = group == C && Cout == C;
    direct = kh == 3 && kw == 3 && sh == 1 && sw == 1 && dh == 1 && dw == 1 && group == 1;
#if defined(OXK_X86_GEMM)
    lanes_packed = packW && lanes_isa(Cout, C / group, kh, kw, group);
#endif
    if (path == OXK_CONV_LANES_PACKED) {   /* packW: oxk_conv_pack_lanes's (pointwise, group 1) */
        if (!packW || group != 1 || kh != 1 || kw != 1) return OXK_EARG;
        lanes_packed = 1;
        path = OXK_CONV_LANES;
    }
    if (path == OXK_CONV_WINOGRAD) {   /* packW: oxk_conv_pack_winograd's */
        if (!packW || !direct || OH != H + pt + pb - 2 || OW != Wd + pl + pr - 2) return OXK_EARG;
        return N ? oxk_conv_winograd_run(x, N, C, H, Wd, packW, Cout, pt, pl, bias, z, act, p0, p1, y, OH, OW) : 0;
    }
    if (path == OXK_CONV_AUTO)
        path = depthwise ? OXK_CONV_DEPTHWISE : lanes_packed ? OXK_CONV_LANES : OXK_CONV_IM2COL;
    j.dw3 = path == OXK_CONV_DEPTHWISE;
    if (path == OXK_CONV_DEPTHWISE_PHASES) path = OXK_CONV_DEPTHWISE;
    if ((path == OXK_CONV_DEPTHWISE && !depthwise) || (path == OXK_CONV_DIRECT3X3 && !direct) ||
        (path != OXK_CONV_DEPTHWISE && path != OXK_CONV_DIRECT3X3 && path != OXK_CONV_IM2COL &&
         path != OXK_CONV_LANES))
        return OXK_EARG;
#if defined(OXK_X86_GEMM)
    if (path == OXK_CONV_LANES && !direct_isa()) return OXK_EARG;
#else
    if (path == OXK_CONV_LANES) return OXK_EARG;
#endif
    if (lanes_packed && path != OXK_CONV_LANES) j.packW = NULL;   /* the A panels are not there */
    if (N == 0) return 0;
    j.toff = (size_t*)oxk_aligned_alloc((size_t)kh * kw * sizeof(size_t));
    if (!j.toff) return OXK_ENOMEM;
    if (path == OXK_CONV_LANES) {
#if defined(OXK_X86_GEMM)
        j.z = z;
        if (kh == 1 && kw == 1 && sh == 1 && sw == 1 && !pt && !pl && !pb && !pr) {
            /* pointwise: no position depends on another, so the planes are one row of H W
             * positions (tiles of up to RT positions, not one short row each) */
            j.W = j.OW = H * Wd;
            j.H = j.OH = 1;
        }
        phase_layout(&j, 0);
        rc = conv_lanes_gemm(&j, direct_isa(), lanes_packed ? packW : NULL);
#else
        rc = OXK_EARG;
#endif
    } else {
        if (z) j.act = OXK_ACT_NONE;   /* after z */
        rc = path == OXK_CONV_DEPTHWISE ? conv_depthwise(&j) :
             path == OXK_CONV_DIRECT3X3 ? conv_direct3x3(&j) : conv_im2col(&j);
        if (!rc && z) {
            residual_job r;
            r.z = z; r.y = y; r.n = OH * OW; r.act = act; r.p0 = p0; r.p1 = p1;
            oxk_parallel_for(N * Cout, residual_task, &r);
        }
    }
    oxk_aligned_free(j.toff);
    return rc;
}

int oxk_conv2d(const float* x, int N, int C, int H, int Wd,
               const float* W, const float* packW, int Cout, int kh, int kw, int group,
               int sh, int sw, int dh, int dw, int pt, int pl, int pb, int pr,
               const float* bias, int act, float p0, float p1,
               float* y, int OH, int OW, int path) {
    return conv2d_impl(x, N, C, H, Wd, W, packW, Cout, kh, kw, group, sh, sw, dh, dw, pt, pl, pb, pr,
                       bias, act, p0, p1, y, OH, OW, path, NULL);
}

int oxk_conv2d_run(const oxk_conv_plan* p, int N, const float* x, float* y) {
    return oxk_conv2d_run_z(p, N, x, NULL, y);
}

int oxk_conv2d_run_z(const oxk_conv_plan* p, int N, const float* x, const float* z, float* y) {
    if (!p) return OXK_EARG;
    if (z && z == y) return OXK_EARG;
    return conv2d_impl(x, N, p->C, p->H, p->W, p->weight, p->packW, p->Cout, p->kh, p->kw, p->group,
                       p->sh, p->sw, p->dh, p->dw, p->pt, p->pl, p->pb, p->pr, p->bias, p->act, p->p0, p->p1,
                       y, p->OH, p->OW, p->path, z);
}

/* ------------------------------------------------------------------ transposed convolution */

size_t oxk_convt_pack_size(int C, int Cout_g, int kh, int kw, int group) {
    if (group <= 0 || C % group || Cout_g <= 0) return 0;
    return (size_t)group * oxk_pack_a_size(Cout_g * kh * kw, C / group);
}

int oxk_convt_pack(const float* W, int C, int Cout_g, int kh, int kw, int group, float* packed) {
    int g, Cg, M;
    size_t per;
    if (!W || !packed || group <= 0 || C % group || Cout_g <= 0 || kh <= 0 || kw <= 0) return OXK_EARG;
    Cg = C / group; M = Cout_g * kh * kw;
    per = oxk_pack_a_size(M, Cg);
    for (g = 0; g < group; g++)   /* A = W_g^T: W_g is Cg rows of M values */
        oxk_pack_a(1, M, Cg, W + (size_t)g * Cg * M, M, packed + (size_t)g * per);
    return 0;
}

typedef struct {
    const oxk_convt_plan* p;
    const float* cols;   /* (Cout_g kh kw) x (H W) of the current image and group */
    float* y;            /* the current image's output */
    int g;
} convt_job;

/* Output channel co of the current group: bias, every tap's columns added where they land, then
 * the activation. */
static void col2im_task(void* ctx, int co) {
    const convt_job* j = (const convt_job*)ctx;
    const oxk_convt_plan* p = j->p;
    const int Cog = p->Cout / p->group, HW = p->H * p->W, oc = j->g * Cog + co;
    float* out = j->y + (size_t)oc * p->OH * p->OW;
    const float b = p->bias ? p->bias[oc] : 0.f;
    int i, k, h, w;
    size_t e;
    for (e = 0; e < (size_t)p->OH * p->OW; e++) out[e] = b;
    for (i = 0; i < p->kh; i++)
        for (k = 0; k < p->kw; k++) {
            const float* row = j->cols + ((size_t)(co * p->kh + i) * p->kw + k) * HW;
            const int c0 = k * p->dw - p->pl;   /* ow = w sw + c0 */
            /* w in [w_lo, w_hi): 0 <= w sw + c0 < OW */
            int w_lo = c0 >= 0 ? 0 : (-c0 + p->sw - 1) / p->sw;
            int w_hi = p->OW - c0 <= 0 ? 0 : (p->OW - c0 + p->sw - 1) / p->sw;
            if (w_hi > p->W) w_hi = p->W;
            if (w_lo >= w_hi) continue;
            for (h = 0; h < p->H; h++) {
                const int oh = h * p->sh - p->pt + i * p->dh;
                const float* src;
                float* dst;
                if (oh < 0 || oh >= p->OH) continue;
                src = row + (size_t)h * p->W;
                dst = out + (size_t)oh * p->OW + c0;
                if (p->sw == 1) {
                    w = w_lo;
                    for (; w + 4 <= w_hi; w += 4) vf_store(dst + w, vf_add(vf_load(dst + w), vf_load(src + w)));
                    for (; w < w_hi; w++) dst[w] += src[w];
                } else {
                    for (w = w_lo; w < w_hi; w++) dst[(size_t)w * p->sw] += src[w];
                }
            }
        }
    oxk_act_row(out, p->OH * p->OW, p->act, p->p0, p->p1);
}

int oxk_conv_transpose2d_run(const oxk_convt_plan* p, int N, const float* x, float* y) {
    int n, rc = 0, Cg, Cog, M, HW;
    size_t per;
    float* cols;
    convt_job j;
    if (!p || !x || !y || N < 0 || p->C <= 0 || p->H <= 0 || p->W <= 0 || p->Cout <= 0 ||
        p->kh <= 0 || p->kw <= 0 || p->group <= 0 || p->C % p->group || p->Cout % p->group ||
        p->sh <= 0 || p->sw <= 0 || p->dh <= 0 || p->dw <= 0 || p->pt < 0 || p->pl < 0 ||
        p->OH <= 0 || p->OW <= 0 || !p->weight)
        return OXK_EARG;
    Cg = p->C / p->group; Cog = p->Cout / p->group; M = Cog * p->kh * p->kw; HW = p->H * p->W;
    per = oxk_pack_a_size(M, Cg);
    cols = (float*)oxk_scratch(OXK_SCRATCH_PANELS, (size_t)M * HW * sizeof(float));
    if (!cols) return OXK_ENOMEM;
    j.p = p; j.cols = cols;
    for (n = 0; n < N && !rc; n++) {
        j.y = y + (size_t)n * p->Cout * p->OH * p->OW;
        for (j.g = 0; j.g < p->group && !rc; j.g++) {
            rc = oxk_sgemm(1, 0, M, HW, Cg, 1.f, p->weight + (size_t)j.g * Cg * M, M,
                           p->packW ? p->packW + (size_t)j.g * per : NULL,
                           x + ((size_t)n * p->C + (size_t)j.g * Cg) * HW, HW, NULL,
                           0.f, cols, HW, NULL, OXK_BIAS_NONE, OXK_ACT_NONE, 0.f, 0.f);
            if (!rc) oxk_parallel_for(Cog, col2im_task, &j);
        }
    }
    return rc;
}
