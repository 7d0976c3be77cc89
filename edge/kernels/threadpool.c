/* threadpool.c - a tiny persistent pthread pool: oxk_parallel_for(n, fn, ctx) runs fn(ctx, i)
 * for i in [0, n) on up to oxk_get_num_threads() threads (the caller is one of them).
 * One job at a time: a caller that finds the pool busy (another thread's job) runs its
 * loop itself, so concurrent callers never wait on each other. wasm32 with shared memory
 * (OXK_WASM_THREADS) has its own pool of Web Worker instances; other builds without pthreads
 * (OXK_NO_THREADS) run every loop on the caller. */
#include "oxk.h"

#if !defined(OXK_NO_THREADS)
#include <pthread.h>
#include <unistd.h>

#define OXK_MAX_THREADS 64

static pthread_mutex_t g_submit = PTHREAD_MUTEX_INITIALIZER;   /* held while a job runs */
static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;     /* guards the fields below */
static pthread_cond_t g_wake = PTHREAD_COND_INITIALIZER;
static pthread_cond_t g_done = PTHREAD_COND_INITIALIZER;
static pthread_t g_workers[OXK_MAX_THREADS];
static int g_nworkers = 0;          /* started worker threads (pool size - 1) */
static int g_nthreads = 1;          /* the size asked for */
static unsigned long g_generation = 0;
static oxk_task_fn g_fn;
static void* g_ctx;
static int g_n, g_next, g_active;   /* g_active: workers inside run_tasks (never reset) */
static int g_joined;                /* workers that joined the current job */

static void run_tasks(void) {
    for (;;) {
        int i;
        pthread_mutex_lock(&g_lock);
        i = g_next < g_n ? g_next++ : -1;
        pthread_mutex_unlock(&g_lock);
        if (i < 0) return;
        g_fn(g_ctx, i);
    }
}

static void* worker(void* arg) {
    unsigned long seen = 0;
    (void)arg;
    for (;;) {
        pthread_mutex_lock(&g_lock);
        while (g_generation == seen) pthread_cond_wait(&g_wake, &g_lock);
        seen = g_generation;
        if (g_joined >= g_nthreads - 1) {   /* pool shrunk below the started workers */
            pthread_mutex_unlock(&g_lock);
            continue;
        }
        g_joined++;
        g_active++;
        pthread_mutex_unlock(&g_lock);
        run_tasks();
        pthread_mutex_lock(&g_lock);
        if (--g_active == 0) pthread_cond_signal(&g_done);
        pthread_mutex_unlock(&g_lock);
    }
    return NULL;
}

int oxk_set_num_threads(int n) {
    if (n <= 0) {
        long c = sysconf(_SC_NPROCESSORS_ONLN);
        n = c > 0 ? (int)c : 1;
    }
    if (n > OXK_MAX_THREADS) n = OXK_MAX_THREADS;
    pthread_mutex_lock(&g_submit);
    pthread_mutex_lock(&g_lock);
    while (g_nworkers < n - 1) {   /* workers are only ever added; extra ones stay idle */
        if (pthread_create(&g_workers[g_nworkers], NULL, worker, NULL) != 0) break;
        pthread_detach(g_workers[g_nworkers]);
        g_nworkers++;
    }
    g_nthreads = n < g_nworkers + 1 ? n : g_nworkers + 1;
    pthread_mutex_unlock(&g_lock);
    pthread_mutex_unlock(&g_submit);
    return g_nthreads;
}

int oxk_get_num_threads(void) { return g_nthreads; }

void oxk_parallel_for(int n, oxk_task_fn fn, void* ctx) {
    int i;
    if (n <= 0) return;
    if (n == 1 || g_nthreads <= 1 || pthread_mutex_trylock(&g_submit) != 0) {
        for (i = 0; i < n; i++) fn(ctx, i);
        return;
    }
    pthread_mutex_lock(&g_lock);
    g_fn = fn; g_ctx = ctx; g_n = n; g_next = 0; g_joined = 0;
    g_generation++;
    pthread_cond_broadcast(&g_wake);
    pthread_mutex_unlock(&g_lock);
    run_tasks();
    pthread_mutex_lock(&g_lock);
    while (g_active > 0 || g_next < g_n) {
        pthread_mutex_unlock(&g_lock);
        run_tasks();
        pthread_mutex_lock(&g_lock);
        if (g_active > 0) pthread_cond_wait(&g_done, &g_lock);
    }
    pthread_mutex_unlock(&g_lock);
    pthread_mutex_unlock(&g_submit);
}

#elif defined(OXK_WASM_THREADS)
/* wasm32 with shared memory: every worker is a Web Worker running its own instance of the module
 * on the same memory (and its own stack), parked in oxk_worker_loop. A job is published in memory:
 * the caller sets the task counter to 0, bumps g_gen and notifies; the workers and the caller take
 * task indices from the counter. Only workers that joined (g_active) are waited for: a worker
 * that wakes late (a busy machine) finds no task left, so the caller never waits on a sleeping
 * worker. After the last task is taken the caller parks the counter at NO_TASKS, so a late worker
 * of this job takes nothing, or (once the next job reset it) a task of the next job, which waits for
 * it through g_active. The caller spins (a page's main thread may not block in memory.atomic.wait);
 * workers spin a little before they sleep, so the back-to-back loops of one kernel (pad, im2col,
 * GEMM) do not each pay a wake-up. */
#define OXK_MAX_THREADS 64
#define SPIN_BEFORE_SLEEP 20000
#define NO_TASKS (1 << 30)

typedef _Atomic int aint;
static aint g_gen, g_next = NO_TASKS, g_active, g_busy, g_started, g_worker_tasks;
static int g_nthreads = 1;
static oxk_task_fn g_fn;
static void* g_ctx;
static int g_n;

static int ld(aint* p) { return __c11_atomic_load(p, __ATOMIC_SEQ_CST); }

static int run_tasks(void) {
    int i, done = 0;
    while ((i = __c11_atomic_fetch_add(&g_next, 1, __ATOMIC_SEQ_CST)) < g_n) { g_fn(g_ctx, i); done++; }
    return done;
}

/* Each worker's stack top, so a thread can tell which it is (oxk_thread_slot): every instance has
 * its own stack (the main one below __heap_base, --stack-first; the workers' in the heap), and C
 * globals live in the shared memory, so "which stack holds my frame" is the one per-thread fact. */
extern unsigned char __heap_base;
static uintptr_t g_stack_top[OXK_MAX_THREADS];

int oxk_thread_slot(void) {
    uintptr_t frame = (uintptr_t)__builtin_frame_address(0), best = 0;
    int i, slot = 0, n = ld(&g_started);
    if (frame < (uintptr_t)&__heap_base) return 0;   /* the main instance */
    for (i = 0; i < n && i < OXK_MAX_THREADS - 1; i++) {
        uintptr_t top = g_stack_top[i];
        if (top >= frame && (!best || top < best)) { best = top; slot = i + 1; }
    }
    return slot;
}

/* The body of worker `index` (0-based; the caller is not a worker): never returns. */
OXK_API void oxk_worker_loop(int index) {
    int seen = ld(&g_gen);
    if (index >= 0 && index < OXK_MAX_THREADS - 1)
        g_stack_top[index] = (uintptr_t)__builtin_frame_address(0);
    __c11_atomic_fetch_add(&g_started, 1, __ATOMIC_SEQ_CST);
    for (;;) {
        int spin = 0;
        while (ld(&g_gen) == seen) {
            if (++spin > SPIN_BEFORE_SLEEP)
                __builtin_wasm_memory_atomic_wait32((int*)&g_gen, seen, -1);
        }
        seen = ld(&g_gen);
        if (index >= g_nthreads - 1) continue;   /* the pool was shrunk below this worker */
        __c11_atomic_fetch_add(&g_active, 1, __ATOMIC_SEQ_CST);
        __c11_atomic_fetch_add(&g_worker_tasks, run_tasks(), __ATOMIC_SEQ_CST);
        __c11_atomic_fetch_sub(&g_active, 1, __ATOMIC_SEQ_CST);
    }
}

/* Workers that have entered oxk_worker_loop, and the tasks they have run so far (for tests). */
OXK_API int oxk_workers_started(void) { return ld(&g_started); }
OXK_API int oxk_worker_tasks(void) { return ld(&g_worker_tasks); }

int oxk_set_num_threads(int n) {
    int started = ld(&g_started);
    if (n <= 0 || n > started + 1) n = started + 1;
    if (n > OXK_MAX_THREADS) n = OXK_MAX_THREADS;
    g_nthreads = n;
    return n;
}

int oxk_get_num_threads(void) { return g_nthreads; }

void oxk_parallel_for(int n, oxk_task_fn fn, void* ctx) {
    int i, workers = g_nthreads - 1;
    if (n <= 0) return;
    if (n == 1 || workers <= 0 || __c11_atomic_exchange(&g_busy, 1, __ATOMIC_ACQUIRE)) {
        for (i = 0; i < n; i++) fn(ctx, i);   /* serial, or nested inside a task */
        return;
    }
    g_fn = fn; g_ctx = ctx; g_n = n;
    __c11_atomic_store(&g_next, 0, __ATOMIC_SEQ_CST);
    __c11_atomic_fetch_add(&g_gen, 1, __ATOMIC_SEQ_CST);
    __builtin_wasm_memory_atomic_notify((int*)&g_gen, (unsigned)workers);
    run_tasks();
    __c11_atomic_store(&g_next, NO_TASKS, __ATOMIC_SEQ_CST);
    while (ld(&g_active) > 0) {
    }
    __c11_atomic_store(&g_busy, 0, __ATOMIC_RELEASE);
}

#else  /* OXK_NO_THREADS */

int oxk_thread_slot(void) { return 0; }
int oxk_set_num_threads(int n) { (void)n; return 1; }
int oxk_get_num_threads(void) { return 1; }
void oxk_parallel_for(int n, oxk_task_fn fn, void* ctx) {
    int i;
    for (i = 0; i < n; i++) fn(ctx, i);
}

#endif
