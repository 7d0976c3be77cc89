/* movement.c - the program's data movement (issue #17): one general strided copy (Transpose, Slice,
 * Concat, Split, Expand, Tile, DepthToSpace/SpaceToDepth, Pad's interior and its fill), a gather of
 * whole slices along one axis (Gather with known indices) and a separable resampling over the two
 * innermost axes with index and weight tables computed by the caller (Resize: nearest, linear,
 * cubic). Work is split into fixed chunks that do not depend on the thread count and every output
 * is computed the same way whoever computes it, so results are bitwise-equal for any number of
 * threads; the resampling adds in the order the CPU provider's axis-by-axis Resize does (rows
 * first, then columns, taps in table order), without contraction into fused multiply-adds. */
#include "oxk.h"

#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF   /* gcc in ISO C mode (-std=c99) does not contract */
#endif

#define CHUNK 16384   /* floats per task when a copy is split across the pool */
#define TBLOCK 16     /* rows moved together when the source is read across rows (transposes) */
#define TCOLS 64      /* columns per pass over such a block */

static long lmin(long a, long b) { return a < b ? a : b; }

/* Lowest and highest offset an index space reaches from `off` with strides `st` (dims > 0). */
static void reach(int rank, const int* dims, const int* st, long off, long* lo, long* hi) {
    int k;
    *lo = *hi = off;
    for (k = 0; k < rank; k++) {
        long span = (long)(dims[k] - 1) * st[k];
        if (span < 0) *lo += span; else *hi += span;
    }
}

typedef struct {
    const oxk_copy_args* g;
    const float* a;
    float* y;
    int r;                 /* rank, at least 1 */
    int n;                 /* innermost length */
    int rows;              /* length of axis r-2 (1 when r == 1) */
    int block;             /* rows of axis r-2 per unit */
    int blocks;            /* units per outer index */
    int transpose;         /* read across rows in TBLOCK x TCOLS tiles */
    long units, per_task;
} copy_job;

static void copy_row(const float* a, int sa, float* y, int sy, int n) {
    int k;
    if (sa == 1 && sy == 1) { memcpy(y, a, (size_t)n * sizeof(float)); return; }
    if (sa == 0) {
        float v = a[0];
        if (sy == 1) { for (k = 0; k < n; k++) y[k] = v; }
        else { for (k = 0; k < n; k++) y[(long)k * sy] = v; }
        return;
    }
    for (k = 0; k < n; k++) y[(long)k * sy] = a[(long)k * sa];
}

static void copy_unit(const copy_job* j, long u) {
    const oxk_copy_args* g = j->g;
    int r = j->r, k, i, i0, i1, c0, c;
    long o = u / j->blocks, ao = g->a_off, yo = g->y_off;
    int sa_row = r >= 2 ? g->sa[r - 2] : 0, sy_row = r >= 2 ? g->sy[r - 2] : 0;
    int sa_in = g->sa[r - 1], sy_in = g->sy[r - 1];
    for (k = r - 3; k >= 0; k--) {   /* the outer multi-index */
        long idx = o % g->dims[k];
        o /= g->dims[k];
        ao += idx * g->sa[k];
        yo += idx * g->sy[k];
    }
    i0 = (int)(u % j->blocks) * j->block;
    i1 = i0 + j->block < j->rows ? i0 + j->block : j->rows;
    if (!j->transpose) {
        for (i = i0; i < i1; i++)
            copy_row(j->a + ao + (long)i * sa_row, sa_in, j->y + yo + (long)i * sy_row, sy_in, j->n);
        return;
    }
    for (c0 = 0; c0 < j->n; c0 += TCOLS) {
        int c1 = c0 + TCOLS < j->n ? c0 + TCOLS : j->n;
        for (i = i0; i < i1; i++) {
            const float* src = j->a + ao + (long)i * sa_row;
            float* dst = j->y + yo + (long)i * sy_row;
            for (c = c0; c < c1; c++) dst[(long)c * sy_in] = src[(long)c * sa_in];
        }
    }
}

static void copy_task(void* ctx, int t) {
    const copy_job* j = (const copy_job*)ctx;
    long u = (long)t * j->per_task, u1 = lmin(u + j->per_task, j->units);
    for (; u < u1; u++) copy_unit(j, u);
}

int oxk_strided_copy(const oxk_copy_args* g, const float* a, float* y) {
    copy_job j;
    oxk_copy_args one;
    long total = 1, per_unit, lo, hi;
    int k, tasks;
    if (!g || g->rank < 0 || g->rank > OXK_COPY_RANK || g->a_len < 0 || g->y_len < 0) return OXK_EARG;
    for (k = 0; k < g->rank; k++) {
        if (g->dims[k] < 0) return OXK_EARG;
        total *= g->dims[k];
    }
    if (total == 0) return 0;
    if (!a || !y) return OXK_EARG;
    reach(g->rank, g->dims, g->sa, g->a_off, &lo, &hi);
    if (lo < 0 || hi >= g->a_len) return OXK_EARG;
    reach(g->rank, g->dims, g->sy, g->y_off, &lo, &hi);
    if (lo < 0 || hi >= g->y_len) return OXK_EARG;
    if (g->rank == 0) {   /* one element */
        one = *g;
        one.rank = 1; one.dims[0] = 1; one.sa[0] = 0; one.sy[0] = 1;
        g = &one;
    }
    j.g = g; j.a = a; j.y = y; j.r = g->rank;
    j.n = g->dims[j.r - 1];
    j.rows = j.r >= 2 ? g->dims[j.r - 2] : 1;
    j.transpose = j.r >= 2 && g->sa[j.r - 1] != 1 && g->sa[j.r - 1] != 0 && j.rows > 1 &&
                  (g->sa[j.r - 2] == 1 || g->sa[j.r - 2] == -1);
    if (j.transpose) j.block = TBLOCK < j.rows ? TBLOCK : j.rows;
    else j.block = j.n >= CHUNK ? 1 : (CHUNK / j.n < j.rows ? CHUNK / j.n : j.rows);
    j.blocks = (j.rows + j.block - 1) / j.block;
    j.units = total / ((long)j.n * j.rows) * j.blocks;
    per_unit = (long)j.block * j.n;
    j.per_task = per_unit >= CHUNK ? 1 : CHUNK / per_unit;
    tasks = (int)((j.units + j.per_task - 1) / j.per_task);
    oxk_parallel_for(tasks, copy_task, &j);
    return 0;
}

/* ------------------------------------------------------------------------------------ gather */

typedef struct {
    const oxk_gather_args* g;
    const float* a;
    const int32_t* idx;   /* the table, or the run-time indices checked and normalized */
    float* y;
    long rows, per_task;
} gather_job;

static void gather_task(void* ctx, int t) {
    const gather_job* j = (const gather_job*)ctx;
    const oxk_gather_args* g = j->g;
    long r = (long)t * j->per_task, r1 = lmin(r + j->per_task, j->rows);
    for (; r < r1; r++) {
        long o = r / g->count, q = r % g->count;
        const float* src = j->a + (o * g->axis + j->idx[q]) * (long)g->inner;
        float* dst = j->y + r * (long)g->inner;
        if (g->inner == 1) *dst = *src;
        else memcpy(dst, src, (size_t)g->inner * sizeof(float));
    }
}

#define GATHER_STACK 256   /* run-time indices normalized on the stack up to this count */

int oxk_gather(const oxk_gather_args* g, const float* a, const void* index, float* y) {
    gather_job j;
    int32_t local[GATHER_STACK];
    int32_t* norm = NULL;
    int q;
    if (!g || g->outer < 0 || g->axis < 0 || g->inner < 0 || g->count < 0) return OXK_EARG;
    if ((long)g->outer * g->count * g->inner == 0) return 0;
    if (!a || !y || (!g->index && !index)) return OXK_EARG;
    if (g->index) {
        for (q = 0; q < g->count; q++)
            if (g->index[q] < 0 || g->index[q] >= g->axis) return OXK_EARG;
        j.idx = g->index;
    } else {   /* operand b: checked, negative indices counted from the end */
        norm = g->count <= GATHER_STACK ? local : (int32_t*)oxk_aligned_alloc((size_t)g->count * sizeof(int32_t));
        if (!norm) return OXK_ENOMEM;
        for (q = 0; q < g->count; q++) {
            long v = g->wide ? (long)((const int64_t*)index)[q] : (long)((const int32_t*)index)[q];
            if (v < 0) v += g->axis;
            if (v < 0 || v >= g->axis) {
                if (norm != local) oxk_aligned_free(norm);
                return OXK_EARG;
            }
            norm[q] = (int32_t)v;
        }
        j.idx = norm;
    }
    j.g = g; j.a = a; j.y = y;
    j.rows = (long)g->outer * g->count;
    j.per_task = g->inner >= CHUNK ? 1 : CHUNK / g->inner;
    oxk_parallel_for((int)((j.rows + j.per_task - 1) / j.per_task), gather_task, &j);
    if (norm && norm != local) oxk_aligned_free(norm);
    return 0;
}

/* ---------------------------------------------------------------------------------- resample */

typedef struct {
    const oxk_resample_args* g;
    const float* a;
    float* y;
    long rows, per_task;
    int up;   /* the columns' table is nearest upsampling by this whole factor (ix[ox] = ox / up), or 0 */
} resample_job;

/* The whole factor f >= 2 a one-tap column table upsamples by (ow = f iw, ix[ox] = ox / f, every
 * weight 1: each input value copied f times), or 0. */
static int nearest_upscale(const oxk_resample_args* g) {
    int f, ox;
    if (g->tx != 1 || g->ow % g->iw || g->ow / g->iw < 2) return 0;
    f = g->ow / g->iw;
    for (ox = 0; ox < g->ow; ox++)
        if (g->ix[ox] != ox / f || g->wx[ox] != 1.0f) return 0;
    return f;
}

/* dst[f i + k] = src[i] for k < f: nearest upsampling of one row (copies, no arithmetic). */
static void upsample_row(const float* src, float* dst, int iw, int f) {
    int i, k;
    if (f == 2) {
        for (i = 0; i < iw; i++) { dst[2 * i] = src[i]; dst[2 * i + 1] = src[i]; }
        return;
    }
    for (i = 0; i < iw; i++, dst += f)
        for (k = 0; k < f; k++) dst[k] = src[i];
}

/* Output row r (plane p, row oy) from the columns' pass over `rows` (iw values: the rows' pass of
 * this output row, or the input row itself when that pass is one tap of weight 1, which is exact). */
static void resample_columns(const oxk_resample_args* g, const float* rows, float* dst) {
    int tx = g->tx, ox, tb;
    if (tx == 1) {
        for (ox = 0; ox < g->ow; ox++) {
            float w = g->wx[ox];
            dst[ox] = w == 1.0f ? rows[g->ix[ox]] : rows[g->ix[ox]] * w;
        }
        return;
    }
    for (ox = 0; ox < g->ow; ox++) {
        const int32_t* cx = g->ix + (long)ox * tx;
        const float* qx = g->wx + (long)ox * tx;
        float acc = rows[cx[0]] * qx[0], term;
        for (tb = 1; tb < tx; tb++) {
            term = rows[cx[tb]] * qx[tb];
            acc = acc + term;
        }
        dst[ox] = acc;
    }
}

static int same_taps(const oxk_resample_args* g, int oy0, int oy1) {
    int t;
    for (t = 0; t < g->ty; t++)
        if (g->iy[(long)oy0 * g->ty + t] != g->iy[(long)oy1 * g->ty + t] ||
            g->wy[(long)oy0 * g->ty + t] != g->wy[(long)oy1 * g->ty + t]) return 0;
    return 1;
}

static void resample_task(void* ctx, int t) {
    const resample_job* j = (const resample_job*)ctx;
    const oxk_resample_args* g = j->g;
    int ty = g->ty, ta, ix;
    long r0 = (long)t * j->per_task, r = r0, r1 = lmin(r0 + j->per_task, j->rows);
    float* tmp = (float*)oxk_scratch(OXK_SCRATCH_PAD, (size_t)g->iw * sizeof(float));
    for (; r < r1; r++) {
        long p = r / g->oh;
        int oy = (int)(r % g->oh);
        const float* plane = j->a + p * (long)g->ih * g->iw;
        const int32_t* cy = g->iy + (long)oy * ty;
        const float* qy = g->wy + (long)oy * ty;
        float* dst = j->y + r * (long)g->ow;
        if (r > r0 && oy > 0 && same_taps(g, oy - 1, oy)) {   /* the row above again (upsampling) */
            memcpy(dst, dst - g->ow, (size_t)g->ow * sizeof(float));
            continue;
        }
        if (ty == 1 && qy[0] == 1.0f) {
            if (j->up) upsample_row(plane + (long)cy[0] * g->iw, dst, g->iw, j->up);
            else resample_columns(g, plane + (long)cy[0] * g->iw, dst);
            continue;
        }
        if (tmp) {   /* the rows' pass over the whole row (the CPU kernel resizes axis H first) */
            const float* row = plane + (long)cy[0] * g->iw;
            float w = qy[0];
            for (ix = 0; ix < g->iw; ix++) tmp[ix] = row[ix] * w;
            for (ta = 1; ta < ty; ta++) {
                row = plane + (long)cy[ta] * g->iw;
                w = qy[ta];
                for (ix = 0; ix < g->iw; ix++) {
                    float term = row[ix] * w;
                    tmp[ix] = tmp[ix] + term;
                }
            }
            resample_columns(g, tmp, dst);
            continue;
        }
        {   /* no scratch: the same sums, output by output */
            int ox, tb;
            for (ox = 0; ox < g->ow; ox++) {
                const int32_t* cx = g->ix + (long)ox * g->tx;
                const float* qx = g->wx + (long)ox * g->tx;
                float acc = 0.0f;
                for (tb = 0; tb < g->tx; tb++) {
                    float col = plane[(long)cy[0] * g->iw + cx[tb]] * qy[0], term;
                    for (ta = 1; ta < ty; ta++) {
                        term = plane[(long)cy[ta] * g->iw + cx[tb]] * qy[ta];
                        col = col + term;
                    }
                    term = col * qx[tb];
                    acc = tb == 0 ? term : acc + term;
                }
                dst[ox] = acc;
            }
        }
    }
}

int oxk_resample(const oxk_resample_args* g, const float* a, float* y) {
    resample_job j;
    long k;
    if (!g || g->planes < 0 || g->ih < 1 || g->iw < 1 || g->oh < 0 || g->ow < 0 || g->ty < 1 || g->tx < 1)
        return OXK_EARG;
    if ((long)g->planes * g->oh * g->ow == 0) return 0;
    if (!a || !y || !g->iy || !g->wy || !g->ix || !g->wx) return OXK_EARG;
    for (k = 0; k < (long)g->oh * g->ty; k++)
        if (g->iy[k] < 0 || g->iy[k] >= g->ih) return OXK_EARG;
    for (k = 0; k < (long)g->ow * g->tx; k++)
        if (g->ix[k] < 0 || g->ix[k] >= g->iw) return OXK_EARG;
    j.g = g; j.a = a; j.y = y;
    j.up = nearest_upscale(g);
    j.rows = (long)g->planes * g->oh;
    j.per_task = (long)g->ow * g->tx >= CHUNK ? 1 : CHUNK / ((long)g->ow * g->tx);
    oxk_parallel_for((int)((j.rows + j.per_task - 1) / j.per_task), resample_task, &j);
    return 0;
}
