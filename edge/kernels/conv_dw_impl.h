/* conv_dw_impl.h - the depthwise inner loop (conv_dw.h), written once for every vector width.
 * The includer defines DW_NAME (the function), VT, VW (float lanes), V_LOAD, V_STORE, V_SET1,
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
