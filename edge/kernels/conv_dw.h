/* conv_dw.h - the depthwise convolution's inner loop (internal to the library).
 *
 * conv.c lays one channel's zero-padded input out in stride phases (polyphase: phase (r, s)
 * holds rows r, r + sh, ... and columns s, s + sw, ... of the padded plane, each phase Hq x Wq),
 * so that every tap of every output reads contiguous memory: output (oh, ow) of tap (i, k) is
 * phase ((i dh) % sh, (k dw) % sw) at row oh + (i dh) / sh, column ow + (k dw) / sw. Over the
 * flat index q = oh * Wq + ow a tap is one shifted contiguous stream, so a channel is `taps`
 * streams summed over n = OH * Wq flat outputs (columns ow >= OW are junk the caller drops).
 *
 * oxk_dw_rows_* computes out[q] = act(bias + sum_t w[t] * base[off[t] + q]) for q < n rounded up
 * to DW_BLOCK (the caller's buffers are that long, and base readable that far); act is applied only
 * for Relu and Clip (others: the caller runs oxk_act_row). One version per vector ISA: conv.c's
 * vf4 version (NEON, wasm simd128, SSE2, plain C) and the x86-64 AVX2+FMA / AVX-512F versions
 * (conv_dw_avx2.c, conv_dw_avx512.c, each compiled with its ISA's flags), chosen by the SGEMM
 * core the library chose at load (gemm_isa.h). */
#ifndef OXK_CONV_DW_H
#define OXK_CONV_DW_H

#include "oxk.h"

#define DW_BLOCK 64   /* the widest block of flat outputs (4 AVX-512 vectors) */

typedef void (*oxk_dw_rows_fn)(const float* base, const size_t* off, int taps, const float* w,
                               float bias, int act, float p0, float p1, float* out, int n);
void oxk_dw_rows_avx2(const float* base, const size_t* off, int taps, const float* w, float bias,
                      int act, float p0, float p1, float* out, int n);
void oxk_dw_rows_avx512(const float* base, const size_t* off, int taps, const float* w, float bias,
                        int act, float p0, float p1, float* out, int n);

/* oxk_dw3_*: the 3x3, stride 1 or 2 (both ways), dilation 1 depthwise conv of one channel straight
 * from its unpadded plane x (H x W, pads pt / pl at the top / left, the rest implied by OH x OW)
 * into out (OH x OW), with no padded copy and no flat junk columns, to the phases path's bits: act
 * applied as in oxk_dw_rows_*. Returns 0 (nothing written) when the plane is too narrow for one
 * vector of interior columns (or the pads wider than a vector). */
typedef int (*oxk_dw3_fn)(const float* x, int H, int W, int stride, int pt, int pl, const float* w,
                          float bias, int act, float p0, float p1, float* out, int OH, int OW);
int oxk_dw3_avx2(const float* x, int H, int W, int stride, int pt, int pl, const float* w, float bias,
                 int act, float p0, float p1, float* out, int OH, int OW);
int oxk_dw3_avx512(const float* x, int H, int W, int stride, int pt, int pl, const float* w,
                   float bias, int act, float p0, float p1, float* out, int OH, int OW);

/* oxk_dw16_avx512: the depthwise conv of nch <= 16 channels at once, channels along the lanes (for
 * small planes, where a padded copy and a flat loop per channel cost more than the taps): the nch
 * planes at x (H x W, plane stride xs) are transposed into buf as Hp x Wp positions of 16 floats
 * (the interior rewritten; the border positions, pads included, zeroed here), each output position
 * sums bias, then its taps in row-major order (the phases path's bits; act applied as in
 * oxk_dw_rows_*), and the outputs are transposed back into y (nch planes of OH x OW, plane stride
 * ys). w: nch x kh kw weights (kh kw <= DW16_MAX_TAPS); bias: nch values or NULL. buf holds
 * (Hp Wp + OH OW) 16 floats; Hp / Wp cover the padded input and every window. */
#define DW16_MAX_TAPS 25
typedef void (*oxk_dw16_fn)(const float* x, size_t xs, int nch, int H, int W, int kh, int kw, int sh,
                            int sw, int dh, int dw, int pt, int pl, const float* w, const float* bias,
                            int act, float p0, float p1, float* y, size_t ys, int OH, int OW,
                            float* buf, int Hp, int Wp);
void oxk_dw16_avx512(const float* x, size_t xs, int nch, int H, int W, int kh, int kw, int sh, int sw,
                     int dh, int dw, int pt, int pl, const float* w, const float* bias, int act, float p0,
                     float p1, float* y, size_t ys, int OH, int OW, float* buf, int Hp, int Wp);

#endif /* OXK_CONV_DW_H */
