/*
 * quant_search.h - error-minimizing quantizers for the legacy block types (Q4_0, Q4_1, Q5_0,
 * Q5_1, Q8_0), in the same file format as ggml's reference quantizers.
 *
 * ggml's `_ref` quantizers derive each block's scale from its extremes (Q4_1: d = (max-min)/15,
 * m = min).  These choose, block by block, the stored (d) or (d, m) -- after rounding to F16,
 * the values a reader sees -- that give the smallest weighted squared error
 *
 *     E = sum_j w[j] (x[j] - deq[j])^2
 *
 * with deq[j] = d * q[j] (+ m).  The bytes are ordinary blocks: every GGUF reader, llama.cpp
 * included, loads them unchanged.  quant_search.c explains the search.
 */
#ifndef LC_QUANT_SEARCH_H
#define LC_QUANT_SEARCH_H

#include <stdbool.h>
#include <stdint.h>

#include "quant.h"

/* true when lc_quantize_row_search() handles type t (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0). */
bool lc_quant_search_supported(enum lc_type t);

/*
 * Quantize one row of n floats x into n / 32 blocks of type t at y, minimizing the error above
 * block by block.  w: n non-negative weights (an importance matrix row: the mean squared
 * activation of each input column), or NULL for w[j] = 1.  A block whose weights are all 0 is
 * fitted unweighted.  The result is never worse, in E, than the reference quantizer's block.
 * Returns 0, or -1 when t is not supported or n is not a multiple of 32 (y untouched).
 */
int lc_quantize_row_search(enum lc_type t, const float *x, void *y, int64_t n, const float *w);

/*
 * lc_quantize_row_search with ggml's weights for a search without an importance matrix (its
 * quantize_row_q4_1_impl / q5_1): w[j] = sqrt(sigma2 + x[j]^2), sigma2 = the row's mean square
 * (lc_quant_search_sigma2), which favours the large weights a little.  What llamachat-quantize
 * --method search uses without --imatrix.  Returns as lc_quantize_row_search.
 */
int lc_quantize_row_search_rms(enum lc_type t, const float *x, void *y, int64_t n);

/* The mean square of the n floats x (summed in double, in a fixed order); 0 when n is 0. */
float lc_quant_search_sigma2(const float *x, int64_t n);

/* The weighted squared error E of one row quantized as the blocks y (type t, n floats): for
 * tests and --stats.  w may be NULL.  Returns -1 for a type without a dequantizer. */
double lc_quant_row_error(enum lc_type t, const float *x, const void *y, int64_t n,
                          const float *w);

#endif
