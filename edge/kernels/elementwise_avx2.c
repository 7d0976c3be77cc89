/* elementwise_avx2.c - the elementwise functions (elementwise_impl.h) 8 lanes at a time with AVX2 + FMA (ymm);
 * compiled only for x86-64 with -mavx2 -mfma and run by elementwise.c's oxk_act_row when the
 * library chose the AVX2 SGEMM core (gemm_isa.h). */
#include <immintrin.h>
#include "oxk.h"

typedef __m256 VF;
typedef __m256i VI;
typedef __m256 VM;   /* all bits of a lane set or clear */
#define VW 8
static inline VF vf_load(const float* p) { return _mm256_loadu_ps(p); }
static inline void vf_store(float* p, VF v) { _mm256_storeu_ps(p, v); }
static inline VF vf_dup(float x) { return _mm256_set1_ps(x); }
static inline VF vf_add(VF a, VF b) { return _mm256_add_ps(a, b); }
static inline VF vf_sub(VF a, VF b) { return _mm256_sub_ps(a, b); }
static inline VF vf_mul(VF a, VF b) { return _mm256_mul_ps(a, b); }
static inline VF vf_div(VF a, VF b) { return _mm256_div_ps(a, b); }
static inline VF vf_fma(VF acc, VF a, VF b) { return _mm256_fmadd_ps(a, b, acc); }
static inline VF vf_sqrt(VF a) { return _mm256_sqrt_ps(a); }
static inline VF vf_max(VF a, VF b) { return _mm256_max_ps(a, b); }
static inline VF vf_min(VF a, VF b) { return _mm256_min_ps(a, b); }
static inline VM vf_lt(VF a, VF b) { return _mm256_cmp_ps(a, b, _CMP_LT_OQ); }
static inline VM vf_le(VF a, VF b) { return _mm256_cmp_ps(a, b, _CMP_LE_OQ); }
static inline VM vf_eq(VF a, VF b) { return _mm256_cmp_ps(a, b, _CMP_EQ_OQ); }
static inline VM vm_and(VM a, VM b) { return _mm256_and_ps(a, b); }
static inline VM vm_or(VM a, VM b) { return _mm256_or_ps(a, b); }
static inline int vm_all(VM m) { return _mm256_movemask_ps(m) == 0xff; }
static inline VF vf_sel(VM m, VF a, VF b) { return _mm256_blendv_ps(b, a, m); }
static inline VI vf_bits(VF a) { return _mm256_castps_si256(a); }
static inline VF vi_float(VI a) { return _mm256_castsi256_ps(a); }
static inline VF vi_cvt(VI a) { return _mm256_cvtepi32_ps(a); }
static inline VI vi_dup(int32_t x) { return _mm256_set1_epi32(x); }
static inline VI vi_add(VI a, VI b) { return _mm256_add_epi32(a, b); }
static inline VI vi_sub(VI a, VI b) { return _mm256_sub_epi32(a, b); }
static inline VI vi_and(VI a, VI b) { return _mm256_and_si256(a, b); }
static inline VI vi_or(VI a, VI b) { return _mm256_or_si256(a, b); }
static inline VI vi_xor(VI a, VI b) { return _mm256_xor_si256(a, b); }
static inline VM vi_eq(VI a, VI b) { return _mm256_castsi256_ps(_mm256_cmpeq_epi32(a, b)); }
#define vi_shl(a, n) _mm256_slli_epi32(a, n)
#define vi_sra(a, n) _mm256_srai_epi32(a, n)

#define ACT_ROW oxk_act_row_avx2
#define ACT_ROW_LINKAGE
void ACT_ROW(float* y, int n, int act, float p0, float p1);
#include "elementwise_impl.h"
