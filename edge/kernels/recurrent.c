/* recurrent.c - LSTM and GRU over a whole sequence in one call (issue #17): the input projection
 * of every time step is one GEMM per direction (W packed once, both biases folded in), then each
 * step is one GEMM of the hidden state against R (packed once) and the gate arithmetic in place.
 * Gate orders are ONNX's: LSTM i, o, f, c (peepholes i, o, f); GRU z, r, h. Activations are the
 * defaults (sigmoid, tanh), computed with oxk_act_row as everywhere else in the engine. */
#include "oxk.h"

static void clamp_row(float* v, int n, float c) {
    int i;
    for (i = 0; i < n; i++) v[i] = v[i] < -c ? -c : (v[i] > c ? c : v[i]);
}

size_t oxk_rnn_scratch_floats(const oxk_rnn_args* a) {
    size_t gh;
    if (!a || a->hidden < 1 || a->batch < 1 || a->seq < 0) return 0;
    gh = (size_t)(a->kind == OXK_RNN_LSTM ? 4 : 3) * (size_t)a->hidden;
    /* the projected sequence, h @ R^T, the h and c states, GRU's r*h and h @ Rh^T */
    return (size_t)a->seq * a->batch * gh + (size_t)a->batch * gh + 4 * (size_t)a->batch * a->hidden;
}

static int check_args(const oxk_rnn_args* a) {
    if (!a || (a->kind != OXK_RNN_LSTM && a->kind != OXK_RNN_GRU) || a->seq < 0 || a->batch < 1 ||
        a->input < 1 || a->hidden < 1 || (a->dirs != 1 && a->dirs != 2) || !a->plans)
        return OXK_EARG;
    if (a->has_clip && !(a->clip >= 0.f)) return OXK_EARG;
    return 0;
}

/* One LSTM step's gate arithmetic for one batch row: g = x-projection (+ h @ R^T in gr). */
static void lstm_row(const oxk_rnn_args* a, const float* peep, float* g, const float* gr,
                     float* c, float* h) {
    int H = a->hidden, j;
    float *gi = g, *go = g + H, *gf = g + 2 * H, *gc = g + 3 * H;
    for (j = 0; j < 4 * H; j++) g[j] += gr[j];
    if (peep)
        for (j = 0; j < H; j++) { gi[j] += peep[j] * c[j]; gf[j] += peep[2 * H + j] * c[j]; }
    if (a->has_clip) { clamp_row(gi, H, a->clip); clamp_row(gf, H, a->clip); clamp_row(gc, H, a->clip); }
    oxk_act_row(gi, H, OXK_ACT_SIGMOID, 0.f, 0.f);
    oxk_act_row(gf, H, OXK_ACT_SIGMOID, 0.f, 0.f);
    oxk_act_row(gc, H, OXK_ACT_TANH, 0.f, 0.f);
    for (j = 0; j < H; j++) c[j] = gf[j] * c[j] + gi[j] * gc[j];
    if (peep)
        for (j = 0; j < H; j++) go[j] += peep[H + j] * c[j];
    if (a->has_clip) clamp_row(go, H, a->clip);
    oxk_act_row(go, H, OXK_ACT_SIGMOID, 0.f, 0.f);
    for (j = 0; j < H; j++) gc[j] = c[j];
    oxk_act_row(gc, H, OXK_ACT_TANH, 0.f, 0.f);
    for (j = 0; j < H; j++) h[j] = go[j] * gc[j];
}

/* One direction: the projection, then `seq` steps; Y's rows for this direction, final states. */
static int run_direction(const oxk_rnn_args* a, int d, const float* x, const float* h0, const float* c0,
                         float* y, float* yh, float* yc, float* scratch) {
    int H = a->hidden, B = a->batch, G = a->kind == OXK_RNN_LSTM ? 4 : 3, s, b, j, rc;
    int reverse = a->dirs == 2 ? d : a->reverse;
    size_t gh = (size_t)G * H, bh = (size_t)B * H;
    const oxk_sgemm_plan* pl = a->plans + 3 * d;
    float* xw = scratch;
    float* gr = xw + (size_t)a->seq * B * gh;
    float* h = gr + (size_t)B * gh;
    float* c = h + bh;
    float* rh = c + bh;
    float* hr = rh + bh;
    const float* peep = a->peep ? a->peep + (size_t)d * 3 * H : NULL;
    if (a->seq > 0) {
        rc = oxk_sgemm_run(&pl[0], a->seq * B, x, NULL, xw);
        if (rc) return rc;
    }
    for (j = 0; j < (int)bh; j++) {
        h[j] = h0 ? h0[(size_t)d * bh + j] : 0.f;
        c[j] = c0 ? c0[(size_t)d * bh + j] : 0.f;
    }
    for (s = 0; s < a->seq; s++) {
        int t = reverse ? a->seq - 1 - s : s;
        float* g = xw + (size_t)t * B * gh;
        rc = oxk_sgemm_run(&pl[1], B, h, NULL, gr);
        if (rc) return rc;
        if (a->kind == OXK_RNN_LSTM) {
            for (b = 0; b < B; b++)
                lstm_row(a, peep, g + b * gh, gr + b * gh, c + (size_t)b * H, h + (size_t)b * H);
        } else {
            /* gr holds h @ R_zr^T (B x 2H); z, r = sigmoid(clip(xw_zr + gr)) */
            for (b = 0; b < B; b++) {
                float* gz = g + b * gh;
                for (j = 0; j < 2 * H; j++) gz[j] += gr[(size_t)b * 2 * H + j];
                if (a->has_clip) clamp_row(gz, 2 * H, a->clip);
                oxk_act_row(gz, 2 * H, OXK_ACT_SIGMOID, 0.f, 0.f);
            }
            if (a->linear_before_reset) {   /* hh = xw_h + r * (h @ Rh^T + Rbh) */
                rc = oxk_sgemm_run(&pl[2], B, h, NULL, hr);
                if (rc) return rc;
                for (b = 0; b < B; b++)
                    for (j = 0; j < H; j++)
                        g[b * gh + 2 * H + j] += g[b * gh + H + j] * hr[(size_t)b * H + j];
            } else {                        /* hh = xw_h + (r * h) @ Rh^T (Rbh is in the projection) */
                for (b = 0; b < B; b++)
                    for (j = 0; j < H; j++) rh[(size_t)b * H + j] = g[b * gh + H + j] * h[(size_t)b * H + j];
                rc = oxk_sgemm_run(&pl[2], B, rh, NULL, hr);
                if (rc) return rc;
                for (b = 0; b < B; b++)
                    for (j = 0; j < H; j++) g[b * gh + 2 * H + j] += hr[(size_t)b * H + j];
            }
            for (b = 0; b < B; b++) {
                float* hh = g + b * gh + 2 * H;
                const float* z = g + b * gh;
                float* hb = h + (size_t)b * H;
                if (a->has_clip) clamp_row(hh, H, a->clip);
                oxk_act_row(hh, H, OXK_ACT_TANH, 0.f, 0.f);
                for (j = 0; j < H; j++) hb[j] = hh[j] + z[j] * (hb[j] - hh[j]);
            }
        }
        if (y) memcpy(y + ((size_t)t * a->dirs + d) * bh, h, bh * sizeof(float));
    }
    if (yh) memcpy(yh + (size_t)d * bh, h, bh * sizeof(float));
    if (yc && a->kind == OXK_RNN_LSTM) memcpy(yc + (size_t)d * bh, c, bh * sizeof(float));
    return 0;
}

int oxk_rnn(const oxk_rnn_args* a, const float* x, const float* h0, const float* c0,
            float* y, float* yh, float* yc, float* scratch) {
    int d, rc = check_args(a);
    if (rc) return rc;
    if (!x || !scratch) return OXK_EARG;
    for (d = 0; d < a->dirs; d++) {
        rc = run_direction(a, d, x, h0, c0, y, yh, yc, scratch);
        if (rc) return rc;
    }
    return 0;
}
