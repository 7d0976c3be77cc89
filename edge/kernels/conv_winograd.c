/* conv_winograd.c - 3x3 stride-1 convolutions (group 1, NCHW, float32) by Winograd's minimal
 * filtering F(2x2, 3x3): each 2x2 block of outputs ("tile") takes 16 multiplies per (input,
 * output) channel pair instead of 36, so the multiply is 2.25x smaller.
 *
 * With d a tile's 4x4 input window (zero-padded), g a 3x3 kernel and
 *   B^T = [1 0 -1 0; 0 1 1 0; 0 -1 1 0; 0 1 0 -1],  G = [1 0 0; .5 .5 .5; .5 -.5 .5; 0 0 1],
 *   A^T = [1 1 1 0; 0 1 -1 -1],
 * the tile is A^T [ sum_c (G g G^T) . (B^T d B) ] A: the weights U = G g G^T are transformed
 * once (oxk_conv_pack_winograd: 16 matrices of Cout x Cin, each packed as the SGEMM's A), the
 * input V = B^T d B per run, and the sum over input channels is 16 GEMMs M[e] = U[e] @ V[e] of
 * Cout x tiles. The transforms use only 0, +-1 and 0.5 (exact scalings): each output is the
 * same sum as the direct convolution's, in another order, with a few more roundings.
 *
 * Per image: the input is copied into zero-bordered planes once; the tiles are taken in blocks
 * (V and M of a block stay in L2), each block in three parallel steps: the input transform per
 * channel (V written straight into the SGEMM's packed B panels), the 16 GEMMs, and the output
 * transform per output channel with bias, residual z and activation. Every output sums its
 * input channels in one GEMM in one order: the bits do not depend on the blocks or threads. */
#include "oxk.h"
#include "vec.h"
#include "gemm_isa.h"

/* The bytes a block's V and M take together (both stay in a core's L2). */
#define WINO_BLOCK_BYTES (1 << 20)
/* Floats added to the distance between the 16 V (and M): the transforms touch all 16 at once,
 * and at a power-of-two distance they would share the L1 cache's sets. */
#define WINO_SKEW 16
/* The fewest channels each way where the transforms are worth their cost: below, the multiply is
 * too small to pay for them. */
#define WINO_MIN_CHANNELS 32
/* The fewest tiles: below, the GEMMs' panels run mostly empty. */
#define WINO_MIN_TILES 16
/* Above this many bytes of transformed weights (1.8x the weights), they come from memory on every
 * run: then the fewest tiles that pay for reading them (measured on ResNet-18's 14 x 14 and 7 x 7
 * layers: slower with Winograd in the whole model, though faster alone). */
#define WINO_CACHED_BYTES (1 << 20)
#define WINO_MIN_TILES_UNCACHED 64

size_t oxk_conv_winograd_pack_size(int Cout, int Cin) {
    return Cout > 0 && Cin > 0 ? 16 * oxk_pack_a_size(Cout, Cin) : 0;
}

size_t oxk_conv_winograd_size(int Cout, int Cin_g, int kh, int kw, int group, int sh, int sw, int dh,
                              int dw, int OH, int OW) {
    size_t tiles;
    if (kh != 3 || kw != 3 || group != 1 || sh != 1 || sw != 1 || dh != 1 || dw != 1 || OH <= 0 || OW <= 0)
        return 0;
    tiles = (size_t)((OH + 1) / 2) * ((OW + 1) / 2);
    if (Cout < WINO_MIN_CHANNELS || Cin_g < WINO_MIN_CHANNELS || tiles < WINO_MIN_TILES) return 0;
    if (tiles < WINO_MIN_TILES_UNCACHED && 16 * (size_t)Cout * Cin_g * sizeof(float) > WINO_CACHED_BYTES) return 0;
    return oxk_conv_winograd_pack_size(Cout, Cin_g);
}

int oxk_conv_pack_winograd(const float* W, int Cout, int Cin, float* packed) {
    const size_t per = oxk_pack_a_size(Cout, Cin), n = (size_t)Cout * Cin;
    float* u;
    size_t i;
    int e, rc = 0;
    if (!W || !packed || Cout <= 0 || Cin <= 0) return OXK_EARG;
    u = (float*)oxk_aligned_alloc(16 * n * sizeof(float));
    if (!u) return OXK_ENOMEM;
    for (i = 0; i < n; i++) {   /* U = G g G^T for kernel i (Cout x Cin kernels of 3x3) */
        const float* g = W + i * 9;
        float t[4][3];
        int r, c;
        for (c = 0; c < 3; c++) {   /* G g: 4 x 3 */
            t[0][c] = g[c];
            t[1][c] = 0.5f * (g[c] + g[3 + c] + g[6 + c]);
            t[2][c] = 0.5f * (g[c] - g[3 + c] + g[6 + c]);
            t[3][c] = g[6 + c];
        }
        for (r = 0; r < 4; r++) {   /* (G g) G^T: 4 x 4 */
            u[(size_t)(r * 4 + 0) * n + i] = t[r][0];
            u[(size_t)(r * 4 + 1) * n + i] = 0.5f * (t[r][0] + t[r][1] + t[r][2]);
            u[(size_t)(r * 4 + 2) * n + i] = 0.5f * (t[r][0] - t[r][1] + t[r][2]);
            u[(size_t)(r * 4 + 3) * n + i] = t[r][2];
        }
    }
    for (e = 0; e < 16 && !rc; e++) rc = oxk_pack_a(0, Cout, Cin, u + (size_t)e * n, Cin, packed + (size_t)e * per);
    oxk_aligned_free(u);
    return rc;
}

typedef struct {
    const float* x;                   /* image n */
    int C, H, W, Cout, OH, OW, pt, pl;
    int TH, TW;                       /* tiles down and across */
    int Hp, Wp;                       /* a zero-bordered plane: every tile's window */
    size_t plane;                     /* floats per padded plane */
    float* xpad;
    const float* pu;                  /* the 16 packed U */
    size_t per_u;
    int nr;                           /* the SGEMM core's panel width */
    int t0, nb;                       /* this block's tiles [t0, t0 + nb) */
    float* v;                         /* 16 x packed B (nb columns, C rows) */
    size_t per_v;                     /* floats from one V to the next */
    size_t per_m;                     /* floats from one M to the next */
    float* m;                         /* 16 x Cout x nb */
    const float* bias;
    const float* z;                   /* image n's residual, or NULL */
    float* y;                         /* image n */
    int act;
    float p0, p1;
    int rc;
} wino_job;

static void pad_task(void* ctx, int c) {
    const wino_job* j = (const wino_job*)ctx;
    const float* src = j->x + (size_t)c * j->H * j->W;
    float* dst = j->xpad + (size_t)c * j->plane;
    int h, rows = j->H < j->Hp - j->pt ? j->H : j->Hp - j->pt, cols = j->W < j->Wp - j->pl ? j->W : j->Wp - j->pl;
    memset(dst, 0, j->plane * sizeof(float));
    for (h = 0; h < rows; h++) memcpy(dst + (size_t)(h + j->pt) * j->Wp + j->pl, src + (size_t)h * j->W,
                                       (size_t)cols * sizeof(float));
}

/* One row of a 4x4 window through B^T: (d0 - d2, d1 + d2, d2 - d1, d1 - d3). */
#define BT_ROW(d0, d1, d2, d3, o0, o1, o2, o3, SUB, ADD) \
    do { o0 = SUB(d0, d2); o1 = ADD(d1, d2); o2 = SUB(d2, d1); o3 = SUB(d1, d3); } while (0)
#define S_SUB(a, b) ((a) - (b))
#define S_ADD(a, b) ((a) + (b))

/* The input transform of channel c for the block's tiles: V[e] at panel t / nr, row c, lane
 * t % nr. Four tiles of one row at a time where they share a panel, the rest one by one. */
static void input_task(void* ctx, int c) {
    const wino_job* j = (const wino_job*)ctx;
    const float* plane = j->xpad + (size_t)c * j->plane;
    const int nr = j->nr, Wp = j->Wp;
    const size_t pv = j->per_v, panel = (size_t)j->C * nr;
    int i = 0, th = j->t0 / j->TW, tw = j->t0 % j->TW, lane = 0;
    float* col = j->v + (size_t)c * nr;   /* this channel's row of the current panel */
    while (i < j->nb) {
        const float* d = plane + (size_t)(2 * th) * Wp + 2 * tw;
        int step = 1;
        if (i + 4 <= j->nb && tw + 4 <= j->TW && lane + 4 <= nr) {
            vf4 w[4][4], r[4][4];
            int a, e;
            for (a = 0; a < 4; a++) {   /* row a of four windows: columns 0, 1 and 2, 3 */
                vf_load_deint(d + (size_t)a * Wp, &w[a][0], &w[a][1]);
                vf_load_deint(d + (size_t)a * Wp + 2, &w[a][2], &w[a][3]);
                BT_ROW(w[a][0], w[a][1], w[a][2], w[a][3], r[a][0], r[a][1], r[a][2], r[a][3], vf_sub, vf_add);
            }
            for (a = 0; a < 4; a++) {   /* column a through B^T */
                vf4 o[4];
                BT_ROW(r[0][a], r[1][a], r[2][a], r[3][a], o[0], o[1], o[2], o[3], vf_sub, vf_add);
                for (e = 0; e < 4; e++) vf_store(col + lane + (size_t)(e * 4 + a) * pv, o[e]);
            }
            step = 4;
        } else {
            float w[4][4], r[4][4];
            int a, e;
            for (a = 0; a < 4; a++) {
                const float* row = d + (size_t)a * Wp;
                BT_ROW(row[0], row[1], row[2], row[3], r[a][0], r[a][1], r[a][2], r[a][3], S_SUB, S_ADD);
            }
            for (a = 0; a < 4; a++) {
                BT_ROW(r[0][a], r[1][a], r[2][a], r[3][a], w[0][a], w[1][a], w[2][a], w[3][a], S_SUB, S_ADD);
                for (e = 0; e < 4; e++) col[lane + (size_t)(e * 4 + a) * pv] = w[e][a];
            }
        }
        i += step; lane += step; tw += step;
        if (lane == nr) { lane = 0; col += panel; }
        if (tw == j->TW) { tw = 0; th++; }
    }
}

static void gemm_task(void* ctx, int e) {
    wino_job* j = (wino_job*)ctx;
    int rc = oxk_sgemm(0, 0, j->Cout, j->nb, j->C, 1.f, NULL, j->C, j->pu + (size_t)e * j->per_u,
                       NULL, j->nb, j->v + (size_t)e * j->per_v, 0.f, j->m + (size_t)e * j->per_m, j->nb,
                       NULL, OXK_BIAS_NONE, OXK_ACT_NONE, 0.f, 0.f);
    if (rc) j->rc = rc;
}

/* A^T m A of a 4x4 m (m[e] for e = 4 row + column): the 2x2 tile (y00, y01, y10, y11). */
#define AT_TILE(m, y00, y01, y10, y11, ADD, SUB) do {                                         \
        int q_;                                                                                \
        for (q_ = 0; q_ < 4; q_++) {                                                           \
            s0[q_] = ADD(ADD(m[q_], m[4 + q_]), m[8 + q_]);                                    \
            s1[q_] = SUB(SUB(m[4 + q_], m[8 + q_]), m[12 + q_]);                               \
        }                                                                                      \
        y00 = ADD(ADD(s0[0], s0[1]), s0[2]); y01 = SUB(SUB(s0[1], s0[2]), s0[3]);              \
        y10 = ADD(ADD(s1[0], s1[1]), s1[2]); y11 = SUB(SUB(s1[1], s1[2]), s1[3]);              \
    } while (0)

/* The output transform of channel co for the block's tiles, + bias (+ z), then the activation. */
static void output_task(void* ctx, int co) {
    const wino_job* j = (const wino_job*)ctx;
    const size_t P = (size_t)j->OH * j->OW, mstride = j->per_m;
    const float* mc = j->m + (size_t)co * j->nb;
    const float b = j->bias ? j->bias[co] : 0.f;
    float* out = j->y + (size_t)co * P;
    const float* zc = j->z ? j->z + (size_t)co * P : NULL;
    int i = 0, th = j->t0 / j->TW, tw = j->t0 % j->TW, oh;
    while (i < j->nb) {
        const int oh0 = 2 * th, ow0 = 2 * tw;
        float* o = out + (size_t)oh0 * j->OW + ow0;
        int step = 1;
        if (i + 4 <= j->nb && tw + 4 <= j->TW && ow0 + 8 <= j->OW && oh0 + 2 <= j->OH) {
            vf4 m[16], s0[4], s1[4], y00, y01, y10, y11, vb = vf_dup(b);
            float r[4][4];
            int e, k;
            for (e = 0; e < 16; e++) m[e] = vf_load(mc + e * mstride + i);
            AT_TILE(m, y00, y01, y10, y11, vf_add, vf_sub);
            vf_store(r[0], vf_add(y00, vb)); vf_store(r[1], vf_add(y01, vb));
            vf_store(r[2], vf_add(y10, vb)); vf_store(r[3], vf_add(y11, vb));
            for (k = 0; k < 4; k++) {
                o[2 * k] = r[0][k]; o[2 * k + 1] = r[1][k];
                o[j->OW + 2 * k] = r[2][k]; o[j->OW + 2 * k + 1] = r[3][k];
            }
            step = 4;
        } else {
            float m[16], s0[4], s1[4], y[4];
            int e;
            for (e = 0; e < 16; e++) m[e] = mc[e * mstride + i];
            AT_TILE(m, y[0], y[1], y[2], y[3], S_ADD, S_SUB);
            for (e = 0; e < 4; e++)
                if (oh0 + e / 2 < j->OH && ow0 + e % 2 < j->OW) o[(e / 2) * j->OW + e % 2] = y[e] + b;
        }
        i += step; tw += step;
        if (tw == j->TW) { tw = 0; th++; }
    }
    if (!zc && j->act == OXK_ACT_NONE) return;
    /* z and the activation over this block's outputs: per tile row, the columns of its tiles */
    for (th = j->t0 / j->TW; th * j->TW < j->t0 + j->nb; th++) {
        const int tw0 = th * j->TW < j->t0 ? j->t0 - th * j->TW : 0;
        const int tw1 = (th + 1) * j->TW > j->t0 + j->nb ? j->t0 + j->nb - th * j->TW : j->TW;
        const int w0 = 2 * tw0, w1 = 2 * tw1 < j->OW ? 2 * tw1 : j->OW;
        for (oh = 2 * th; oh < 2 * th + 2 && oh < j->OH; oh++) {
            float* row = out + (size_t)oh * j->OW + w0;
            if (zc) {
                const float* zr = zc + (size_t)oh * j->OW + w0;
                int w;
                for (w = 0; w < w1 - w0; w++) row[w] = row[w] + zr[w];
            }
            oxk_act_row(row, w1 - w0, j->act, j->p0, j->p1);
        }
    }
}

int oxk_conv_winograd_run(const float* x, int N, int C, int H, int W, const float* packU, int Cout,
                          int pt, int pl, const float* bias, const float* z, int act, float p0, float p1,
                          float* y, int OH, int OW) {
    wino_job j;
    size_t tiles, nb, vbytes, mbytes;
    int n;
    if (!x || !packU || !y || N < 0 || C <= 0 || H <= 0 || W <= 0 || Cout <= 0 || pt < 0 || pl < 0 ||
        OH <= 0 || OW <= 0)
        return OXK_EARG;
    memset(&j, 0, sizeof(j));
    j.C = C; j.H = H; j.W = W; j.Cout = Cout; j.OH = OH; j.OW = OW; j.pt = pt; j.pl = pl;
    j.TH = (OH + 1) / 2; j.TW = (OW + 1) / 2;
    j.Hp = 2 * j.TH + 2; j.Wp = 2 * j.TW + 2;
    j.plane = (size_t)j.Hp * j.Wp;
    j.pu = packU; j.per_u = oxk_pack_a_size(Cout, C);
    j.nr = OXK_SGEMM_NR;
    j.bias = bias; j.act = act; j.p0 = p0; j.p1 = p1;
    tiles = (size_t)j.TH * j.TW;
    if (tiles > 0x7fffffff / 2) return OXK_EARG;
    /* tiles per block: a multiple of the panel width whose V and M fit WINO_BLOCK_BYTES */
    nb = WINO_BLOCK_BYTES / (16 * sizeof(float) * ((size_t)C + Cout)) / j.nr * j.nr;
    if (nb < (size_t)j.nr) nb = j.nr;
    if (nb > tiles) nb = tiles;
    vbytes = 16 * (oxk_pack_b_size((int)nb, C) + WINO_SKEW) * sizeof(float);
    mbytes = 16 * ((size_t)Cout * nb + WINO_SKEW) * sizeof(float);
    j.xpad = (float*)oxk_scratch(OXK_SCRATCH_PAD, (size_t)C * j.plane * sizeof(float));
    j.v = (float*)oxk_scratch(OXK_SCRATCH_PANELS, vbytes + mbytes);
    if (!j.xpad || !j.v) return OXK_ENOMEM;
    j.m = j.v + vbytes / sizeof(float);
    for (n = 0; n < N && !j.rc; n++) {
        j.x = x + (size_t)n * C * H * W;
        j.y = y + (size_t)n * Cout * OH * OW;
        j.z = z ? z + (size_t)n * Cout * OH * OW : NULL;
        oxk_parallel_for(C, pad_task, &j);
        for (j.t0 = 0; j.t0 < (int)tiles && !j.rc; j.t0 += j.nb) {
            j.nb = (int)(tiles - j.t0 < nb ? tiles - j.t0 : nb);
            j.per_v = oxk_pack_b_size(j.nb, C) + WINO_SKEW;
            j.per_m = (size_t)Cout * j.nb + WINO_SKEW;
            if (j.nb % j.nr) {   /* the last panel's lanes past the block: zero, never stored */
                int e;
                for (e = 0; e < 16; e++)
                    memset(j.v + e * j.per_v + (size_t)(j.nb / j.nr) * C * j.nr, 0, (size_t)C * j.nr * sizeof(float));
            }
            oxk_parallel_for(C, input_task, &j);
            oxk_parallel_for(16, gemm_task, &j);
            if (!j.rc) oxk_parallel_for(Cout, output_task, &j);
        }
    }
    return j.rc;
}
