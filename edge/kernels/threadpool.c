/* threadpool.c - a tiny persistent pthread pool: oxk_parallel_for(n, fn, ctx) runs fn(ctx, i)
 * for i in [0, n) on up to oxk_get_num_threads() threads (the caller is one of them).
 * One job at a time: a caller that finds the pool busy (another thread's job) runs its
 * loop itself, so concurrent callers never wait on each other. Builds without pthreads
 * (OXK_NO_THREADS, e.g. wasm32) run every loop on the caller. */
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

#else  /* OXK_NO_THREADS */

int oxk_set_num_threads(int n) { (void)n; return 1; }
int oxk_get_num_threads(void) { return 1; }
void oxk_parallel_for(int n, oxk_task_fn fn, void* ctx) {
    int i;
    for (i = 0; i < n; i++) fn(ctx, i);
}

#endif
