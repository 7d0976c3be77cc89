/* pool.c - MaxPool / AveragePool (2-D, pads, strides, dilations, windows that run past the
 * input as ceil_mode makes them) and global max/average pooling, one task per plane. */
#include "oxk.h"
#include "vec.h"

typedef struct {
    const float* x; int H, W, kind, kh, kw, sh, sw, dh, dw, pt, pl, pb, pr, include_pad;
    float* y; int OH, OW, HW;
} pool_job;

static void pool_plane(void* ctx, int p) {
    const pool_job* j = (const pool_job*)ctx;
    const float* x = j->x + (size_t)p * j->H * j->W;
    float* y = j->y + (size_t)p * j->OH * j->OW;
    int oh, ow, i, k;
    for (oh = 0; oh < j->OH; oh++) {
        for (ow = 0; ow < j->OW; ow++) {
            float acc = j->kind == 0 ? -OXK_INFINITY : 0.f;
            int n = 0, padded = 0;
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
            y[(size_t)oh * j->OW + ow] = acc;
        }
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
