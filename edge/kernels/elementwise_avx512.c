/* elementwise_avx512.c - the elementwise functions (elementwise_impl.h) 16 lanes at a time with AVX-512F (zmm,
 * comparisons into mask registers); compiled only for x86-64 with -mavx512f and run by
 * elementwise.c's oxk_act_row when the library chose the AVX-512 SGEMM core (gemm_isa.h). */
#include <immintrin.h>
#include "oxk.h"

typedef __m512 VF;
typedef __m512i VI;
typedef __mmask16 VM;
#define VW 16
static inline VF vf_load(const float* p) { return _mm512_loadu_ps(p); }
static inline void vf_store(float* p, VF v) { _mm512_storeu_ps(p, v); }
static inline VF vf_dup(float x) { return _mm512_set1_ps(x); }
static inline VF vf_add(VF a, VF b) { return _mm512_add_ps(a, b); }
static inline VF vf_sub(VF a, VF b) { return _mm512_sub_ps(a, b); }
static inline VF vf_mul(VF a, VF b) { return _mm512_mul_ps(a, b); }
static inline VF vf_div(VF a, VF b) { return _mm512_div_ps(a, b); }
static inline VF vf_fma(VF acc, VF a, VF b) { return _mm512_fmadd_ps(a, b, acc); }
static inline VF vf_sqrt(VF a) { return _mm512_sqrt_ps(a); }
static inline VF vf_max(VF a, VF b) { return _mm512_max_ps(a, b); }
static inline VF vf_min(VF a, VF b) { return _mm512_min_ps(a, b); }
static inline VM vf_lt(VF a, VF b) { return _mm512_cmp_ps_mask(a, b, _CMP_LT_OQ); }
static inline VM vf_le(VF a, VF b) { return _mm512_cmp_ps_mask(a, b, _CMP_LE_OQ); }
static inline VM vf_eq(VF a, VF b) { return _mm512_cmp_ps_mask(a, b, _CMP_EQ_OQ); }
static inline VM vm_and(VM a, VM b) { return (VM)(a & b); }
static inline VM vm_or(VM a, VM b) { return (VM)(a | b); }
static inline int vm_all(VM m) { return m == 0xffff; }
static inline VF vf_sel(VM m, VF a, VF b) { return _mm512_mask_blend_ps(m, b, a); }
static inline VI vf_bits(VF a) { return _mm512_castps_si512(a); }
static inline VF vi_float(VI a) { return _mm512_castsi512_ps(a); }
static inline VF vi_cvt(VI a) { return _mm512_cvtepi32_ps(a); }
static inline VI vi_dup(int32_t x) { return _mm512_set1_epi32(x); }
static inline VI vi_add(VI a, VI b) { return _mm512_add_epi32(a, b); }
static inline VI vi_sub(VI a, VI b) { return _mm512_sub_epi32(a, b); }
static inline VI vi_and(VI a, VI b) { return _mm512_and_epi32(a, b); }
static inline VI vi_or(VI a, VI b) { return _mm512_or_epi32(a, b); }
static inline VI vi_xor(VI a, VI b) { return _mm512_xor_epi32(a, b); }
static inline VM vi_eq(VI a, VI b) { return _mm512_cmpeq_epi32_mask(a, b); }
#define vi_shl(a, n) _mm512_slli_epi32(a, n)
#define vi_sra(a, n) _mm512_srai_epi32(a, n)
/* v 2^k (k an integer-valued float) rounded once, denormals included */
#define act_ldexp(v, k) _mm512_scalef_ps(v, k)

#define ACT_ROW oxk_act_row_avx512
#define ACT_ROW_LINKAGE
void ACT_ROW(float* y, int n, int act, float p0, float p1);
#include "elementwise_impl.h"
