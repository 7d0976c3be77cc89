/* pool.c - MaxPool / AveragePool (2-D, pads, strides, dilations, windows that run past the
 * input as ceil_mode makes them) and global max/average pooling, one task per plane. MaxPool is
 * separable (rows, then columns: max_plane). AveragePool: outputs whose window lies inside the
 * input skip the bounds checks and go 4 at a time (strides 1, 2). */
#include "oxk.h"
#include "vec.h"

typedef struct {
    const float* x; int H, W, kind, kh, kw, sh, sw, dh, dw, pt, pl, pb, pr, include_pad;
    float* y; int OH, OW, HW;
} pool_job;

/* One output of the general path: bounds-checked window (pads, windows past the input). */
static float pool_at(const pool_job* j, const float* x, int oh, int ow) {
    float acc = j->kind == 0 ? -OXK_INFINITY : 0.f;
    int n = 0, padded = 0, i, k;
    for (i = 0; i < j->kh; i++) {
        int ih = oh * j->sh - j->pt + i * j->dh;
        if (ih >= j->H + j->pb) break;
        for (k = 0; k < j->kw; k++) {
            int iw = ow * j->sw - j->pl + k * j->dw;
            if (iw >= j->W + j->pr) break;
            padded++;
            if (ih < 0 || iw < 0 || ih >= j->H || iw >= j->W) continue;
            if (j->kind == 0) { float v = x[(size_t)ih * j->W + iw]; if (v > acc) acc = v; }
            else acc += x[(size_t)ih * j->W + iw];
            n++;
        }
    }
    if (j->kind == 1) acc = (j->include_pad ? padded : n) > 0 ? acc / (float)(j->include_pad ? padded : n) : 0.f;
    return acc;
}

/* [lo, hi): the outputs along one axis whose whole window lies inside the input. */
static void inside_range(int in, int out, int k, int s, int d, int pad, int* lo, int* hi) {
    int span = (k - 1) * d;
    *lo = (pad + s - 1) / s;
    *hi = in - 1 - span + pad < 0 ? 0 : (in - 1 - span + pad) / s + 1;
    if (*hi > out) *hi = out;
    if (*lo > *hi) *lo = *hi;
}

/* Outputs [ow, ow_end) of row oh whose windows lie inside: no bounds checks, 4 at a time for
 * strides 1 and 2 (vf_load_even gathers every second value). */
static void pool_row_inside(const pool_job* j, const float* x, float* yrow, int oh, int ow, int ow_end) {
    const float* xrow = x + (size_t)(oh * j->sh - j->pt) * j->W;   /* inside: the offsets below are >= 0 */
    const int kh = j->kh, kw = j->kw, sw = j->sw, W = j->W, max = j->kind == 0;
    const size_t rstep = (size_t)j->dh * W;
    const float inv = 1.f / (float)(kh * kw);
    int i, k;
    if (kw == 1 && sw == 1) {   /* a column window (text models' (2, 1), (4, 1)): 8 outputs a step */
        const vf4 init = vf_dup(max ? -OXK_INFINITY : 0.f);
        for (; ow + 8 <= ow_end; ow += 8) {
            const float* r = xrow + (ow - j->pl);
            vf4 a0 = init, a1 = init;
            for (i = 0; i < kh; i++, r += rstep) {
                a0 = max ? vf_max(a0, vf_load(r)) : vf_add(a0, vf_load(r));
                a1 = max ? vf_max(a1, vf_load(r + 4)) : vf_add(a1, vf_load(r + 4));
            }
            vf_store(yrow + ow, max ? a0 : vf_mul(a0, vf_dup(inv)));
            vf_store(yrow + ow + 4, max ? a1 : vf_mul(a1, vf_dup(inv)));
        }
    }
    if (sw <= 2) {
        /* with stride 2, vf_load_even also reads the value after the window's last: stay in the plane */
        const long last = (long)(oh * j->sh - j->pt + (kh - 1) * j->dh) * W + (kw - 1) * j->dw - j->pl + 1;
        const long plane = (long)j->H * W;
        if (kh == 2 && kw == 2 && sw == 2 && j->dh == 1 && j->dw == 1) {   /* 2x2 stride 2: 2 loads per 4 */
            for (; ow + 4 <= ow_end; ow += 4) {
                const float* r = xrow + (ow * 2 - j->pl);
                vf4 e0, o0, e1, o1, acc;
                vf_load_deint(r, &e0, &o0);
                vf_load_deint(r + rstep, &e1, &o1);
                acc = max ? vf_max(vf_max(e0, o0), vf_max(e1, o1))
                          : vf_mul(vf_add(vf_add(e0, o0), vf_add(e1, o1)), vf_dup(inv));
                vf_store(yrow + ow, acc);
            }
        }
        for (; ow + 4 <= ow_end && (sw == 1 || last + (ow + 3) * 2 < plane); ow += 4) {
            vf4 acc = vf_dup(max ? -OXK_INFINITY : 0.f);
            const float* r = xrow + (ow * sw - j->pl);
            for (i = 0; i < kh; i++, r += rstep) {
                for (k = 0; k < kw; k++) {
                    vf4 v = sw == 1 ? vf_load(r + (size_t)k * j->dw) : vf_load_even(r + (size_t)k * j->dw);
                    acc = max ? vf_max(acc, v) : vf_add(acc, v);
                }
            }
            vf_store(yrow + ow, max ? acc : vf_mul(acc, vf_dup(inv)));
        }
    }
    for (; ow < ow_end; ow++) {
        const float* r = xrow + (ow * sw - j->pl);
        float acc = max ? -OXK_INFINITY : 0.f;
        for (i = 0; i < kh; i++, r += rstep) {
            for (k = 0; k < kw; k++) {
                float v = r[(size_t)k * j->dw];
                if (max) acc = v > acc ? v : acc;
                else acc += v;
            }
        }
        yrow[ow] = max ? acc : acc * inv;
    }
}

/* ------------------------------------------------------------------ separable MaxPool */

/* hrow[ow] = max over k of line[ow * sw + k * dw] (line: a padded row, -inf outside the input,
 * readable 8 floats past the last window). */
static void max_hrow(const pool_job* j, const float* line, float* h) {
    const int OW = j->OW, sw = j->sw, dw = j->dw, kw = j->kw;
    int ow = 0, k;
    if (sw == 1) {
        for (; ow + 4 <= OW; ow += 4) {
            vf4 acc = vf_load(line + ow);
            for (k = 1; k < kw; k++) acc = vf_max(acc, vf_load(line + ow + (size_t)k * dw));
            vf_store(h + ow, acc);
        }
    } else if (sw == 2 && dw == 1) {   /* taps k, k + 1 are one deinterleaved load */
        for (; ow + 4 <= OW; ow += 4) {
            vf4 acc, e, o;
            vf_load_deint(line + 2 * ow, &acc, &o);
            if (kw > 1) acc = vf_max(acc, o);
            for (k = 2; k + 1 < kw; k += 2) {
                vf_load_deint(line + 2 * ow + k, &e, &o);
                acc = vf_max(acc, vf_max(e, o));
            }
            if (k < kw && kw > 1) acc = vf_max(acc, vf_load_even(line + 2 * ow + k));
            vf_store(h + ow, acc);
        }
    } else if (sw == 2) {
        for (; ow + 4 <= OW; ow += 4) {
            vf4 acc = vf_load_even(line + 2 * ow);
            for (k = 1; k < kw; k++) acc = vf_max(acc, vf_load_even(line + 2 * ow + (size_t)k * dw));
            vf_store(h + ow, acc);
        }
    }
    for (; ow < OW; ow++) {
        const float* r = line + (size_t)ow * sw;
        float acc = r[0];
        for (k = 1; k < kw; k++) acc = r[(size_t)k * dw] > acc ? r[(size_t)k * dw] : acc;
        h[ow] = acc;
    }
}

/* MaxPool of one plane as two 1-D passes (max is exact: any order gives the same value): every
 * padded row the windows touch is reduced along W into OW values (rows of the padding, and the
 * columns past the input, are -inf), then each output row is the max of its window's kh rows.
 * kh + kw vector maxes per 4 outputs instead of kh x kw (ResNet's 3x3 s2, YOLO's SPPF 5x5 s1 whose
 * 8x8 planes are mostly border). Scratch: the padded row and the reduced rows. */
static int max_plane(const pool_job* j, const float* x, float* y) {
    const int OW = j->OW, Hp = (j->OH - 1) * j->sh + (j->kh - 1) * j->dh + 1;
    const int Wp = (OW - 1) * j->sw + (j->kw - 1) * j->dw + 1;
    const size_t lw = ((size_t)Wp + 8 + 3) & ~(size_t)3, hw = ((size_t)OW + 3) & ~(size_t)3;
    float* buf = (float*)oxk_scratch(OXK_SCRATCH_PAD, (lw + (size_t)Hp * hw) * sizeof(float));
    float *line = buf, *hr = buf + lw;
    const int cnt = j->W < Wp - j->pl ? j->W : Wp - j->pl;   /* input columns inside the line */
    int r, c, oh, ow, i;
    if (!buf) return OXK_ENOMEM;
    for (c = 0; c < (int)lw; c++) line[c] = -OXK_INFINITY;
    for (r = 0; r < Hp; r++) {
        const int ih = r - j->pt;
        float* h = hr + (size_t)r * hw;
        if (ih < 0 || ih >= j->H || cnt <= 0) {
            for (ow = 0; ow < OW; ow++) h[ow] = -OXK_INFINITY;
            continue;
        }
        memcpy(line + j->pl, x + (size_t)ih * j->W, (size_t)cnt * sizeof(float));
        max_hrow(j, line, h);
    }
    for (oh = 0; oh < j->OH; oh++) {
        const float* h0 = hr + (size_t)oh * j->sh * hw;
        const size_t step = (size_t)j->dh * hw;
        float* yrow = y + (size_t)oh * OW;
        ow = 0;
        for (; ow + 4 <= OW; ow += 4) {
            vf4 acc = vf_load(h0 + ow);
            for (i = 1; i < j->kh; i++) acc = vf_max(acc, vf_load(h0 + i * step + ow));
            vf_store(yrow + ow, acc);
        }
        for (; ow < OW; ow++) {
            float acc = h0[ow];
            for (i = 1; i < j->kh; i++) acc = h0[i * step + ow] > acc ? h0[i * step + ow] : acc;
            yrow[ow] = acc;
        }
    }
    return 0;
}

static void pool_plane(void* ctx, int p) {
    const pool_job* j = (const pool_job*)ctx;
    const float* x = j->x + (size_t)p * j->H * j->W;
    float* y = j->y + (size_t)p * j->OH * j->OW;
    int oh, ow, oh_lo, oh_hi, ow_lo, ow_hi;
    /* 2x2 windows and smaller gain nothing from two passes; without scratch: the direct path */
    if (j->kind == 0 && j->kh * j->kw > 4 && !max_plane(j, x, y)) return;
    inside_range(j->H, j->OH, j->kh, j->sh, j->dh, j->pt, &oh_lo, &oh_hi);
    inside_range(j->W, j->OW, j->kw, j->sw, j->dw, j->pl, &ow_lo, &ow_hi);
    for (oh = 0; oh < j->OH; oh++) {
        float* yrow = y + (size_t)oh * j->OW;
        if (oh < oh_lo || oh >= oh_hi || ow_lo >= ow_hi) {
            for (ow = 0; ow < j->OW; ow++) yrow[ow] = pool_at(j, x, oh, ow);
            continue;
        }
        for (ow = 0; ow < ow_lo; ow++) yrow[ow] = pool_at(j, x, oh, ow);
        pool_row_inside(j, x, yrow, oh, ow_lo, ow_hi);
        for (ow = ow_hi; ow < j->OW; ow++) yrow[ow] = pool_at(j, x, oh, ow);
    }
}

int oxk_pool2d(const float* x, int NC, int H, int Wd, int kind, int kh, int kw,
               int sh, int sw, int dh, int dw, int pt, int pl, int pb, int pr,
               int count_include_pad, float* y, int OH, int OW) {
    pool_job j;
    if (!x || !y || NC < 0 || H <= 0 || Wd <= 0 || (kind != 0 && kind != 1) || kh <= 0 || kw <= 0 ||
        sh <= 0 || sw <= 0 || dh <= 0 || dw <= 0 || pt < 0 || pl < 0 || pb < 0 || pr < 0 || OH <= 0 || OW <= 0)
        return OXK_EARG;
    j.x = x; j.H = H; j.W = Wd; j.kind = kind; j.kh = kh; j.kw = kw; j.sh = sh; j.sw = sw;
    j.dh = dh; j.dw = dw; j.pt = pt; j.pl = pl; j.pb = pb; j.pr = pr;
    j.include_pad = count_include_pad; j.y = y; j.OH = OH; j.OW = OW;
    oxk_parallel_for(NC, pool_plane, &j);
    return 0;
}

static void global_plane(void* ctx, int p) {
    const pool_job* j = (const pool_job*)ctx;
    const float* x = j->x + (size_t)p * j->HW;
    int i = 0, n = j->HW;
    if (j->kind == 0) {
        float m = x[0];
        if (n >= 4) {
            vf4 vm = vf_load(x);
            float t[4];
            for (i = 4; i + 4 <= n; i += 4) vm = vf_max(vm, vf_load(x + i));
            vf_store(t, vm);
            m = t[0] > t[1] ? t[0] : t[1]; m = m > t[2] ? m : t[2]; m = m > t[3] ? m : t[3];
        }
        for (; i < n; i++) m = x[i] > m ? x[i] : m;
        j->y[p] = m;
    } else {
        vf4 vs = vf_dup(0.f);
        float s;
        for (; i + 4 <= n; i += 4) vs = vf_add(vs, vf_load(x + i));
        s = vf_hsum(vs);
        for (; i < n; i++) s += x[i];
        j->y[p] = s / (float)n;
    }
}

int oxk_global_pool(const float* x, int NC, int HW, int kind, float* y) {
    pool_job j;
    if (!x || !y || NC < 0 || HW <= 0 || (kind != 0 && kind != 1)) return OXK_EARG;
    j.x = x; j.y = y; j.HW = HW; j.kind = kind;
    oxk_parallel_for(NC, global_plane, &j);
    return 0;
}

int oxk_pool2d_run(const oxk_pool_plan* p, int NC, const float* x, float* y) {
    if (!p) return OXK_EARG;
    return oxk_pool2d(x, NC, p->H, p->W, p->kind, p->kh, p->kw, p->sh, p->sw, p->dh, p->dw,
                      p->pt, p->pl, p->pb, p->pr, p->count_include_pad, y, p->OH, p->OW);
}
