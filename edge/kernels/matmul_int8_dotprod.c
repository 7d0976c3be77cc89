/* matmul_int8_dotprod.c - the int8 GEMM loop built with the dot-product extension (vdotq_s32);
 * compiled only for aarch64 with -march=armv8.2-a+dotprod and chosen at run time by matmul_int8.c
 * when the CPU reports asimddp. */
#include "oxk.h"
#include "vec.h"
#define QGEMM_FN oxk_qgemm_rows_dotprod
#include "matmul_int8_impl.h"
