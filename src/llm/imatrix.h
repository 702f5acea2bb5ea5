/*
 * imatrix.h - importance matrices: per weight matrix, the mean squared activation of each input
 * column over a text, in llama.cpp's file formats.
 *
 * For a product y = W x, the error a quantized W adds to y_i is sum_j dW_ij x_j; over a text
 * its mean square is about sum_j dW_ij^2 E[x_j^2] (cross terms averaging out), so E[x_j^2]
 * weighs the squared error of column j.  llama-imatrix collects it; llama-quantize uses it.
 *
 * Files (llama.cpp tools/imatrix/imatrix.cpp, the source of truth):
 *   legacy ".dat" (all integers int32 little-endian):
 *       n_entries; per entry: name length, name (no NUL), ncall, nval, nval float32 values;
 *       then the chunk count and the length + bytes of the text's file name.
 *     values[j] = mean(x_j^2) * ncall (ncall: chunks seen), so llama-quantize divides by ncall.
 *   GGUF (llama.cpp since mid-2025): general.type = "imatrix", imatrix.datasets (string array),
 *       imatrix.chunk_count and imatrix.chunk_size (u32); per matrix NAME the F32 tensors
 *       "NAME.in_sum2" [nval / nmat, nmat] (sums of x_j^2) and "NAME.counts" [1, nmat] (rows
 *       summed), nmat > 1 for stacked experts.  The mean is in_sum2 / counts.
 */
#ifndef LC_IMATRIX_H
#define LC_IMATRIX_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct lc_imatrix;

/* An empty matrix set; NULL when out of memory. */
struct lc_imatrix *lc_imatrix_new(void);
void lc_imatrix_free(struct lc_imatrix *im);

/*
 * Accumulate rows activation rows of n floats (stride floats apart) as the input of the matrix
 * named name (its GGUF tensor name).  Returns 0, or -1 when out of memory or when name was
 * seen before with another n.
 */
int lc_imatrix_add(struct lc_imatrix *im, const char *name, const float *x, int rows, int n,
                   size_t stride);
/*
 * From now on also collect the full second moments sum x x^T (the "Hessian" H = X^T X of the
 * layer-wise quantization objective, GPTQ's input) of every new matrix with at most max_n input
 * columns (n^2 doubles each: 8 MiB for n = 1024); 0 turns it off.  Saved (GGUF files only) as
 * the extra F32 tensors "NAME.in_cov" [n, n], which llama.cpp's readers ignore.
 */
void lc_imatrix_collect_cov(struct lc_imatrix *im, int64_t max_n);

/*
 * The sums of x x^T of matrix name, row-major (n, n) doubles, and *rows the number of input rows
 * summed (the mean is sum / rows); valid until the next add or free.  NULL when the matrix has
 * none (not collected, a legacy file, or no rows).
 */
const double *lc_imatrix_get_cov(const struct lc_imatrix *im, const char *name, int64_t *n,
                                 double *rows);

/*
 * Round every sum (x^2, x x^T, rows) to float, as a GGUF imatrix file stores them, so that a
 * quantization with im in memory (llamachat-quantize --self-calibrate) gives the bytes one
 * with im saved as GGUF and read back gives.  Further adds go on from the rounded sums.
 */
void lc_imatrix_round_f32(struct lc_imatrix *im);

/* Count one more chunk of text (the ncall / chunk_count of the files). */
void lc_imatrix_end_chunk(struct lc_imatrix *im);

/* Number of matrices, and the name of matrix i (0 <= i < n). */
int lc_imatrix_count(const struct lc_imatrix *im);
const char *lc_imatrix_name(const struct lc_imatrix *im, int i);

/*
 * The mean squared activations of matrix name: *n floats, valid until the next add or free;
 * NULL when the matrix is absent or nothing was added.  For a GGUF file with nmat > 1 the
 * experts' means follow one another (*n = nval).
 */
const float *lc_imatrix_get(const struct lc_imatrix *im, const char *name, int64_t *n);

/*
 * Write im to path: GGUF when gguf is true, else the legacy format; dataset is the text's file
 * name recorded in it, chunk_size the tokens per chunk (GGUF only).  The file is written to a
 * temporary and renamed.  Returns 0, or -1 with a malloc'd *err.
 */
int lc_imatrix_save(const struct lc_imatrix *im, const char *path, bool gguf, const char *dataset,
                    uint32_t chunk_size, char **err);

/* Read a legacy or GGUF imatrix file (told apart by the GGUF magic).  NULL with a malloc'd
 * *err naming the file and the problem (truncated, bad counts, non-finite values...). */
struct lc_imatrix *lc_imatrix_load(const char *path, char **err);

#endif
