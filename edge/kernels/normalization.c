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
