/*
 * context.h - an inference context: KV cache, scratch buffers, the forward pass.
 *
 * lc_context_decode() evaluates a batch of tokens at consecutive positions and leaves the logits
 * of the last token (or of every token) in the context.  The KV cache holds positions
 * [0, n_past); decoding at pos < n_past overwrites from pos on (the cache is truncated there).
 */
#ifndef LC_CONTEXT_H
#define LC_CONTEXT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "model.h"

/* The float order of the dots, softmax and SwiGLU (lc_context_params.order). */
enum lc_order {
    LC_ORDER_DEFAULT = 0, /* the kernels' own: b4748's AVX-512 order (tinyBLAS for batches) */
    LC_ORDER_GGML_AVX2,   /* llama.cpp 0.7.0's AVX2 ("haswell") backend without tinyBLAS */
};

struct lc_context_params {
    int32_t n_ctx;        /* KV cache size in tokens; 0 = min(n_ctx_train, 4096) */
    int32_t n_batch;      /* tokens per forward batch for prompts (default 512) */
    int32_t n_threads;    /* 0 = number of CPUs */
    enum lc_type kv_type; /* LC_TYPE_F16 (default, as llama.cpp), LC_TYPE_F32, or LC_TYPE_Q8_0
                             (K and V in Q8_0 blocks of 32: head_dim must be a multiple of 32;
                             implies flash_attn, as llama.cpp's quantized V cache needs -fa) */
    bool flash_attn;      /* false (default): llama.cpp's order without -fa: all scores, softmax,
                             then the V product (V cached transposed).  true: one fused pass per
                             query and head over the cache with an online softmax, as llama.cpp's
                             -fa but in chunks of keys with F32 sums (K and V cached by rows of
                             each KV head); the last bits of the logits differ from the default
                             order and from llama.cpp's -fa */
    /*
     * The float order of a llama.cpp other than b4748 (for tests against references it made;
     * the defaults follow b4748's x86 build).  no_tinyblas: products of a batch with F16/F32
     * weights, and the batch's q.K and p.V in attention, are vec_dot's row by row instead of
     * tinyBLAS's (llama.cpp built without llamafile, as Debian's 0.7.0 is).  kv_pad: attention
     * runs over the used KV cells rounded up to this many (0 = 32, b4748's; 0.7.0 pads to 256),
     * which moves where vec_dot's SIMD blocks end in p.V.  Neither changes what is computed,
     * only the last bits.  order: LC_ORDER_GGML_AVX2 (implies no_tinyblas) takes the F16/F32
     * dots of matrix products and attention, the softmax and SwiGLU in the order of llama.cpp's
     * AVX2 backend (8 float lanes; arch/ggml-order-avx2.h), emulated on every ISA.
     */
    bool no_tinyblas;
    int32_t kv_pad;
    enum lc_order order;
    /*
     * fast_math (default false): prompt batches may multiply by weights in a faster float order
     * that is not llama.cpp's where a kernel has one (kernels.h: gemm_x16_fast; AVX-512 Q4_1,
     * Q8_0, Q4_K, Q5_K, and Q5_0 / IQ4_NL through Q8_0's, kernels.h recode): logits within float rounding of the default order, not bit for bit, so
     * greedy outputs can part from llama.cpp's.  One-token decodes and verification (lc_context_verify) keep the
     * reference order.
     */
    bool fast_math;
    /*
     * threads_from (default NULL: a pool of n_threads of its own): compute with the worker
     * threads of this context instead (n_threads is then its count).  The two contexts share
     * the pool (reference-counted: either may be freed first) and must never compute at the
     * same time: a draft model's context beside its target's, both driven by one thread, so
     * that one set of workers spins between jobs instead of two competing for the cores.
     */
    const struct lc_context *threads_from;
};

struct lc_context_params lc_context_default_params(void);

struct lc_context;

/* The model must outlive the context.  NULL + malloc'd *err on failure (e.g. out of memory). */
struct lc_context *lc_context_new(const struct lc_model *m, const struct lc_context_params *p,
                                  char **err);
void lc_context_free(struct lc_context *c);

int32_t lc_context_n_ctx(const struct lc_context *c);
int32_t lc_context_n_past(const struct lc_context *c);
int32_t lc_context_n_batch(const struct lc_context *c);
int32_t lc_context_n_threads(const struct lc_context *c);
/* true when a and b compute with the same worker threads (lc_context_params.threads_from). */
bool lc_context_same_threads(const struct lc_context *a, const struct lc_context *b);
const struct lc_model *lc_context_model(const struct lc_context *c);

/*
 * Evaluate n tokens at positions pos .. pos+n-1 (pos <= n_past; the cache is truncated to pos
 * first).  Splits into batches of n_batch.  all_logits keeps the logits of every token (for
 * perplexity); otherwise only the last token's.  Between batches, and between the layers of a
 * batch of more than one token, the progress callback (if set) is consulted (done counts the
 * layers' share of a batch); when it returns true the call stops and returns 1 with n_past at
 * the end of the last finished batch.  Returns 0 on success, -1 with *err (malloc'd) when pos + n > n_ctx or a
 * token id is out of range; nothing is written past the KV cache.
 */
int lc_context_decode(struct lc_context *c, const int32_t *tokens, int32_t n, int32_t pos,
                      bool all_logits, char **err);
/*
 * Verification of drafted tokens (speculative decoding, src/llm/spec.h): evaluate n tokens
 * (1 <= n <= n_batch) at positions pos .. pos+n-1 as lc_context_decode with all_logits, but
 * with the numerics of n one-token decodes -- the logits of token i have the same bits as
 * lc_context_decode(tokens + i, 1, pos + i) after decoding tokens 0 .. i-1 one by one -- so
 * that greedy output does not change.  The weights are still read from memory once for the
 * n tokens (the gemm entries with vec_dot's bits, or one-token products over small chunks of
 * rows).  Afterwards n_past = pos + n; drop the rejected tail with lc_context_truncate or by
 * decoding at an earlier pos.  The time counts as generation time (t_gen_s), the tokens as
 * n_verify_tokens, not as n_gen_tokens: the caller adds the tokens it keeps with
 * lc_context_add_gen_tokens.  The progress callback sees one step: (0, 1) before, (1, 1) after.  Returns as lc_context_decode; -1 also when n > n_batch.
 */
int lc_context_verify(struct lc_context *c, const int32_t *tokens, int32_t n, int32_t pos,
                      char **err);
/* Add n generated tokens to the statistics (n_gen_tokens), for speculative decoding. */
void lc_context_add_gen_tokens(struct lc_context *c, int32_t n);
/* Logits (n_vocab floats) of token i of the last decode (i = -1: the last token).  NULL if not kept. */
const float *lc_context_logits(const struct lc_context *c, int32_t i);
/*
 * Context shift (llama.cpp's llama_kv_self_seq_rm + seq_add): drop cached positions
 * [keep, keep + n_discard) and move the later ones down by n_discard, re-rotating their keys
 * with RoPE by -n_discard positions (RoPE angles add up, so a key rotated for position p and then
 * by -d is the key for p - d, up to rounding; F16 keys are rounded again, as in llama.cpp).  The
 * moved entries are not recomputed.  Returns 0, or -1 for a range outside [0, n_past) or on
 * allocation failure (the cache is then unchanged).
 */
int lc_context_shift(struct lc_context *c, int32_t keep, int32_t n_discard);
/*
 * The cached key row of layer il at position pos, after RoPE: n_head_kv * head_dim floats
 * (converted from the cache's type) into out.  For tests of the cache (test-context-shift).
 * Returns 0, or -1 when il or pos is out of range (pos >= n_past).
 */
int lc_context_k_row(const struct lc_context *c, int il, int32_t pos, float *out);
/*
 * Reading and writing KV cells, for saving a conversation's cache and restoring it (kvstate.h).
 * A cell row is what the cache holds for one position and layer: n_head_kv * head_dim elements
 * (lc_context_kv_n_embd) of K after RoPE, or of V, in the cache's type (lc_context_kv_type:
 * LC_TYPE_F16, LC_TYPE_F32 or LC_TYPE_Q8_0), lc_context_kv_row_bytes bytes.  V is always given
 * by rows here, also when the cache keeps it transposed (no flash attention): the rows are the
 * same elements, so a saved cache restores into either layout bit for bit.
 */
enum lc_type lc_context_kv_type(const struct lc_context *c);
/*
 * The options that change the bits of what c computes, and so of its KV cells (a saved cache
 * is used only by a context with the same flags): LC_COMPUTE_FAST_MATH (lc_context_params.
 * fast_math, when the kernels in use have a faster order for one of the model's repacked
 * weight types: --fast-math with another ISA or type computes as without it) and
 * LC_COMPUTE_FLASH_ATTN (flash_attn, or a q8_0 cache, which implies it).
 */
#define LC_COMPUTE_FAST_MATH 1u
#define LC_COMPUTE_FLASH_ATTN 2u
unsigned lc_context_compute_flags(const struct lc_context *c);
int32_t lc_context_kv_n_embd(const struct lc_context *c);
size_t lc_context_kv_row_bytes(const struct lc_context *c);
/*
 * Copy the K (v false) or V rows of layer il for positions [pos, pos + n) into dst
 * (n * lc_context_kv_row_bytes bytes).  Returns 0, or -1 when il is not a layer or the range is
 * not within [0, n_past).
 */
int lc_context_kv_read(const struct lc_context *c, int il, bool v, int32_t pos, int32_t n, void *dst);
/*
 * Write n rows of src (n * lc_context_kv_row_bytes bytes) as the K or V rows of layer il at
 * positions [pos, pos + n).  n_past becomes min(n_past, pos): the rows are not valid until
 * lc_context_kv_commit says so.  Returns 0, or -1 when il is not a layer or pos + n > n_ctx.
 */
int lc_context_kv_write(struct lc_context *c, int il, bool v, int32_t pos, int32_t n, const void *src);
/* After lc_context_kv_write of every layer's K and V rows [0, n_past): they are the cache.
 * Returns 0, or -1 when n_past is outside [0, n_ctx]. */
int lc_context_kv_commit(struct lc_context *c, int32_t n_past);
/* Drop cached positions >= n_past. */
void lc_context_truncate(struct lc_context *c, int32_t n_past);
/* Progress/abort: cb(user, done_tokens, total_tokens) before each batch; true = stop. */
typedef bool (*lc_progress_fn)(void *user, int32_t done, int32_t total);
void lc_context_set_progress(struct lc_context *c, lc_progress_fn cb, void *user);

/*
 * Matrix-product observer (importance matrices: llamachat-imatrix).  When set, cb runs on the
 * decoding thread before every product dst = src W^T of the forward pass, with the weight -- a
 * member of the model (&m->layers[il].wq, &m->output, ...), which tells the caller which tensor
 * it is -- and the product's float input: rows rows of w->ne[0] floats, src_stride floats
 * apart, valid only during the call.  cb = NULL removes it.  Costs one test per product.
 */
typedef void (*lc_matmul_observer_fn)(void *user, const struct lc_weight *w, const float *src,
                                      int rows, size_t src_stride);
void lc_context_set_matmul_observer(struct lc_context *c, lc_matmul_observer_fn cb, void *user);

/* Timing of the last decode calls, for the status bar and the CLI: cumulative counters. */
struct lc_context_stats {
    int64_t n_prompt_tokens;  /* tokens evaluated in batches of more than one */
    double t_prompt_s;
    int64_t n_gen_tokens;     /* tokens evaluated one at a time */
    double t_gen_s;
    int64_t n_verify;         /* lc_context_verify calls ... */
    int64_t n_verify_tokens;  /* ... and the tokens they evaluated (time in t_gen_s) */
};
void lc_context_stats(const struct lc_context *c, struct lc_context_stats *out);
void lc_context_reset_stats(struct lc_context *c);

#endif
