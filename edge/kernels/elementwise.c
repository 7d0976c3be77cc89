/* elementwise.c - the pointwise ops (issues #16, #17): the elementwise functions (oxk.h OXK_ACT_*:
 * activations and unary math) over n floats, which are also every GEMM / convolution epilogue
 * (oxk_act_row), and float32 Add / Sub / Mul / Div / Pow / Max / Min over up to three broadcast
 * axes.
 *
 * The math (exp, expm1, log, tanh, sigmoid, erf, erfc) is written once for every vector width in
 * elementwise_impl.h: here on vec.h's four lanes (every target), on x86-64 also 8 (elementwise_avx2.c) and 16
 * (elementwise_avx512.c) lanes, oxk_act_row running the ISA of the SGEMM core chosen at load (gemm_isa.h,
 * OXK_ISA caps it). A single value (oxk_act_scalar, a row's tail) runs the same vector code on a
 * padded register, so a value gets the same bits wherever it sits in a row, in a tile, or in the
 * reference kernels. Accuracy (tests/edge/test_engine_elementwise.py measures it against float64
 * for every ISA): exp, log, sigmoid, tanh, erf within a few ulp over the whole float range, NaN
 * propagated, the infinities and zeros as C99's functions give them. Work is split into fixed
 * chunks that do not depend on the thread count, so results are bitwise-equal for any number of
 * threads. */
#include "oxk.h"
#include "vec.h"
#include "gemm_isa.h"

#define CHUNK 16384   /* floats per task when a run is split across the pool */

/* ------------------------------------------------------------------------- vector math */

/* elementwise_impl.h's functions on vec.h's 4-lane vectors: act_row_vec, the row function of every target
 * (on x86-64 the SSE2 one, beside elementwise_avx2.c's and elementwise_avx512.c's). */
#define VF vf4
#define VI vi4
#define VM vm4
#define VW 4
#define ACT_ROW act_row_vec
#define ACT_ROW_LINKAGE static
#include "elementwise_impl.h"

/* x^y as C's powf: exp(y log|x|) (relative error about (|y log x| + 2) ulp) with the sign of a
 * negative base to an odd integer power, NaN for a finite negative base to a non-integer; y = 2
 * and y = 0.5 are exact (x * x, sqrt). */
static inline vf4 v_pow(vf4 x, vf4 y) {
    const vf4 two23 = vf_dup(8388608.f);
    vf4 ax = v_abs(x), ay = v_abs(y), r, t;
    vm4 big = vf_le(two23, ay), is_int, odd, neg, sq;
    r = v_exp(vf_mul(y, v_log(ax)));
    t = vf_add(ay, two23);
    is_int = vm_or(big, vf_eq(vf_sub(t, two23), ay));
    odd = vm_or(vm_and(vm_and(vf_lt(ay, two23), is_int), vi_eq(vi_and(vf_bits(t), vi_dup(1)), vi_dup(1))),
                vm_and(vm_and(big, vf_lt(ay, vf_dup(16777216.f))), vi_eq(vi_and(vf_bits(ay), vi_dup(1)), vi_dup(1))));
    neg = vi_eq(vi_and(vf_bits(x), vi_dup((int32_t)0x80000000u)), vi_dup((int32_t)0x80000000u));
    r = vf_sel(vm_and(neg, odd), v_neg(r), r);
    /* a finite negative base to a non-integer power: NaN */
    t = vf_sel(vm_and(vf_lt(x, vf_dup(0.f)), vf_lt(vf_dup(-OXK_INFINITY), x)), v_bits(0x7fc00000), r);
    r = vf_sel(is_int, r, t);
    r = vf_sel(vm_and(vf_eq(ax, vf_dup(1.f)), vf_eq(ay, vf_dup(OXK_INFINITY))), vf_dup(1.f), r);
    sq = vf_eq(y, vf_dup(0.5f));   /* sqrt(-0) is -0 and sqrt(-inf) NaN; powf gives +0 and +inf */
    t = vf_sel(vf_eq(x, vf_dup(-OXK_INFINITY)), vf_dup(OXK_INFINITY), vf_add(vf_sqrt(x), vf_dup(0.f)));
    r = vf_sel(sq, t, r);
    r = vf_sel(vf_eq(y, vf_dup(2.f)), vf_mul(x, x), r);
    r = vf_sel(vm_or(vf_eq(y, vf_dup(0.f)), vf_eq(x, vf_dup(1.f))), vf_dup(1.f), r);
    return r;
}

/* ------------------------------------------------------------------------- the functions */

#if defined(OXK_X86_GEMM)
void oxk_act_row_avx2(float* y, int n, int act, float p0, float p1);
void oxk_act_row_avx512(float* y, int n, int act, float p0, float p1);
typedef void (*act_row_fn)(float* y, int n, int act, float p0, float p1);
static act_row_fn g_act_row;   /* chosen on the first call: the SGEMM core's ISA (gemm_isa.h) */

static act_row_fn choose_act_row(void) {
    const char* isa = oxk_sgemm_isa_name();
    act_row_fn f = !strcmp(isa, oxk_gemm_avx512.name) ? oxk_act_row_avx512
                 : !strcmp(isa, oxk_gemm_avx2.name) ? oxk_act_row_avx2 : act_row_vec;
    __atomic_store_n(&g_act_row, f, __ATOMIC_RELAXED);
    return f;
}
#endif

void oxk_act_row(float* y, int n, int act, float p0, float p1) {
#if defined(OXK_X86_GEMM)
    act_row_fn f = __atomic_load_n(&g_act_row, __ATOMIC_RELAXED);
    if (!f) f = choose_act_row();
    f(y, n, act, p0, p1);
#else
    act_row_vec(y, n, act, p0, p1);
#endif
}

/* one value through the row function: the bits it gets at any position of a row */
float oxk_act_scalar(float v, int act, float p0, float p1) {
    oxk_act_row(&v, 1, act, p0, p1);
    return v;
}

typedef struct { const float* x; float* y; int n, act; float p0, p1; } act_job;

static void act_task(void* ctx, int t) {
    const act_job* j = (const act_job*)ctx;
    int i0 = t * CHUNK, n = j->n - i0 < CHUNK ? j->n - i0 : CHUNK;
    if (j->x != j->y) memcpy(j->y + i0, j->x + i0, (size_t)n * sizeof(float));
    oxk_act_row(j->y + i0, n, j->act, j->p0, j->p1);
}

int oxk_act(const float* x, int n, int act, float p0, float p1, float* y) {
    act_job j;
    if (n < 0 || (n > 0 && (!x || !y))) return OXK_EARG;
    if (act < OXK_ACT_NONE || act > OXK_ACT_LAST) return OXK_EARG;
    if (n == 0) return 0;
    j.x = x; j.y = y; j.n = n; j.act = act; j.p0 = p0; j.p1 = p1;
    if (n <= CHUNK) act_task(&j, 0);
    else oxk_parallel_for((n + CHUNK - 1) / CHUNK, act_task, &j);
    return 0;
}

/* ------------------------------------------------------------------------- binary ops */

/* y[k] = a[k*sa] op b[k*sb] for k < n; strides 0 or 1 take loops the compiler vectorizes. */
#define BIN_LOOPS(EXPR)                                                                   \
    if (sa == 1 && sb == 1) { for (k = 0; k < n; k++) { float u = a[k], v = b[k]; y[k] = EXPR; } } \
    else if (sa == 1 && sb == 0) { float v = b[0]; for (k = 0; k < n; k++) { float u = a[k]; y[k] = EXPR; } } \
    else if (sa == 0 && sb == 1) { float u = a[0]; for (k = 0; k < n; k++) { float v = b[k]; y[k] = EXPR; } } \
    else { for (k = 0; k < n; k++) { float u = a[(size_t)k * sa], v = b[(size_t)k * sb]; y[k] = EXPR; } }

/* four values of a strided operand (stride 0: one value repeated) */
static inline vf4 load_strided(const float* p, int s, int k) {
    float t[4];
    int i;
    if (s == 1) return vf_load(p + k);
    if (s == 0) return vf_dup(p[0]);
    for (i = 0; i < 4; i++) t[i] = p[(size_t)(k + i) * s];
    return vf_load(t);
}

static void pow_row(const float* a, int sa, const float* b, int sb, float* y, int n) {
    int k = 0;
    if (sb == 0 && b[0] == 2.f) {   /* the common squares: no log/exp */
        if (sa == 1) for (; k < n; k++) y[k] = a[k] * a[k];
        else for (; k < n; k++) { float u = a[(size_t)k * sa]; y[k] = u * u; }
        return;
    }
    for (; k + 4 <= n; k += 4) vf_store(y + k, v_pow(load_strided(a, sa, k), load_strided(b, sb, k)));
    if (k < n) {
        float ta[4] = {1.f, 1.f, 1.f, 1.f}, tb[4] = {1.f, 1.f, 1.f, 1.f}, ty[4];
        int i;
        for (i = 0; k + i < n; i++) { ta[i] = a[(size_t)(k + i) * sa]; tb[i] = b[(size_t)(k + i) * sb]; }
        vf_store(ty, v_pow(vf_load(ta), vf_load(tb)));
        for (i = 0; k + i < n; i++) y[k + i] = ty[i];
    }
}

static void bin_row(int op, const float* a, int sa, const float* b, int sb, float* y, int n) {
    int k;
    switch (op) {
    case OXK_BIN_ADD: BIN_LOOPS(u + v) break;
    case OXK_BIN_SUB: BIN_LOOPS(u - v) break;
    case OXK_BIN_MUL: BIN_LOOPS(u * v) break;
    case OXK_BIN_POW: pow_row(a, sa, b, sb, y, n); break;
    case OXK_BIN_MAX: BIN_LOOPS((u > v || u != u) ? u : v) break;
    case OXK_BIN_MIN: BIN_LOOPS((u < v || u != u) ? u : v) break;
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
    if (!g || g->op < OXK_BIN_ADD || g->op > OXK_BIN_MIN || g->d0 < 0 || g->d1 < 0 || g->d2 < 0)
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
