/* attention.c - multi-head scaled dot-product attention (com.onnxedge MultiHeadAttention), one
 * engine op (issue #16/#17; the batched MatMul of two computed operands is matmul.c's oxk_matmul).
 *
 * Attention: per (batch, head) task, scores = scale * Q K^T through oxk_sgemm reading the heads
 * in place (transB, leading dimension H * D: no copies), + the additive mask (broadcast by its
 * strides), softmax over each row (normalization.c's oxk_softmax, the one implementation; rows are
 * independent, so it gives the same bits however it splits them), NaN -> 0 when asked,
 * then out = P V straight into the head's columns of the output. Tasks run over oxk_parallel_for;
 * each task's arithmetic does not depend on which thread runs it (the GEMMs inside run serially in
 * a task: nested oxk_parallel_for), and every task writes its own scores rows, so results are
 * bitwise-equal for any number of threads. */
#include "oxk.h"

typedef struct {
    const oxk_attention_args* a;
    const float *q, *k, *v, *mask;
    float *scratch, *y;
    int rc;
} attention_job;

static void attention_task(void* ctx, int t) {
    attention_job* j = (attention_job*)ctx;
    const oxk_attention_args* a = j->a;
    int b = t / a->heads, h = t % a->heads;
    int Sq = a->q_seq, Skv = a->kv_seq, D = a->head_size, Dv = a->v_head_size;
    int ldq = a->heads * D, ldv = a->heads * Dv;
    const float* q = j->q + (size_t)b * Sq * ldq + (size_t)h * D;
    const float* k = j->k + (size_t)b * Skv * ldq + (size_t)h * D;
    const float* v = j->v + (size_t)b * Skv * ldv + (size_t)h * Dv;
    float* y = j->y + (size_t)b * Sq * ldv + (size_t)h * Dv;
    float* s = j->scratch + (size_t)t * Sq * Skv;
    int i, c, rc;
    rc = oxk_sgemm(0, 1, Sq, Skv, D, a->scale, q, ldq, NULL, k, ldq, NULL, 0.f, s, Skv,
                   NULL, OXK_BIAS_NONE, OXK_ACT_NONE, 0.f, 0.f);
    if (!rc && j->mask) {
        const float* m = j->mask + (size_t)b * a->mask_stride[0] + (size_t)h * a->mask_stride[1];
        int si = a->mask_stride[2], sj = a->mask_stride[3];
        for (i = 0; i < Sq; i++) {
            float* row = s + (size_t)i * Skv;
            const float* mr = m + (size_t)i * si;
            if (sj == 1)
                for (c = 0; c < Skv; c++) row[c] += mr[c];
            else
                for (c = 0; c < Skv; c++) row[c] += mr[(size_t)c * sj];
        }
    }
    if (!rc) rc = oxk_softmax(s, Sq, Skv, 0, s);   /* nested in a task: runs in this thread */
    if (!rc) {
        if (a->nan_to_zero)
            for (i = 0; i < Sq * Skv; i++) s[i] = s[i] != s[i] ? 0.f : s[i];
        rc = oxk_sgemm(0, 0, Sq, Dv, Skv, 1.f, s, Skv, NULL, v, ldv, NULL, 0.f, y, ldv,
                       NULL, OXK_BIAS_NONE, OXK_ACT_NONE, 0.f, 0.f);
    }
    if (rc) j->rc = rc;   /* any failing task's code (they fail alike: bad arguments, memory) */
}

int oxk_attention(const oxk_attention_args* a, const float* q, const float* k, const float* v,
                  const float* mask, float* scratch, float* y) {
    attention_job j;
    int d;
    if (!a || a->batch < 0 || a->heads < 1 || a->q_seq < 0 || a->kv_seq < 0 || a->head_size < 0
            || a->v_head_size < 0)
        return OXK_EARG;
    for (d = 0; d < 4; d++)
        if (a->mask_stride[d] < 0) return OXK_EARG;
    if (a->batch == 0 || a->q_seq == 0 || a->v_head_size == 0) return 0;
    if (a->kv_seq == 0) return OXK_EARG;   /* a softmax over nothing */
    if (!q || !k || !v || !scratch || !y) return OXK_EARG;
    j.a = a; j.q = q; j.k = k; j.v = v; j.mask = mask; j.scratch = scratch; j.y = y; j.rc = 0;
    oxk_parallel_for(a->batch * a->heads, attention_task, &j);
    return j.rc;
}

size_t oxk_attention_scratch_size(const oxk_attention_args* a) {
    if (!a || a->batch < 0 || a->heads < 1 || a->q_seq < 0 || a->kv_seq < 0) return 0;
    return (size_t)a->batch * a->heads * a->q_seq * a->kv_seq;
}
