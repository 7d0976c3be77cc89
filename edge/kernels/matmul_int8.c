/* matmul_int8.c - int8 GEMM with int32 output and zero points (MatMulInteger, QLinearMatMul).
 * uint8 data is moved to int8 by subtracting 128 from data and zero point alike, so one signed
 * loop serves all four type pairs: raw = sum a'b' (vmull_s8 + vpadalq_s16 on NEON, vdotq_s32 when
 * the CPU has the dot-product extension - chosen at run time), then
 * C = raw - zb'*rowsum(a') - za'*colsum(b') + K*za'*zb'. */
#include "oxk.h"
#include "vec.h"
#define QGEMM_FN oxk_qgemm_rows_base
#include "matmul_int8_impl.h"

#if defined(OXK_HAVE_DOTPROD_TU)
#include <sys/auxv.h>
#ifndef HWCAP_ASIMDDP
#define HWCAP_ASIMDDP (1 << 20)
#endif
void oxk_qgemm_rows_dotprod(int M, int N, int K16, const int8_t* a, const int8_t* b, int32_t* C,
                            int ldc, int m_beg, int m_end);
#endif

#define QROWS 16

static int k16(int K) { return (K + 15) / 16 * 16; }

int oxk_qgemm_has_dotprod(void) {
#if defined(OXK_HAVE_DOTPROD_TU)
    return (getauxval(AT_HWCAP) & HWCAP_ASIMDDP) != 0;
#else
    return 0;
#endif
}

size_t oxk_qpack_b_size(int N, int K) { return (size_t)N * sizeof(int32_t) + (size_t)N * k16(K); }

/* Packed B: N int32 column sums (of the signed values), then N columns of K16 int8 values. */
int oxk_qpack_b(int N, int K, const void* B, int b_signed, int8_t* packed) {
    int n, k, K16 = k16(K);
    int32_t* sums = (int32_t*)packed;
    int8_t* cols = packed + (size_t)N * sizeof(int32_t);
    if (N < 0 || K < 0 || !B || !packed) return OXK_EARG;
    for (n = 0; n < N; n++) {
        int8_t* dst = cols + (size_t)n * K16;
        int32_t s = 0;
        for (k = 0; k < K; k++) {
            int v = b_signed ? ((const int8_t*)B)[(size_t)k * N + n] : ((const uint8_t*)B)[(size_t)k * N + n] - 128;
            dst[k] = (int8_t)v;
            s += v;
        }
        for (; k < K16; k++) dst[k] = 0;
        sums[n] = s;
    }
    return 0;
}

typedef struct {
    int M, N, K16;
    const int8_t *a, *b;
    int32_t* C;
    int dot;
} qjob;

static void qrows(void* ctx, int blk) {
    const qjob* q = (const qjob*)ctx;
    int m0 = blk * QROWS, m1 = m0 + QROWS < q->M ? m0 + QROWS : q->M;
#if defined(OXK_HAVE_DOTPROD_TU)
    if (q->dot) { oxk_qgemm_rows_dotprod(q->M, q->N, q->K16, q->a, q->b, q->C, q->N, m0, m1); return; }
#endif
    oxk_qgemm_rows_base(q->M, q->N, q->K16, q->a, q->b, q->C, q->N, m0, m1);
}

int oxk_qgemm(int M, int N, int K, const void* A, int a_signed, const int32_t* za, int za_per_row,
              const void* B, int b_signed, const int8_t* packB, const int32_t* zb, int zb_per_col,
              int32_t* C) {
    int K16 = k16(K), m, n, k;
    int8_t *pa, *pb = NULL;
    int32_t* rowsum;
    const int32_t* colsum;
    qjob q;
    if (M < 0 || N < 0 || K < 0 || !A || (!B && !packB) || !za || !zb || !C) return OXK_EARG;
    if (M == 0 || N == 0) return 0;
    pa = (int8_t*)oxk_aligned_alloc((size_t)M * K16 + (size_t)M * sizeof(int32_t));
    if (!pa) return OXK_ENOMEM;
    rowsum = (int32_t*)(pa + (size_t)M * K16);
    for (m = 0; m < M; m++) {
        int8_t* dst = pa + (size_t)m * K16;
        int32_t s = 0;
        for (k = 0; k < K; k++) {
            int v = a_signed ? ((const int8_t*)A)[(size_t)m * K + k] : ((const uint8_t*)A)[(size_t)m * K + k] - 128;
            dst[k] = (int8_t)v;
            s += v;
        }
        for (; k < K16; k++) dst[k] = 0;
        rowsum[m] = s;
    }
    if (!packB) {
        pb = (int8_t*)oxk_aligned_alloc(oxk_qpack_b_size(N, K));
        if (!pb) { oxk_aligned_free(pa); return OXK_ENOMEM; }
        oxk_qpack_b(N, K, B, b_signed, pb);
        packB = pb;
    }
    colsum = (const int32_t*)packB;
    q.M = M; q.N = N; q.K16 = K16; q.a = pa; q.b = packB + (size_t)N * sizeof(int32_t); q.C = C;
    q.dot = oxk_qgemm_has_dotprod();
    oxk_parallel_for((M + QROWS - 1) / QROWS, qrows, &q);
    for (m = 0; m < M; m++) {
        int32_t zam = (za_per_row ? za[m] : za[0]) - (a_signed ? 0 : 128);
        for (n = 0; n < N; n++) {
            int32_t zbn = (zb_per_col ? zb[n] : zb[0]) - (b_signed ? 0 : 128);
            C[(size_t)m * N + n] += -zbn * rowsum[m] - zam * colsum[n] + K * zam * zbn;
        }
    }
    oxk_aligned_free(pa);
    oxk_aligned_free(pb);
    return 0;
}
