/*
 * quant_gptq.h - GPTQ for the legacy block types (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0): quantize a
 * weight matrix column by column, each column's rounding error pushed onto the columns not yet
 * quantized so that the error of the matrix PRODUCT over a text, not of the weights, is small.
 *
 * Source: E. Frantar, S. Ashkboos, T. Hoefler, D. Alistarh, "GPTQ: Accurate Post-Training
 * Quantization for Generative Pre-trained Transformers", ICLR 2023, Algorithm 1 (the Cholesky
 * form of the inverse Hessian, dampening by a fraction of its mean diagonal, group-wise scales
 * chosen when the group's first column is reached).  Here a group is a 32-weight block, whose
 * F16 (d) or (d, m) is chosen by quant_search.h's error-minimizing search on the block's updated
 * weights, weighted by diag(H); the file format is unchanged (every GGUF reader loads it).
 *
 * The objective for one row w of W (y = W x): E = (w - q) H (w - q)^T with H = E[x x^T] over a
 * text (llamachat-imatrix --cov collects the sums).
 */
#ifndef LC_QUANT_GPTQ_H
#define LC_QUANT_GPTQ_H

#include <stdint.h>

#include "quant.h"

/* What GPTQ needs of one matrix's input statistics (lc_gptq_prepare). */
struct lc_gptq {
    int64_t n;   /* input columns */
    float *U;    /* (n, n) row-major: the upper Cholesky factor of the dampened H^-1 */
    float *H;    /* (n, n) row-major: H = E[x x^T] (undampened), for the final scale re-fit */
    float *diag; /* (n) diag(H): the mean squared activations (the block search's weights) */
};

/*
 * From the sums of x x^T over rows input rows (cov_sum, row-major (n, n), symmetric): H =
 * cov_sum / rows, and U the upper Cholesky factor of (H + damp * mean(diag H) * I)^-1 (inputs
 * never active get H_jj = 1 first).  damp: GPTQ's percdamp (0.01); when the dampened H is not
 * positive definite it is raised tenfold, at most four times.  Returns a malloc'd struct (free
 * with lc_gptq_free), or NULL when n < 1, rows <= 0, out of memory, or H stays singular.
 * Cost: about (4/3) n^3 double multiply-adds.
 */
struct lc_gptq *lc_gptq_prepare(const double *cov_sum, double rows, int64_t n, float damp);
void lc_gptq_free(struct lc_gptq *g);

/*
 * Quantize one row x (g->n floats, a multiple of 32) of a matrix into g->n / 32 blocks of type
 * t at y by GPTQ, then re-fit every block's (d, m) jointly for the codes chosen (least squares
 * in the H norm, rounded to F16; kept only when it lowers (x - q) H (x - q)^T).  x is not
 * modified.  Returns 0, or -1 when t is not one of Q4_0/Q4_1/Q5_0/Q5_1/Q8_0, n is not a
 * multiple of 32, or out of memory (y untouched).
 */
int lc_quantize_row_gptq(enum lc_type t, const float *x, void *y, const struct lc_gptq *g);

#endif
