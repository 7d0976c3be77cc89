/* matmul_x86_impl.h - one x86-64 SGEMM core, written once for every vector width.
 *
 * Included by matmul_avx2.c and matmul_avx512.c, each compiled with its ISA's flags, after they
 * define:
 *   GEMM_ISA       the oxk_gemm_isa this file defines (oxk_gemm_avx2, ...), GEMM_NAME its name
 *   VT, VW         the vector type and its float lanes; the register tile is MR x NR, NR = 2 VW
 *   MR             rows of the tile (at most 14)
 *   V_LOAD(p) V_STORE(p, v) V_SET1(x) V_ZERO() V_FMA(a, b, acc) = a * b + acc, V_ADD V_MAX V_MIN
 *   V_MASK_T, V_MASK(lo, n) (lanes [lo, lo + n)), V_MASKSTORE(p, m, v): masked lanes are not
 *                  written
 * Both operands are packed (A in panels of MR rows, B in panels of NR columns; conv passes its
 * weights and im2col panels packed already), except one row of A (M == 1), read in place by
 * row_block with four B panels at a time. The micro-kernel broadcasts one A value per row and
 * multiplies it into two B vectors: MR x 2 accumulators stay in registers over a K block of KC
 * steps. Each row count 1..MR and each width (one or two vectors) is its own function, so edge
 * tiles do no wasted arithmetic. alpha, beta, bias (row/col) and Relu/Clip are fused into the tile
 * store on the last K block; other activations run over the stored rows (oxk_act_row); tiles with
 * partial columns or alpha/beta to apply go through a buffer. Parallel over blocks of C (MB x NB)
 * with oxk_parallel_for; K is never split, so results do not depend on the thread count.
 * conv_direct (end of file) is conv.c's implicit GEMM on the same register tile: B vectors loaded
 * straight from the padded input through per-K offsets, no im2col panels, all K in registers. */
#include <immintrin.h>
#include "oxk.h"
#include "gemm_isa.h"

#define NR (2 * VW)
#define KC 256
#define MB (MR * 4)
#define NB (NR * 8)
#define PF_B OXK_KOFF_AHEAD

static int ceil_div(int a, int b) { return (a + b - 1) / b; }

/* packed A: for each panel of MR rows, K steps of MR values (rows past M are zero). */
static int pack_a(int transA, int M, int K, const float* A, int lda, float* packed) {
    int mt, k, r;
    for (mt = 0; mt < ceil_div(M, MR); mt++) {
        float* dst = packed + (size_t)mt * K * MR;
        int m0 = mt * MR, mv = M - m0 < MR ? M - m0 : MR;
        if (transA) {
            const float* src = A + m0;
            for (k = 0; k < K; k++, src += lda, dst += MR) {
                for (r = 0; r < mv; r++) dst[r] = src[r];
                for (; r < MR; r++) dst[r] = 0.f;
            }
        } else if (mv == MR) {
            const float* rows[MR];
            for (r = 0; r < MR; r++) rows[r] = A + (size_t)(m0 + r) * lda;
            for (k = 0; k < K; k++, dst += MR)
#pragma GCC unroll 16
                for (r = 0; r < MR; r++) dst[r] = rows[r][k];
        } else {
            for (k = 0; k < K; k++, dst += MR) {
                for (r = 0; r < mv; r++) dst[r] = A[(size_t)(m0 + r) * lda + k];
                for (; r < MR; r++) dst[r] = 0.f;
            }
        }
    }
    return 0;
}

/* packed B: for each panel of NR columns, K steps of NR values (columns past N are zero). */
static int pack_b(int transB, int N, int K, const float* B, int ldb, float* packed) {
    int nt, k, j;
    for (nt = 0; nt < ceil_div(N, NR); nt++) {
        float* dst = packed + (size_t)nt * K * NR;
        int n0 = nt * NR, nv = N - n0 < NR ? N - n0 : NR;
        if (!transB && nv == NR) {
            const float* src = B + n0;
            for (k = 0; k < K; k++, src += ldb, dst += NR) {
                V_STORE(dst, V_LOAD(src));
                V_STORE(dst + VW, V_LOAD(src + VW));
            }
        } else if (!transB) {
            const float* src = B + n0;
            for (k = 0; k < K; k++, src += ldb, dst += NR) {
                for (j = 0; j < nv; j++) dst[j] = src[j];
                for (; j < NR; j++) dst[j] = 0.f;
            }
        } else {
            for (j = 0; j < nv; j++) {
                const float* src = B + (size_t)(n0 + j) * ldb;
                for (k = 0; k < K; k++) dst[(size_t)k * NR + j] = src[k];
            }
            for (k = 0; k < K; k++)
                for (j = nv; j < NR; j++) dst[(size_t)k * NR + j] = 0.f;
        }
    }
    return 0;
}

typedef struct {
    int M, N, K;
    float alpha, beta;
    const float *pa, *pb;
    float* C;
    int ldc;
    const float* bias;
    int bias_kind, act;
    float p0, p1;
    int nblocks;
    const float* arow;   /* M == 1: A's one row, read in place (no packing), a step `astep` apart */
    int astep;
} gemm_job;

/* oxk_store_tile (matmul.c) for a tile of this core (row stride NR) at (m0, n0) of the job's C. */
static void store_general(const gemm_job* g, const float* tile, int mv, int nv, int m0, int n0,
                          int first, int last) {
    const float* bias = g->bias_kind == OXK_BIAS_ROW ? g->bias + m0
                      : g->bias_kind == OXK_BIAS_COL ? g->bias + n0 : g->bias;
    oxk_store_tile(tile, NR, mv, nv, g->C + (size_t)m0 * g->ldc + n0, g->ldc, g->alpha, g->beta,
                   bias, g->bias_kind, g->act, g->p0, g->p1, first, last);
}

/* The sums of one K block for R rows (a constant after inlining) x NV vectors of C at (m0, n0),
 * c0 (first vector) and c1, merged into C: added to what earlier K blocks stored, with bias and
 * activation on the last block. */
static inline __attribute__((always_inline)) void tile_store(const gemm_job* g, const int R,
                                                             const int NV, VT* c0, VT* c1, int m0,
                                                             int n0, int first, int last) {
    int r;
    const int nv = g->N - n0 < NV * VW ? g->N - n0 : NV * VW;   /* narrow tiles: N - n0 <= VW */
    if (nv == NV * VW && g->alpha == 1.f && (!first || g->beta == 0.f)) {
        const size_t ldc = (size_t)g->ldc;
        float* cp = g->C + (size_t)m0 * ldc + n0;
        const int bias = last ? g->bias_kind : OXK_BIAS_NONE, act = last ? g->act : OXK_ACT_NONE;
        if (!first) {
#pragma GCC unroll 16
            for (r = 0; r < R; r++) {
                c0[r] = V_ADD(c0[r], V_LOAD(cp + r * ldc));
                if (NV > 1) c1[r] = V_ADD(c1[r], V_LOAD(cp + r * ldc + VW));
            }
        }
        if (bias == OXK_BIAS_COL) {
            VT bc0 = V_LOAD(g->bias + n0), bc1 = NV > 1 ? V_LOAD(g->bias + n0 + VW) : bc0;
#pragma GCC unroll 16
            for (r = 0; r < R; r++) { c0[r] = V_ADD(c0[r], bc0); if (NV > 1) c1[r] = V_ADD(c1[r], bc1); }
        } else if (bias == OXK_BIAS_ROW) {
#pragma GCC unroll 16
            for (r = 0; r < R; r++) {
                VT bb = V_SET1(g->bias[m0 + r]);
                c0[r] = V_ADD(c0[r], bb);
                if (NV > 1) c1[r] = V_ADD(c1[r], bb);
            }
        }
        if (act == OXK_ACT_RELU || act == OXK_ACT_CLIP) {
            VT lo = V_SET1(act == OXK_ACT_CLIP ? g->p0 : 0.f);
#pragma GCC unroll 16
            for (r = 0; r < R; r++) { c0[r] = V_MAX(c0[r], lo); if (NV > 1) c1[r] = V_MAX(c1[r], lo); }
            if (act == OXK_ACT_CLIP) {
                VT hi = V_SET1(g->p1);
#pragma GCC unroll 16
                for (r = 0; r < R; r++) { c0[r] = V_MIN(c0[r], hi); if (NV > 1) c1[r] = V_MIN(c1[r], hi); }
            }
        } else if (act > OXK_ACT_CLIP) {
            /* the other activations over the whole tile in one call (one per row would be calls
             * of two vectors each), then stored as below */
            float buf[MR * NR] __attribute__((aligned(64)));
#pragma GCC unroll 16
            for (r = 0; r < R; r++) {
                V_STORE(buf + r * nv, c0[r]);
                if (NV > 1) V_STORE(buf + r * nv + VW, c1[r]);
            }
            oxk_act_row(buf, R * nv, act, g->p0, g->p1);
#pragma GCC unroll 16
            for (r = 0; r < R; r++) {
                c0[r] = V_LOAD(buf + r * nv);
                if (NV > 1) c1[r] = V_LOAD(buf + r * nv + VW);
            }
        }
#pragma GCC unroll 16
        for (r = 0; r < R; r++) {
            V_STORE(cp + r * ldc, c0[r]);
            if (NV > 1) V_STORE(cp + r * ldc + VW, c1[r]);
        }
    } else {
        float buf[MR * NR] __attribute__((aligned(64)));
#pragma GCC unroll 16
        for (r = 0; r < R; r++) {
            V_STORE(buf + r * NR, c0[r]);
            if (NV > 1) V_STORE(buf + r * NR + VW, c1[r]);
        }
        store_general(g, buf, R, nv, m0, n0, first, last);
    }
}

/* R rows (a constant after inlining) x NV vectors of C from kc K steps of the packed panels a and
 * b, merged into C at (m0, n0). */
static inline __attribute__((always_inline)) void tile(const gemm_job* g, const int R, const int NV,
                                                       int kc, const float* a, const float* b,
                                                       int m0, int n0, int first, int last) {
    VT c0[MR], c1[MR];
    int r, k;
#pragma GCC unroll 16
    for (r = 0; r < R; r++) { c0[r] = V_ZERO(); c1[r] = V_ZERO(); }
#pragma GCC unroll 2
    for (k = 0; k < kc; k++) {
        VT b0 = V_LOAD(b), b1 = NV > 1 ? V_LOAD(b + VW) : b0;
#pragma GCC unroll 16
        for (r = 0; r < R; r++) {
            VT av = V_SET1(a[r]);
            c0[r] = V_FMA(av, b0, c0[r]);
            if (NV > 1) c1[r] = V_FMA(av, b1, c1[r]);
        }
        a += MR;
        b += NR;
    }
    tile_store(g, R, NV, c0, c1, m0, n0, first, last);
}

/* One row of C (M == 1: matrix-vector products, batch 1) over columns [n_beg, n_end): A's row is
 * read in place, and ROW_PANELS B panels run together so 2 x ROW_PANELS FMA chains are in flight
 * (one panel's two chains wait on the FMA latency). Every element is summed over the same K
 * blocks in the same order as tile() sums it, so the bits are those of the packed path. */
#define ROW_PANELS 4
static void row_block(const gemm_job* g, int n_beg, int n_end) {
    const int K = g->K, as = g->astep;
    const size_t ps = (size_t)K * NR;   /* from one B panel to the next */
    int k0, k, n0, p;
    for (n0 = n_beg; n0 < n_end; n0 += ROW_PANELS * NR) {
        const int np = ceil_div(n_end - n0, NR) < ROW_PANELS ? ceil_div(n_end - n0, NR) : ROW_PANELS;
        for (k0 = 0; k0 < (K > 0 ? K : 1); k0 += KC) {
            const int kc = K - k0 < KC ? K - k0 : KC, first = k0 == 0, last = k0 + KC >= K;
            const float* a = g->arow + (size_t)k0 * as;
            const float* b = g->pb + (size_t)(n0 / NR) * ps + (size_t)k0 * NR;
            VT c0[ROW_PANELS], c1[ROW_PANELS];
#pragma GCC unroll 4
            for (p = 0; p < ROW_PANELS; p++) { c0[p] = V_ZERO(); c1[p] = V_ZERO(); }
            if (np == ROW_PANELS) {
                for (k = 0; k < kc; k++, a += as, b += NR) {
                    VT av = V_SET1(*a);
#pragma GCC unroll 4
                    for (p = 0; p < ROW_PANELS; p++) {
                        c0[p] = V_FMA(av, V_LOAD(b + p * ps), c0[p]);
                        c1[p] = V_FMA(av, V_LOAD(b + p * ps + VW), c1[p]);
                    }
                }
            } else {   /* the last panels (padded with zero columns up to NR) */
                for (k = 0; k < kc; k++, a += as, b += NR) {
                    VT av = V_SET1(*a);
                    for (p = 0; p < np; p++) {
                        c0[p] = V_FMA(av, V_LOAD(b + p * ps), c0[p]);
                        c1[p] = V_FMA(av, V_LOAD(b + p * ps + VW), c1[p]);
                    }
                }
            }
            for (p = 0; p < np; p++) {
                const int n = n0 + p * NR;
                if (g->N - n <= VW) tile_store(g, 1, 1, c0 + p, c1 + p, 0, n, first, last);
                else tile_store(g, 1, 2, c0 + p, c1 + p, 0, n, first, last);
            }
        }
    }
}

typedef void (*tile_fn)(const gemm_job* g, int kc, const float* a, const float* b, int m0, int n0,
                        int first, int last);
#define TILE_FN(R)                                                                                \
    static void tile_##R##_1(const gemm_job* g, int kc, const float* a, const float* b, int m0,   \
                             int n0, int first, int last) { tile(g, R, 1, kc, a, b, m0, n0, first, last); } \
    static void tile_##R##_2(const gemm_job* g, int kc, const float* a, const float* b, int m0,   \
                             int n0, int first, int last) { tile(g, R, 2, kc, a, b, m0, n0, first, last); }
TILE_FN(1) TILE_FN(2) TILE_FN(3) TILE_FN(4) TILE_FN(5) TILE_FN(6)
#if MR > 6
TILE_FN(7) TILE_FN(8) TILE_FN(9) TILE_FN(10) TILE_FN(11) TILE_FN(12)
#endif
#if MR > 12
TILE_FN(13) TILE_FN(14)
#endif
/* TILES[nv - 1][rows - 1] */
static const tile_fn TILES[2][MR] = {
    {tile_1_1, tile_2_1, tile_3_1, tile_4_1, tile_5_1, tile_6_1,
#if MR > 6
     tile_7_1, tile_8_1, tile_9_1, tile_10_1, tile_11_1, tile_12_1,
#endif
#if MR > 12
     tile_13_1, tile_14_1,
#endif
    },
    {tile_1_2, tile_2_2, tile_3_2, tile_4_2, tile_5_2, tile_6_2,
#if MR > 6
     tile_7_2, tile_8_2, tile_9_2, tile_10_2, tile_11_2, tile_12_2,
#endif
#if MR > 12
     tile_13_2, tile_14_2,
#endif
    }};

/* The tiles of C's rows [m_beg, m_end) x columns [n_beg, n_end), K block by K block; pb holds the
 * B panels of the columns from pb_n0 on. */
static void block_tiles(const gemm_job* g, const float* pb, int pb_n0, int m_beg, int m_end, int n_beg,
                        int n_end) {
    int K = g->K, k0, m0, n0;
    for (k0 = 0; k0 < (K > 0 ? K : 1); k0 += KC) {
        int kc = K - k0 < KC ? K - k0 : KC;
        int first = k0 == 0, last = k0 + KC >= K;
        for (m0 = m_beg; m0 < m_end; m0 += MR) {
            int rows = g->M - m0 < MR ? g->M - m0 : MR;
            const float* a = g->pa + (size_t)(m0 / MR) * K * MR + (size_t)k0 * MR;
            tile_fn wide = TILES[1][rows - 1], narrow = TILES[0][rows - 1];
            for (n0 = n_beg; n0 < n_end; n0 += NR) {
                const float* b = pb + (size_t)((n0 - pb_n0) / NR) * K * NR + (size_t)k0 * NR;
                (g->N - n0 <= VW ? narrow : wide)(g, kc, a, b, m0, n0, first, last);
            }
        }
    }
}

static void gemm_block(void* ctx, int idx) {
    const gemm_job* g = (const gemm_job*)ctx;
    int bm = idx / g->nblocks, bn = idx % g->nblocks;
    int m_beg = bm * MB, m_end = m_beg + MB < g->M ? m_beg + MB : g->M;
    int n_beg = bn * NB, n_end = n_beg + NB < g->N ? n_beg + NB : g->N;
    if (g->arow)
        row_block(g, n_beg, n_end);
    else
        block_tiles(g, g->pb, 0, m_beg, m_end, n_beg, n_end);
}

static size_t panel_size(int n, int r, int K) { return (size_t)ceil_div(n, r) * r * (size_t)(K > 0 ? K : 1); }

/* B as given (not packed) and many columns: per task one block of NB columns, its panels packed
 * into the thread's scratch right before use (they stay in L2 over every row of A) instead of all
 * of B packed up front and read back from memory. Same K blocks in the same order per element as
 * gemm_block: the same bits. */
typedef struct {
    const gemm_job* g;
    const float* B;
    int ldb, transB;
    int rc;   /* a task's failure (ENOMEM) */
} cols_job;

static void gemm_cols(void* ctx, int bn) {
    cols_job* cj = (cols_job*)ctx;
    const gemm_job* g = cj->g;
    const int K = g->K, n_beg = bn * NB, n_end = n_beg + NB < g->N ? n_beg + NB : g->N;
    float* pb = (float*)oxk_scratch(OXK_SCRATCH_PACK_B, panel_size(n_end - n_beg, NR, K) * sizeof(float));
    if (!pb) { cj->rc = OXK_ENOMEM; return; }
    pack_b(cj->transB, n_end - n_beg, K, cj->B + (cj->transB ? (size_t)n_beg * cj->ldb : (size_t)n_beg),
           cj->ldb, pb);
    block_tiles(g, pb, n_beg, 0, g->M, n_beg, n_end);
}

static int sgemm(int transA, int transB, int M, int N, int K, float alpha,
                 const float* A, int lda, const float* packA,
                 const float* B, int ldb, const float* packB,
                 float beta, float* C, int ldc,
                 const float* bias, int bias_kind, int act, float p0, float p1) {
    gemm_job g;
    int blocks;
    g.arow = NULL;
    g.astep = 0;
    if (M == 1) {   /* one row: read in place (packed: its panel's first lane) */
        g.arow = packA ? packA : A;
        g.astep = packA ? MR : transA ? lda : 1;
    } else if (!packA) {
        float* pa = (float*)oxk_scratch(OXK_SCRATCH_PACK_A, panel_size(M, MR, K) * sizeof(float));
        if (!pa) return OXK_ENOMEM;
        pack_a(transA, M, K, A, lda, pa);
        packA = pa;
    }
    g.M = M; g.N = N; g.K = K; g.alpha = alpha; g.beta = beta;
    g.pa = packA; g.C = C; g.ldc = ldc;
    g.bias = bias; g.bias_kind = bias_kind; g.act = act; g.p0 = p0; g.p1 = p1;
    g.nblocks = ceil_div(N, NB);
    if (!packB && M > 1 && g.nblocks > 1) {
        cols_job cj;
        cj.g = &g; cj.B = B; cj.ldb = ldb; cj.transB = transB; cj.rc = 0;
        oxk_parallel_for(g.nblocks, gemm_cols, &cj);
        return cj.rc;
    }
    if (!packB) {
        float* pb = (float*)oxk_scratch(OXK_SCRATCH_PACK_B, panel_size(N, NR, K) * sizeof(float));
        if (!pb) return OXK_ENOMEM;
        pack_b(transB, N, K, B, ldb, pb);
        packB = pb;
    }
    g.pb = packB;
    blocks = ceil_div(M, MB) * g.nblocks;
    if (blocks == 1)
        gemm_block(&g, 0);
    else
        oxk_parallel_for(blocks, gemm_block, &g);
    return 0;
}

/* ------------------------------------------------------------------ implicit-GEMM convolution */

/* The epilogue and store of one conv tile (R rows from m0, NR flat positions from f0): each vector's
 * lanes split into runs that stay in one flat row; the runs inside the output (ow < OW) are stored
 * with a lane mask at their output position. */
static inline __attribute__((always_inline)) void conv_tile_store(const oxk_conv_direct* d, const int R,
                                                                  VT* c0, VT* c1, int f0, int m0) {
    const int act = d->act;
    const ptrdiff_t ldy = d->ldy;
    int v, r;
    if (act > OXK_ACT_CLIP) {
        /* the other activations over the whole tile at once (oxk_act_row per lane run would be
         * calls of a few values), then stored as they are */
        float buf[MR * NR] __attribute__((aligned(64)));
#pragma GCC unroll 16
        for (r = 0; r < R; r++) {
            VT t0 = c0[r], t1 = c1[r];
            if (d->bias) {
                const VT bb = V_SET1(d->bias[m0 + r]);
                t0 = V_ADD(t0, bb);
                t1 = V_ADD(t1, bb);
            }
            V_STORE(buf + r * NR, t0);
            V_STORE(buf + r * NR + VW, t1);
        }
        oxk_act_row(buf, R * NR, act, d->p0, d->p1);
#pragma GCC unroll 16
        for (r = 0; r < R; r++) { c0[r] = V_LOAD(buf + r * NR); c1[r] = V_LOAD(buf + r * NR + VW); }
    }
    for (v = 0; v < 2; v++) {
        VT* c = v ? c1 : c0;
        int f = f0 + v * VW, lane = 0;
        while (lane < VW && f < d->F) {
            const int oh = f / d->Wq, ow = f - oh * d->Wq;
            const int run = VW - lane < d->Wq - ow ? VW - lane : d->Wq - ow;
            if (ow < d->OW) {
                const int n = run < d->OW - ow ? run : d->OW - ow;
                const V_MASK_T mask = V_MASK(lane, n);
                /* lane 0's output offset (lanes below `lane` are masked: never touched) */
                const ptrdiff_t off = (ptrdiff_t)oh * d->OW + ow - lane;
#pragma GCC unroll 16
                for (r = 0; r < R; r++) {
                    const ptrdiff_t at = (ptrdiff_t)(m0 + r) * ldy + off;
                    float* yp = d->y + at;
                    VT t = c[r];
                    if (d->bias && act <= OXK_ACT_CLIP) t = V_ADD(t, V_SET1(d->bias[m0 + r]));
                    if (act == OXK_ACT_RELU || act == OXK_ACT_CLIP) {
                        t = V_MAX(t, V_SET1(act == OXK_ACT_CLIP ? d->p0 : 0.f));
                        if (act == OXK_ACT_CLIP) t = V_MIN(t, V_SET1(d->p1));
                    }
                    V_MASKSTORE(yp, mask, t);
                }
            }
            lane += run;
            f += run;
        }
    }
}

/* R rows (a constant after inlining) x NR flat positions from f0: all K steps, B from the input. */
static inline __attribute__((always_inline)) void conv_tile(const oxk_conv_direct* d, const int R,
                                                            const float* a, int f0, int m0) {
    VT c0[MR], c1[MR];
    const float* xb = d->x + f0;
    const int* ko = d->koff;
    const int K = d->K;
    int r, k;
#pragma GCC unroll 16
    for (r = 0; r < R; r++) { c0[r] = V_ZERO(); c1[r] = V_ZERO(); }
#pragma GCC unroll 2
    for (k = 0; k < K; k++) {
        const float* bp = xb + ko[k];
        VT b0 = V_LOAD(bp), b1 = V_LOAD(bp + VW);
        /* the packed weights stay in L1 over a task's tiles; the input rows come from L2 through
         * offsets no hardware prefetcher follows: fetch the last line of a later step's row */
        _mm_prefetch((const char*)(xb + ko[k + PF_B] + NR), _MM_HINT_T0);
#pragma GCC unroll 16
        for (r = 0; r < R; r++) {
            VT av = V_SET1(a[r]);
            c0[r] = V_FMA(av, b0, c0[r]);
            c1[r] = V_FMA(av, b1, c1[r]);
        }
        a += MR;
    }
    conv_tile_store(d, R, c0, c1, f0, m0);
}

typedef void (*conv_tile_fn)(const oxk_conv_direct* d, const float* a, int f0, int m0);
#define CONV_TILE_FN(R) \
    static void conv_tile_##R(const oxk_conv_direct* d, const float* a, int f0, int m0) { conv_tile(d, R, a, f0, m0); }
CONV_TILE_FN(1) CONV_TILE_FN(2) CONV_TILE_FN(3) CONV_TILE_FN(4) CONV_TILE_FN(5) CONV_TILE_FN(6)
#if MR > 6
CONV_TILE_FN(7) CONV_TILE_FN(8) CONV_TILE_FN(9) CONV_TILE_FN(10) CONV_TILE_FN(11) CONV_TILE_FN(12)
#endif
#if MR > 12
CONV_TILE_FN(13) CONV_TILE_FN(14)
#endif
static const conv_tile_fn CONV_TILES[MR] = {
    conv_tile_1, conv_tile_2, conv_tile_3, conv_tile_4, conv_tile_5, conv_tile_6,
#if MR > 6
    conv_tile_7, conv_tile_8, conv_tile_9, conv_tile_10, conv_tile_11, conv_tile_12,
#endif
#if MR > 12
    conv_tile_13, conv_tile_14,
#endif
};

/* Each row strip (its packed weights stay in L1) over the call's flat positions. */
static void conv_direct(const oxk_conv_direct* d) {
    int m0, f0;
    for (m0 = 0; m0 < d->M; m0 += MR) {
        const int rows = d->M - m0 < MR ? d->M - m0 : MR;
        const float* a = d->pa + (size_t)(m0 / MR) * d->K * MR;
        for (f0 = d->f_beg; f0 < d->f_end; f0 += NR) CONV_TILES[rows - 1](d, a, f0, m0);
    }
}

/* ------------------------------------------------------------------ conv, channels along lanes */

/* A lanes tile's prefetch of the next weight panel: `lines` cache lines from `at`, `per` of them
 * at the start of every `every` K steps. */
typedef struct {
    const char* at;
    int lines, per, every;
} lanes_pf;

#if VW == 16
#include "conv_lanes_avx512.h"

/* Rows c[0..R) (R <= 16, a constant after inlining) of 16 lanes stored transposed: lane m of every
 * row to y + m * ldy, R consecutive floats (a 16 x 16 transpose in registers, then one masked store
 * per lane: in place of 16 R scalar stores). */
static inline __attribute__((always_inline)) void store_transposed16(const int R, const __m512* c,
                                                                     float* y, ptrdiff_t ldy) {
    __m512 r[16];
    const __mmask16 keep = oxk_first_lanes(R);
    int i;
#pragma GCC unroll 16
    for (i = 0; i < 16; i++) r[i] = i < R ? c[i] : _mm512_setzero_ps();
    oxk_transpose16(r);
#pragma GCC unroll 16
    for (i = 0; i < 16; i++) _mm512_mask_storeu_ps(y + i * ldy, keep, r[i]);
}
#endif

/* The epilogue and store of one lanes tile: NR channels from m0 (c0: the first VW, c1: the next)
 * x R positions from p0 of y's planes. Bias per lane; the sums go through a buffer (R rows of NR)
 * where the residual z is added, then the activation, then each channel's R values are stored. */
static inline __attribute__((always_inline)) void lanes_store(const oxk_conv_lanes* d, const int R,
                                                              VT* c0, VT* c1, int m0, int p0) {
    float buf[RT * NR] __attribute__((aligned(64)));
    const int mv = d->M - m0 < NR ? d->M - m0 : NR, act = d->act;
    const int vec_act = act == OXK_ACT_RELU || act == OXK_ACT_CLIP;
    /* AVX-512, whole panels: stored from registers by store_transposed16, not from buf */
    const int from_regs = VW == 16 && mv == NR;
    const ptrdiff_t ldy = d->ldy;
    int r, m;
    if (d->bias) {
        VT b0, b1;
        if (mv == NR) {
            b0 = V_LOAD(d->bias + m0);
            b1 = V_LOAD(d->bias + m0 + VW);
        } else {
            float bb[NR] __attribute__((aligned(64)));
            for (m = 0; m < NR; m++) bb[m] = m < mv ? d->bias[m0 + m] : 0.f;
            b0 = V_LOAD(bb);
            b1 = V_LOAD(bb + VW);
        }
#pragma GCC unroll 16
        for (r = 0; r < R; r++) { c0[r] = V_ADD(c0[r], b0); c1[r] = V_ADD(c1[r], b1); }
    }
    if (d->z) {
        const float* zp = d->z + (size_t)m0 * ldy + p0;
#pragma GCC unroll 16
        for (r = 0; r < R; r++) { V_STORE(buf + r * NR, c0[r]); V_STORE(buf + r * NR + VW, c1[r]); }
        for (m = 0; m < mv; m++, zp += ldy)
            for (r = 0; r < R; r++) buf[r * NR + m] += zp[r];
        if (vec_act) {
#pragma GCC unroll 16
            for (r = 0; r < R; r++) { c0[r] = V_LOAD(buf + r * NR); c1[r] = V_LOAD(buf + r * NR + VW); }
        }
    }
    if (vec_act) {
        const VT lo = V_SET1(act == OXK_ACT_CLIP ? d->p0 : 0.f), hi = V_SET1(d->p1);
#pragma GCC unroll 16
        for (r = 0; r < R; r++) {
            c0[r] = V_MAX(c0[r], lo);
            c1[r] = V_MAX(c1[r], lo);
            if (act == OXK_ACT_CLIP) { c0[r] = V_MIN(c0[r], hi); c1[r] = V_MIN(c1[r], hi); }
        }
    }
    if ((vec_act || !d->z) && (!from_regs || act > OXK_ACT_CLIP)) {
#pragma GCC unroll 16
        for (r = 0; r < R; r++) { V_STORE(buf + r * NR, c0[r]); V_STORE(buf + r * NR + VW, c1[r]); }
    }
    if (act > OXK_ACT_CLIP) oxk_act_row(buf, R * NR, act, d->p0, d->p1);
#if VW == 16
    if (from_regs) {   /* the sums are final in c0/c1 unless an epilogue step left them in buf */
        float* yp = d->y + (size_t)m0 * ldy + p0;
        if (act > OXK_ACT_CLIP || (d->z && !vec_act)) {
#pragma GCC unroll 16
            for (r = 0; r < R; r++) { c0[r] = V_LOAD(buf + r * NR); c1[r] = V_LOAD(buf + r * NR + VW); }
        }
        store_transposed16(R, c0, yp, ldy);
        store_transposed16(R, c1, yp + VW * ldy, ldy);
        return;
    }
#endif
    {
        float* yp = d->y + (size_t)m0 * ldy + p0;
        for (m = 0; m < mv; m++, yp += ldy)
#pragma GCC unroll 16
            for (r = 0; r < R; r++) yp[r] = buf[r * NR + m];
    }
}

/* R positions (a constant after inlining) from xb x NR channels of the weight panel b: all K. */
static inline __attribute__((always_inline)) void lanes_tile(const oxk_conv_lanes* d, const int R,
                                                             const float* b, const float* xb, int m0,
                                                             int p0, const lanes_pf* pf) {
    VT c0[RT], c1[RT];
    const int* ko = d->koff;
    const int K = d->K, every = pf->every;
    const char* pl = pf->at;
    int r, k, k0, i, pn = pf->lines;
#pragma GCC unroll 16
    for (r = 0; r < R; r++) { c0[r] = V_ZERO(); c1[r] = V_ZERO(); }
    for (k0 = 0; k0 < K; k0 += every) {
        const int k1 = K - k0 < every ? K : k0 + every;
        for (i = 0; i < pf->per && pn > 0; i++, pn--, pl += 64)   /* into L2: the next panel */
            _mm_prefetch(pl, _MM_HINT_T1);
#pragma GCC unroll 2
        for (k = k0; k < k1; k++) {
            const float* xp = xb + ko[k];
            const VT w0 = V_LOAD(b), w1 = V_LOAD(b + VW);
            /* the input rows come from L2 through offsets no hardware prefetcher follows: fetch
             * both ends of a later step's run (the weights stream in order) */
            const float* xf = xb + ko[k + PF_B];
            _mm_prefetch((const char*)xf, _MM_HINT_T0);
            _mm_prefetch((const char*)(xf + R - 1), _MM_HINT_T0);
#pragma GCC unroll 16
            for (r = 0; r < R; r++) {
                const VT xv = V_SET1(xp[r]);
                c0[r] = V_FMA(xv, w0, c0[r]);
                c1[r] = V_FMA(xv, w1, c1[r]);
            }
            b += NR;
        }
    }
    lanes_store(d, R, c0, c1, m0, p0);
}

typedef void (*lanes_tile_fn)(const oxk_conv_lanes* d, const float* b, const float* xb, int m0, int p0,
                              const lanes_pf* pf);
#define LANES_TILE_FN(R) \
    static void lanes_tile_##R(const oxk_conv_lanes* d, const float* b, const float* xb, int m0, int p0, \
                               const lanes_pf* pf) { lanes_tile(d, R, b, xb, m0, p0, pf); }
LANES_TILE_FN(1) LANES_TILE_FN(2) LANES_TILE_FN(3) LANES_TILE_FN(4) LANES_TILE_FN(5) LANES_TILE_FN(6)
#if RT > 6
LANES_TILE_FN(7) LANES_TILE_FN(8) LANES_TILE_FN(9) LANES_TILE_FN(10) LANES_TILE_FN(11) LANES_TILE_FN(12)
LANES_TILE_FN(13) LANES_TILE_FN(14)
#endif
static const lanes_tile_fn LANES_TILES[RT] = {
    lanes_tile_1, lanes_tile_2, lanes_tile_3, lanes_tile_4, lanes_tile_5, lanes_tile_6,
#if RT > 6
    lanes_tile_7, lanes_tile_8, lanes_tile_9, lanes_tile_10, lanes_tile_11, lanes_tile_12,
    lanes_tile_13, lanes_tile_14,
#endif
};

/* The fewest K steps between a lanes tile's prefetches of the next panel. */
#define LANES_PF_STEPS 8

/* Each channel panel (its weights stay in L2) over the call's row segments; a row of OW positions
 * is cut into `segs` pieces as even as can be (the first OW % segs one longer). A panel's weights
 * are read once per segment: from memory on the first, unless fetched ahead. So the panel's tiles
 * prefetch the next panel (the next in this call, or the one after the call's last) into L2, an
 * even share each, one line every few K steps: its memory traffic overlaps this panel's FMAs. */
static void conv_lanes(const oxk_conv_lanes* d) {
    const int segs = d->segs, len = d->OW / segs, extra = d->OW % segs, S = d->s_end - d->s_beg;
    const int panels = (d->M + NR - 1) / NR, lines = (int)(((size_t)d->K * NR * sizeof(float) + 63) / 64);
    const int share = (lines + S - 1) / S;
    int c, s;
    for (c = d->c_beg; c < d->c_end; c++) {
        const float* b = d->pb + (size_t)c * d->K * NR;
        for (s = d->s_beg; s < d->s_end; s++) {
            const int oh = s / segs, piece = s % segs, t = s - d->s_beg;
            const int ow = piece * len + (piece < extra ? piece : extra), R = len + (piece < extra);
            lanes_pf pf;
            pf.at = (const char*)(b + (size_t)d->K * NR) + (size_t)t * share * 64;
            pf.lines = c + 1 < panels ? (lines - t * share < share ? lines - t * share : share) : 0;
            pf.every = pf.lines > 0 && d->K / pf.lines > LANES_PF_STEPS ? d->K / pf.lines : LANES_PF_STEPS;
            pf.per = pf.lines > 0 ? (int)(((size_t)pf.lines * pf.every + d->K - 1) / d->K) : 0;
            LANES_TILES[R - 1](d, b, d->x + (size_t)oh * d->Wq + ow, c * NR, oh * d->OW + ow, &pf);
        }
    }
}

const oxk_gemm_isa GEMM_ISA = {GEMM_NAME, MR, NR, pack_a, pack_b, sgemm, conv_direct, RT, conv_lanes};
