/* elementwise.c - the pointwise ops (issues #16, #17): the elementwise functions (oxk.h OXK_ACT_*:
 * activations and unary math) over n floats, which are also every GEMM / convolution epilogue
 * (oxk_act_row), and float32 Add / Sub / Mul / Div / Pow / Max / Min over up to three broadcast
 * axes.
 *
 * The math (exp, expm1, log, tanh, sigmoid, erf, erfc) is written once, four lanes at a time in
 * vec.h's operations; a single value (oxk_act_scalar, a row's tail) runs the same vector code on a
 * broadcast register, so a value gets the same bits wherever it sits in a row, in a tile, or in the
 * reference kernels. Accuracy (tests/edge/test_engine_elementwise.py measures it against float64):
 * exp, log, sigmoid, tanh, erf within a few ulp over the whole float range, NaN propagated, the
 * infinities and zeros as C99's functions give them. Work is split into fixed chunks that do not
 * depend on the thread count, so results are bitwise-equal for any number of threads. */
#include "oxk.h"
#include "vec.h"

#define CHUNK 16384   /* floats per task when a run is split across the pool */

/* ------------------------------------------------------------------------- vector math */

static inline vf4 v_bits(int32_t b) { return vi_float(vi_dup(b)); }
static inline vf4 v_abs(vf4 x) { return vi_float(vi_and(vf_bits(x), vi_dup(0x7fffffff))); }
static inline vf4 v_neg(vf4 x) { return vi_float(vi_xor(vf_bits(x), vi_dup((int32_t)0x80000000u))); }
/* r where x is a number, x (its NaN) where x is NaN */
static inline vf4 v_keep_nan(vf4 x, vf4 r) { return vf_sel(vf_eq(x, x), r, x); }
static inline vf4 v_copysign(vf4 mag, vf4 sgn) {
    return vi_float(vi_or(vf_bits(v_abs(mag)), vi_and(vf_bits(sgn), vi_dup((int32_t)0x80000000u))));
}

/* exp(x) = (1 + q) * 2^n with |x - n ln2| <= ln2 / 2: q and n (x clamped to [-104, 89], where exp
 * is 0 or infinite in float; Cody-Waite reduction, Cephes expf's polynomial, about 1 ulp). For
 * |x| < ln2 / 2, n is 0 and q = x + x^2 p(x): expm1 without cancellation. */
static inline vf4 v_exp_q(vf4 x, vi4* n) {
    const vf4 magic = vf_dup(12582912.f);   /* 1.5 * 2^23: adding it rounds to an integer */
    vf4 t, k, r, p;
    x = vf_min(vf_max(x, vf_dup(-104.f)), vf_dup(89.f));
    t = vf_fma(magic, x, vf_dup(1.44269504088896341f));
    k = vf_sub(t, magic);
    *n = vi_sub(vf_bits(t), vf_bits(magic));
    r = vf_sub(vf_sub(x, vf_mul(k, vf_dup(0.693359375f))), vf_mul(k, vf_dup(-2.12194440e-4f)));
    p = vf_fma(vf_dup(1.3981999507e-3f), r, vf_dup(1.9875691500e-4f));
    p = vf_fma(vf_dup(8.3334519073e-3f), r, p);
    p = vf_fma(vf_dup(4.1665795894e-2f), r, p);
    p = vf_fma(vf_dup(1.6666665459e-1f), r, p);
    p = vf_fma(vf_dup(5.0000001201e-1f), r, p);
    return vf_fma(r, vf_mul(r, r), p);
}

/* v * 2^n for n in [-150, 128], v in [0.5, 2] (two normal factors: results down to the denormals
 * round once). */
static inline vf4 v_ldexp(vf4 v, vi4 n) {
    vi4 n1 = vi_sra(n, 1), n2 = vi_sub(n, n1);
    vf4 s1 = vi_float(vi_shl(vi_add(n1, vi_dup(127)), 23)), s2 = vi_float(vi_shl(vi_add(n2, vi_dup(127)), 23));
    return vf_mul(vf_mul(v, s1), s2);
}

static inline vf4 v_exp(vf4 x) {
    vi4 n;
    vf4 q = v_exp_q(x, &n);
    return v_keep_nan(x, v_ldexp(vf_add(vf_dup(1.f), q), n));
}

/* exp(x) - 1, relative to the result also near 0 */
static inline vf4 v_expm1(vf4 x) {
    vi4 n;
    vf4 q = v_exp_q(x, &n);
    vf4 big = vf_sub(v_ldexp(vf_add(vf_dup(1.f), q), n), vf_dup(1.f));
    return v_keep_nan(x, vf_sel(vi_eq(n, vi_dup(0)), q, big));
}

/* log(x): x = m 2^e with m in [sqrt(1/2), sqrt(2)), log m = f - f^2/2 + s (f^2/2 + R(s^2)) with
 * f = m - 1, s = f / (2 + f) (fdlibm's logf), e ln2 in two parts. log(0) = -inf, log(x < 0) = NaN. */
static inline vf4 v_log(vf4 x) {
    vm4 tiny = vf_lt(x, vf_dup(1.17549435e-38f));
    vf4 xs = vf_sel(tiny, vf_mul(x, vf_dup(16777216.f)), x);   /* denormals: scale by 2^24 */
    vi4 b = vf_bits(xs);
    vi4 e = vi_sub(vi_sra(b, 23), vi_dup(127));
    vf4 m = vi_float(vi_or(vi_and(b, vi_dup(0x007fffff)), vi_dup(0x3f800000)));
    vm4 hi = vf_lt(vf_dup(1.41421356f), m);
    vf4 ef, f, s, z, R, hfsq, r;
    m = vf_sel(hi, vf_mul(m, vf_dup(0.5f)), m);
    ef = vf_add(vi_cvt(e), vf_sel(hi, vf_dup(1.f), vf_dup(0.f)));
    ef = vf_sub(ef, vf_sel(tiny, vf_dup(24.f), vf_dup(0.f)));
    f = vf_sub(m, vf_dup(1.f));
    s = vf_div(f, vf_add(vf_dup(2.f), f));
    z = vf_mul(s, s);
    R = vf_fma(vf_dup(0.28498786688f), z, vf_dup(0.24279078841f));
    R = vf_fma(vf_dup(0.40000972152f), z, R);
    R = vf_mul(z, vf_fma(vf_dup(0.66666662693f), z, R));
    hfsq = vf_mul(vf_dup(0.5f), vf_mul(f, f));
    /* e ln2_hi - ((hfsq - (s (hfsq + R) + e ln2_lo)) - f) */
    r = vf_fma(vf_mul(ef, vf_dup(9.0580006145e-06f)), s, vf_add(hfsq, R));
    r = vf_sub(vf_sub(hfsq, r), f);
    r = vf_sub(vf_mul(ef, vf_dup(6.9313812256e-01f)), r);
    r = vf_sel(vf_eq(x, vf_dup(0.f)), vf_dup(-OXK_INFINITY), r);
    r = vf_sel(vf_lt(x, vf_dup(0.f)), v_bits(0x7fc00000), r);
    r = vf_sel(vf_eq(x, vf_dup(OXK_INFINITY)), x, r);
    return v_keep_nan(x, r);
}

/* log(1 + u) for u >= 0: log(w) corrected by the rounding of w = 1 + u */
static inline vf4 v_log1p_pos(vf4 u) {
    vf4 w = vf_add(vf_dup(1.f), u);
    vf4 c = vf_div(vf_sub(vf_sub(w, vf_dup(1.f)), u), w);
    vf4 r = vf_sub(v_log(w), c);
    return vf_sel(vf_eq(w, vf_dup(OXK_INFINITY)), w, r);
}

/* num / (1 + e) with e = exp(-|x|), num = 1 (x >= 0) or e (x < 0): sigmoid(x), accurate to the
 * denormals on both sides (one rounding of the ratio). */
static inline vf4 v_sigmoid(vf4 x) {
    vf4 e = v_exp(v_neg(v_abs(x)));
    vf4 num = vf_sel(vf_lt(x, vf_dup(0.f)), e, vf_dup(1.f));
    return v_keep_nan(x, vf_div(num, vf_add(vf_dup(1.f), e)));
}

/* tanh: x + x^3 P(x^2) for |x| < 0.625 (Cephes tanhf), else 1 - 2 / (exp(2|x|) + 1) with the sign */
static inline vf4 v_tanh(vf4 x) {
    vf4 a = v_abs(x), z = vf_mul(x, x), p, small, big;
    p = vf_fma(vf_dup(2.06390887954e-2f), z, vf_dup(-5.70498872745e-3f));
    p = vf_fma(vf_dup(-5.37397155531e-2f), z, p);
    p = vf_fma(vf_dup(1.33314422036e-1f), z, p);
    p = vf_fma(vf_dup(-3.33332819422e-1f), z, p);
    small = vf_fma(x, vf_mul(z, x), p);
    big = vf_sub(vf_dup(1.f), vf_div(vf_dup(2.f), vf_add(v_exp(vf_add(a, a)), vf_dup(1.f))));
    return v_keep_nan(x, v_copysign(vf_sel(vf_lt(a, vf_dup(0.625f)), small, big), x));
}

/* erf(a) / a for |a| <= 1 as a polynomial in a^2 (fitted: relative error 1.3e-9) */
static inline vf4 v_erf_small(vf4 a) {
    vf4 z = vf_mul(a, a), p = vf_fma(vf_dup(-0.000801020302f), z, vf_dup(7.85388984e-05f));
    p = vf_fma(vf_dup(0.00518832868f), z, p);
    p = vf_fma(vf_dup(-0.0268538129f), z, p);
    p = vf_fma(vf_dup(0.112835854f), z, p);
    p = vf_fma(vf_dup(-0.37612626f), z, p);
    p = vf_fma(vf_dup(1.12837911f), z, p);
    return vf_mul(a, p);
}

/* erfc(a) = m * e for a >= 1 (0 from 10 on, where erfc is below float's smallest denormal):
 * exp(-a^2) G(1/a) / a, G fitted in 1/a - 0.55 (relative error 4e-8), exp(-a^2) as
 * exp(-h^2) exp(-(a - h)(a + h)) with h = a to 12 bits, so h^2 is exact. *e = exp(-h^2), the
 * factor that may be denormal: a caller scales m first, so a denormal result rounds once. */
static inline vf4 v_erfc_tail(vf4 a, vf4* e_out) {
    vf4 t, g, h, c = vf_min(vf_max(a, vf_dup(1.f)), vf_dup(10.f));
    t = vf_div(vf_dup(1.f), c);
    g = vf_sub(t, vf_dup(0.55f));
    t = vf_fma(vf_dup(-0.0294122677f), g, vf_dup(-0.0530907921f));
    t = vf_fma(vf_dup(0.1081696f), g, t);
    t = vf_fma(vf_dup(-0.0739276558f), g, t);
    t = vf_fma(vf_dup(0.00921670068f), g, t);
    t = vf_fma(vf_dup(0.0510490686f), g, t);
    t = vf_fma(vf_dup(-0.096883513f), g, t);
    t = vf_fma(vf_dup(0.0983145759f), g, t);
    t = vf_fma(vf_dup(-0.020366393f), g, t);
    t = vf_fma(vf_dup(-0.170034677f), g, t);
    t = vf_fma(vf_dup(0.50235343f), g, t);
    h = vi_float(vi_and(vf_bits(c), vi_dup((int32_t)0xfffff000u)));
    *e_out = vf_sel(vf_lt(a, vf_dup(10.f)), v_exp(v_neg(vf_mul(h, h))), vf_dup(0.f));
    return vf_div(vf_mul(v_exp(vf_mul(vf_sub(h, c), vf_add(c, h))), t), c);
}

static inline vf4 v_erf(vf4 x) {
    vf4 a = v_abs(x), e, m = v_erfc_tail(a, &e);
    vf4 r = vf_sel(vf_lt(a, vf_dup(1.f)), v_erf_small(a), vf_sub(vf_dup(1.f), vf_mul(m, e)));
    return v_keep_nan(x, v_copysign(r, x));
}

/* x/2 (1 + erf(x / sqrt 2)); for x / sqrt 2 <= -1 as x/2 erfc(|x| / sqrt 2), without cancellation */
static inline vf4 v_gelu(vf4 x) {
    vf4 z = vf_mul(x, vf_dup(0.70710678118654752f)), a = v_abs(z);
    vm4 small = vf_lt(a, vf_dup(1.f));
    vf4 hx = vf_mul(vf_dup(0.5f), x), es = v_erf_small(a), e, m = v_erfc_tail(a, &e);
    vf4 pos = vf_mul(hx, vf_add(vf_dup(1.f), vf_sel(small, es, vf_sub(vf_dup(1.f), vf_mul(m, e)))));
    vf4 neg = vf_sel(small, vf_mul(hx, vf_sub(vf_dup(1.f), es)), vf_mul(vf_mul(hx, m), e));
    return v_keep_nan(x, vf_sel(vf_lt(z, vf_dup(0.f)), neg, pos));
}

/* x * sigmoid(2 sqrt(2 / pi) (x + 0.044715 x^3)): the tanh form of Gelu, 1 + tanh(u) = 2 sigmoid(2u) */
static inline vf4 v_gelu_tanh(vf4 x) {
    vf4 u = vf_mul(vf_dup(1.5957691216057308f), vf_fma(x, vf_mul(vf_dup(0.044715f), x), vf_mul(x, x)));
    return vf_mul(x, v_sigmoid(u));
}

static inline vf4 v_hard_sigmoid(vf4 x, vf4 alpha, vf4 beta) {
    vf4 t = vf_fma(beta, alpha, x);
    return v_keep_nan(t, vf_min(vf_max(t, vf_dup(0.f)), vf_dup(1.f)));
}

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

static inline __attribute__((always_inline)) vf4 act4(vf4 v, int act, vf4 p0, vf4 p1) {
    switch (act) {
    case OXK_ACT_RELU: return vf_min(vf_max(v, vf_dup(0.f)), vf_dup(OXK_INFINITY));
    case OXK_ACT_CLIP: return vf_min(vf_max(v, p0), p1);
    case OXK_ACT_SIGMOID: return v_sigmoid(v);
    case OXK_ACT_GELU_TANH: return v_gelu_tanh(v);
    case OXK_ACT_LEAKY_RELU: return vf_sel(vf_le(vf_dup(0.f), v), v, vf_mul(v, p0));
    case OXK_ACT_TANH: return v_tanh(v);
    case OXK_ACT_EXP: return v_exp(v);
    case OXK_ACT_LOG: return v_log(v);
    case OXK_ACT_SQRT: return vf_sqrt(v);
    case OXK_ACT_ABS: return v_abs(v);
    case OXK_ACT_NEG: return v_neg(v);
    case OXK_ACT_RECIPROCAL: return vf_div(vf_dup(1.f), v);
    case OXK_ACT_ERF: return v_erf(v);
    case OXK_ACT_HARD_SIGMOID: return v_hard_sigmoid(v, p0, p1);
    case OXK_ACT_HARD_SWISH: return vf_mul(v, v_hard_sigmoid(v, vf_dup(1.f / 6.f), vf_dup(0.5f)));
    case OXK_ACT_ELU: return vf_sel(vf_lt(vf_dup(0.f), v), v, vf_mul(p0, v_expm1(v)));
    case OXK_ACT_SOFTPLUS:
        return v_keep_nan(v, vf_add(vf_max(v, vf_dup(0.f)), v_log1p_pos(v_exp(v_neg(v_abs(v))))));
    case OXK_ACT_GELU: return v_gelu(v);
    case OXK_ACT_SILU: return vf_mul(v, v_sigmoid(v));
    default: return v;
    }
}

float oxk_act_scalar(float v, int act, float p0, float p1) {
    float t[4];
    vf_store(t, act4(vf_dup(v), act, vf_dup(p0), vf_dup(p1)));
    return t[0];
}

#define ACT_LOOP(CODE) \
    case CODE: for (; i + 4 <= n; i += 4) vf_store(y + i, act4(vf_load(y + i), CODE, vp0, vp1)); break;

void oxk_act_row(float* y, int n, int act, float p0, float p1) {
    vf4 vp0 = vf_dup(p0), vp1 = vf_dup(p1);
    int i = 0;
    if (act == OXK_ACT_NONE) return;
    switch (act) {   /* one loop per function, each with its code inlined */
    ACT_LOOP(OXK_ACT_RELU) ACT_LOOP(OXK_ACT_CLIP) ACT_LOOP(OXK_ACT_SIGMOID) ACT_LOOP(OXK_ACT_GELU_TANH)
    ACT_LOOP(OXK_ACT_LEAKY_RELU) ACT_LOOP(OXK_ACT_TANH) ACT_LOOP(OXK_ACT_EXP) ACT_LOOP(OXK_ACT_LOG)
    ACT_LOOP(OXK_ACT_SQRT) ACT_LOOP(OXK_ACT_ABS) ACT_LOOP(OXK_ACT_NEG) ACT_LOOP(OXK_ACT_RECIPROCAL)
    ACT_LOOP(OXK_ACT_ERF) ACT_LOOP(OXK_ACT_HARD_SIGMOID) ACT_LOOP(OXK_ACT_HARD_SWISH) ACT_LOOP(OXK_ACT_ELU)
    ACT_LOOP(OXK_ACT_SOFTPLUS) ACT_LOOP(OXK_ACT_GELU) ACT_LOOP(OXK_ACT_SILU)
    default: return;
    }
    if (i < n) {   /* the tail through the same vector code */
        float t[4] = {0.f, 0.f, 0.f, 0.f};
        int k;
        for (k = 0; i + k < n; k++) t[k] = y[i + k];
        vf_store(t, act4(vf_load(t), act, vp0, vp1));
        for (k = 0; i + k < n; k++) y[i + k] = t[k];
    }
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
