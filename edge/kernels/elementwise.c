/* elementwise.c - the program's pointwise ops: an activation over n floats and float32 Add / Sub /
 * Mul / Div over up to three broadcast axes (issue #16). Work is split into fixed chunks that do
 * not depend on the thread count, and each output is computed the same way whoever computes it,
 * so results are bitwise-equal for any number of threads. */
#include "oxk.h"

#define CHUNK 16384   /* floats per task when a run is split across the pool */

int oxk_act(const float* x, int n, int act, float p0, float p1, float* y) {
    if (n < 0 || (n > 0 && (!x || !y))) return OXK_EARG;
    if (act < OXK_ACT_NONE || act > OXK_ACT_TANH) return OXK_EARG;
    if (x != y && n > 0) memcpy(y, x, (size_t)n * sizeof(float));
    oxk_act_row(y, n, act, p0, p1);
    return 0;
}

/* y[k] = a[k*sa] op b[k*sb] for k < n; strides 0 or 1 take loops the compiler vectorizes. */
#define BIN_LOOPS(EXPR)                                                                   \
    if (sa == 1 && sb == 1) { for (k = 0; k < n; k++) { float u = a[k], v = b[k]; y[k] = EXPR; } } \
    else if (sa == 1 && sb == 0) { float v = b[0]; for (k = 0; k < n; k++) { float u = a[k]; y[k] = EXPR; } } \
    else if (sa == 0 && sb == 1) { float u = a[0]; for (k = 0; k < n; k++) { float v = b[k]; y[k] = EXPR; } } \
    else { for (k = 0; k < n; k++) { float u = a[(size_t)k * sa], v = b[(size_t)k * sb]; y[k] = EXPR; } }

static void bin_row(int op, const float* a, int sa, const float* b, int sb, float* y, int n) {
    int k;
    switch (op) {
    case OXK_BIN_ADD: BIN_LOOPS(u + v) break;
    case OXK_BIN_SUB: BIN_LOOPS(u - v) break;
    case OXK_BIN_MUL: BIN_LOOPS(u * v) break;
    default: BIN_LOOPS(u / v) break;
    }
}

typedef struct {
    const oxk_binary_args* g;
    const float* a;
    const float* b;
    float* y;
    int rows_per_task, inner_chunks;   /* a task: rows [t*rows_per_task, ...) or one inner chunk */
} bin_job;

static void bin_task(void* ctx, int t) {
    const bin_job* j = (const bin_job*)ctx;
    const oxk_binary_args* g = j->g;
    int rows = g->d0 * g->d1, r, r1;
    if (j->inner_chunks > 1) {   /* one row, split along the inner axis */
        int k0 = t * CHUNK, n = g->d2 - k0 < CHUNK ? g->d2 - k0 : CHUNK;
        bin_row(g->op, j->a + (size_t)k0 * g->sa2, g->sa2, j->b + (size_t)k0 * g->sb2, g->sb2, j->y + k0, n);
        return;
    }
    r = t * j->rows_per_task;
    r1 = r + j->rows_per_task < rows ? r + j->rows_per_task : rows;
    for (; r < r1; r++) {
        int i = r / g->d1, jj = r % g->d1;
        size_t oa = (size_t)i * g->sa0 + (size_t)jj * g->sa1, ob = (size_t)i * g->sb0 + (size_t)jj * g->sb1;
        bin_row(g->op, j->a + oa, g->sa2, j->b + ob, g->sb2, j->y + (size_t)r * g->d2, g->d2);
    }
}

int oxk_binary(const oxk_binary_args* g, const float* a, const float* b, float* y) {
    bin_job j;
    int rows, tasks;
    if (!g || g->op < OXK_BIN_ADD || g->op > OXK_BIN_DIV || g->d0 < 0 || g->d1 < 0 || g->d2 < 0)
        return OXK_EARG;
    rows = g->d0 * g->d1;
    if (rows == 0 || g->d2 == 0) return 0;
    if (!a || !b || !y) return OXK_EARG;
    j.g = g; j.a = a; j.b = b; j.y = y; j.inner_chunks = 1;
    if (rows == 1) {
        j.inner_chunks = (g->d2 + CHUNK - 1) / CHUNK;
        j.rows_per_task = 1;
        tasks = j.inner_chunks;
    } else {
        j.rows_per_task = g->d2 >= CHUNK ? 1 : CHUNK / g->d2;
        tasks = (rows + j.rows_per_task - 1) / j.rows_per_task;
    }
    oxk_parallel_for(tasks, bin_task, &j);
    return 0;
}
