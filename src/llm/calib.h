/*
 * calib.h - calibration for quantizing: an importance matrix (imatrix.h) collected from the
 * inputs of every matrix product of the forward pass, over a text or over text that the model
 * samples itself.
 *
 * A quantizer that weighs its error by the activations (llamachat-quantize --imatrix, --method
 * gptq) needs a calibration text.  When the user has none, the model can write one: sequences
 * sampled from BOS at temperature 1 follow the model's own distribution, which is what its
 * activations will see in use (bench/QUANTIZE.md, "self-generated calibration").  Both paths go
 * through lc_calib_chunk, so a sampled sequence is collected exactly as a chunk of text is.
 * Calibrating on text the model generates itself is the data-free idea of LLM-QAT (Liu et al.,
 * "LLM-QAT: Data-Free Quantization Aware Training for Large Language Models", 2023), which
 * starts each sequence from a random first token and samples on; here every sequence starts at
 * BOS and is sampled throughout (plain sampling, temperature 1 by default), and the collected
 * statistics feed an imatrix search or GPTQ (quant_gptq.h) rather than training.
 */
#ifndef LC_CALIB_H
#define LC_CALIB_H

#include <stdint.h>

#include "context.h"
#include "imatrix.h"
#include "sampler.h"

struct lc_calib;

/*
 * A collector for the matrix products of ctx's model into im, each matrix under its GGUF
 * tensor name as llama.cpp's llama-imatrix names it (blk.N.attn_q.weight, ...,
 * output.weight or the tied token_embd.weight; fused attn_qkv / ffn_up once, under the file's
 * name).  ctx and im are not owned and must outlive the collector.  The observer is set on ctx
 * only during lc_calib_chunk.  NULL when out of memory.
 */
struct lc_calib *lc_calib_new(struct lc_context *ctx, struct lc_imatrix *im);
/* Free a collector (NULL: nothing); ctx and im stay (the observer is set only during a chunk). */
void lc_calib_free(struct lc_calib *c);

/* The number of weight matrices observed. */
int lc_calib_n_matrices(const struct lc_calib *c);

/*
 * Evaluate tokens[0 .. n) from position 0 (1 <= n <= the context's n_ctx; the caller puts BOS
 * first as it wants it) with every token's logits, adding the input rows of every matrix
 * product to im (lc_imatrix_add), then count one chunk (lc_imatrix_end_chunk).  Returns 0, or
 * -1 with a malloc'd *err (decode failure, out of memory, a matrix seen with two row lengths).
 */
int lc_calib_chunk(struct lc_calib *c, const int32_t *tokens, int32_t n, char **err);

/*
 * Sample one sequence from the model: out[0] = BOS, then tokens drawn one at a time with s
 * from the logits of the tokens before (one-token decodes from an empty cache, no observer),
 * until n_max tokens (2 <= n_max <= n_ctx) or an end-of-generation token, which is not
 * stored.  s's history is reset first; its RNG goes on, so successive calls give independent
 * sequences and the whole series is fixed by s's seed.  The logits do not depend on the thread
 * count, so neither do the tokens.  Returns the length (1 .. n_max, BOS included), or -1 with
 * a malloc'd *err (no BOS token in the vocabulary, decode failure).
 */
int32_t lc_calib_sample(struct lc_calib *c, struct lc_sampler *s, int32_t *out, int32_t n_max,
                        char **err);

/* Told of each sequence of lc_calib_generate once collected: its tokens (n, BOS first, valid
 * during the call) and its index i_seq from 0. */
typedef void (*lc_calib_seq_fn)(void *user, const int32_t *tokens, int32_t n, int i_seq);

/*
 * Self-generated calibration: sample sequences of up to n_ctx tokens (the context's) with a
 * sampler of parameters sp (lc_calib_sampler_params), one after the other with one RNG, and
 * collect each as a chunk (lc_calib_chunk), until n_tokens tokens in all (BOS included; the
 * last sequence is cut to what is left, and a remainder of one token is dropped) or max_seqs
 * sequences (<= 0: no limit).  cb (may be NULL) is told of each.  The result -- im's sums and
 * the sequences -- depends only on the model, sp, n_tokens and n_ctx, not on the thread count.
 * Returns the number of sequences, or -1 with a malloc'd *err.
 */
int lc_calib_generate(struct lc_calib *c, const struct lc_sampler_params *sp, int64_t n_tokens,
                      int max_seqs, lc_calib_seq_fn cb, void *user, char **err);

/*
 * Plain sampling at temperature temp (no top-k, top-p, min-p or repetition penalty: the
 * model's own distribution at temp 1) with RNG seed seed: the sampler parameters of a
 * self-generated calibration text.
 */
struct lc_sampler_params lc_calib_sampler_params(float temp, uint64_t seed);

#endif
