/* common.c - version, backend name, activations, aligned allocation and the per-thread scratch
 * buffers shared by the kernels. */
#include "oxk.h"
#include "vec.h"
#include "gemm_isa.h"

int oxk_version(void) { return 1; }

/* The vector backend; on x86-64 the SGEMM core chosen at load ("sse2", "avx2+fma", "avx512f"). */
const char* oxk_backend(void) {
#if defined(OXK_X86_GEMM)
    return oxk_sgemm_isa_name();
#else
    return VEC_BACKEND;
#endif
}

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

/* Per-thread scratch: OXK_SCRATCH_SLOTS growable blocks per calling thread, kept across calls (no
 * malloc/free and no fresh page faults per inference) and freed when the thread exits. */
typedef struct { void* p[OXK_SCRATCH_SLOTS]; size_t n[OXK_SCRATCH_SLOTS]; } scratch_set;

#if !defined(OXK_NO_THREADS)
#include <pthread.h>
static pthread_key_t g_scratch_key;
static pthread_once_t g_scratch_once = PTHREAD_ONCE_INIT;
static int g_scratch_ok = 0;

static void scratch_release(void* v) {
    scratch_set* s = (scratch_set*)v;
    int i;
    for (i = 0; i < OXK_SCRATCH_SLOTS; i++) oxk_aligned_free(s->p[i]);
    free(s);
}

static void scratch_key_init(void) { g_scratch_ok = pthread_key_create(&g_scratch_key, scratch_release) == 0; }

static scratch_set* scratch_of_thread(void) {
    scratch_set* s;
    pthread_once(&g_scratch_once, scratch_key_init);
    if (!g_scratch_ok) return NULL;
    s = (scratch_set*)pthread_getspecific(g_scratch_key);
    if (!s) {
        s = (scratch_set*)malloc(sizeof(scratch_set));
        if (!s) return NULL;
        memset(s, 0, sizeof(scratch_set));
        if (pthread_setspecific(g_scratch_key, s) != 0) { free(s); return NULL; }
    }
    return s;
}
#else
static scratch_set g_scratch;
static scratch_set* scratch_of_thread(void) { return &g_scratch; }
#endif

void* oxk_scratch(int slot, size_t bytes) {
    scratch_set* s = scratch_of_thread();
    if (!s || slot < 0 || slot >= OXK_SCRATCH_SLOTS) return NULL;
    if (bytes > s->n[slot]) {
        void* p = oxk_aligned_alloc(bytes + bytes / 4);   /* some headroom for the next shape */
        if (!p) return NULL;
        oxk_aligned_free(s->p[slot]);
        s->p[slot] = p;
        s->n[slot] = bytes + bytes / 4;
    }
    return s->p[slot];
}
