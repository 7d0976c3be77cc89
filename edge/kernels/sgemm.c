/* sgemm.c - single-precision GEMM: packed panels of A (VEC_MR rows) and B (VEC_NR columns),
 * a VEC_MR x VEC_NR register-tiled micro-kernel (vf_fma = vfmaq_f32 on NEON), edge tiles
 * through a zero-padded tile buffer, K blocked by KC, alpha/beta/transposes, and a fused
 * epilogue (bias per row or column, then an activation) applied on the last K block.
 * Parallel over blocks of C with oxk_parallel_for. */
#include "oxk.h"
#include "vec.h"

#define MR VEC_MR
#define NR VEC_NR
#define KC 256
#define MB (MR * 8)
#define NB (NR * 16)

static int ceil_div(int a, int b) { return (a + b - 1) / b; }

size_t oxk_pack_a_size(int M, int K) { return (size_t)ceil_div(M, MR) * MR * (size_t)(K > 0 ? K : 1); }
size_t oxk_pack_b_size(int N, int K) { return (size_t)ceil_div(N, NR) * NR * (size_t)(K > 0 ? K : 1); }

/* packed A: for each tile of MR rows, K steps of MR values (rows past M are zero). */
int oxk_pack_a(int transA, int M, int K, const float* A, int lda, float* packed) {
    int mt, k, r;
    if (M < 0 || K < 0 || !A || !packed) return OXK_EARG;
    for (mt = 0; mt < ceil_div(M, MR); mt++) {
        float* dst = packed + (size_t)mt * K * MR;
        int m0 = mt * MR, mv = M - m0 < MR ? M - m0 : MR;
        for (k = 0; k < K; k++) {
            for (r = 0; r < mv; r++)
                dst[r] = transA ? A[(size_t)k * lda + m0 + r] : A[(size_t)(m0 + r) * lda + k];
            for (; r < MR; r++) dst[r] = 0.f;
            dst += MR;
        }
    }
    return 0;
}

/* packed B: for each panel of NR columns, K steps of NR values (columns past N are zero). */
int oxk_pack_b(int transB, int N, int K, const float* B, int ldb, float* packed) {
    int nt, k, j;
    if (N < 0 || K < 0 || !B || !packed) return OXK_EARG;
    for (nt = 0; nt < ceil_div(N, NR); nt++) {
        float* dst = packed + (size_t)nt * K * NR;
        int n0 = nt * NR, nv = N - n0 < NR ? N - n0 : NR;
        for (k = 0; k < K; k++) {
            if (!transB && nv == NR) {
                memcpy(dst, B + (size_t)k * ldb + n0, NR * sizeof(float));
            } else {
                for (j = 0; j < nv; j++)
                    dst[j] = transB ? B[(size_t)(n0 + j) * ldb + k] : B[(size_t)k * ldb + n0 + j];
                for (; j < NR; j++) dst[j] = 0.f;
            }
            dst += NR;
        }
    }
    return 0;
}

/* tile[MR][NR] = sum over kc steps of a[k][:] (outer) b[k][:]. */
static void ukernel(int kc, const float* a, const float* b, float* tile) {
    vf4 c0[MR], c1[MR];
    int k, r;
    for (r = 0; r < MR; r++) { c0[r] = vf_dup(0.f); c1[r] = vf_dup(0.f); }
    for (k = 0; k < kc; k++) {
        vf4 b0 = vf_load(b), b1 = vf_load(b + 4);
        for (r = 0; r < MR; r++) {
            vf4 ar = vf_dup(a[r]);
            c0[r] = vf_fma(c0[r], ar, b0);
            c1[r] = vf_fma(c1[r], ar, b1);
        }
        a += MR;
        b += NR;
    }
    for (r = 0; r < MR; r++) { vf_store(tile + r * NR, c0[r]); vf_store(tile + r * NR + 4, c1[r]); }
}

/* One row of a tile (row r of a packed A panel, stride MR): for short edge tiles, where the
 * full MR-row kernel would do MR / mv times the needed work (M = 1: a matrix-vector product). */
static void ukernel_row(int kc, const float* a, const float* b, float* trow) {
    vf4 c0 = vf_dup(0.f), c1 = vf_dup(0.f);
    int k;
    for (k = 0; k < kc; k++) {
        vf4 ar = vf_dup(a[(size_t)k * MR]);
        c0 = vf_fma(c0, ar, vf_load(b));
        c1 = vf_fma(c1, ar, vf_load(b + 4));
        b += NR;
    }
    vf_store(trow, c0);
    vf_store(trow + 4, c1);
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
    int mblocks, nblocks;
} gemm_job;

/* Merge one tile into C: C = alpha*tile + (first ? beta*C : C), epilogue on the last K block. */
static void store_tile(const gemm_job* g, const float* tile, int m0, int n0, int first, int last) {
    int mv = g->M - m0 < MR ? g->M - m0 : MR, nv = g->N - n0 < NR ? g->N - n0 : NR;
    int r, j;
    vf4 va = vf_dup(g->alpha), vb = vf_dup(g->beta);
    for (r = 0; r < mv; r++) {
        float* c = g->C + (size_t)(m0 + r) * g->ldc + n0;
        const float* t = tile + r * NR;
        if (nv == NR) {
            vf4 x0 = vf_mul(va, vf_load(t)), x1 = vf_mul(va, vf_load(t + 4));
            if (!first) {
                x0 = vf_add(x0, vf_load(c)); x1 = vf_add(x1, vf_load(c + 4));
            } else if (g->beta != 0.f) {
                x0 = vf_fma(x0, vb, vf_load(c)); x1 = vf_fma(x1, vb, vf_load(c + 4));
            }
            if (last && g->bias_kind == OXK_BIAS_ROW) {
                vf4 bb = vf_dup(g->bias[m0 + r]);
                x0 = vf_add(x0, bb); x1 = vf_add(x1, bb);
            } else if (last && g->bias_kind == OXK_BIAS_COL) {
                x0 = vf_add(x0, vf_load(g->bias + n0)); x1 = vf_add(x1, vf_load(g->bias + n0 + 4));
            }
            vf_store(c, x0); vf_store(c + 4, x1);
        } else {
            for (j = 0; j < nv; j++) {
                float x = g->alpha * t[j];
                if (!first) x += c[j];
                else if (g->beta != 0.f) x += g->beta * c[j];
                if (last && g->bias_kind == OXK_BIAS_ROW) x += g->bias[m0 + r];
                else if (last && g->bias_kind == OXK_BIAS_COL) x += g->bias[n0 + j];
                c[j] = x;
            }
        }
        if (last) oxk_act_row(c, nv, g->act, g->p0, g->p1);
    }
}

static void gemm_block(void* ctx, int idx) {
    const gemm_job* g = (const gemm_job*)ctx;
    int bm = idx / g->nblocks, bn = idx % g->nblocks;
    int m_beg = bm * MB, m_end = m_beg + MB < g->M ? m_beg + MB : g->M;
    int n_beg = bn * NB, n_end = n_beg + NB < g->N ? n_beg + NB : g->N;
    int K = g->K, k0, m0, n0;
    float tile[MR * NR];
    for (k0 = 0; k0 < (K > 0 ? K : 1); k0 += KC) {
        int kc = K - k0 < KC ? K - k0 : KC;
        int first = k0 == 0, last = k0 + KC >= K;
        for (n0 = n_beg; n0 < n_end; n0 += NR) {
            const float* b = g->pb + (size_t)(n0 / NR) * K * NR + (size_t)k0 * NR;
            for (m0 = m_beg; m0 < m_end; m0 += MR) {
                const float* a = g->pa + (size_t)(m0 / MR) * K * MR + (size_t)k0 * MR;
                int mv = g->M - m0, r;
                if (mv * 2 <= MR) {
                    for (r = 0; r < mv; r++) ukernel_row(kc, a + r, b, tile + r * NR);
                } else {
                    ukernel(kc, a, b, tile);
                }
                store_tile(g, tile, m0, n0, first, last);
            }
        }
    }
}

int oxk_sgemm(int transA, int transB, int M, int N, int K, float alpha,
              const float* A, int lda, const float* packA,
              const float* B, int ldb, const float* packB,
              float beta, float* C, int ldc,
              const float* bias, int bias_kind, int act, float p0, float p1) {
    gemm_job g;
    float *pa = NULL, *pb = NULL;
    if (M < 0 || N < 0 || K < 0 || !C || ldc < N) return OXK_EARG;
    if (M == 0 || N == 0) return 0;
    if ((!packA && !A) || (!packB && !B) || (bias_kind != OXK_BIAS_NONE && !bias)) return OXK_EARG;
    if (!packA) {
        pa = (float*)oxk_aligned_alloc(oxk_pack_a_size(M, K) * sizeof(float));
        if (!pa) return OXK_ENOMEM;
        oxk_pack_a(transA, M, K, A, lda, pa);
    }
    if (!packB) {
        pb = (float*)oxk_aligned_alloc(oxk_pack_b_size(N, K) * sizeof(float));
        if (!pb) { oxk_aligned_free(pa); return OXK_ENOMEM; }
        oxk_pack_b(transB, N, K, B, ldb, pb);
    }
    g.M = M; g.N = N; g.K = K; g.alpha = alpha; g.beta = beta;
    g.pa = packA ? packA : pa; g.pb = packB ? packB : pb;
    g.C = C; g.ldc = ldc; g.bias = bias; g.bias_kind = bias_kind;
    g.act = act; g.p0 = p0; g.p1 = p1;
    g.mblocks = ceil_div(M, MB); g.nblocks = ceil_div(N, NB);
    oxk_parallel_for(g.mblocks * g.nblocks, gemm_block, &g);
    oxk_aligned_free(pa);
    oxk_aligned_free(pb);
    return 0;
}
