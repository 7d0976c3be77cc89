/* conv_dw_impl.h - the depthwise inner loops (conv_dw.h), written once for every vector width.
 * The includer defines DW_NAME and DW3_NAME (the functions), VT, VW (float lanes), V_LOAD, V_STORE, V_SET1,
 * V_FMA(a, b, acc) = a * b + acc, V_MAX, V_MIN. Four vectors of outputs are accumulated at once
 * over the taps; a 3x3 kernel keeps its 9 weights in registers. */
#include "conv_dw.h"

#define DW_STEP (4 * VW)

static inline VT dw_act(VT v, int act, VT lo, VT hi) {
    if (act == OXK_ACT_RELU) return V_MAX(v, lo);
    if (act == OXK_ACT_CLIP) return V_MIN(V_MAX(v, lo), hi);
    return v;
}

void DW_NAME(const float* base, const size_t* off, int taps, const float* w, float bias,
             int act, float p0, float p1, float* out, int n) {
    const VT vb = V_SET1(bias);
    const VT lo = V_SET1(act == OXK_ACT_CLIP ? p0 : 0.f), hi = V_SET1(p1);
    int q, t;
    if (act != OXK_ACT_RELU && act != OXK_ACT_CLIP) act = OXK_ACT_NONE;
    if (taps == 9) {
        const float *s0 = base + off[0], *s1 = base + off[1], *s2 = base + off[2],
                    *s3 = base + off[3], *s4 = base + off[4], *s5 = base + off[5],
                    *s6 = base + off[6], *s7 = base + off[7], *s8 = base + off[8];
        const VT w0 = V_SET1(w[0]), w1 = V_SET1(w[1]), w2 = V_SET1(w[2]), w3 = V_SET1(w[3]),
                 w4 = V_SET1(w[4]), w5 = V_SET1(w[5]), w6 = V_SET1(w[6]), w7 = V_SET1(w[7]),
                 w8 = V_SET1(w[8]);
        for (q = 0; q < n; q += DW_STEP) {
            VT a0 = vb, a1 = vb, a2 = vb, a3 = vb;
#define DW_TAP(S, WV)                                                      \
            a0 = V_FMA(V_LOAD(S + q), WV, a0);                             \
            a1 = V_FMA(V_LOAD(S + q + VW), WV, a1);                        \
            a2 = V_FMA(V_LOAD(S + q + 2 * VW), WV, a2);                    \
            a3 = V_FMA(V_LOAD(S + q + 3 * VW), WV, a3);
            DW_TAP(s0, w0) DW_TAP(s1, w1) DW_TAP(s2, w2) DW_TAP(s3, w3) DW_TAP(s4, w4)
            DW_TAP(s5, w5) DW_TAP(s6, w6) DW_TAP(s7, w7) DW_TAP(s8, w8)
#undef DW_TAP
            V_STORE(out + q, dw_act(a0, act, lo, hi));
            V_STORE(out + q + VW, dw_act(a1, act, lo, hi));
            V_STORE(out + q + 2 * VW, dw_act(a2, act, lo, hi));
            V_STORE(out + q + 3 * VW, dw_act(a3, act, lo, hi));
        }
        return;
    }
    for (q = 0; q < n; q += DW_STEP) {
        VT a0 = vb, a1 = vb, a2 = vb, a3 = vb;
        for (t = 0; t < taps; t++) {
            const float* s = base + off[t] + q;
            const VT wv = V_SET1(w[t]);
            a0 = V_FMA(V_LOAD(s), wv, a0);
            a1 = V_FMA(V_LOAD(s + VW), wv, a1);
            a2 = V_FMA(V_LOAD(s + 2 * VW), wv, a2);
            a3 = V_FMA(V_LOAD(s + 3 * VW), wv, a3);
        }
        V_STORE(out + q, dw_act(a0, act, lo, hi));
        V_STORE(out + q + VW, dw_act(a1, act, lo, hi));
        V_STORE(out + q + 2 * VW, dw_act(a2, act, lo, hi));
        V_STORE(out + q + 3 * VW, dw_act(a3, act, lo, hi));
    }
}
#undef DW_STEP

#define DW3_RB 4   /* output rows a block keeps in flight (one vector each) */
#define DW3_IN(R, S) ((S) * ((R) - 1) + 3)   /* input rows of R output rows at stride S */

/* Input row ii's three tap columns x0, x1, x2 into the sums of the output rows r it feeds (tap
 * row ii - S r), taps in row-major order. */
static inline __attribute__((always_inline)) void dw3_row_taps(VT* a, VT x0, VT x1, VT x2, const VT* wv,
                                                               int ii, const int R, const int S) {
    int r;
#pragma GCC unroll 4
    for (r = 0; r < R; r++) {
        const int i = ii - S * r;
        if (i >= 0 && i < 3) {
            a[r] = V_FMA(x0, wv[i * 3], a[r]);
            a[r] = V_FMA(x1, wv[i * 3 + 1], a[r]);
            a[r] = V_FMA(x2, wv[i * 3 + 2], a[r]);
        }
    }
}

/* Output rows [0, R) (R a constant after inlining) of the block at out, columns [ow0, ow1) in
 * vectors (the last one moved back to end at ow1: it recomputes some outputs, to the same bits),
 * stride S (1 or 2, a constant). rows[ii] (ii < DW3_IN(R, S)) is input row ii of the block, indexed
 * so that rows[ii][S * ow + k] is tap k's input of column ow; NULL: outside the plane (its taps are
 * skipped, as the phases path adds zeros). Each output sums bias, then its taps in row-major order:
 * the phases path's bits. */
static inline __attribute__((always_inline)) void dw3_cols(const float* const* rows, const VT* wv,
                                                           VT vb, int act, VT lo, VT hi, float* out,
                                                           int OW, const int R, const int S, int ow0,
                                                           int ow1) {
    int ow = ow0, last = 0, r, ii;
    for (;;) {
        VT a[DW3_RB];
        if (ow + VW >= ow1) { ow = ow1 - VW; last = 1; }
#pragma GCC unroll 4
        for (r = 0; r < R; r++) a[r] = vb;
#pragma GCC unroll 9
        for (ii = 0; ii < DW3_IN(R, S); ii++) {   /* input row ii: tap row ii - S r of output row r */
            if (rows[ii]) {
                const float* src = rows[ii] + S * ow;
                VT x0, x1, x2;
                if (S == 1) {
                    x0 = V_LOAD(src); x1 = V_LOAD(src + 1); x2 = V_LOAD(src + 2);
                } else {
                    VT odd2;
                    V_LOAD_DEINT(src, x0, x1);
                    V_LOAD_DEINT(src + 2, x2, odd2);
                    (void)odd2;
                }
                dw3_row_taps(a, x0, x1, x2, wv, ii, R, S);
            }
        }
#pragma GCC unroll 4
        for (r = 0; r < R; r++) V_STORE(out + (size_t)r * OW + ow, dw_act(a[r], act, lo, hi));
        if (last) return;
        ow += VW;
    }
}

/* dw3_cols for each (R, S) the plane loop uses, each compiled once. */
typedef void (*dw3_cols_fn)(const float* const* rows, const VT* wv, VT vb, int act, VT lo, VT hi,
                            float* out, int OW, int ow0, int ow1);
#define DW3_COLS_FN(R, S)                                                                          \
    static void dw3_cols_##R##_##S(const float* const* rows, const VT* wv, VT vb, int act, VT lo,  \
                                   VT hi, float* out, int OW, int ow0, int ow1) {                 \
        dw3_cols(rows, wv, vb, act, lo, hi, out, OW, R, S, ow0, ow1);                             \
    }
DW3_COLS_FN(1, 1) DW3_COLS_FN(4, 1) DW3_COLS_FN(1, 2) DW3_COLS_FN(4, 2)
#undef DW3_COLS_FN

#if defined(V_MASKZ_LOAD)
/* Lanes j with 0 <= c + j < W: a load from column c that stays inside the row. */
static inline unsigned dw3_mask(int c, int W) {
    const int lo = c < 0 ? -c : 0, hi = W - c < VW ? W - c : VW;
    return hi <= lo ? 0u : (unsigned)(((1ull << hi) - 1) & ~((1ull << lo) - 1));
}

/* dw3_cols for the one vector of columns from ow at a border: each load masked to the row's
 * columns [0, W) (rows[ii][S ow + q] is column S ow + q - pl; masked lanes read as zero and are not
 * touched), in place of zero-padded copies: the same sums, so the same bits. */
static inline __attribute__((always_inline)) void dw3_col_masked(const float* const* rows, const VT* wv,
                                                                 VT vb, int act, VT lo, VT hi, float* out,
                                                                 int OW, const int R, const int S, int ow,
                                                                 int W, int pl) {
    VT a[DW3_RB];
    const int c = S * ow - pl;   /* the column of rows[ii][S ow] */
    int r, ii;
#pragma GCC unroll 4
    for (r = 0; r < R; r++) a[r] = vb;
#pragma GCC unroll 9
    for (ii = 0; ii < DW3_IN(R, S); ii++) {
        if (rows[ii]) {
            const float* src = rows[ii] + S * ow;
            VT x0, x1, x2;
            if (S == 1) {
                x0 = V_MASKZ_LOAD(src, dw3_mask(c, W));
                x1 = V_MASKZ_LOAD(src + 1, dw3_mask(c + 1, W));
                x2 = V_MASKZ_LOAD(src + 2, dw3_mask(c + 2, W));
            } else {
                VT odd2;
                V_LOAD_DEINT_MASKZ(src, dw3_mask(c, W), dw3_mask(c + VW, W), x0, x1);
                V_LOAD_DEINT_MASKZ(src + 2, dw3_mask(c + 2, W), dw3_mask(c + 2 + VW, W), x2, odd2);
                (void)odd2;
            }
            dw3_row_taps(a, x0, x1, x2, wv, ii, R, S);
        }
    }
#pragma GCC unroll 4
    for (r = 0; r < R; r++) V_STORE(out + (size_t)r * OW + ow, dw_act(a[r], act, lo, hi));
}
#endif

/* Output rows [oh, oh + R) at stride S: the interior columns [c0, c1) straight from the plane,
 * and one vector at each border: with masked loads where the ISA has them (AVX-512), else from
 * zero-padded copies of the S VW + 2 input columns it reads (copied first, so the interior's work
 * covers their stores' way to the cache before the border vectors load them). */
static inline __attribute__((always_inline)) void dw3_rows(const float* x, int H, int W, int pt,
                                                           int pl, const VT* wv, VT vb, int act,
                                                           VT lo, VT hi, float* out, int OW, int oh,
                                                           const int R, const int S, int c0, int c1) {
    const float* rows[DW3_IN(DW3_RB, 2)];
    const dw3_cols_fn cols = R == 1 ? (S == 1 ? dw3_cols_1_1 : dw3_cols_1_2)
                                    : (S == 1 ? dw3_cols_4_1 : dw3_cols_4_2);
    int ii;
#if !defined(V_MASKZ_LOAD)
    float strip[2][DW3_IN(DW3_RB, 2)][2 * VW + 2];
    const float* srows[2][DW3_IN(DW3_RB, 2)];
    int e, q;
#endif
    for (ii = 0; ii < DW3_IN(R, S); ii++) {
        const int r = S * oh - pt + ii;
        rows[ii] = r >= 0 && r < H ? x + (size_t)r * W - pl : NULL;
    }
#if defined(V_MASKZ_LOAD)
    {   /* the border vectors at 0 and OW - VW masked, the vectors between them on the grid */
        const int L = c0 > 0 ? VW : 0, Rt = c1 < OW ? OW - VW : OW;
        float* o = out + (size_t)oh * OW;
        if (c0 > 0) dw3_col_masked(rows, wv, vb, act, lo, hi, o, OW, R, S, 0, W, pl);
        if (c1 < OW) dw3_col_masked(rows, wv, vb, act, lo, hi, o, OW, R, S, OW - VW, W, pl);
        if (Rt - L >= VW) cols(rows, wv, vb, act, lo, hi, o, OW, L, Rt);
        else if (Rt > L) dw3_col_masked(rows, wv, vb, act, lo, hi, o, OW, R, S, L, W, pl);
    }
#else
    for (e = 0; e < 2; e++) {   /* e 0: columns [0, VW); e 1: [OW - VW, OW) */
        const int first = e ? OW - VW : 0;
        if (e ? c1 >= OW : c0 <= 0) continue;
        for (ii = 0; ii < DW3_IN(R, S); ii++) {
            srows[e][ii] = NULL;
            if (!rows[ii]) continue;
            for (q = 0; q < S * VW + 2; q++) {
                const int col = S * first + q - pl;
                strip[e][ii][q] = col >= 0 && col < W ? rows[ii][S * first + q] : 0.f;
            }
            srows[e][ii] = strip[e][ii] - S * first;
        }
    }
    cols(rows, wv, vb, act, lo, hi, out + (size_t)oh * OW, OW, c0, c1);
    if (c0 > 0) cols(srows[0], wv, vb, act, lo, hi, out + (size_t)oh * OW, OW, 0, VW);
    if (c1 < OW) cols(srows[1], wv, vb, act, lo, hi, out + (size_t)oh * OW, OW, OW - VW, OW);
#endif
}

static inline __attribute__((always_inline)) void dw3_plane(const float* x, int H, int W, int pt,
                                                            int pl, const VT* wv, VT vb, int act,
                                                            VT lo, VT hi, float* out, int OH, int OW,
                                                            const int S, int c0, int c1) {
    int oh;
    for (oh = 0; oh + DW3_RB <= OH; oh += DW3_RB)
        dw3_rows(x, H, W, pt, pl, wv, vb, act, lo, hi, out, OW, oh, DW3_RB, S, c0, c1);
    for (; oh < OH; oh++) dw3_rows(x, H, W, pt, pl, wv, vb, act, lo, hi, out, OW, oh, 1, S, c0, c1);
}

int DW3_NAME(const float* x, int H, int W, int stride, int pt, int pl, const float* w, float bias,
             int act, float p0, float p1, float* out, int OH, int OW) {
    const VT vb = V_SET1(bias);
    const VT lo = V_SET1(act == OXK_ACT_CLIP ? p0 : 0.f), hi = V_SET1(p1);
    /* interior columns: every load of the column's vector inside the row (stride 1: ow - pl >= 0,
     * ow - pl + 2 < W; stride 2: 2 ow - pl >= 0, 2 ow - pl + 3 < W) */
    const int c0 = (pl + stride - 1) / stride;
    const int c1 = (W - 2 + pl) / stride < OW ? (W - 2 + pl) / stride : OW;
    VT wv[9];
    int t;
    if (act != OXK_ACT_RELU && act != OXK_ACT_CLIP) act = OXK_ACT_NONE;
    if ((stride != 1 && stride != 2) || W - 2 + pl < 0 || c1 - c0 < VW || c0 > VW || OW - c1 > VW)
        return 0;
    for (t = 0; t < 9; t++) wv[t] = V_SET1(w[t]);
    if (stride == 1) dw3_plane(x, H, W, pt, pl, wv, vb, act, lo, hi, out, OH, OW, 1, c0, c1);
    else dw3_plane(x, H, W, pt, pl, wv, vb, act, lo, hi, out, OH, OW, 2, c0, c1);
    return 1;
}
#undef DW3_IN
#undef DW3_RB
