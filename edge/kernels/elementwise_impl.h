/* elementwise_impl.h - the elementwise functions (oxk.h OXK_ACT_*), written once for every vector width.
 *
 * Included by elementwise.c (vec.h's 4-lane vf4, every target) and, on x86-64, by elementwise_avx2.c
 * (8 lanes) and elementwise_avx512.c (16 lanes), each compiled with its ISA's flags; elementwise.c's
 * oxk_act_row runs the one the library chose at load (the SGEMM core's ISA, gemm_isa.h). The
 * includer defines
 *   VF, VI, VM   float, int32 and mask vectors of VW lanes
 *   ACT_ROW      the name of the row function this file defines (ACT_ROW_LINKAGE: its linkage)
 * and, on those types, vec.h's operations under vec.h's names: vf_load vf_store vf_dup vf_add
 * vf_sub vf_mul vf_div vf_fma(acc, a, b) = acc + a b, vf_sqrt vf_max vf_min (SSE semantics: the
 * second operand when either is NaN), comparisons vf_lt vf_le vf_eq vi_eq giving masks,
 * vm_and vm_or vm_all (every lane set), vf_sel(m, a, b) = m ? a : b, vf_bits / vi_float (the bits,
 * no conversion), vi_cvt (int to float), vi_dup vi_add vi_sub vi_and vi_or vi_xor, vi_shl(a, n)
 * vi_sra(a, n).
 *
 * Every lane is computed from its own value alone (a branch only skips work no lane of the
 * vector needs), and a row's tail goes through the same vector code on a zero-padded vector, so a
 * value gets the same bits wherever it sits: in a row, a tile, a tail, or on its own
 * (oxk_act_scalar). Widths differ only in how many lanes run at once: with FMA (AVX2, AVX-512,
 * NEON) the bits are the same at any width; the SSE2 baseline and wasm round vf_fma twice.
 * Accuracy (tests/edge/test_engine_elementwise.py measures it against float64 for every ISA):
 * exp, log, sigmoid, tanh, erf within about 1.5 ulp over the whole float range, NaN propagated,
 * the infinities and zeros as C99's functions give them. */

/* ------------------------------------------------------------------------- vector math */

static inline VF v_bits(int32_t b) { return vi_float(vi_dup(b)); }
static inline VF v_abs(VF x) { return vi_float(vi_and(vf_bits(x), vi_dup(0x7fffffff))); }
static inline VF v_neg(VF x) { return vi_float(vi_xor(vf_bits(x), vi_dup((int32_t)0x80000000u))); }
static inline VF v_nabs(VF x) { return vi_float(vi_or(vf_bits(x), vi_dup((int32_t)0x80000000u))); }   /* -|x| */
/* r where x is a number, x (its NaN) where x is NaN */
static inline VF v_keep_nan(VF x, VF r) { return vf_sel(vf_eq(x, x), r, x); }
static inline VF v_copysign(VF mag, VF sgn) {
    return vi_float(vi_or(vf_bits(v_abs(mag)), vi_and(vf_bits(sgn), vi_dup((int32_t)0x80000000u))));
}

/* q = exp(r) - 1 for |r| <= ln2 / 2: r + r^2 p(r), Cephes expf's polynomial (about 1 ulp) */
static inline VF v_exp_poly(VF r) {
    VF p = vf_fma(vf_dup(1.3981999507e-3f), r, vf_dup(1.9875691500e-4f));
    p = vf_fma(vf_dup(8.3334519073e-3f), r, p);
    p = vf_fma(vf_dup(4.1665795894e-2f), r, p);
    p = vf_fma(vf_dup(1.6666665459e-1f), r, p);
    p = vf_fma(vf_dup(5.0000001201e-1f), r, p);
    return vf_fma(r, vf_mul(r, r), p);
}

/* exp(x) = (1 + q) * 2^n with |x - n ln2| <= ln2 / 2: q and n for x in [-104, 89] (callers clamp
 * x there: beyond, exp is 0 or infinite in float; Cody-Waite reduction). For |x| < ln2 / 2, n is 0
 * and q = x + x^2 p(x): expm1 without cancellation. */
static inline VF v_exp_q(VF x, VI* n, VF* k) {
    const VF magic = vf_dup(12582912.f);   /* 1.5 * 2^23: adding it rounds to an integer */
    VF t = vf_fma(magic, x, vf_dup(1.44269504088896341f));
    *k = vf_sub(t, magic);   /* n as an int and as a float (the callers' ldexp uses one) */
    *n = vi_sub(vf_bits(t), vf_bits(magic));
    return v_exp_poly(vf_fma(vf_fma(x, *k, vf_dup(-0.693359375f)), *k, vf_dup(2.12194440e-4f)));
}
/* v * 2^n for n in [-150, 128] (k: n as a float), v in [0.5, 2], rounded once (results down to
 * the denormals): two normal factors, or the includer's act_ldexp(v, k) (AVX-512's scalef, the same
 * bits). */
static inline VF v_ldexp(VF v, VI n, VF k) {
#if defined(act_ldexp)
    (void)n;
    return act_ldexp(v, k);
#else
    (void)k;
    VI n1 = vi_sra(n, 1), n2 = vi_sub(n, n1);
    VF s1 = vi_float(vi_shl(vi_add(n1, vi_dup(127)), 23)), s2 = vi_float(vi_shl(vi_add(n2, vi_dup(127)), 23));
    return vf_mul(vf_mul(v, s1), s2);
#endif
}

/* exp(x) for x in [-104, 89] */
static inline VF v_exp_in_range(VF x) {
    VI n;
    VF k, q = v_exp_q(x, &n, &k);
    return v_ldexp(vf_add(vf_dup(1.f), q), n, k);
}

static inline VF v_exp(VF x) {
    return v_keep_nan(x, v_exp_in_range(vf_min(vf_max(x, vf_dup(-104.f)), vf_dup(89.f))));
}

/* exp(x) for x <= 0 and for x >= 0 (a NaN gives a number: their callers keep NaN themselves) */
static inline VF v_exp_neg(VF x) { return v_exp_in_range(vf_max(x, vf_dup(-104.f))); }
static inline VF v_exp_pos(VF x) { return v_exp_in_range(vf_min(x, vf_dup(89.f))); }

/* exp(x) - 1, relative to the result also near 0 */
static inline VF v_expm1(VF x) {
    VI n;
    VF k, q = v_exp_q(vf_min(vf_max(x, vf_dup(-104.f)), vf_dup(89.f)), &n, &k);
    VF big = vf_sub(v_ldexp(vf_add(vf_dup(1.f), q), n, k), vf_dup(1.f));
    return v_keep_nan(x, vf_sel(vi_eq(n, vi_dup(0)), q, big));
}

/* log(x): x = m 2^e with m in [sqrt(1/2), sqrt(2)), log m = f - f^2/2 + s (f^2/2 + R(s^2)) with
 * f = m - 1, s = f / (2 + f) (fdlibm's logf), e ln2 in two parts. log(0) = -inf, log(x < 0) = NaN. */
static inline VF v_log(VF x) {
    VM tiny = vf_lt(x, vf_dup(1.17549435e-38f));
    VF xs = vf_sel(tiny, vf_mul(x, vf_dup(16777216.f)), x);   /* denormals: scale by 2^24 */
    VI b = vf_bits(xs);
    VI e = vi_sub(vi_sra(b, 23), vi_dup(127));
    VF m = vi_float(vi_or(vi_and(b, vi_dup(0x007fffff)), vi_dup(0x3f800000)));
    VM hi = vf_lt(vf_dup(1.41421356f), m);
    VF ef, f, s, z, R, hfsq, r;
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
static inline VF v_log1p_pos(VF u) {
    VF w = vf_add(vf_dup(1.f), u);
    VF c = vf_div(vf_sub(vf_sub(w, vf_dup(1.f)), u), w);
    VF r = vf_sub(v_log(w), c);
    return vf_sel(vf_eq(w, vf_dup(OXK_INFINITY)), w, r);
}

/* num / (1 + e) with e = exp(-|x|), num = 1 (x >= 0) or e (x < 0): sigmoid(x), accurate to the
 * denormals on both sides (one rounding of the ratio). A number for NaN (1): x sigmoid(x) is NaN. */
static inline VF v_sigmoid_num(VF x) {
    VF e = v_exp_neg(v_nabs(x));
    VF num = vf_sel(vf_lt(x, vf_dup(0.f)), e, vf_dup(1.f));
    return vf_div(num, vf_add(vf_dup(1.f), e));
}

static inline VF v_sigmoid(VF x) { return v_keep_nan(x, v_sigmoid_num(x)); }

/* tanh: x + x^3 P(x^2) for |x| < 0.625 (Cephes tanhf), else 1 - 2 / (exp(2|x|) + 1) with the sign */
static inline VF v_tanh(VF x) {
    VF a = v_abs(x), z = vf_mul(x, x), p, small, big;
    p = vf_fma(vf_dup(2.06390887954e-2f), z, vf_dup(-5.70498872745e-3f));
    p = vf_fma(vf_dup(-5.37397155531e-2f), z, p);
    p = vf_fma(vf_dup(1.33314422036e-1f), z, p);
    p = vf_fma(vf_dup(-3.33332819422e-1f), z, p);
    small = vf_fma(x, vf_mul(z, x), p);
    big = vf_sub(vf_dup(1.f), vf_div(vf_dup(2.f), vf_add(v_exp_pos(vf_add(a, a)), vf_dup(1.f))));
    return v_keep_nan(x, v_copysign(vf_sel(vf_lt(a, vf_dup(0.625f)), small, big), x));
}

/* erf(z) for |z| <= 1: z P(z^2) (fitted: relative error 1.3e-9); odd, -0 stays -0 */
static inline VF v_erf_small(VF z) {
    VF s = vf_mul(z, z), p = vf_fma(vf_dup(-0.000801020302f), s, vf_dup(7.85388984e-05f));
    p = vf_fma(vf_dup(0.00518832868f), s, p);
    p = vf_fma(vf_dup(-0.0268538129f), s, p);
    p = vf_fma(vf_dup(0.112835854f), s, p);
    p = vf_fma(vf_dup(-0.37612626f), s, p);
    p = vf_fma(vf_dup(1.12837911f), s, p);
    return vf_mul(z, p);
}

/* exp(x + lo) = (1 + q) 2^n for x = -h^2 with h >= 1 of 12 significant bits (x - n ln2_hi is
 * exact) and |lo| <= x / 512: the low part joins the reduced argument before any rounding. */
static inline VF v_exp_q_split(VF x, VF lo, VI* n, VF* k) {
    const VF magic = vf_dup(12582912.f);
    VF t = vf_fma(magic, vf_add(x, lo), vf_dup(1.44269504088896341f));
    *k = vf_sub(t, magic);
    *n = vi_sub(vf_bits(t), vf_bits(magic));
    return v_exp_poly(vf_fma(vf_add(vf_fma(x, *k, vf_dup(-0.693359375f)), lo), *k, vf_dup(2.12194440e-4f)));
}

/* u^2 = hi + lo with hi exact: h = u to 12 bits, hi = h^2, lo = (u - h)(u + h) (|lo| <= u^2 / 1024) */
static inline VF v_square_split(VF u, VF* lo) {
    VF h = vi_float(vi_and(vf_bits(u), vi_dup((int32_t)0xfffff000u)));
    *lo = vf_mul(vf_sub(u, h), vf_add(u, h));
    return vf_mul(h, h);
}

/* erfc(a) = V 2^n for a in [1, 10] from t = 1 / a and a^2 = hi + lo (hi exact, as
 * v_square_split gives): exp(-a^2) G(t) t, G fitted in t - 0.55 (relative error 4e-8), exp(-a^2)
 * in one reduction of -hi - lo. V is normal: a caller scales it (ldexp) last, so a denormal result
 * rounds once; V = 0 where `live` is clear (a >= 10: erfc is below float's smallest denormal). */
static inline VF v_erfc_tail(VF t, VF hi, VF lo, VM live, VI* n, VF* k) {
    VF g = vf_sub(t, vf_dup(0.55f)), p, q;
    p = vf_fma(vf_dup(-0.0294122677f), g, vf_dup(-0.0530907921f));
    p = vf_fma(vf_dup(0.1081696f), g, p);
    p = vf_fma(vf_dup(-0.0739276558f), g, p);
    p = vf_fma(vf_dup(0.00921670068f), g, p);
    p = vf_fma(vf_dup(0.0510490686f), g, p);
    p = vf_fma(vf_dup(-0.096883513f), g, p);
    p = vf_fma(vf_dup(0.0983145759f), g, p);
    p = vf_fma(vf_dup(-0.020366393f), g, p);
    p = vf_fma(vf_dup(-0.170034677f), g, p);
    p = vf_fma(vf_dup(0.50235343f), g, p);
    q = v_exp_q_split(v_neg(hi), v_neg(lo), n, k);
    p = vf_sel(live, vf_mul(p, t), vf_dup(0.f));
    return vf_fma(p, p, q);   /* p (1 + q) */
}

/* erf: z P(z^2) for |z| < 1, else 1 - erfc(|z|) with z's sign; the erfc part only where a lane
 * needs it */
static inline VF v_erf(VF x) {
    VF a = v_abs(x), r = v_erf_small(x);
    VM small = vf_lt(a, vf_dup(1.f));
    if (!vm_all(small)) {
        VI n;
        VF k, c = vf_min(vf_max(a, vf_dup(1.f)), vf_dup(10.f)), lo, hi = v_square_split(c, &lo);
        VF v = v_erfc_tail(vf_div(vf_dup(1.f), c), hi, lo, vf_lt(a, vf_dup(10.f)), &n, &k);
        r = vf_sel(small, r, v_copysign(vf_sub(vf_dup(1.f), v_ldexp(v, n, k)), x));
    }
    return v_keep_nan(x, r);
}

/* Gelu, x Phi(x) = x/2 (1 + erf(z)) with z = x / sqrt 2: x/2 + x/2 erf(z) for |z| < 1; for
 * z <= -1 x/2 erfc(|z|) (no cancellation; x/2 joins erfc's mantissa before its scaling, so a
 * denormal result rounds once), for z >= 1 x - x/2 erfc(z). erfc's exp(-x^2 / 2) takes x^2 split
 * from x itself (z's rounding would cost |x|^2 / 2 half-ulps). */
static inline VF v_gelu(VF x) {
    VF z = vf_mul(x, vf_dup(0.70710678118654752f)), a = v_abs(z), hx = vf_mul(vf_dup(0.5f), x);
    VF r = vf_mul(hx, vf_add(vf_dup(1.f), v_erf_small(z)));
    VM small = vf_lt(a, vf_dup(1.f));
    if (!vm_all(small)) {
        VI n;
        VF k;
        VM neg = vf_lt(z, vf_dup(0.f));
        VF u = vf_min(vf_max(v_abs(x), vf_dup(1.41421356f)), vf_dup(14.1421356f)), lo, hi = v_square_split(u, &lo);
        VF v = v_erfc_tail(vf_div(vf_dup(1.41421356237309505f), u), vf_mul(hi, vf_dup(0.5f)),
                           vf_mul(lo, vf_dup(0.5f)), vf_lt(a, vf_dup(10.f)), &n, &k);
        VF e = v_ldexp(vf_sel(neg, vf_mul(hx, v), v), n, k);
        VF t = vf_sel(neg, e, vf_fma(x, v_neg(hx), e));
        r = vf_sel(small, r, vf_sel(vf_eq(x, vf_dup(OXK_INFINITY)), x, t));
    }
    return v_keep_nan(x, r);
}

/* x * sigmoid(2 sqrt(2 / pi) (x + 0.044715 x^3)): the tanh form of Gelu, 1 + tanh(u) = 2 sigmoid(2u) */
static inline VF v_gelu_tanh(VF x) {
    VF u = vf_mul(vf_dup(1.5957691216057308f), vf_fma(x, vf_mul(vf_dup(0.044715f), x), vf_mul(x, x)));
    return vf_mul(x, v_sigmoid_num(u));
}

static inline VF v_hard_sigmoid(VF x, VF alpha, VF beta) {
    VF t = vf_fma(beta, alpha, x);
    return v_keep_nan(t, vf_min(vf_max(t, vf_dup(0.f)), vf_dup(1.f)));
}

/* ------------------------------------------------------------------------- the functions */

static inline __attribute__((always_inline)) VF act_v(VF v, int act, VF p0, VF p1) {
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
        return v_keep_nan(v, vf_add(vf_max(v, vf_dup(0.f)), v_log1p_pos(v_exp_neg(v_nabs(v)))));
    case OXK_ACT_GELU: return v_gelu(v);
    case OXK_ACT_SILU: return vf_mul(v, v_sigmoid_num(v));
    default: return v;
    }
}

#define ACT_LOOP(CODE) \
    case CODE: for (; i + VW <= n; i += VW) vf_store(y + i, act_v(vf_load(y + i), CODE, vp0, vp1)); break;

/* y[0..n) = act(y) in place: one loop per function, each with its code inlined; the tail through
 * the same vector code on a zero-padded vector. */
ACT_ROW_LINKAGE void ACT_ROW(float* y, int n, int act, float p0, float p1) {
    VF vp0 = vf_dup(p0), vp1 = vf_dup(p1);
    int i = 0;
    switch (act) {
    ACT_LOOP(OXK_ACT_RELU) ACT_LOOP(OXK_ACT_CLIP) ACT_LOOP(OXK_ACT_SIGMOID) ACT_LOOP(OXK_ACT_GELU_TANH)
    ACT_LOOP(OXK_ACT_LEAKY_RELU) ACT_LOOP(OXK_ACT_TANH) ACT_LOOP(OXK_ACT_EXP) ACT_LOOP(OXK_ACT_LOG)
    ACT_LOOP(OXK_ACT_SQRT) ACT_LOOP(OXK_ACT_ABS) ACT_LOOP(OXK_ACT_NEG) ACT_LOOP(OXK_ACT_RECIPROCAL)
    ACT_LOOP(OXK_ACT_ERF) ACT_LOOP(OXK_ACT_HARD_SIGMOID) ACT_LOOP(OXK_ACT_HARD_SWISH) ACT_LOOP(OXK_ACT_ELU)
    ACT_LOOP(OXK_ACT_SOFTPLUS) ACT_LOOP(OXK_ACT_GELU) ACT_LOOP(OXK_ACT_SILU)
    default: return;
    }
    if (i < n) {
        float t[VW];
        int k;
        for (k = 0; k < VW; k++) t[k] = i + k < n ? y[i + k] : 0.f;
        vf_store(t, act_v(vf_load(t), act, vp0, vp1));
        for (k = 0; i + k < n; k++) y[i + k] = t[k];
    }
}
#undef ACT_LOOP
