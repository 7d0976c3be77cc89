/* normalization.c - Softmax and LogSoftmax over the last axis of a rows x cols matrix (issue #16).
 * Each row is one task and is computed the same way whoever computes it (max, then a sum of
 * exp(x - max) in order), so results are bitwise-equal for any number of threads. */
#include "oxk.h"

/* log(s) for s >= 1 (a softmax row's sum); no libc log in the wasm build. m * 2^e with m in
 * [sqrt(1/2), sqrt(2)), log m = 2 atanh((m - 1) / (m + 1)) by its series (error < 1e-10). */
static float log_sum(float s) {
    union { float f; uint32_t u; } v;
    double m, t, t2, r;
    int e;
    if (!(s >= 1.f) || s == OXK_INFINITY) return s == OXK_INFINITY ? s : (s - s) / (s - s);
    v.f = s;
    e = (int)((v.u >> 23) & 255) - 127;
    v.u = (v.u & 0x007fffffu) | 0x3f800000u;
    m = v.f;
    if (m > 1.4142135623730951) { m *= 0.5; e++; }
    t = (m - 1.0) / (m + 1.0);
    t2 = t * t;
    r = t * (2.0 + t2 * (2.0 / 3 + t2 * (2.0 / 5 + t2 * (2.0 / 7 + t2 * (2.0 / 9 + t2 * (2.0 / 11
        + t2 * (2.0 / 13)))))));
    return (float)(r + e * 0.6931471805599453);
}

typedef struct { const float* x; float* y; int cols, log; } softmax_job;

static void softmax_row(void* ctx, int r) {
    const softmax_job* j = (const softmax_job*)ctx;
    const float* x = j->x + (size_t)r * j->cols;
    float* y = j->y + (size_t)r * j->cols;
    float mx = x[0], sum = 0.f;
    int k, n = j->cols;
    for (k = 1; k < n; k++) mx = x[k] > mx ? x[k] : mx;
    if (j->log) {
        float ls;
        for (k = 0; k < n; k++) sum += expf(x[k] - mx);
        ls = log_sum(sum);
        for (k = 0; k < n; k++) y[k] = (x[k] - mx) - ls;
    } else {
        float inv;
        for (k = 0; k < n; k++) { float e = expf(x[k] - mx); y[k] = e; sum += e; }
        inv = 1.f / sum;
        for (k = 0; k < n; k++) y[k] *= inv;
    }
}

int oxk_softmax(const float* x, int rows, int cols, int log, float* y) {
    softmax_job j;
    if (rows < 0 || cols < 0) return OXK_EARG;
    if (rows == 0 || cols == 0) return 0;
    if (!x || !y) return OXK_EARG;
    j.x = x; j.y = y; j.cols = cols; j.log = log;
    if ((size_t)rows * (size_t)cols < 4096) {
        int r;
        for (r = 0; r < rows; r++) softmax_row(&j, r);
    } else {
        oxk_parallel_for(rows, softmax_row, &j);
    }
    return 0;
}

/* ---- Normalizations and reductions (issue #17) ------------------------------------------------
 * Statistics are float32 vector sums (four chains) over blocks of STAT_BLOCK values, the block
 * sums added in double, so a row of 10^6 values keeps float32 accuracy. Mean and variance take the
 * corrected two-pass scheme: a first mean m (float32), then the sums of d = x - m and d^2 give the
 * variance (sum d^2 - (sum d)^2 / n) / n and the mean m + sum d / n, exactly for any m (never
 * E[x^2] - E[x]^2); the output's x - mean subtracts the mean's float32 value and then its rounding
 * error, so an offset far larger than the spread costs no accuracy. Every row (or reduce chunk) is one task computed the same way whoever computes it:
 * results are bitwise-equal for any number of threads. */
#include "vec.h"

#define STAT_BLOCK 256    /* values per float32 partial sum */
#define PAR_MIN 32768     /* below this many values a call stays on the caller's thread */
#define RED_CHUNK 256     /* inner positions per task of a strided reduction */
#define RED_TASK 16384    /* values per task of a row reduction */

/* sum of f(x[i]) over n values: f = x, |x| or (x - c)^2 (c: a centre, 0 for plain squares;
 * sum_sq also gives the sum of x - c, which the corrected two-pass scheme needs). */
static double sum_plain(const float* x, int n) {
    double tot = 0.0;
    int i = 0;
    while (i < n) {
        int end = n - i > STAT_BLOCK ? i + STAT_BLOCK : n;
        vf4 a0 = vf_dup(0.f), a1 = vf_dup(0.f), a2 = vf_dup(0.f), a3 = vf_dup(0.f);
        float t = 0.f;
        for (; i + 16 <= end; i += 16) {
            a0 = vf_add(a0, vf_load(x + i)); a1 = vf_add(a1, vf_load(x + i + 4));
            a2 = vf_add(a2, vf_load(x + i + 8)); a3 = vf_add(a3, vf_load(x + i + 12));
        }
        for (; i + 4 <= end; i += 4) a0 = vf_add(a0, vf_load(x + i));
        for (; i < end; i++) t += x[i];
        tot += (double)vf_hsum(vf_add(vf_add(a0, a1), vf_add(a2, a3))) + (double)t;
    }
    return tot;
}

static double sum_abs(const float* x, int n) {
    double tot = 0.0;
    int i = 0;
    vf4 neg = vf_dup(-1.f);
    while (i < n) {
        int end = n - i > STAT_BLOCK ? i + STAT_BLOCK : n;
        vf4 a0 = vf_dup(0.f), a1 = vf_dup(0.f);
        float t = 0.f;
        for (; i + 8 <= end; i += 8) {
            vf4 u = vf_load(x + i), v = vf_load(x + i + 4);
            a0 = vf_add(a0, vf_max(u, vf_mul(u, neg)));
            a1 = vf_add(a1, vf_max(v, vf_mul(v, neg)));
        }
        for (; i < end; i++) t += x[i] < 0.f ? -x[i] : x[i];
        tot += (double)vf_hsum(vf_add(a0, a1)) + (double)t;
    }
    return tot;
}

static double sum_sq(const float* x, int n, float c, double* sum_d) {
    double tot = 0.0, tot_d = 0.0;
    int i = 0;
    vf4 vc = vf_dup(-c);
    while (i < n) {
        int end = n - i > STAT_BLOCK ? i + STAT_BLOCK : n;
        vf4 a0 = vf_dup(0.f), a1 = vf_dup(0.f), a2 = vf_dup(0.f), a3 = vf_dup(0.f);
        vf4 d0 = vf_dup(0.f), d1 = vf_dup(0.f), d2 = vf_dup(0.f), d3 = vf_dup(0.f);
        float t = 0.f, td = 0.f;
        for (; i + 16 <= end; i += 16) {   /* four chains each: the adds' latency is hidden */
            vf4 u = vf_add(vf_load(x + i), vc), v = vf_add(vf_load(x + i + 4), vc);
            vf4 p = vf_add(vf_load(x + i + 8), vc), q = vf_add(vf_load(x + i + 12), vc);
            a0 = vf_fma(a0, u, u); a1 = vf_fma(a1, v, v); a2 = vf_fma(a2, p, p); a3 = vf_fma(a3, q, q);
            d0 = vf_add(d0, u); d1 = vf_add(d1, v); d2 = vf_add(d2, p); d3 = vf_add(d3, q);
        }
        for (; i + 4 <= end; i += 4) {
            vf4 u = vf_add(vf_load(x + i), vc);
            a0 = vf_fma(a0, u, u);
            d0 = vf_add(d0, u);
        }
        for (; i < end; i++) { float d = x[i] - c; t += d * d; td += d; }
        tot += (double)vf_hsum(vf_add(vf_add(a0, a1), vf_add(a2, a3))) + (double)t;
        tot_d += (double)vf_hsum(vf_add(vf_add(d0, d1), vf_add(d2, d3))) + (double)td;
    }
    if (sum_d) *sum_d = tot_d;
    return tot;
}

static float row_extreme(const float* x, int n, int is_max) {
    float m = x[0];
    int i = 0;
    if (n >= 8) {
        vf4 a0 = vf_load(x), a1 = vf_load(x + 4);
        float t[4];
        for (i = 8; i + 8 <= n; i += 8) {
            a0 = is_max ? vf_max(a0, vf_load(x + i)) : vf_min(a0, vf_load(x + i));
            a1 = is_max ? vf_max(a1, vf_load(x + i + 4)) : vf_min(a1, vf_load(x + i + 4));
        }
        vf_store(t, is_max ? vf_max(a0, a1) : vf_min(a0, a1));
        m = t[0];
        m = is_max ? (t[1] > m ? t[1] : m) : (t[1] < m ? t[1] : m);
        m = is_max ? (t[2] > m ? t[2] : m) : (t[2] < m ? t[2] : m);
        m = is_max ? (t[3] > m ? t[3] : m) : (t[3] < m ? t[3] : m);
    }
    for (; i < n; i++) m = is_max ? (x[i] > m ? x[i] : m) : (x[i] < m ? x[i] : m);
    return m;
}

/* ---- oxk_norm: LayerNormalization, RMS normalization, InstanceNormalization, GroupNormalization */

typedef struct { const oxk_norm_args* a; const float* x; const float* s; const float* b; float* y; int cols; } norm_job;

static void norm_row(void* ctx, int r) {
    const norm_job* j = (const norm_job*)ctx;
    const oxk_norm_args* a = j->a;
    const float* x = j->x + (size_t)r * j->cols;
    float* y = j->y + (size_t)r * j->cols;
    const float* s = j->s;
    const float* b = j->b;
    int n = j->cols, k, c;
    float mf = 0.f, ml = 0.f, inv;
    double var;
    if (a->rms) {
        var = sum_sq(x, n, 0.f, NULL) / n;
    } else {   /* the corrected two-pass scheme: the second pass also corrects the mean */
        double mean, sd, ss;
        mf = (float)(sum_plain(x, n) / n);
        ss = sum_sq(x, n, mf, &sd);   /* exact for any centre: mf's rounding costs nothing */
        var = (ss - sd * sd / n) / n;
        var = var > 0.0 ? var : 0.0;
        mean = (double)mf + sd / n;
        mf = (float)mean;
        ml = (float)(mean - (double)mf);
    }
    inv = (float)(1.0 / __builtin_sqrt(var + (double)a->epsilon));
    if (a->inner == 1 && a->groups == 1 && !a->per_group) {   /* scale / bias per column */
        vf4 vm = vf_dup(-mf), vl = vf_dup(-ml), vi = vf_dup(inv);
        for (k = 0; k + 4 <= n; k += 4) {   /* (the compiler takes the tests out of the loop) */
            vf4 d = vf_mul(vf_add(vf_add(vf_load(x + k), vm), vl), vi);
            if (s) d = vf_mul(d, vf_load(s + k));
            if (b) d = vf_add(d, vf_load(b + k));
            vf_store(y + k, d);
        }
        for (; k < n; k++) {
            float d = ((x[k] - mf) - ml) * inv;
            if (s) d *= s[k];
            if (b) d += b[k];
            y[k] = d;
        }
        return;
    }
    /* channels of `inner` values: scale and bias per channel (per group when per_group) */
    for (c = 0; c < a->cpg; c++) {
        int ch = a->per_group ? r % a->groups : (r % a->groups) * a->cpg + c, m = a->inner;
        float sc = s ? inv * s[ch] : inv, sh = b ? b[ch] : 0.f;
        const float* xc = x + (size_t)c * m;
        float* yc = y + (size_t)c * m;
        vf4 vm = vf_dup(-mf), vl = vf_dup(-ml), vs = vf_dup(sc), vb = vf_dup(sh);
        for (k = 0; k + 4 <= m; k += 4)
            vf_store(yc + k, vf_fma(vb, vf_add(vf_add(vf_load(xc + k), vm), vl), vs));
        for (; k < m; k++) yc[k] = sh + ((xc[k] - mf) - ml) * sc;
    }
}

int oxk_norm(const oxk_norm_args* a, int rows, const float* x, const float* scale, const float* bias,
             float* y) {
    norm_job j;
    int cols;
    if (!a || rows < 0 || a->groups < 1 || a->cpg < 1 || a->inner < 1 || !(a->epsilon >= 0.f))
        return OXK_EARG;
    if ((long long)a->cpg * a->inner > 0x7fffffffLL) return OXK_EARG;
    cols = a->cpg * a->inner;
    if (rows == 0) return 0;
    if (!x || !y) return OXK_EARG;
    j.a = a; j.x = x; j.s = scale; j.b = bias; j.y = y; j.cols = cols;
    if ((size_t)rows * (size_t)cols < PAR_MIN) {
        int r;
        for (r = 0; r < rows; r++) norm_row(&j, r);
    } else {
        oxk_parallel_for(rows, norm_row, &j);
    }
    return 0;
}

/* ---- oxk_batchnorm: y[o, c, i] = (x[o, c, i] - mean[c]) / sqrt(var[c] + epsilon) * scale[c] + bias[c],
 * as x * a + (bias - mean * a) with a = scale / sqrt(var + epsilon) (in double, rounded once). */

typedef struct {
    const oxk_batchnorm_args* a;
    const float* x; const float* s; const float* b; const float* m; const float* v; float* y;
    int planes_per_task, planes;
} bn_job;

static void bn_task(void* ctx, int t) {
    const bn_job* j = (const bn_job*)ctx;
    const oxk_batchnorm_args* a = j->a;
    int p = t * j->planes_per_task, p1 = p + j->planes_per_task < j->planes ? p + j->planes_per_task : j->planes;
    int m = a->inner, k;
    for (; p < p1; p++) {
        int c = p % a->channels;
        const float* xp = j->x + (size_t)p * m;
        float* yp = j->y + (size_t)p * m;
        double sd = (double)j->s[c] / __builtin_sqrt((double)j->v[c] + (double)a->epsilon);
        float sc = (float)sd, sh = (float)((double)j->b[c] - (double)j->m[c] * sd);
        vf4 vs = vf_dup(sc), vb = vf_dup(sh);
        for (k = 0; k + 4 <= m; k += 4) vf_store(yp + k, vf_fma(vb, vf_load(xp + k), vs));
        for (; k < m; k++) yp[k] = sh + xp[k] * sc;
    }
}

int oxk_batchnorm(const oxk_batchnorm_args* a, int outer, const float* x, const float* scale,
                  const float* bias, const float* mean, const float* var, float* y) {
    bn_job j;
    long long planes;
    if (!a || outer < 0 || a->channels < 1 || a->inner < 0 || !(a->epsilon >= 0.f)) return OXK_EARG;
    planes = (long long)outer * a->channels;
    if (planes > 0x7fffffffLL) return OXK_EARG;
    if (planes == 0 || a->inner == 0) return 0;
    if (!x || !y || !scale || !bias || !mean || !var) return OXK_EARG;
    j.a = a; j.x = x; j.s = scale; j.b = bias; j.m = mean; j.v = var; j.y = y; j.planes = (int)planes;
    j.planes_per_task = a->inner >= RED_TASK ? 1 : RED_TASK / a->inner;
    if (planes * a->inner < PAR_MIN) {
        j.planes_per_task = j.planes;
        bn_task(&j, 0);
    } else {
        oxk_parallel_for((int)((planes + j.planes_per_task - 1) / j.planes_per_task), bn_task, &j);
    }
    return 0;
}

/* ---- oxk_reduce: y[o, i] = reduce over r of x[o, r, i] */

typedef struct { const oxk_reduce_args* a; const float* x; float* y; int outer, per_task, chunks; } reduce_job;

static float finish(int kind, double tot, int n) {
    switch (kind) {
    case OXK_RED_MEAN: return n ? (float)(tot / n) : 0.f;
    case OXK_RED_L2: return (float)__builtin_sqrt(tot);
    default: return (float)tot;
    }
}

static float reduce_row(int kind, const float* x, int n) {
    switch (kind) {
    case OXK_RED_MAX: return n ? row_extreme(x, n, 1) : -OXK_INFINITY;
    case OXK_RED_MIN: return n ? row_extreme(x, n, 0) : OXK_INFINITY;
    case OXK_RED_L1: return finish(kind, sum_abs(x, n), n);
    case OXK_RED_L2:
    case OXK_RED_SUMSQ: return finish(kind, sum_sq(x, n, 0.f, NULL), n);
    default: return finish(kind, sum_plain(x, n), n);
    }
}

/* positions [i0, i0 + m) of one outer row, m <= RED_CHUNK: float32 partial sums over blocks of
 * STAT_BLOCK reduce steps, added in double */
static void reduce_strided(int kind, const float* x, int R, int inner, int m, float* y) {
    double tot[RED_CHUNK];
    float acc[RED_CHUNK];
    int i, r, r0;
    if (kind == OXK_RED_MAX || kind == OXK_RED_MIN) {
        int mx = kind == OXK_RED_MAX;
        for (i = 0; i < m; i++) acc[i] = mx ? -OXK_INFINITY : OXK_INFINITY;
        for (r = 0; r < R; r++) {
            const float* row = x + (size_t)r * inner;
            for (i = 0; i + 4 <= m; i += 4)
                vf_store(acc + i, mx ? vf_max(vf_load(acc + i), vf_load(row + i)) : vf_min(vf_load(acc + i), vf_load(row + i)));
            for (; i < m; i++) acc[i] = mx ? (row[i] > acc[i] ? row[i] : acc[i]) : (row[i] < acc[i] ? row[i] : acc[i]);
        }
        for (i = 0; i < m; i++) y[i] = acc[i];
        return;
    }
    for (i = 0; i < m; i++) tot[i] = 0.0;
    for (r0 = 0; r0 < R; r0 += STAT_BLOCK) {
        int r1 = R - r0 > STAT_BLOCK ? r0 + STAT_BLOCK : R;
        vf4 neg = vf_dup(-1.f);
        for (i = 0; i < m; i++) acc[i] = 0.f;
        for (r = r0; r < r1; r++) {
            const float* row = x + (size_t)r * inner;
            for (i = 0; i + 4 <= m; i += 4) {
                vf4 v = vf_load(row + i), s = vf_load(acc + i);
                if (kind == OXK_RED_L1) s = vf_add(s, vf_max(v, vf_mul(v, neg)));
                else if (kind == OXK_RED_L2 || kind == OXK_RED_SUMSQ) s = vf_fma(s, v, v);
                else s = vf_add(s, v);
                vf_store(acc + i, s);
            }
            for (; i < m; i++) {
                float v = row[i];
                if (kind == OXK_RED_L1) acc[i] += v < 0.f ? -v : v;
                else if (kind == OXK_RED_L2 || kind == OXK_RED_SUMSQ) acc[i] += v * v;
                else acc[i] += v;
            }
        }
        for (i = 0; i < m; i++) tot[i] += (double)acc[i];
    }
    for (i = 0; i < m; i++) y[i] = finish(kind, tot[i], R);
}

static void reduce_task(void* ctx, int t) {
    const reduce_job* j = (const reduce_job*)ctx;
    const oxk_reduce_args* a = j->a;
    size_t row = (size_t)a->r * a->inner;
    if (a->inner == 1) {   /* rows [t * per_task, ...) */
        int o = t * j->per_task, o1 = o + j->per_task < j->outer ? o + j->per_task : j->outer;
        for (; o < o1; o++) j->y[o] = reduce_row(a->kind, j->x + (size_t)o * row, a->r);
        return;
    }
    if (j->chunks == 1) {   /* whole outer rows [t * per_task, ...) */
        int o = t * j->per_task, o1 = o + j->per_task < j->outer ? o + j->per_task : j->outer, i;
        for (; o < o1; o++)
            for (i = 0; i < a->inner; i += RED_CHUNK)
                reduce_strided(a->kind, j->x + (size_t)o * row + i, a->r, a->inner,
                               a->inner - i < RED_CHUNK ? a->inner - i : RED_CHUNK, j->y + (size_t)o * a->inner + i);
        return;
    }
    {   /* one chunk of one outer row */
        int o = t / j->chunks, i = (t % j->chunks) * RED_CHUNK;
        reduce_strided(a->kind, j->x + (size_t)o * row + i, a->r, a->inner,
                       a->inner - i < RED_CHUNK ? a->inner - i : RED_CHUNK, j->y + (size_t)o * a->inner + i);
    }
}

int oxk_reduce(const oxk_reduce_args* a, int outer, const float* x, float* y) {
    reduce_job j;
    long long total, per;
    int tasks;
    if (!a || outer < 0 || a->r < 0 || a->inner < 0 || a->kind < OXK_RED_SUM || a->kind > OXK_RED_SUMSQ)
        return OXK_EARG;
    if (outer == 0 || a->inner == 0) return 0;
    if (!y || (a->r > 0 && !x)) return OXK_EARG;
    if ((long long)a->r * a->inner > 0x7fffffffLL) return OXK_EARG;
    j.a = a; j.x = x; j.y = y; j.outer = outer;
    j.chunks = (a->inner + RED_CHUNK - 1) / RED_CHUNK;
    per = (long long)a->r * a->inner;   /* values per outer row */
    total = per * outer;
    if (j.chunks > 1) {
        if ((long long)outer * j.chunks > 0x7fffffffLL) return OXK_EARG;
        j.per_task = 1;
        tasks = outer * j.chunks;
    } else {
        j.chunks = 1;
        j.per_task = per >= RED_TASK ? 1 : (int)(RED_TASK / (per ? per : 1));
        tasks = (int)((outer + (long long)j.per_task - 1) / j.per_task);
    }
    if (total < PAR_MIN) {
        int t;
        for (t = 0; t < tasks; t++) reduce_task(&j, t);
    } else {
        oxk_parallel_for(tasks, reduce_task, &j);
    }
    return 0;
}
