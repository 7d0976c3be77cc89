/* common.c - version, backend name, aligned allocation and the per-thread scratch buffers shared by
 * the kernels (the activations are elementwise.c's). */
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
#else   /* one set per thread slot: the main instance and each Web Worker of the wasm threads build */
static scratch_set g_scratch[OXK_THREAD_SLOTS];
static scratch_set* scratch_of_thread(void) {
    int slot = oxk_thread_slot();
    return slot >= 0 && slot < OXK_THREAD_SLOTS ? &g_scratch[slot] : NULL;
}
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
