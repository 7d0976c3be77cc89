/* matmul.c - single-precision GEMM (sgemm).
 *
 * B is packed into panels of VEC_NR columns (weights once, at session creation; otherwise per
 * call into per-thread scratch). A is read in place when it is row-major and its row strips meet
 * few B panels (M < MR or N <= 2 NR: matrix-vector products, small batches), and otherwise packed
 * into panels of VEC_MR rows (4, 6 or 8; per call, 4x4 transposes; or once, for conv weights). The register
 * tile is up to MR x NR accumulators, each named (see ROWS_n), so they live in registers from the
 * K loop through the store; every multiply-add step is vf_fma_lane (NEON: one `fmla v.4s, v.4s,
 * v.s[l]` per 4 multiply-adds, no broadcasts); the in-place path unrolls K by 4 (one vector load
 * per row of A serves 4 steps). K is blocked by KC; alpha, beta, transposes, and the epilogue
 * (bias per row or column, then an activation) are fused into the tile store on the last K block.
 * A strip of rows walks every panel of its block (setup once per strip, not per tile). Parallel
 * over blocks of C with oxk_parallel_for; a block's arithmetic does not depend on the thread
 * count, so results are bit-identical across counts. This is the SGEMM core of every target; on
 * x86-64 (SSE2 baseline) the public entry points at the end hand over to the AVX2+FMA or AVX-512F
 * core chosen at load when the CPU has one (gemm_isa.h). */
#include "oxk.h"
#include "vec.h"
#include "gemm_isa.h"

#define MR VEC_MR
#define NR VEC_NR
#define KC 256
#define MB (MR * 8)
#define NB (NR * 16)
/* GCC's first scheduling pass hoists every B load of the unrolled K step and then runs out of the
 * 32 vector registers (register moves in the loop); without it the micro-kernels have none. */
#if defined(__GNUC__) && !defined(__clang__)
#  define KERNEL_ATTR __attribute__((optimize("no-schedule-insns")))
#else
#  define KERNEL_ATTR
#endif

#ifndef VEC_SPLAT_A
#  define VEC_SPLAT_A 0
#endif

static int ceil_div(int a, int b) { return (a + b - 1) / b; }

static size_t panel_size(int n, int r, int K) { return (size_t)ceil_div(n, r) * r * (size_t)(K > 0 ? K : 1); }

/* packed A: for each tile of MR rows, K steps of MR values (rows past M are zero). Full tiles of a
 * row-major A go 4 x 4 blocks at a time through vf_transpose4. */
static int base_pack_a(int transA, int M, int K, const float* A, int lda, float* packed) {
    int mt, k, r;
    for (mt = 0; mt < ceil_div(M, MR); mt++) {
        float* dst = packed + (size_t)mt * K * MR;
        int m0 = mt * MR, mv = M - m0 < MR ? M - m0 : MR;
        k = 0;
        if (!transA && mv == MR) {
            for (; k + 4 <= K; k += 4) {
                int q;
                for (q = 0; q < MR / 4; q++) {
                    const float* src = A + (size_t)(m0 + 4 * q) * lda + k;
                    vf4 r0 = vf_load(src), r1 = vf_load(src + lda), r2 = vf_load(src + 2 * (size_t)lda),
                        r3 = vf_load(src + 3 * (size_t)lda);
                    vf_transpose4(&r0, &r1, &r2, &r3);
                    vf_store(dst + 4 * q, r0);
                    vf_store(dst + MR + 4 * q, r1);
                    vf_store(dst + 2 * MR + 4 * q, r2);
                    vf_store(dst + 3 * MR + 4 * q, r3);
                }
                for (r = 4 * (MR / 4); r < MR; r++) {   /* MR 6: rows 4 and 5 */
                    const float* src = A + (size_t)(m0 + r) * lda + k;
                    dst[r] = src[0]; dst[MR + r] = src[1]; dst[2 * MR + r] = src[2]; dst[3 * MR + r] = src[3];
                }
                dst += 4 * MR;
            }
        }
        for (; k < K; k++) {
            for (r = 0; r < mv; r++)
                dst[r] = transA ? A[(size_t)k * lda + m0 + r] : A[(size_t)(m0 + r) * lda + k];
            for (; r < MR; r++) dst[r] = 0.f;
            dst += MR;
        }
    }
    return 0;
}

/* packed B: for each panel of NR columns, K steps of NR values (columns past N are zero). */
static int base_pack_b(int transB, int N, int K, const float* B, int ldb, float* packed) {
    int nt, k, j;
    for (nt = 0; nt < ceil_div(N, NR); nt++) {
        float* dst = packed + (size_t)nt * K * NR;
        int n0 = nt * NR, nv = N - n0 < NR ? N - n0 : NR;
        if (!transB && nv == NR) {
            const float* src = B + n0;
            for (k = 0; k < K; k++, src += ldb, dst += NR) {
                vf_store(dst, vf_load(src));
                vf_store(dst + 4, vf_load(src + 4));
            }
            continue;
        }
        for (k = 0; k < K; k++) {
            for (j = 0; j < nv; j++)
                dst[j] = transB ? B[(size_t)(n0 + j) * ldb + k] : B[(size_t)k * ldb + n0 + j];
            for (; j < NR; j++) dst[j] = 0.f;
            dst += NR;
        }
    }
    return 0;
}

typedef struct {
    int M, N, K;
    float alpha, beta;
    const float* A;          /* row-major A (lda), read in place when pa is NULL */
    int lda;
    const float *pa, *pb;
    float* C;
    int ldc;
    const float* bias;
    int bias_kind, act;
    float p0, p1;
    int mblocks, nblocks;
} gemm_job;

void oxk_store_tile(const float* tile, int stride, int mv, int nv, float* C, int ldc,
                    float alpha, float beta, const float* bias, int bias_kind, int act,
                    float p0, float p1, int first, int last) {
    int r, j;
    for (r = 0; r < mv; r++) {
        float* c = C + (size_t)r * ldc;
        const float* t = tile + (size_t)r * stride;
        for (j = 0; j < nv; j++) {
            float x = alpha * t[j];
            if (!first) x += c[j];
            else if (beta != 0.f) x += beta * c[j];
            if (last && bias_kind == OXK_BIAS_ROW) x += bias[r];
            else if (last && bias_kind == OXK_BIAS_COL) x += bias[j];
            c[j] = x;
        }
        if (last) oxk_act_row(c, nv, act, p0, p1);
    }
}

/* oxk_store_tile for a tile of this core (row stride NR) at (m0, n0) of the job's C. */
static void store_tile_general(const gemm_job* g, const float* tile, int mv, int nv, int m0, int n0,
                               int first, int last) {
    const float* bias = g->bias_kind == OXK_BIAS_ROW ? g->bias + m0
                      : g->bias_kind == OXK_BIAS_COL ? g->bias + n0 : g->bias;
    oxk_store_tile(tile, NR, mv, nv, g->C + (size_t)m0 * g->ldc + n0, g->ldc, g->alpha, g->beta,
                   bias, g->bias_kind, g->act, g->p0, g->p1, first, last);
}

/* The micro-kernels name every accumulator (c<row>0, c<row>1: row r, columns 0-3 and 4-7) instead
 * of indexing an array, so the compiler keeps them in registers from the K loop through the store.
 * ROWS_n(X, q) expands X(r, q) for each row r of an n-row tile. */
#define ROWS_1(X, q) X(0, q)
#define ROWS_2(X, q) X(0, q) X(1, q)
#define ROWS_4(X, q) X(0, q) X(1, q) X(2, q) X(3, q)
#define ROWS_8(X, q) X(0, q) X(1, q) X(2, q) X(3, q) X(4, q) X(5, q) X(6, q) X(7, q)
#define ROWS_6(X, q) X(0, q) X(1, q) X(2, q) X(3, q) X(4, q) X(5, q)
#if MR == 8
#  define ROWS_MR ROWS_8
#elif MR == 6
#  define ROWS_MR ROWS_6
#else
#  define ROWS_MR ROWS_4
#endif

#define ACC_DECL(r, _) vf4 c##r##0 = vf_dup(0.f), c##r##1 = vf_dup(0.f);
/* row-major A: a pointer per row (rows past M repeat row M-1; their results are not stored) */
#define ROW_PTR(r, _) const float* a##r = g->A + (size_t)(m0 + r < g->M ? m0 + r : g->M - 1) * g->lda + k0;
#define ROW_LOAD4(r, _) vf4 av##r = vf_load(a##r + k);
#define ROW_FMA_LANE(r, q) c##r##0 = vf_fma_lane(c##r##0, b0, av##r, q); c##r##1 = vf_fma_lane(c##r##1, b1, av##r, q);
#define ROW_FMA_1(r, _) { vf4 s = vf_dup(a##r[k]); c##r##0 = vf_fma(c##r##0, s, b0); c##r##1 = vf_fma(c##r##1, s, b1); }
#define B_NEXT() b0 = vf_load(b); b1 = vf_load(b + 4); b += NR;
/* packed A: MR values per K step; row r is lane r % 4 of vector r / 4 (PK_FMA), or broadcast
 * from memory (PK_SPLAT_FMA, backends without a multiply by lane: the same bits) */
#define PK_SPLAT_FMA(r, _) { vf4 s = vf_load_splat(a + r); c##r##0 = vf_fma(c##r##0, s, b0); \
                             c##r##1 = vf_fma(c##r##1, s, b1); }
#define PK_FMA(r, _) c##r##0 = vf_fma_lane(c##r##0, b0, r < 4 ? a0 : a1, r % 4); \
                     c##r##1 = vf_fma_lane(c##r##1, b1, r < 4 ? a0 : a1, r % 4);

/* The tile store, from registers: C (+)= alpha acc, then bias and Relu/Clip on the last K block
 * (oxk_store_tile's order: the same bits); rows past mv are dropped. Tiles it cannot take (narrow,
 * beta on the first block) spill to a buffer for store_tile_general. */
#define ST_ALPHA(r, _) c##r##0 = vf_mul(c##r##0, va); c##r##1 = vf_mul(c##r##1, va);
#define ST_ADD_C(r, _) if (r < mv) { c##r##0 = vf_add(c##r##0, vf_load(cp + r * ldc)); \
                                     c##r##1 = vf_add(c##r##1, vf_load(cp + r * ldc + 4)); }
#define ST_BIAS_COL(r, _) c##r##0 = vf_add(c##r##0, bc0); c##r##1 = vf_add(c##r##1, bc1);
#define ST_BIAS_ROW(r, _) if (r < mv) { vf4 bb = vf_dup(brow[r]); c##r##0 = vf_add(c##r##0, bb); \
                                        c##r##1 = vf_add(c##r##1, bb); }
#define ST_RELU(r, _) c##r##0 = vf_max(c##r##0, lo); c##r##1 = vf_max(c##r##1, lo);
#define ST_CLIP(r, _) c##r##0 = vf_min(vf_max(c##r##0, lo), hi); c##r##1 = vf_min(vf_max(c##r##1, lo), hi);
#define ST_STORE(r, _) if (r < mv) { vf_store(cp + r * ldc, c##r##0); vf_store(cp + r * ldc + 4, c##r##1); }
#define ST_SPILL(r, _) vf_store(tile + r * NR, c##r##0); vf_store(tile + r * NR + 4, c##r##1);
#define STORE_TILE(ROWS, R)                                                                       \
    {                                                                                             \
        int mv = g->M - m0 < R ? g->M - m0 : R;                                                   \
        if (fast && n0 + NR <= g->N) {                                                            \
            float* cp = g->C + (size_t)m0 * ldc + n0;                                             \
            if (g->alpha != 1.f) { const vf4 va = vf_dup(g->alpha); ROWS(ST_ALPHA, 0) }           \
            if (!first) { ROWS(ST_ADD_C, 0) }                                                     \
            if (bias == OXK_BIAS_COL) {                                                           \
                vf4 bc0 = vf_load(g->bias + n0), bc1 = vf_load(g->bias + n0 + 4);                 \
                ROWS(ST_BIAS_COL, 0)                                                              \
            } else if (bias == OXK_BIAS_ROW) {                                                    \
                const float* brow = g->bias + m0;                                                 \
                ROWS(ST_BIAS_ROW, 0)                                                              \
            }                                                                                     \
            if (act == OXK_ACT_RELU) { ROWS(ST_RELU, 0) }                                         \
            else if (act == OXK_ACT_CLIP) { ROWS(ST_CLIP, 0) }                                    \
            if (act > OXK_ACT_CLIP) {   /* the other activations: one call for the tile */      \
                float tile[MR * NR];                                                              \
                int r_;                                                                           \
                ROWS(ST_SPILL, 0)                                                                 \
                oxk_act_row(tile, mv * NR, act, g->p0, g->p1);                                    \
                for (r_ = 0; r_ < mv; r_++) {                                                     \
                    vf_store(cp + r_ * ldc, vf_load(tile + r_ * NR));                             \
                    vf_store(cp + r_ * ldc + 4, vf_load(tile + r_ * NR + 4));                     \
                }                                                                                 \
            } else {                                                                              \
                ROWS(ST_STORE, 0)                                                                 \
            }                                                                                     \
        } else {                                                                                  \
            float tile[MR * NR];                                                                  \
            int nv = g->N - n0 < NR ? g->N - n0 : NR;                                             \
            ROWS(ST_SPILL, 0)                                                                     \
            store_tile_general(g, tile, mv, nv, m0, n0, first, last);                             \
        }                                                                                         \
    }

/* What every strip needs: the store's mode for this K block. */
#define STRIP_SETUP()                                                                             \
    const size_t ldc = (size_t)g->ldc;                                                            \
    const int bias = last ? g->bias_kind : OXK_BIAS_NONE, act = last ? g->act : OXK_ACT_NONE;    \
    const int fast = !first || g->beta == 0.f;                                                    \
    const vf4 lo = vf_dup(act == OXK_ACT_CLIP ? g->p0 : 0.f), hi = vf_dup(g->p1);                 \
    vf4 b0, b1;                                                                                   \
    int k, n0;

/* R rows of row-major A (from row m0, column k0) times the packed B panels of columns
 * [n_beg, n_end), kc K steps, each tile stored as it is done. K is unrolled by 4: one vector
 * load per row of A serves 4 steps through its lanes. */
#define DEFINE_STRIP_ROWS(name, ROWS, R)                                                          \
static KERNEL_ATTR void name(const gemm_job* g, int kc, int k0, int m0, int n_beg, int n_end,    \
                             int first, int last) {                                               \
    STRIP_SETUP()                                                                                 \
    ROWS(ROW_PTR, 0)                                                                              \
    (void)hi;                                                                                     \
    for (n0 = n_beg; n0 < n_end; n0 += NR) {                                                      \
        const float* b = g->pb + (size_t)(n0 / NR) * g->K * NR + (size_t)k0 * NR;                \
        ROWS(ACC_DECL, 0)                                                                         \
        for (k = 0; k + 4 <= kc; k += 4) {                                                        \
            ROWS(ROW_LOAD4, 0)                                                                    \
            B_NEXT() ROWS(ROW_FMA_LANE, 0)                                                        \
            B_NEXT() ROWS(ROW_FMA_LANE, 1)                                                        \
            B_NEXT() ROWS(ROW_FMA_LANE, 2)                                                        \
            B_NEXT() ROWS(ROW_FMA_LANE, 3)                                                        \
        }                                                                                         \
        for (; k < kc; k++) {                                                                     \
            B_NEXT() ROWS(ROW_FMA_1, 0)                                                           \
        }                                                                                         \
        STORE_TILE(ROWS, R)                                                                       \
    }                                                                                             \
}

DEFINE_STRIP_ROWS(strip_rows_mr, ROWS_MR, MR)
#if MR > 4
DEFINE_STRIP_ROWS(strip_rows_4, ROWS_4, 4)
#endif
DEFINE_STRIP_ROWS(strip_rows_2, ROWS_2, 2)
DEFINE_STRIP_ROWS(strip_rows_1, ROWS_1, 1)

/* One packed A panel (MR rows from m0, K steps from k0) times the packed B panels of columns
 * [n_beg, n_end). */
static KERNEL_ATTR void strip_packed(const gemm_job* g, int kc, int k0, int m0, int n_beg, int n_end,
                                     int first, int last) {
    const float* a_strip = g->pa + (size_t)(m0 / MR) * g->K * MR + (size_t)k0 * MR;
    STRIP_SETUP()
    (void)hi;
    for (n0 = n_beg; n0 < n_end; n0 += NR) {
        const float* b = g->pb + (size_t)(n0 / NR) * g->K * NR + (size_t)k0 * NR;
        const float* a = a_strip;
        ROWS_MR(ACC_DECL, 0)
#pragma GCC unroll 4
        for (k = 0; k < kc; k++) {
#if VEC_SPLAT_A
            B_NEXT()
            ROWS_MR(PK_SPLAT_FMA, 0)
#else
            vf4 a0 = vf_load(a), a1 = MR > 4 ? vf_load(a + 4) : a0;
            B_NEXT()
            ROWS_MR(PK_FMA, 0)
#endif
            a += MR;
        }
        STORE_TILE(ROWS_MR, MR)
    }
}

static void gemm_block(void* ctx, int idx) {
    const gemm_job* g = (const gemm_job*)ctx;
    int bm = idx / g->nblocks, bn = idx % g->nblocks;
    int m_beg = bm * MB, m_end = m_beg + MB < g->M ? m_beg + MB : g->M;
    int n_beg = bn * NB, n_end = n_beg + NB < g->N ? n_beg + NB : g->N;
    int K = g->K, k0, m0;
    for (k0 = 0; k0 < (K > 0 ? K : 1); k0 += KC) {
        int kc = K - k0 < KC ? K - k0 : KC;
        int first = k0 == 0, last = k0 + KC >= K;
        for (m0 = m_beg; m0 < m_end; m0 += MR) {
            int mv = g->M - m0;
            if (g->pa && (mv > MR / 2 || !g->A))
                strip_packed(g, kc, k0, m0, n_beg, n_end, first, last);
            else if (mv > MR / 2)
                strip_rows_mr(g, kc, k0, m0, n_beg, n_end, first, last);
#if MR > 4
            else if (mv > 2)
                strip_rows_4(g, kc, k0, m0, n_beg, n_end, first, last);
#endif
            else if (mv == 2)
                strip_rows_2(g, kc, k0, m0, n_beg, n_end, first, last);
            else
                strip_rows_1(g, kc, k0, m0, n_beg, n_end, first, last);
        }
    }
}

static int base_sgemm(int transA, int transB, int M, int N, int K, float alpha,
                      const float* A, int lda, const float* packA,
                      const float* B, int ldb, const float* packB,
                      float beta, float* C, int ldc,
                      const float* bias, int bias_kind, int act, float p0, float p1) {
    gemm_job g;
    float *pa = NULL, *pb = NULL;
    /* a row-major A is read in place, unless its row strips meet enough B panels to repay a pack */
    if (!packA && (transA || (M >= MR && N > 2 * NR))) {
        pa = (float*)oxk_scratch(OXK_SCRATCH_PACK_A, panel_size(M, MR, K) * sizeof(float));
        if (!pa) return OXK_ENOMEM;
        base_pack_a(transA, M, K, A, lda, pa);
    }
    if (!packB) {
        pb = (float*)oxk_scratch(OXK_SCRATCH_PACK_B, panel_size(N, NR, K) * sizeof(float));
        if (!pb) return OXK_ENOMEM;
        base_pack_b(transB, N, K, B, ldb, pb);
    }
    g.M = M; g.N = N; g.K = K; g.alpha = alpha; g.beta = beta;
    g.A = transA ? NULL : A; g.lda = lda;
    g.pa = packA ? packA : pa; g.pb = packB ? packB : pb;
    g.C = C; g.ldc = ldc; g.bias = bias; g.bias_kind = bias_kind;
    g.act = act; g.p0 = p0; g.p1 = p1;
    g.mblocks = ceil_div(M, MB); g.nblocks = ceil_div(N, NB);
    if (g.mblocks * g.nblocks == 1)
        gemm_block(&g, 0);
    else
        oxk_parallel_for(g.mblocks * g.nblocks, gemm_block, &g);
    return 0;
}

/* ------------------------------------------------------------------ the public entry points */
#if defined(OXK_X86_GEMM)
/* The x86-64 core chosen at load (gemm_isa.h); NULL is the baseline core above. */
static const oxk_gemm_isa* g_isa;

/* OXK_ISA's rank (sse2 0, avx2 1, avx512 2); -1 when unset or unknown (then the CPU decides). */
static int isa_rank(const char* s) {
    if (!s) return -1;
    if (!strcmp(s, "sse2")) return 0;
    if (!strcmp(s, "avx2")) return 1;
    if (!strcmp(s, "avx512")) return 2;
    return -1;
}

__attribute__((constructor)) static void choose_isa(void) {
    int have = 0, want = isa_rank(getenv("OXK_ISA"));
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
        have = __builtin_cpu_supports("avx512f") ? 2 : 1;
    if (want >= 0 && want < have) have = want;
    g_isa = have == 2 ? &oxk_gemm_avx512 : have == 1 ? &oxk_gemm_avx2 : NULL;
}

const char* oxk_sgemm_isa_name(void) { return g_isa ? g_isa->name : VEC_BACKEND; }
int oxk_sgemm_nr(void) { return g_isa ? g_isa->nr : NR; }
#  define ISA_MR (g_isa ? g_isa->mr : MR)
#  define ISA_NR (g_isa ? g_isa->nr : NR)
#  define ISA_CALL(fn, args) if (g_isa) return g_isa->fn args
#else
#  define ISA_MR MR
#  define ISA_NR NR
#  define ISA_CALL(fn, args)
#endif

size_t oxk_pack_a_size(int M, int K) { return panel_size(M, ISA_MR, K); }
size_t oxk_pack_b_size(int N, int K) { return panel_size(N, ISA_NR, K); }

int oxk_pack_a(int transA, int M, int K, const float* A, int lda, float* packed) {
    if (M < 0 || K < 0 || !A || !packed) return OXK_EARG;
    ISA_CALL(pack_a, (transA, M, K, A, lda, packed));
    return base_pack_a(transA, M, K, A, lda, packed);
}

int oxk_pack_b(int transB, int N, int K, const float* B, int ldb, float* packed) {
    if (N < 0 || K < 0 || !B || !packed) return OXK_EARG;
    ISA_CALL(pack_b, (transB, N, K, B, ldb, packed));
    return base_pack_b(transB, N, K, B, ldb, packed);
}

int oxk_sgemm(int transA, int transB, int M, int N, int K, float alpha,
              const float* A, int lda, const float* packA,
              const float* B, int ldb, const float* packB,
              float beta, float* C, int ldc,
              const float* bias, int bias_kind, int act, float p0, float p1) {
    if (M < 0 || N < 0 || K < 0 || !C || ldc < N) return OXK_EARG;
    if (M == 0 || N == 0) return 0;
    if ((!packA && !A) || (!packB && !B) || (bias_kind != OXK_BIAS_NONE && !bias)) return OXK_EARG;
    ISA_CALL(sgemm, (transA, transB, M, N, K, alpha, A, lda, packA, B, ldb, packB, beta, C, ldc,
                     bias, bias_kind, act, p0, p1));
    return base_sgemm(transA, transB, M, N, K, alpha, A, lda, packA, B, ldb, packB, beta, C, ldc,
                      bias, bias_kind, act, p0, p1);
}

int oxk_sgemm_run(const oxk_sgemm_plan* p, int M, const float* A, const float* B, float* C) {
    if (!p) return OXK_EARG;
    return oxk_sgemm(p->transA, p->transB, M, p->N, p->K, p->alpha, A, p->transA ? M : p->K, p->packA,
                     B, p->transB ? p->K : p->N, p->packB, p->beta, C, p->N,
                     p->bias, p->bias_kind, p->act, p->p0, p->p1);
}

/* oxk_matmul: MatMul with both operands computed (attention's batched products, issue #17): one
 * plan's GEMM per batch index (i0, i1, i2) of the folded batch axes, A and B found through their
 * strides (0: broadcast), C contiguous. */
int oxk_matmul(const oxk_matmul_args* m, int M, const float* A, const float* B, float* C) {
    const oxk_sgemm_plan* p;
    int i0, i1, i2, rc;
    size_t mn;
    if (!m || !m->plan || M < 0 || m->d0 < 0 || m->d1 < 0 || m->d2 < 0) return OXK_EARG;
    p = m->plan;
    mn = (size_t)M * p->N;
    for (i0 = 0; i0 < m->d0; i0++)
        for (i1 = 0; i1 < m->d1; i1++)
            for (i2 = 0; i2 < m->d2; i2++) {
                size_t ia = (size_t)i0 * m->sa0 + (size_t)i1 * m->sa1 + (size_t)i2 * m->sa2;
                size_t ib = (size_t)i0 * m->sb0 + (size_t)i1 * m->sb1 + (size_t)i2 * m->sb2;
                size_t ic = ((size_t)i0 * m->d1 + i1) * m->d2 + i2;
                rc = oxk_sgemm_run(p, M, A + ia, B ? B + ib : NULL, C + ic * mn);
                if (rc) return rc;
            }
    return 0;
}
