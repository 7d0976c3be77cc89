/* wasm_rt.c - the small libc a freestanding wasm32 build of the kernels needs (no emscripten, no
 * WASI): a heap allocator over the module's linear memory, memset/memcpy/memmove (bulk-memory
 * instructions), expf/tanhf (computed in double: within 1 ulp of the correctly rounded float), and
 * the exported oxk_malloc/oxk_free that JavaScript uses to place tensors and plans in memory.
 *
 * Heap: [__heap_base, end of memory), a chain of blocks, each with a 16-byte header (size of the
 * previous block, own size | USED bit) so payloads stay 16-byte aligned; free blocks sit on one
 * doubly linked list (first fit, split, neighbours merged on free). When nothing fits, memory.grow
 * extends the last block. In the threads build (-matomics) a spinlock guards the heap: workers may
 * allocate while the main thread does. Only this file grows memory. */
#if defined(__wasm__)
#include "oxk.h"

#define HDR 16u
#define MIN_BLOCK 32u
#define USED 1u
#define PAGE 65536u

typedef struct block {
    uint32_t prev_size;   /* size of the block before (0 for the first) */
    uint32_t size;        /* own size including this header, | USED */
    uint32_t pad[2];
    struct block* next;   /* free list links: only in free blocks (inside the payload) */
    struct block* prev;
} block;

extern unsigned char __heap_base;
static block* g_first;    /* first block of the heap */
static block* g_end;      /* zero-size USED sentinel at the end of memory */
static block* g_free;     /* free list head */

#if defined(__wasm_atomics__)
static int g_lock;
static void heap_lock(void) {
    while (__c11_atomic_exchange((_Atomic int*)&g_lock, 1, __ATOMIC_ACQUIRE)) {
    }
}
static void heap_unlock(void) { __c11_atomic_store((_Atomic int*)&g_lock, 0, __ATOMIC_RELEASE); }
#else
static void heap_lock(void) {}
static void heap_unlock(void) {}
#endif

static uint32_t bsize(const block* b) { return b->size & ~USED; }
static block* bnext(block* b) { return (block*)((unsigned char*)b + bsize(b)); }

static void list_push(block* b) {
    b->prev = NULL;
    b->next = g_free;
    if (g_free) g_free->prev = b;
    g_free = b;
}

static void list_remove(block* b) {
    if (b->prev) b->prev->next = b->next;
    else g_free = b->next;
    if (b->next) b->next->prev = b->prev;
}

static void put_sentinel(unsigned char* at, uint32_t prev_size) {
    g_end = (block*)at;
    g_end->prev_size = prev_size;
    g_end->size = USED;
}

static void heap_init(void) {
    uintptr_t start = ((uintptr_t)&__heap_base + HDR - 1) & ~(uintptr_t)(HDR - 1);
    uintptr_t end = (uintptr_t)__builtin_wasm_memory_size(0) * PAGE;
    g_first = (block*)start;
    if (end - start < MIN_BLOCK + HDR) {
        if (__builtin_wasm_memory_grow(0, 1) == (size_t)-1) return;
        end += PAGE;
    }
    g_first->prev_size = 0;
    g_first->size = (uint32_t)(end - HDR - start);
    put_sentinel((unsigned char*)end - HDR, g_first->size);
    list_push(g_first);
}

/* Free block b (off the list) of at least `need` bytes becomes used; the rest returns to the list. */
static void* take(block* b, uint32_t need) {
    uint32_t size = bsize(b);
    if (size - need >= MIN_BLOCK) {
        block* rest = (block*)((unsigned char*)b + need);
        rest->prev_size = need;
        rest->size = size - need;
        bnext(rest)->prev_size = rest->size;
        list_push(rest);
        size = need;
    }
    b->size = size | USED;
    return (unsigned char*)b + HDR;
}

/* Grow memory so that the heap ends with a free block of at least `need` bytes; it is returned off
 * the list. NULL when memory cannot grow. */
static block* grow(uint32_t need) {
    block* last = (block*)((unsigned char*)g_end - g_end->prev_size);
    int last_free = g_end->prev_size && !(last->size & USED);
    uint32_t have = last_free ? bsize(last) : 0;
    uint64_t pages = ((uint64_t)need - have + HDR + PAGE - 1) / PAGE;
    block* b;
    if (pages > 65536 - __builtin_wasm_memory_size(0) || __builtin_wasm_memory_grow(0, (size_t)pages) == (size_t)-1)
        return NULL;
    if (last_free) {
        list_remove(last);
        b = last;
        b->size = have + (uint32_t)pages * PAGE;
    } else {
        b = g_end;   /* the old sentinel's place starts the new block */
        b->size = (uint32_t)pages * PAGE;
    }
    put_sentinel((unsigned char*)b + b->size, b->size);
    return b;
}

void* malloc(size_t n) {
    uint32_t need;
    block* b;
    void* p = NULL;
    if (n > 0xFFFF0000u - 2 * HDR) return NULL;
    need = (uint32_t)((n + HDR + HDR - 1) & ~(size_t)(HDR - 1));
    if (need < MIN_BLOCK) need = MIN_BLOCK;
    heap_lock();
    if (!g_first) heap_init();
    for (b = g_free; b; b = b->next)
        if (bsize(b) >= need) break;
    if (b) list_remove(b);
    else if (g_first) b = grow(need);
    if (b) p = take(b, need);
    heap_unlock();
    return p;
}

void free(void* p) {
    block *b, *nx;
    if (!p) return;
    heap_lock();
    b = (block*)((unsigned char*)p - HDR);
    b->size &= ~USED;
    nx = bnext(b);
    if (!(nx->size & USED)) {   /* merge the next block */
        list_remove(nx);
        b->size += nx->size;
    }
    if (b->prev_size) {
        block* pv = (block*)((unsigned char*)b - b->prev_size);
        if (!(pv->size & USED)) {   /* merge into the previous block */
            list_remove(pv);
            pv->size += b->size;
            b = pv;
        }
    }
    bnext(b)->prev_size = b->size;
    list_push(b);
    heap_unlock();
}

OXK_API void* oxk_malloc(size_t n) { return malloc(n); }
OXK_API void oxk_free(void* p) { free(p); }

/* Bytes the heap holds in free blocks and the linear memory's size: for tests and leak checks. */
OXK_API size_t oxk_heap_free_bytes(void) {
    size_t total = 0;
    block* b;
    heap_lock();
    for (b = g_free; b; b = b->next) total += bsize(b);
    heap_unlock();
    return total;
}

/* With -mbulk-memory these builtins are single memory.fill / memory.copy instructions. */
void* memset(void* p, int c, size_t n) { __builtin_memset(p, c, n); return p; }
void* memcpy(void* d, const void* s, size_t n) { __builtin_memcpy(d, s, n); return d; }
void* memmove(void* d, const void* s, size_t n) { __builtin_memmove(d, s, n); return d; }

/* exp(r) for |r| <= ln2/2 in double: Taylor to r^12 (error < 1e-16 relative). */
static double exp_reduced(double r) {
    double p = 1.0 / 479001600.0;
    p = p * r + 1.0 / 39916800.0;
    p = p * r + 1.0 / 3628800.0;
    p = p * r + 1.0 / 362880.0;
    p = p * r + 1.0 / 40320.0;
    p = p * r + 1.0 / 5040.0;
    p = p * r + 1.0 / 720.0;
    p = p * r + 1.0 / 120.0;
    p = p * r + 1.0 / 24.0;
    p = p * r + 1.0 / 6.0;
    p = p * r + 0.5;
    p = p * r + 1.0;
    return p * r + 1.0;
}

/* exp(x) in double for |x| <= 200 (2^k scaling through the exponent bits). */
static double exp_d(double x) {
    const double ln2_hi = 6.93147180369123816490e-01, ln2_lo = 1.90821492927058770002e-10;
    double k = __builtin_nearbyint(x * 1.4426950408889634);
    double r = (x - k * ln2_hi) - k * ln2_lo;
    union { double d; uint64_t u; } s;
    s.u = (uint64_t)((int64_t)k + 1023) << 52;
    return exp_reduced(r) * s.d;
}

float expf(float x) {
    if (x != x) return x;
    if (x > 88.8f) return OXK_INFINITY;
    if (x < -104.f) return 0.f;
    return (float)exp_d((double)x);
}

/* expm1(y) in double for 0 <= y <= 20, without cancellation near 0. */
static double expm1_d(double y) {
    if (y < 0.25) {
        double t = y, s = y;
        int i;
        for (i = 2; i <= 14; i++) { t *= y / i; s += t; }
        return s;
    }
    return exp_d(y) - 1.0;
}

float tanhf(float x) {
    double a, e;
    if (x != x) return x;
    a = x < 0.f ? -(double)x : (double)x;
    if (a > 10.0) return x < 0.f ? -1.f : 1.f;
    e = expm1_d(2.0 * a);
    a = e / (e + 2.0);
    return (float)(x < 0.f ? -a : a);
}
#endif /* __wasm__ */
