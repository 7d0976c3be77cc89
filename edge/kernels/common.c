/* common.c - version, backend name, activations and aligned allocation shared by the kernels. */
#include "oxk.h"
#include "vec.h"

int oxk_version(void) { return 1; }

const char* oxk_backend(void) { return VEC_BACKEND; }

float oxk_act_scalar(float v, int act, float p0, float p1) {
    switch (act) {
    case OXK_ACT_RELU: return v > 0.f ? v : 0.f;
    case OXK_ACT_CLIP: return v < p0 ? p0 : (v > p1 ? p1 : v);
    case OXK_ACT_SIGMOID: return 1.f / (1.f + expf(-v));
    case OXK_ACT_GELU_TANH:
        return 0.5f * v * (1.f + tanhf(0.7978845608028654f * (v + 0.044715f * v * v * v)));
    case OXK_ACT_LEAKY_RELU: return v >= 0.f ? v : v * p0;
    case OXK_ACT_TANH: return tanhf(v);
    default: return v;
    }
}

void oxk_act_row(float* y, int n, int act, float p0, float p1) {
    int i = 0;
    if (act == OXK_ACT_NONE) return;
    if (act == OXK_ACT_RELU || act == OXK_ACT_CLIP) {
        vf4 lo = vf_dup(act == OXK_ACT_RELU ? 0.f : p0);
        vf4 hi = vf_dup(act == OXK_ACT_RELU ? OXK_INFINITY : p1);
        for (; i + 4 <= n; i += 4) vf_store(y + i, vf_min(vf_max(vf_load(y + i), lo), hi));
    }
    for (; i < n; i++) y[i] = oxk_act_scalar(y[i], act, p0, p1);
}

void* oxk_aligned_alloc(size_t bytes) {
    /* 64-byte aligned block; the byte before the block holds the offset back to malloc's. */
    unsigned char* raw = (unsigned char*)malloc(bytes + 64);
    unsigned char* p;
    if (!raw) return NULL;
    p = raw + (64 - ((uintptr_t)raw & 63));
    p[-1] = (unsigned char)(p - raw);
    return p;
}

void oxk_aligned_free(void* p) {
    if (p) free((unsigned char*)p - ((unsigned char*)p)[-1]);
}
