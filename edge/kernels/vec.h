/* vec.h - the small set of vector operations every kernel is written in.
 *
 * One 4-lane float type (vf4) and one 4-lane int32 type (vi4), with a backend per target:
 *   NEON (aarch64, arm_neon.h)      VEC_BACKEND "neon" / "neon+dotprod"
 *   SSE2 / SSE2+FMA (x86_64 host)   VEC_BACKEND "sse2" / "sse2+fma"
 *   wasm simd128 (wasm_simd128.h)   VEC_BACKEND "wasm-simd128"
 *   plain C (OXK_FORCE_GENERIC or any other target)  VEC_BACKEND "generic"
 * VEC_MR x VEC_NR is the SGEMM register tile of the backend (NR is two vectors wide).
 * vf_fma_lane(acc, b, a, l) = acc + b * a[l] (l a constant; NEON: one fmla by element).
 * vf_load_even(p) = p[0], p[2], p[4], p[6] (reads p[0..7]; NEON: vld2q); vf_load_deint(p, &e, &o)
 * gives those and p[1], p[3], p[5], p[7]. vf_transpose4(&a, &b, &c, &d): rows become columns.
 */
#ifndef OXK_VEC_H
#define OXK_VEC_H

#include <stdint.h>

#if defined(OXK_FORCE_GENERIC)
#  define OXK_GENERIC 1
#elif defined(__aarch64__) && defined(__ARM_NEON)
#  define OXK_NEON 1
#elif defined(__wasm_simd128__)
#  define OXK_WASM 1
#elif defined(__SSE2__)
#  define OXK_SSE 1
#else
#  define OXK_GENERIC 1
#endif

/* ------------------------------------------------------------------------------------ NEON */
#if defined(OXK_NEON)
#include <arm_neon.h>
#  if defined(__ARM_FEATURE_DOTPROD)
#    define VEC_BACKEND "neon+dotprod"
#  else
#    define VEC_BACKEND "neon"
#  endif
#  define VEC_MR 8
typedef float32x4_t vf4;
typedef int32x4_t vi4;
static inline vf4 vf_load(const float* p) { return vld1q_f32(p); }
static inline void vf_store(float* p, vf4 v) { vst1q_f32(p, v); }
static inline vf4 vf_dup(float x) { return vdupq_n_f32(x); }
static inline vf4 vf_add(vf4 a, vf4 b) { return vaddq_f32(a, b); }
static inline vf4 vf_mul(vf4 a, vf4 b) { return vmulq_f32(a, b); }
static inline vf4 vf_fma(vf4 acc, vf4 a, vf4 b) { return vfmaq_f32(acc, a, b); }
#  define vf_fma_lane(acc, b, a, l) vfmaq_laneq_f32(acc, b, a, l)
static inline vf4 vf_load_even(const float* p) { return vld2q_f32(p).val[0]; }
static inline void vf_load_deint(const float* p, vf4* even, vf4* odd) {
    float32x4x2_t v = vld2q_f32(p); *even = v.val[0]; *odd = v.val[1];
}
static inline void vf_transpose4(vf4* a, vf4* b, vf4* c, vf4* d) {
    float32x4_t t0 = vtrn1q_f32(*a, *b), t1 = vtrn2q_f32(*a, *b), t2 = vtrn1q_f32(*c, *d), t3 = vtrn2q_f32(*c, *d);
    *a = vreinterpretq_f32_f64(vtrn1q_f64(vreinterpretq_f64_f32(t0), vreinterpretq_f64_f32(t2)));
    *b = vreinterpretq_f32_f64(vtrn1q_f64(vreinterpretq_f64_f32(t1), vreinterpretq_f64_f32(t3)));
    *c = vreinterpretq_f32_f64(vtrn2q_f64(vreinterpretq_f64_f32(t0), vreinterpretq_f64_f32(t2)));
    *d = vreinterpretq_f32_f64(vtrn2q_f64(vreinterpretq_f64_f32(t1), vreinterpretq_f64_f32(t3)));
}
static inline vf4 vf_max(vf4 a, vf4 b) { return vmaxq_f32(a, b); }
static inline vf4 vf_min(vf4 a, vf4 b) { return vminq_f32(a, b); }
static inline float vf_hsum(vf4 a) { return vaddvq_f32(a); }
static inline vi4 vi_zero(void) { return vdupq_n_s32(0); }
/* acc lanes += products of 16 int8 pairs (the lane sum grows by the 16-term dot product). */
static inline vi4 vi_dot16(vi4 acc, const int8_t* a, const int8_t* b) {
    int8x16_t va = vld1q_s8(a), vb = vld1q_s8(b);
#  if defined(__ARM_FEATURE_DOTPROD)
    return vdotq_s32(acc, va, vb);
#  else
    acc = vpadalq_s16(acc, vmull_s8(vget_low_s8(va), vget_low_s8(vb)));
    return vpadalq_s16(acc, vmull_high_s8(va, vb));
#  endif
}
static inline int32_t vi_hsum(vi4 a) { return vaddvq_s32(a); }

/* -------------------------------------------------------------------------------- wasm */
#elif defined(OXK_WASM)
#include <wasm_simd128.h>
#  define VEC_BACKEND "wasm-simd128"
/* 6x8 tile with A broadcast by load (VEC_SPLAT_A): 12 accumulators, the two B vectors and the
 * broadcast fit the 16 xmm registers V8 allocates from on x86-64, and a load-splat (vbroadcastss)
 * takes a load port where a lane shuffle would take the shuffle port every multiply waits on */
#  define VEC_MR 6
#  define VEC_SPLAT_A 1
typedef v128_t vf4;
typedef v128_t vi4;
static inline vf4 vf_load(const float* p) { return wasm_v128_load(p); }
static inline vf4 vf_load_splat(const float* p) { return wasm_v128_load32_splat(p); }
static inline void vf_store(float* p, vf4 v) { wasm_v128_store(p, v); }
static inline vf4 vf_dup(float x) { return wasm_f32x4_splat(x); }
static inline vf4 vf_add(vf4 a, vf4 b) { return wasm_f32x4_add(a, b); }
static inline vf4 vf_mul(vf4 a, vf4 b) { return wasm_f32x4_mul(a, b); }
static inline vf4 vf_fma(vf4 acc, vf4 a, vf4 b) { return wasm_f32x4_add(acc, wasm_f32x4_mul(a, b)); }
#  define vf_fma_lane(acc, b, a, l) vf_fma(acc, b, wasm_i32x4_shuffle(a, a, l, l, l, l))
static inline vf4 vf_load_even(const float* p) {
    return wasm_i32x4_shuffle(wasm_v128_load(p), wasm_v128_load(p + 4), 0, 2, 4, 6);
}
static inline void vf_load_deint(const float* p, vf4* even, vf4* odd) {
    v128_t a = wasm_v128_load(p), b = wasm_v128_load(p + 4);
    *even = wasm_i32x4_shuffle(a, b, 0, 2, 4, 6); *odd = wasm_i32x4_shuffle(a, b, 1, 3, 5, 7);
}
static inline void vf_transpose4(vf4* a, vf4* b, vf4* c, vf4* d) {
    v128_t t0 = wasm_i32x4_shuffle(*a, *b, 0, 4, 1, 5), t1 = wasm_i32x4_shuffle(*a, *b, 2, 6, 3, 7);
    v128_t t2 = wasm_i32x4_shuffle(*c, *d, 0, 4, 1, 5), t3 = wasm_i32x4_shuffle(*c, *d, 2, 6, 3, 7);
    *a = wasm_i32x4_shuffle(t0, t2, 0, 1, 4, 5); *b = wasm_i32x4_shuffle(t0, t2, 2, 3, 6, 7);
    *c = wasm_i32x4_shuffle(t1, t3, 0, 1, 4, 5); *d = wasm_i32x4_shuffle(t1, t3, 2, 3, 6, 7);
}
static inline vf4 vf_max(vf4 a, vf4 b) { return wasm_f32x4_pmax(a, b); }
static inline vf4 vf_min(vf4 a, vf4 b) { return wasm_f32x4_pmin(a, b); }
static inline float vf_hsum(vf4 a) {
    return wasm_f32x4_extract_lane(a, 0) + wasm_f32x4_extract_lane(a, 1) +
           wasm_f32x4_extract_lane(a, 2) + wasm_f32x4_extract_lane(a, 3);
}
static inline vi4 vi_zero(void) { return wasm_i32x4_splat(0); }
static inline vi4 vi_dot16(vi4 acc, const int8_t* a, const int8_t* b) {
    v128_t va = wasm_v128_load(a), vb = wasm_v128_load(b);
    acc = wasm_i32x4_add(acc, wasm_i32x4_dot_i16x8(wasm_i16x8_extend_low_i8x16(va),
                                                   wasm_i16x8_extend_low_i8x16(vb)));
    return wasm_i32x4_add(acc, wasm_i32x4_dot_i16x8(wasm_i16x8_extend_high_i8x16(va),
                                                    wasm_i16x8_extend_high_i8x16(vb)));
}
static inline int32_t vi_hsum(vi4 a) {
    return wasm_i32x4_extract_lane(a, 0) + wasm_i32x4_extract_lane(a, 1) +
           wasm_i32x4_extract_lane(a, 2) + wasm_i32x4_extract_lane(a, 3);
}

/* --------------------------------------------------------------------------------- SSE */
#elif defined(OXK_SSE)
#include <emmintrin.h>
#  if defined(__FMA__)
#    include <immintrin.h>
#    define VEC_BACKEND "sse2+fma"
#  else
#    define VEC_BACKEND "sse2"
#  endif
#  define VEC_MR 4
typedef __m128 vf4;
typedef __m128i vi4;
static inline vf4 vf_load(const float* p) { return _mm_loadu_ps(p); }
static inline void vf_store(float* p, vf4 v) { _mm_storeu_ps(p, v); }
static inline vf4 vf_dup(float x) { return _mm_set1_ps(x); }
static inline vf4 vf_add(vf4 a, vf4 b) { return _mm_add_ps(a, b); }
static inline vf4 vf_mul(vf4 a, vf4 b) { return _mm_mul_ps(a, b); }
#  if defined(__FMA__)
static inline vf4 vf_fma(vf4 acc, vf4 a, vf4 b) { return _mm_fmadd_ps(a, b, acc); }
#  else
static inline vf4 vf_fma(vf4 acc, vf4 a, vf4 b) { return _mm_add_ps(acc, _mm_mul_ps(a, b)); }
#  endif
#  define vf_fma_lane(acc, b, a, l) vf_fma(acc, b, _mm_shuffle_ps(a, a, _MM_SHUFFLE(l, l, l, l)))
static inline vf4 vf_load_even(const float* p) {
    return _mm_shuffle_ps(_mm_loadu_ps(p), _mm_loadu_ps(p + 4), _MM_SHUFFLE(2, 0, 2, 0));
}
static inline void vf_load_deint(const float* p, vf4* even, vf4* odd) {
    __m128 a = _mm_loadu_ps(p), b = _mm_loadu_ps(p + 4);
    *even = _mm_shuffle_ps(a, b, _MM_SHUFFLE(2, 0, 2, 0)); *odd = _mm_shuffle_ps(a, b, _MM_SHUFFLE(3, 1, 3, 1));
}
static inline void vf_transpose4(vf4* a, vf4* b, vf4* c, vf4* d) { _MM_TRANSPOSE4_PS(*a, *b, *c, *d); }
static inline vf4 vf_max(vf4 a, vf4 b) { return _mm_max_ps(a, b); }
static inline vf4 vf_min(vf4 a, vf4 b) { return _mm_min_ps(a, b); }
static inline float vf_hsum(vf4 a) {
    float t[4]; _mm_storeu_ps(t, a); return t[0] + t[1] + t[2] + t[3];
}
static inline vi4 vi_zero(void) { return _mm_setzero_si128(); }
static inline vi4 vi_dot16(vi4 acc, const int8_t* a, const int8_t* b) {
    __m128i va = _mm_loadu_si128((const __m128i*)a), vb = _mm_loadu_si128((const __m128i*)b);
    __m128i alo = _mm_srai_epi16(_mm_unpacklo_epi8(va, va), 8);
    __m128i ahi = _mm_srai_epi16(_mm_unpackhi_epi8(va, va), 8);
    __m128i blo = _mm_srai_epi16(_mm_unpacklo_epi8(vb, vb), 8);
    __m128i bhi = _mm_srai_epi16(_mm_unpackhi_epi8(vb, vb), 8);
    acc = _mm_add_epi32(acc, _mm_madd_epi16(alo, blo));
    return _mm_add_epi32(acc, _mm_madd_epi16(ahi, bhi));
}
static inline int32_t vi_hsum(vi4 a) {
    int32_t t[4]; _mm_storeu_si128((__m128i*)t, a); return t[0] + t[1] + t[2] + t[3];
}

/* ----------------------------------------------------------------------------- generic */
#else
#  define VEC_BACKEND "generic"
#  define VEC_MR 4
typedef struct { float v[4]; } vf4;
typedef struct { int32_t v[4]; } vi4;
static inline vf4 vf_load(const float* p) { vf4 r; int i; for (i = 0; i < 4; i++) r.v[i] = p[i]; return r; }
static inline void vf_store(float* p, vf4 a) { int i; for (i = 0; i < 4; i++) p[i] = a.v[i]; }
static inline vf4 vf_dup(float x) { vf4 r; int i; for (i = 0; i < 4; i++) r.v[i] = x; return r; }
static inline vf4 vf_add(vf4 a, vf4 b) { int i; for (i = 0; i < 4; i++) a.v[i] += b.v[i]; return a; }
static inline vf4 vf_mul(vf4 a, vf4 b) { int i; for (i = 0; i < 4; i++) a.v[i] *= b.v[i]; return a; }
static inline vf4 vf_fma(vf4 acc, vf4 a, vf4 b) { int i; for (i = 0; i < 4; i++) acc.v[i] += a.v[i] * b.v[i]; return acc; }
#  define vf_fma_lane(acc, b, a, l) vf_fma(acc, b, vf_dup((a).v[l]))
static inline vf4 vf_load_even(const float* p) { vf4 r; int i; for (i = 0; i < 4; i++) r.v[i] = p[2 * i]; return r; }
static inline void vf_load_deint(const float* p, vf4* even, vf4* odd) {
    int i; for (i = 0; i < 4; i++) { even->v[i] = p[2 * i]; odd->v[i] = p[2 * i + 1]; }
}
static inline void vf_transpose4(vf4* a, vf4* b, vf4* c, vf4* d) {
    vf4 r[4] = {*a, *b, *c, *d}; int i;
    for (i = 0; i < 4; i++) { a->v[i] = r[i].v[0]; b->v[i] = r[i].v[1]; c->v[i] = r[i].v[2]; d->v[i] = r[i].v[3]; }
}
static inline vf4 vf_max(vf4 a, vf4 b) { int i; for (i = 0; i < 4; i++) a.v[i] = a.v[i] > b.v[i] ? a.v[i] : b.v[i]; return a; }
static inline vf4 vf_min(vf4 a, vf4 b) { int i; for (i = 0; i < 4; i++) a.v[i] = a.v[i] < b.v[i] ? a.v[i] : b.v[i]; return a; }
static inline float vf_hsum(vf4 a) { return a.v[0] + a.v[1] + a.v[2] + a.v[3]; }
static inline vi4 vi_zero(void) { vi4 r = {{0, 0, 0, 0}}; return r; }
static inline vi4 vi_dot16(vi4 acc, const int8_t* a, const int8_t* b) {
    int i; for (i = 0; i < 16; i++) acc.v[i & 3] += (int32_t)a[i] * (int32_t)b[i]; return acc;
}
static inline int32_t vi_hsum(vi4 a) { return a.v[0] + a.v[1] + a.v[2] + a.v[3]; }
#endif

#define VEC_NR 8

/* ---------------------------------------------------------------- elementwise math (#17)
 * What elementwise.c's vector exp/log/erf/tanh are written in: sub, div, sqrt; masks (vm4, all
 * bits of a lane set or clear) from comparisons, vf_sel(m, a, b) = m ? a : b per lane; the bits of
 * a float as int32 lanes (vf_bits / vi_float, no conversion) and int32 lane arithmetic; vm_all(m):
 * every lane of m set (a branch that skips work no lane needs). */
#if defined(OXK_NEON)
typedef uint32x4_t vm4;
static inline vf4 vf_sub(vf4 a, vf4 b) { return vsubq_f32(a, b); }
static inline vf4 vf_div(vf4 a, vf4 b) { return vdivq_f32(a, b); }
static inline vf4 vf_sqrt(vf4 a) { return vsqrtq_f32(a); }
static inline vm4 vf_lt(vf4 a, vf4 b) { return vcltq_f32(a, b); }
static inline vm4 vf_le(vf4 a, vf4 b) { return vcleq_f32(a, b); }
static inline vm4 vf_eq(vf4 a, vf4 b) { return vceqq_f32(a, b); }
static inline vm4 vm_and(vm4 a, vm4 b) { return vandq_u32(a, b); }
static inline vm4 vm_or(vm4 a, vm4 b) { return vorrq_u32(a, b); }
static inline vf4 vf_sel(vm4 m, vf4 a, vf4 b) { return vbslq_f32(m, a, b); }
static inline int vm_all(vm4 m) { return vminvq_u32(m) != 0; }
static inline vi4 vf_bits(vf4 a) { return vreinterpretq_s32_f32(a); }
static inline vf4 vi_float(vi4 a) { return vreinterpretq_f32_s32(a); }
static inline vf4 vi_cvt(vi4 a) { return vcvtq_f32_s32(a); }
static inline vi4 vi_dup(int32_t x) { return vdupq_n_s32(x); }
static inline vi4 vi_add(vi4 a, vi4 b) { return vaddq_s32(a, b); }
static inline vi4 vi_sub(vi4 a, vi4 b) { return vsubq_s32(a, b); }
static inline vi4 vi_and(vi4 a, vi4 b) { return vandq_s32(a, b); }
static inline vi4 vi_or(vi4 a, vi4 b) { return vorrq_s32(a, b); }
static inline vi4 vi_xor(vi4 a, vi4 b) { return veorq_s32(a, b); }
static inline vm4 vi_eq(vi4 a, vi4 b) { return vceqq_s32(a, b); }
#  define vi_shl(a, n) vshlq_n_s32(a, n)
#  define vi_sra(a, n) vshrq_n_s32(a, n)
#elif defined(OXK_WASM)
typedef v128_t vm4;
static inline vf4 vf_sub(vf4 a, vf4 b) { return wasm_f32x4_sub(a, b); }
static inline vf4 vf_div(vf4 a, vf4 b) { return wasm_f32x4_div(a, b); }
static inline vf4 vf_sqrt(vf4 a) { return wasm_f32x4_sqrt(a); }
static inline vm4 vf_lt(vf4 a, vf4 b) { return wasm_f32x4_lt(a, b); }
static inline vm4 vf_le(vf4 a, vf4 b) { return wasm_f32x4_le(a, b); }
static inline vm4 vf_eq(vf4 a, vf4 b) { return wasm_f32x4_eq(a, b); }
static inline vm4 vm_and(vm4 a, vm4 b) { return wasm_v128_and(a, b); }
static inline vm4 vm_or(vm4 a, vm4 b) { return wasm_v128_or(a, b); }
static inline vf4 vf_sel(vm4 m, vf4 a, vf4 b) { return wasm_v128_bitselect(a, b, m); }
static inline int vm_all(vm4 m) { return wasm_i32x4_all_true(m); }
static inline vi4 vf_bits(vf4 a) { return a; }
static inline vf4 vi_float(vi4 a) { return a; }
static inline vf4 vi_cvt(vi4 a) { return wasm_f32x4_convert_i32x4(a); }
static inline vi4 vi_dup(int32_t x) { return wasm_i32x4_splat(x); }
static inline vi4 vi_add(vi4 a, vi4 b) { return wasm_i32x4_add(a, b); }
static inline vi4 vi_sub(vi4 a, vi4 b) { return wasm_i32x4_sub(a, b); }
static inline vi4 vi_and(vi4 a, vi4 b) { return wasm_v128_and(a, b); }
static inline vi4 vi_or(vi4 a, vi4 b) { return wasm_v128_or(a, b); }
static inline vi4 vi_xor(vi4 a, vi4 b) { return wasm_v128_xor(a, b); }
static inline vm4 vi_eq(vi4 a, vi4 b) { return wasm_i32x4_eq(a, b); }
#  define vi_shl(a, n) wasm_i32x4_shl(a, n)
#  define vi_sra(a, n) wasm_i32x4_shr(a, n)
#elif defined(OXK_SSE)
typedef __m128 vm4;
static inline vf4 vf_sub(vf4 a, vf4 b) { return _mm_sub_ps(a, b); }
static inline vf4 vf_div(vf4 a, vf4 b) { return _mm_div_ps(a, b); }
static inline vf4 vf_sqrt(vf4 a) { return _mm_sqrt_ps(a); }
static inline vm4 vf_lt(vf4 a, vf4 b) { return _mm_cmplt_ps(a, b); }
static inline vm4 vf_le(vf4 a, vf4 b) { return _mm_cmple_ps(a, b); }
static inline vm4 vf_eq(vf4 a, vf4 b) { return _mm_cmpeq_ps(a, b); }
static inline vm4 vm_and(vm4 a, vm4 b) { return _mm_and_ps(a, b); }
static inline vm4 vm_or(vm4 a, vm4 b) { return _mm_or_ps(a, b); }
static inline vf4 vf_sel(vm4 m, vf4 a, vf4 b) { return _mm_or_ps(_mm_and_ps(m, a), _mm_andnot_ps(m, b)); }
static inline int vm_all(vm4 m) { return _mm_movemask_ps(m) == 0xf; }
static inline vi4 vf_bits(vf4 a) { return _mm_castps_si128(a); }
static inline vf4 vi_float(vi4 a) { return _mm_castsi128_ps(a); }
static inline vf4 vi_cvt(vi4 a) { return _mm_cvtepi32_ps(a); }
static inline vi4 vi_dup(int32_t x) { return _mm_set1_epi32(x); }
static inline vi4 vi_add(vi4 a, vi4 b) { return _mm_add_epi32(a, b); }
static inline vi4 vi_sub(vi4 a, vi4 b) { return _mm_sub_epi32(a, b); }
static inline vi4 vi_and(vi4 a, vi4 b) { return _mm_and_si128(a, b); }
static inline vi4 vi_or(vi4 a, vi4 b) { return _mm_or_si128(a, b); }
static inline vi4 vi_xor(vi4 a, vi4 b) { return _mm_xor_si128(a, b); }
static inline vm4 vi_eq(vi4 a, vi4 b) { return _mm_castsi128_ps(_mm_cmpeq_epi32(a, b)); }
#  define vi_shl(a, n) _mm_slli_epi32(a, n)
#  define vi_sra(a, n) _mm_srai_epi32(a, n)
#else
typedef struct { uint32_t v[4]; } vm4;
#  define VEC_LANES_(T, E) T r; int i; for (i = 0; i < 4; i++) r.v[i] = (E); return r
#  define VEC_MASK_(c) ((c) ? 0xffffffffu : 0u)
static inline vf4 vf_sub(vf4 a, vf4 b) { VEC_LANES_(vf4, a.v[i] - b.v[i]); }
static inline vf4 vf_div(vf4 a, vf4 b) { VEC_LANES_(vf4, a.v[i] / b.v[i]); }
static inline vf4 vf_sqrt(vf4 a) { VEC_LANES_(vf4, __builtin_sqrtf(a.v[i])); }
static inline vm4 vf_lt(vf4 a, vf4 b) { VEC_LANES_(vm4, VEC_MASK_(a.v[i] < b.v[i])); }
static inline vm4 vf_le(vf4 a, vf4 b) { VEC_LANES_(vm4, VEC_MASK_(a.v[i] <= b.v[i])); }
static inline vm4 vf_eq(vf4 a, vf4 b) { VEC_LANES_(vm4, VEC_MASK_(a.v[i] == b.v[i])); }
static inline vm4 vm_and(vm4 a, vm4 b) { VEC_LANES_(vm4, a.v[i] & b.v[i]); }
static inline vm4 vm_or(vm4 a, vm4 b) { VEC_LANES_(vm4, a.v[i] | b.v[i]); }
static inline vf4 vf_sel(vm4 m, vf4 a, vf4 b) { VEC_LANES_(vf4, m.v[i] ? a.v[i] : b.v[i]); }
static inline int vm_all(vm4 m) { return (m.v[0] & m.v[1] & m.v[2] & m.v[3]) != 0; }
static inline vi4 vf_bits(vf4 a) { vi4 r; __builtin_memcpy(r.v, a.v, sizeof r.v); return r; }
static inline vf4 vi_float(vi4 a) { vf4 r; __builtin_memcpy(r.v, a.v, sizeof r.v); return r; }
static inline vf4 vi_cvt(vi4 a) { VEC_LANES_(vf4, (float)a.v[i]); }
static inline vi4 vi_dup(int32_t x) { VEC_LANES_(vi4, x); }
static inline vi4 vi_add(vi4 a, vi4 b) { VEC_LANES_(vi4, (int32_t)((uint32_t)a.v[i] + (uint32_t)b.v[i])); }
static inline vi4 vi_sub(vi4 a, vi4 b) { VEC_LANES_(vi4, (int32_t)((uint32_t)a.v[i] - (uint32_t)b.v[i])); }
static inline vi4 vi_and(vi4 a, vi4 b) { VEC_LANES_(vi4, a.v[i] & b.v[i]); }
static inline vi4 vi_or(vi4 a, vi4 b) { VEC_LANES_(vi4, a.v[i] | b.v[i]); }
static inline vi4 vi_xor(vi4 a, vi4 b) { VEC_LANES_(vi4, a.v[i] ^ b.v[i]); }
static inline vm4 vi_eq(vi4 a, vi4 b) { VEC_LANES_(vm4, VEC_MASK_(a.v[i] == b.v[i])); }
static inline vi4 vi_shl_(vi4 a, int n) { VEC_LANES_(vi4, (int32_t)((uint32_t)a.v[i] << n)); }
static inline vi4 vi_sra_(vi4 a, int n) { VEC_LANES_(vi4, a.v[i] >> n); }
#  define vi_shl(a, n) vi_shl_(a, n)
#  define vi_sra(a, n) vi_sra_(a, n)
#endif

#endif /* OXK_VEC_H */
