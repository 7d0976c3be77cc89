/* oxk_libc.h - the few libc pieces the kernels use. A freestanding wasm32 build (clang
 * --target=wasm32 -nostdlib, no sysroot) has no libc headers: declare them, the embedder links them. */
#ifndef OXK_LIBC_H
#define OXK_LIBC_H

#include <stddef.h>
#include <stdint.h>

#if defined(__wasm__) && !defined(__wasi__) && !defined(__EMSCRIPTEN__)
#  define OXK_NO_THREADS 1
#  if defined(__wasm_atomics__)
#    define OXK_WASM_THREADS 1   /* shared memory: threadpool.c's pool of Web Worker instances */
#  endif
void* malloc(size_t n);
void free(void* p);
void* memset(void* p, int c, size_t n);
void* memcpy(void* d, const void* s, size_t n);
float expf(float x);
float tanhf(float x);
#  define OXK_INFINITY __builtin_inff()
#else
#  include <math.h>
#  include <stdlib.h>
#  include <string.h>
#  define OXK_INFINITY INFINITY
#endif

#endif /* OXK_LIBC_H */
