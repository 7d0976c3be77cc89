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

#endif /* OXK_CONV_DW_H */
