/* matmul_int8_impl.h - the int8 GEMM inner loop, included by matmul_int8.c (base ISA) and, on
 * aarch64, by matmul_int8_dotprod.c (compiled with +dotprod, where vi_dot16 is vdotq_s32).
 * QGEMM_FN names the function. A rows and packed B columns are K16 (K rounded up to 16)
 * int8 values each, already shifted to signed; the caller adds the zero-point corrections. */
void QGEMM_FN(int M, int N, int K16, const int8_t* a, const int8_t* b, int32_t* C, int ldc,
              int m_beg, int m_end);
void QGEMM_FN(int M, int N, int K16, const int8_t* a, const int8_t* b, int32_t* C, int ldc,
              int m_beg, int m_end) {
    int m, n, k;
    (void)M;
    for (m = m_beg; m + 2 <= m_end; m += 2) {
        const int8_t* a0 = a + (size_t)m * K16;
        const int8_t* a1 = a0 + K16;
        for (n = 0; n + 2 <= N; n += 2) {
            const int8_t* b0 = b + (size_t)n * K16;
            const int8_t* b1 = b0 + K16;
            vi4 c00 = vi_zero(), c01 = vi_zero(), c10 = vi_zero(), c11 = vi_zero();
            for (k = 0; k < K16; k += 16) {
                c00 = vi_dot16(c00, a0 + k, b0 + k);
                c01 = vi_dot16(c01, a0 + k, b1 + k);
                c10 = vi_dot16(c10, a1 + k, b0 + k);
                c11 = vi_dot16(c11, a1 + k, b1 + k);
            }
            C[(size_t)m * ldc + n] = vi_hsum(c00);
            C[(size_t)m * ldc + n + 1] = vi_hsum(c01);
            C[(size_t)(m + 1) * ldc + n] = vi_hsum(c10);
            C[(size_t)(m + 1) * ldc + n + 1] = vi_hsum(c11);
        }
        for (; n < N; n++) {
            const int8_t* b0 = b + (size_t)n * K16;
            vi4 c00 = vi_zero(), c10 = vi_zero();
            for (k = 0; k < K16; k += 16) {
                c00 = vi_dot16(c00, a0 + k, b0 + k);
                c10 = vi_dot16(c10, a1 + k, b0 + k);
            }
            C[(size_t)m * ldc + n] = vi_hsum(c00);
            C[(size_t)(m + 1) * ldc + n] = vi_hsum(c10);
        }
    }
    for (; m < m_end; m++) {
        const int8_t* a0 = a + (size_t)m * K16;
        for (n = 0; n < N; n++) {
            const int8_t* b0 = b + (size_t)n * K16;
            vi4 c00 = vi_zero();
            for (k = 0; k < K16; k += 16) c00 = vi_dot16(c00, a0 + k, b0 + k);
            C[(size_t)m * ldc + n] = vi_hsum(c00);
        }
    }
}
