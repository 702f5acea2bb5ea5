/*
 * quant_k.c - the K-quant block formats llamachat needs: Q6_K (weights: what llama.cpp stores
 * output.weight in) and Q8_K (its activations).  Reference versions of ggml-quants.c.
 */
#include "quant.h"

#include <string.h>

/* TODO(issue 5): bit-exact make_qx_quants port. */
void lc_quantize_row_q6_K_ref(const float *x, lc_block_q6_K *y, int64_t n)
{
    (void)x;
    memset(y, 0, (size_t)(n / LC_QK_K) * sizeof(*y));
}

void lc_quantize_row_q8_K_ref(const float *x, lc_block_q8_K *y, int64_t n)
{
    (void)x;
    memset(y, 0, (size_t)(n / LC_QK_K) * sizeof(*y));
}

void lc_dequantize_row_q6_K(const lc_block_q6_K *x, float *y, int64_t n)
{
    (void)x;
    memset(y, 0, (size_t)n * sizeof(float));
}
