/*
 * context.c - the forward pass over a batch of tokens, with a KV cache: one pass for every
 * architecture, which reads what differs from the model's struct lc_arch and per-layer data
 * (model.h).
 *
 * Per layer, for a batch of T tokens at positions pos .. pos+T-1 (shapes are row-major,
 * one row per token; n_q = n_head * head_dim, n_kv = n_head_kv * head_dim):
 *
 *   xb   = RMSNorm(x) * attn_norm                        (T, n_embd)
 *   q    = xb Wq^T (+ bq), k = xb Wk^T (+ bk), v = xb Wv^T (+ bv)   (T, n_q), (T, n_kv), (T, n_kv)
 *   q, k = RMSNorm per head * q_norm, k_norm             qk_norm (qwen3, gemma3)
 *   q, k = RoPE(q, k)  adjacent pairs (llama) or NEOX halves (the others), the layer's base and
 *          scale, angles divided by the frequency factors when the model has them
 *   q   *= q_scale                                       (phi3, gemma: 1/sqrt(d); else 1)
 *   K cache rows [pos, pos+T) = k  (n_head_kv, n_ctx, head_dim); V cache columns = v  (n_kv, n_ctx)
 *   s    = q K^T; s = c tanh(s / c) (attn_softcap); s *= kq_scale; keys past the query, or
 *          n_swa or more positions before it on a window layer, masked
 *   att  = softmax(s) V                                  per head; head h reads KV head
 *                                                          h / (n_head / n_head_kv)  (GQA)
 *   o    = att Wo^T;  x += post_norms ? RMSNorm(o) * post_attention_norm : o
 *   xb   = RMSNorm(x) * ffn_norm
 *   f    = (act(xb Wgate^T) * (xb Wup^T)) Wdown^T        act = SiLU or GELU(tanh)
 *   x   += post_norms ? RMSNorm(f) * post_ffw_norm : f
 *
 * with x = embedding * embd_scale at the start (gemma: sqrt(n_embd)), then
 * logits = RMSNorm(x) * output_norm  Woutput^T, soft-capped by final_softcap (gemma2).
 *
 * Numerics follow ggml's CPU backend so that logits agree with llama.cpp: each matrix product
 * first converts the activation rows to the weight's vec_dot_type (Q8_1 for Q4_1, Q8_0 for
 * Q4_0/Q8_0, Q8_K for Q6_K, F16 for F16); with an F16 KV cache, q is rounded to F16 before
 * q.K and the softmax weights are rounded to F16 before the weighted sum of V, as ggml's
 * mul_mat does with F16 operands.  Every scaling is one float multiply as ggml_scale, the
 * soft-caps are its scale, tanh, scale, and GELU goes through ggml's F16 table.
 *
 * With flash_attn (or a q8_0 cache) the attention is attention_fused, one pass over the keys
 * with an online softmax as llama.cpp's -fa (in chunks of keys: not its order, within rounding of
 * the default), and V is cached head-major as K (kv_head_row); see there.  The default order's
 * one-token steps go through attention_groups where the ISA has dot_f16_rows_multi: the heads
 * of a GQA group read each K and V row together, with the bits of dot_f16 per head; prompt
 * batches with an F16 cache through attention_batch: the queries of a block of tokens and a GQA
 * group as the columns of one F16 gemm call, with tinyBLAS's bits per query and key
 * (LLAMACHAT_ATTN_HEADS=1 turns both off, for tests).
 */
#include "context.h"

#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "arch/ggml-order-avx2.h"
#include "arch/kernels.h"
#include "repack.h"
#include "threadpool.h"

struct lc_context {
    const struct lc_model *model;
    const struct lc_kernels *k;
    struct lc_threadpool *tp;
    int32_t n_ctx, n_batch, n_past;
    enum lc_type kv_type;
    bool no_tinyblas;         /* lc_context_params.no_tinyblas */
    bool fast_math;           /* lc_context_params.fast_math */
    int32_t kv_pad;           /* attention length granularity (lc_context_params.kv_pad) */
    struct lc_kernels k_order; /* the kernel table with LC_ORDER_GGML_AVX2's entries (k points here) */
    size_t kv_elt;            /* bytes per KV element (F16/F32; 0 for Q8_0) */
    size_t kv_row;            /* bytes per cache row of n_kv elements (any kv_type) */
    bool fa;                  /* fused attention (V head-major as K: kv_head_row) */
    int32_t n_kv;             /* n_head_kv * head_dim */

    void *k_cache, *v_cache;  /* K (n_layer, n_head_kv, n_ctx, head_dim): kv_head_row; V
                                 (n_layer, n_kv, n_ctx) transposed, or as K under fa */
    size_t head_row;          /* bytes of one KV head's slice of a cache row (any kv_type) */
    void *fa_scratch;         /* fused attention: fa_scratch_bytes per thread */
    size_t fa_scratch_bytes;

    /* scratch for one batch of up to n_batch tokens */
    float *x;                 /* (n_batch, n_embd) residual stream */
    float *xb;                /* (n_batch, n_embd) normed input of a block */
    float *q;                 /* (n_batch, n_q) */
    float *kb, *vb;           /* (n_batch, n_kv) */
    float *att;               /* (n_batch, n_q) attention output */
    float *hg, *hu;           /* (n_batch, n_ff) gate, up */
    float *rope_cs[2];        /* (n_batch, n_rot) each: RoPE cos/sin of the batch's positions for
                                 up to two (base, scale) pairs (gemma3: window / global layers) */
    float rope_key[2][2];     /* the (base, scale) of each table this batch, base 0 = none */
    const float *freq_factors;/* (n_rot / 2) RoPE frequency factors, or NULL */
    float *scores;            /* (n_threads, n_ctx) attention scores per thread */
    lc_fp16 *q16;             /* (n_threads, max(head_dim, n_ctx)) q or p rounded to f16 */
    char *grp;                /* attention_groups' per-thread scratch (grp_stride bytes each) */
    size_t grp_stride;
    int grp_max;              /* heads of one GQA group handled by one job (<= GRP_MAX) */
    char *bat;                /* attention_batch's per-thread scratch (bat_stride bytes each) */
    uint8_t **as_q8;          /* matmul_recoded's per-thread buffers (as_q8_bytes each, made by
                               * their thread on first use; NULL until then) */
    size_t as_q8_bytes;
    int as_q8_n;              /* entries of as_q8 (the threads) */
    size_t bat_stride;
    void *act;                /* activations converted to a vec_dot_type, (n_batch, max row) */
    size_t act_stride;        /* bytes per row in act */
    enum lc_type act_type;    /* what act holds now (LC_TYPE_COUNT = nothing) */
    const float *act_src;     /* ... converted from this buffer */

    float *logits;            /* (n_logits_cap, n_vocab) */
    int32_t n_logits_cap;     /* rows of logits allocated */
    int32_t n_logits;         /* rows valid after the last decode */
    bool logits_all;
    bool exact;               /* this batch as n single-token decodes, bit for bit (verify) */

    lc_progress_fn progress;
    void *progress_user;
    struct lc_context_stats stats;

    lc_matmul_observer_fn observer; /* sees every matmul's input (imatrix), or NULL */
    void *observer_user;
};

/* decode with vec_dot row by row (Q2_K, Q3_K, IQ4_XS, ...): the row PF_ROWS ahead prefetched
 * into L2 before each row.  1.1B shape, 1 thread, CPU ms/token (none / 2 / 4 / 8 rows ahead):
 * Q3_K_M 91 / 75 / 75 / 77, Q2_K 94 / 73 / 73 / 73, IQ4_XS 151 / 77 / 78 / 79 */
#ifndef PF_ROWS
#define PF_ROWS 4
#endif

/* matmul_recoded: rows recoded at a time (a multiple of 16; 64 rows of n = 14336:
 * 0.9 MB, twice, per thread) */
#define AS_Q8_ROWS 64

/* attention_groups: at most this many heads of one GQA group per job */
#define GRP_MAX LC_ROWS_MULTI_MAX

/* attention_groups' scratch for one thread: g score rows (n_ctx floats), g q/p rows in F16
 * (max(hd, n_ctx)), and dot_f16_rows_multi's work (kernels.h: g * n floats for rows of n <= 256
 * -- the keys, and the values while n_kv <= 256 -- else 4 * n). */
static size_t grp_scratch_size(int g, int hd, int n_ctx)
{
    const size_t w = (size_t)(hd > n_ctx ? hd : n_ctx);
    const size_t w_short = w < 256 ? w : 256;
    const size_t work = (size_t)g * w_short > 4 * w ? (size_t)g * w_short : 4 * w;
    return ((size_t)g * (size_t)n_ctx * sizeof(float) + (size_t)g * w * sizeof(lc_fp16) +
            work * sizeof(float) + 3 * 64 + 63) & ~(size_t)63;
}

/* attention_batch: at most this many queries (tokens x heads of a GQA group) per job */
#define BAT_Q 32

/* attention_batch's scratch for one thread: BAT_Q queries in F16 (hd each), their score rows
 * (n_ctx floats), their softmax rows in F16 (n_ctx) and their outputs (hd floats), each array
 * 64-byte aligned. */
static size_t bat_scratch_size(int hd, int n_ctx)
{
    const size_t q = BAT_Q, a = 63, h = (size_t)hd, n = (size_t)n_ctx;
    return ((q * h * sizeof(lc_fp16) + a) & ~a) + ((q * n * sizeof(float) + a) & ~a) +
           ((q * n * sizeof(lc_fp16) + a) & ~a) + ((q * h * sizeof(float) + a) & ~a) + 64;
}

static size_t fa_scratch_size(int g, int hd);
static void set_err(char **err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void set_err(char **err, const char *fmt, ...)
{
    if (!err)
        return;
    va_list ap;
    va_start(ap, fmt);
    if (vasprintf(err, fmt, ap) < 0)
        *err = NULL;
    va_end(ap);
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/*
 * GELU as ggml computes it on the CPU (ggml_vec_gelu_f32 / ggml_vec_geglu_f32 with
 * GGML_GELU_FP16): 0 for x <= -10, x for x >= 10, otherwise the input rounded to f16 indexes a
 * table of the tanh approximation 0.5 x (1 + tanh(sqrt(2/pi) x (1 + 0.044715 x^2))) rounded to
 * f16.  Exact tanh-GELU moves gemma3's logits by up to 0.09 (reference/arch/README.md).  The
 * fmaf is the contraction GCC makes of ggml_gelu_f32's 1 + a*x*x on an FMA CPU.
 */
static lc_fp16 gelu_table[1 << 16];
static pthread_once_t gelu_once = PTHREAD_ONCE_INIT;

static void gelu_table_init(void)
{
    const float sqrt_2_over_pi = 0.79788456080286535587989211986876f, coef_a = 0.044715f;
    for (uint32_t i = 0; i < 1u << 16; i++) {
        const float x = lc_fp16_to_fp32((lc_fp16)i);
        const float g = 0.5f * x * (1.0f + tanhf(sqrt_2_over_pi * x * fmaf(coef_a * x, x, 1.0f)));
        gelu_table[i] = lc_fp32_to_fp16(g);
    }
}

/* y[i] = gelu(g[i]) * u[i] (GeGLU), gelu from the table above */
static void geglu(float *y, const float *g, const float *u, int n)
{
    for (int i = 0; i < n; i++) {
        const float x = g[i];
        float ge;
        if (x <= -10.0f)
            ge = 0.0f;
        else if (x >= 10.0f)
            ge = x;
        else
            ge = lc_fp16_to_fp32(gelu_table[lc_fp32_to_fp16(x)]);
        y[i] = ge * u[i];
    }
}

struct lc_context_params lc_context_default_params(void)
{
    struct lc_context_params p = {.n_ctx = 0, .n_batch = 512, .n_threads = 0,
                                  .kv_type = LC_TYPE_F16};
    return p;
}

static void *xcalloc(size_t n, size_t sz, bool *ok)
{
    void *p = calloc(n ? n : 1, sz);
    if (!p)
        *ok = false;
    return p;
}

struct lc_context *lc_context_new(const struct lc_model *m, const struct lc_context_params *p,
                                  char **err)
{
    if (err)
        *err = NULL;
    if (m->vocab_only) {
        set_err(err, "the model was loaded without weights (vocab only)");
        return NULL;
    }
    struct lc_context *c = calloc(1, sizeof(*c));
    if (!c) {
        set_err(err, "out of memory");
        return NULL;
    }
    const struct lc_hparams *hp = &m->hp;
    c->model = m;
    c->k = lc_kernels();
    c->n_ctx = p->n_ctx > 0 ? p->n_ctx : (hp->n_ctx_train < 4096 ? hp->n_ctx_train : 4096);
    c->n_batch = p->n_batch > 0 ? p->n_batch : 512;
    if (c->n_batch > c->n_ctx)
        c->n_batch = c->n_ctx;
    if (p->kv_type != LC_TYPE_F16 && p->kv_type != LC_TYPE_F32 && p->kv_type != LC_TYPE_Q8_0) {
        set_err(err, "KV cache type %s is not supported (f16, f32 or q8_0)",
                lc_type_name(p->kv_type));
        free(c);
        return NULL;
    }
    if (p->kv_type == LC_TYPE_Q8_0 && hp->head_dim % LC_QK8_0) {
        set_err(err, "a q8_0 KV cache needs a head size that is a multiple of %d (this model's "
                "is %d); use f16", LC_QK8_0, hp->head_dim);
        free(c);
        return NULL;
    }
    c->kv_type = p->kv_type;
    c->fa = p->flash_attn || c->kv_type == LC_TYPE_Q8_0;
    c->kv_elt = c->kv_type == LC_TYPE_F32 ? sizeof(float) : c->kv_type == LC_TYPE_F16 ? sizeof(lc_fp16) : 0;
    c->no_tinyblas = p->no_tinyblas;
    c->fast_math = p->fast_math;
    if (p->order == LC_ORDER_GGML_AVX2) {
        /* the float kernels in AVX2's order, row by row (no gemm/gemv entries) */
        c->k_order = *c->k;
        struct lc_kernels *ko = &c->k_order;
        ko->vec_dot[LC_TYPE_F16] = o8_vec_dot_f16;
        ko->vec_dot[LC_TYPE_F32] = o8_vec_dot_f32;
        ko->gemm[LC_TYPE_F16] = ko->gemm[LC_TYPE_F32] = NULL;
        ko->gemv[LC_TYPE_F16] = ko->gemv[LC_TYPE_F32] = NULL;
        ko->dot_f16 = o8_dot_f16;
        ko->dot_f16_rows = NULL;   /* the 16-row kernel is dot_f16's AVX-512 order */
        ko->dot_f16_rows_multi = NULL;
        ko->dot_f32 = o8_dot_f32;
        ko->softmax = o8_softmax;
        ko->swiglu = o8_swiglu;
        c->k = ko;
        c->no_tinyblas = true;
    }
    c->kv_pad = p->kv_pad > 0 ? p->kv_pad : 32;
    c->n_kv = hp->n_head_kv * hp->head_dim;
    c->kv_row = lc_row_size(c->kv_type, c->n_kv);
    c->head_row = lc_row_size(c->kv_type, hp->head_dim);
    int n_threads = p->n_threads > 0 ? p->n_threads : lc_n_cpus();
    if (p->threads_from) {
        c->tp = lc_threadpool_ref(p->threads_from->tp);
        n_threads = lc_threadpool_n_threads(c->tp);
    } else {
        c->tp = lc_threadpool_new(n_threads, err);
    }
    if (!c->tp) {
        free(c);
        return NULL;
    }
    bool ok = true;
    const size_t B = (size_t)c->n_batch, E = (size_t)hp->n_embd, F = (size_t)hp->n_ff;
    const size_t kvrows = (size_t)hp->n_layer * (size_t)c->n_ctx;
    c->k_cache = xcalloc(kvrows, c->kv_row, &ok);
    c->v_cache = xcalloc(kvrows, c->kv_row, &ok);
    if (c->fa) {
        const int g = hp->n_head / hp->n_head_kv;
        c->fa_scratch_bytes = fa_scratch_size(g < GRP_MAX ? g : GRP_MAX, hp->head_dim);
        c->fa_scratch = xcalloc((size_t)n_threads, c->fa_scratch_bytes, &ok);
    }
    c->x = xcalloc(B * E, sizeof(float), &ok);
    c->xb = xcalloc(B * E, sizeof(float), &ok);
    const size_t Q = (size_t)hp->n_q;
    c->q = xcalloc(B * Q, sizeof(float), &ok);
    c->kb = xcalloc(B * (size_t)c->n_kv, sizeof(float), &ok);
    c->vb = xcalloc(B * (size_t)c->n_kv, sizeof(float), &ok);
    c->att = xcalloc(B * Q, sizeof(float), &ok);
    c->hg = xcalloc(B * F, sizeof(float), &ok);
    c->hu = xcalloc(B * F, sizeof(float), &ok);
    for (int t = 0; t < 2; t++)
        c->rope_cs[t] = xcalloc(B * (size_t)(hp->n_rot > 0 ? hp->n_rot : 1), sizeof(float), &ok);
    /* Frequency factors: rope_freqs (Llama 3), else phi3's long factors when the context is
     * longer than the original training context and the short ones otherwise (llama.cpp's
     * build_rope_factors) */
    if (m->rope_freqs.data)
        c->freq_factors = m->rope_freqs.data;
    else if (m->rope_long.data && c->n_ctx > hp->n_ctx_orig)
        c->freq_factors = m->rope_long.data;
    else if (m->rope_short.data)
        c->freq_factors = m->rope_short.data;
    c->scores = xcalloc((size_t)n_threads * (size_t)c->n_ctx, sizeof(float), &ok);
    c->q16 = xcalloc((size_t)n_threads * (size_t)(hp->head_dim > c->n_ctx ? hp->head_dim : c->n_ctx),
                     sizeof(lc_fp16), &ok);
    /* attention_groups' scratch, where it is used (LLAMACHAT_ATTN_HEADS=1, for tests: never) */
    const int group = hp->n_head_kv > 0 ? hp->n_head / hp->n_head_kv : 1;
    const char *heads_only = getenv("LLAMACHAT_ATTN_HEADS");
    if (group > 1 && c->kv_type == LC_TYPE_F16 && !c->fa && c->k->dot_f16_rows_multi &&
        !(heads_only && *heads_only && strcmp(heads_only, "0") != 0)) {
        c->grp_max = group < GRP_MAX ? group : GRP_MAX;
        c->grp_stride = grp_scratch_size(c->grp_max, hp->head_dim, c->n_ctx);
        c->grp = xcalloc((size_t)n_threads, c->grp_stride, &ok);
    }
    /* attention_batch's, for prompt batches in tinyBLAS's order with an F16 cache (off with
     * LLAMACHAT_ATTN_HEADS=1 too: tests compare it with attention_heads) */
    if (c->kv_type == LC_TYPE_F16 && !c->fa && !c->no_tinyblas && c->k->gemm[LC_TYPE_F16] &&
        !(heads_only && *heads_only && strcmp(heads_only, "0") != 0)) {
        c->bat_stride = bat_scratch_size(hp->head_dim, c->n_ctx);
        c->bat = xcalloc((size_t)n_threads, c->bat_stride, &ok);
    }
    /* Widest activation row: n_ff, n_embd or n_q floats in any vec_dot_type; F32 is the largest. */
    size_t maxn = E > F ? E : F;
    if (Q > maxn)
        maxn = Q;
    c->act_stride = (maxn + 256) * sizeof(float);
    if (c->k->x16_native) { /* matmul_recoded's buffers (Q8_0 rows are the largest recoded) */
        c->as_q8_n = n_threads;
        c->as_q8_bytes = 2 * AS_Q8_ROWS * lc_row_size(LC_TYPE_Q8_0, (int64_t)maxn);
        c->as_q8 = xcalloc((size_t)n_threads, sizeof(*c->as_q8), &ok);
    }
    c->act = xcalloc(B, c->act_stride, &ok);
    c->n_logits_cap = 1;
    c->logits = xcalloc((size_t)hp->n_vocab, sizeof(float), &ok);
    if (!ok) {   /* the message first: it reads c */
        set_err(err, "out of memory allocating a context of %d tokens (KV cache %.1f MiB)",
                c->n_ctx, (double)(2 * kvrows * c->kv_row) / (1024.0 * 1024.0));
        lc_context_free(c);
        return NULL;
    }
    c->act_type = LC_TYPE_COUNT;
    if (hp->arch->act == LC_FFN_GELU)
        pthread_once(&gelu_once, gelu_table_init);
    return c;
}

void lc_context_free(struct lc_context *c)
{
    if (!c)
        return;
    for (int i = 0; c->as_q8 && i < c->as_q8_n; i++)
        free(c->as_q8[i]);
    free(c->as_q8);
    lc_threadpool_free(c->tp);
    free(c->k_cache);
    free(c->v_cache);
    free(c->fa_scratch);
    free(c->x);
    free(c->xb);
    free(c->q);
    free(c->kb);
    free(c->vb);
    free(c->att);
    free(c->hg);
    free(c->hu);
    free(c->rope_cs[0]);
    free(c->rope_cs[1]);
    free(c->scores);
    free(c->q16);
    free(c->grp);
    free(c->bat);
    free(c->act);
    free(c->logits);
    free(c);
}

int32_t lc_context_n_ctx(const struct lc_context *c) { return c->n_ctx; }
int32_t lc_context_n_past(const struct lc_context *c) { return c->n_past; }
int32_t lc_context_n_batch(const struct lc_context *c) { return c->n_batch; }
int32_t lc_context_n_threads(const struct lc_context *c) { return lc_threadpool_n_threads(c->tp); }
bool lc_context_same_threads(const struct lc_context *a, const struct lc_context *b)
{
    return a->tp == b->tp;
}
const struct lc_model *lc_context_model(const struct lc_context *c) { return c->model; }

void lc_context_truncate(struct lc_context *c, int32_t n_past)
{
    if (n_past >= 0 && n_past < c->n_past)
        c->n_past = n_past;
}

void lc_context_set_progress(struct lc_context *c, lc_progress_fn cb, void *user)
{
    c->progress = cb;
    c->progress_user = user;
}

void lc_context_set_matmul_observer(struct lc_context *c, lc_matmul_observer_fn cb, void *user)
{
    c->observer = cb;
    c->observer_user = user;
}

void lc_context_stats(const struct lc_context *c, struct lc_context_stats *out) { *out = c->stats; }
void lc_context_reset_stats(struct lc_context *c) { memset(&c->stats, 0, sizeof(c->stats)); }

const float *lc_context_logits(const struct lc_context *c, int32_t i)
{
    if (c->n_logits == 0)
        return NULL;
    if (i < 0)
        return c->logits + (size_t)(c->n_logits - 1) * (size_t)c->model->hp.n_vocab;
    if (!c->logits_all || i >= c->n_logits)
        return NULL;
    return c->logits + (size_t)i * (size_t)c->model->hp.n_vocab;
}

/* ---------------------------------------------------------------- matrix products */

struct convert_task {
    const struct lc_context *c;
    const float *src;
    int n, rows;
    size_t src_stride; /* floats */
    enum lc_type type;
};

static void convert_rows(void *arg, int ith, int nth)
{
    const struct convert_task *t = arg;
    int lo, hi;
    lc_split_range(t->rows, ith, nth, &lo, &hi);
    lc_quantize_row_fn f = t->c->k->quantize_row[t->type];
    for (int r = lo; r < hi; r++)
        f(t->src + (size_t)r * t->src_stride, (uint8_t *)t->c->act + (size_t)r * t->c->act_stride,
          t->n);
}

/* Convert rows of src (n floats each, src_stride apart) to type into c->act, once per source. */
static void convert_act(struct lc_context *c, const float *src, int n, int rows,
                        size_t src_stride, enum lc_type type)
{
    if (c->act_type == type && c->act_src == src)
        return;
    struct convert_task t = {c, src, n, rows, src_stride, type};
    if (rows * n >= 4096)
        lc_threadpool_run(c->tp, convert_rows, &t);
    else
        convert_rows(&t, 0, 1);
    c->act_type = type;
    c->act_src = src;
}

/*
 * The middle of the FFN: hg = swiglu(hg, hu) (or geglu) and its conversion to the activation type of
 * ffn_down, as one job split in whole blocks of that type (for one token, between the threads;
 * before, SwiGLU ran on one thread and the conversion of a single row too).  Per element and
 * per block the same operations as the serial kernels, so the same bits.
 */
struct ffn_mid_task {
    const struct lc_context *c;
    int rows, n;          /* tokens, n_ff */
    enum lc_type type;    /* activation type of ffn_down */
    int blk;              /* elements per block of type */
};

/* row r, blocks [b0, b1) */
static void ffn_mid_span(const struct lc_context *c, const struct ffn_mid_task *t, int r, int b0,
                         int b1)
{
    const size_t bsize = lc_type_traits(t->type)->type_size;
    const size_t off = (size_t)r * (size_t)t->n + (size_t)b0 * (size_t)t->blk;
    const int len = (b1 - b0) * t->blk;
    if (c->model->hp.arch->act == LC_FFN_GELU)
        geglu(c->hg + off, c->hg + off, c->hu + off, len);
    else
        c->k->swiglu(c->hg + off, c->hg + off, c->hu + off, len);
    c->k->quantize_row[t->type](c->hg + off,
                                (uint8_t *)c->act + (size_t)r * c->act_stride + (size_t)b0 * bsize,
                                len);
}

static void ffn_mid_rows(void *arg, int ith, int nth)
{
    const struct ffn_mid_task *t = arg;
    const struct lc_context *c = t->c;
    const int per_row = t->n / t->blk;
    int lo, hi;
    if (c->exact) {
        /* verification: each row split between the threads as one token's is, so that every
         * element goes through the same lane of the same kernel call (a SIMD body and its
         * scalar tail may round differently: F32 ffn_down, one element per block) */
        for (int r = 0; r < t->rows; r++) {
            lc_split_range(per_row, ith, nth, &lo, &hi);
            if (lo < hi)
                ffn_mid_span(c, t, r, lo, hi);
        }
        return;
    }
    lc_split_range(t->rows * per_row, ith, nth, &lo, &hi);
    while (lo < hi) {
        const int r = lo / per_row, b0 = lo % per_row;
        const int b1 = hi - r * per_row < per_row ? hi - r * per_row : per_row;
        ffn_mid_span(c, t, r, b0, b1);
        lo = r * per_row + b1;
    }
}

struct matmul_task {
    const struct lc_context *c;
    const struct lc_weight *w;
    float *dst;         /* (rows_act, ld) */
    size_t ld;          /* floats between rows of dst */
    int rows_act;       /* activation rows (tokens) */
    int chunk_rows;     /* output rows per chunk (a multiple of 16) */
    int n_chunks;
    atomic_int next_chunk; /* the next chunk not yet taken, from nth on */
};

/*
 * Prompt batches of Q5_0, IQ4_NL and Q3_K: their blocks are those of Q8_0 / Q6_K in another
 * coding, and their batch orders are that type's vec_dot one (kernels.h recode), so
 * AS_Q8_ROWS rows at a time are recoded, repacked into x16 groups in the thread's buffer and
 * multiplied by that type's x16 GEMM (the same bits as the type's own path, several times its
 * speed).  Output rows [lo, hi); returns the first row it did not do (the rows past the last
 * whole group of 16, or all of them when the thread's buffer cannot be made), which the
 * caller computes its own way.
 */
static int matmul_recoded(const struct matmul_task *t, int ith, int lo, int hi)
{
    const struct lc_context *c = t->c;
    const struct lc_weight *w = t->w;
    const struct lc_kernels *k = c->k;
    const enum lc_type to = lc_recoded_type(w->type);
    if (!c->as_q8 || ith >= c->as_q8_n || !k->recode[w->type] || !(k->x16_native >> to & 1))
        return lo;
    if (!c->as_q8[ith] && !(c->as_q8[ith] = malloc(c->as_q8_bytes)))
        return lo;
    const int n = (int)w->ne[0], nb = n / (int)lc_type_traits(w->type)->blck_size;
    const size_t q8_row = lc_row_size(to, n); /* at most Q8_0's: as_q8_bytes */
    uint8_t *plain = c->as_q8[ith], *x16 = plain + AS_Q8_ROWS * q8_row;
    const lc_gemm_fn gemm = c->fast_math && !c->exact && k->gemm_x16_fast[to]
                                ? k->gemm_x16_fast[to]
                                : k->gemm_x16[to];
    int r0 = lo;
    while (hi - r0 >= 16) {
        int nr = hi - r0 < AS_Q8_ROWS ? hi - r0 : AS_Q8_ROWS;
        nr -= nr % 16;
        for (int r = 0; r < nr; r++)
            k->recode[w->type]((const uint8_t *)w->data + (size_t)(r0 + r) * w->row_bytes,
                               plain + (size_t)r * q8_row, nb);
        lc_x16_repack(to, x16, plain, n, nr);
        gemm(n, t->dst + r0, t->ld, x16, q8_row, nr, c->act, c->act_stride, t->rows_act);
        r0 += nr;
    }
    return r0;
}

/* Output rows [lo, hi) of the product (lo, hi multiples of 16 on an x16 weight), by thread ith. */
static void matmul_range(const struct matmul_task *t, int ith, int lo, int hi)
{
    const struct lc_weight *w = t->w;
    const struct lc_kernels *k = t->c->k;
    const int n = (int)w->ne[0];
    const uint8_t *wd = w->data;
    const uint8_t *act = t->c->act;
    const size_t as = t->c->act_stride;
    if (w->x16) { /* whole groups of 16 rows */
        const uint8_t *wg = wd + (size_t)lo * w->row_bytes;
        /* fast_math: the faster order where there is one, never for verification */
        lc_gemm_fn gemm = t->c->fast_math && !t->c->exact && k->gemm_x16_fast[w->type]
                              ? k->gemm_x16_fast[w->type]
                              : k->gemm_x16[w->type];
        if (t->rows_act > 1)
            gemm(n, t->dst + lo, t->ld, wg, w->row_bytes, hi - lo, act, as, t->rows_act);
        else
            k->gemv_x16[w->type](n, t->dst + lo, wg, w->row_bytes, hi - lo, act);
        return;
    }
    lc_gemm_fn gemm = w->q4_0x8 ? k->gemm_q4_0x8 : k->gemm[w->type];
    if (t->c->no_tinyblas && (w->type == LC_TYPE_F16 || w->type == LC_TYPE_F32))
        gemm = NULL; /* vec_dot row by row (quantized gemms have vec_dot's bits anyway) */
    lc_gemv_fn gemv = w->q4_0x8 ? k->gemv_q4_0x8 : k->gemv[w->type];
    lc_vec_dot_fn dot = w->q4_0x8 ? k->vec_dot_q4_0x8 : k->vec_dot[w->type];
    /* gemm entries with vec_dot's bits (kernels.h; test-kernels checks it): the quantized
     * ones except IQ4_NL's, which follows tinyBLAS's order as F16/F32's do */
    const bool gemm_exact = w->q4_0x8 || w->type == LC_TYPE_Q4_0 || w->type == LC_TYPE_Q4_1 ||
                            w->type == LC_TYPE_Q8_0 || w->type == LC_TYPE_Q5_0 ||
                            w->type == LC_TYPE_IQ4_XS || w->type == LC_TYPE_Q2_K;
    if (t->c->exact && t->rows_act > 1 && !gemm_exact) {
        /* Verification (lc_context_verify): every token gets the one-token product instead:
         * gemv (same bits as vec_dot) over chunks of rows small enough to stay in cache
         * while each token of the batch reads them, so the weights come from memory once.
         * (The x16 entries have vec_dot's bits too: used as they are, above.) */
        enum { CHUNK = 32 };
        for (int r0 = lo; r0 < hi; r0 += CHUNK) {
            const int nr = hi - r0 < CHUNK ? hi - r0 : CHUNK;
            const uint8_t *wc = wd + (size_t)r0 * w->row_bytes;
            for (int i = 0; i < t->rows_act; i++) {
                float *d = t->dst + (size_t)i * t->ld + r0;
                const uint8_t *ai = act + (size_t)i * as;
                if (gemv) {
                    gemv(n, d, wc, w->row_bytes, nr, ai);
                } else {
                    for (int r = 0; r < nr; r++)
                        dot(n, &d[r], wc + (size_t)r * w->row_bytes, ai);
                }
            }
        }
        return;
    }
    if (t->rows_act > 1 && k->recode[w->type])
        lo = matmul_recoded(t, ith, lo, hi); /* the rows it leaves: below */
    if (lo == hi)
        return;
    if (gemm && t->rows_act > 1) {
        /* s[c * ld + r] layout: dst row = token, column = output row */
        gemm(n, t->dst + lo, t->ld, wd + (size_t)lo * w->row_bytes, w->row_bytes, hi - lo, act,
             as, t->rows_act);
        return;
    }
    if (gemv) {
        for (int i = 0; i < t->rows_act; i++)
            gemv(n, t->dst + (size_t)i * t->ld + lo, wd + (size_t)lo * w->row_bytes, w->row_bytes,
                 hi - lo, act + (size_t)i * as);
        return;
    }
    for (int r = lo; r < hi; r++) {
        const uint8_t *wr = wd + (size_t)r * w->row_bytes;
        if (t->rows_act == 1 && r + PF_ROWS < hi) /* decode: a row PF_ROWS ahead into L2 */
            for (size_t o = 0; o < w->row_bytes; o += 64)
                __builtin_prefetch(wr + PF_ROWS * w->row_bytes + o, 0, 2);
        for (int i = 0; i < t->rows_act; i++) {
            float s;
            dot(n, &s, wr, act + (size_t)i * as);
            t->dst[(size_t)i * t->ld + r] = s;
        }
    }
}

/*
 * The threads take chunks of output rows from a shared counter (as ggml's mul_mat does): thread
 * ith starts with chunk ith, then takes the next one not yet taken.  When the machine is busy
 * and a thread is descheduled, the others do its share instead of waiting for it; each output
 * row is computed by the same kernel call whatever thread takes it, so the bits do not depend
 * on the split.  A decode step's chunks are 64 rows (73 KB of a 2048-wide Q4_0 matrix: the
 * counter costs nothing next to reading them); a prompt batch's are a quarter of a thread's share.
 */
static void matmul_rows(void *arg, int ith, int nth)
{
    struct matmul_task *t = arg;
    (void)nth;
    const int n_out = (int)t->w->ne[1];
    for (int ch = ith; ch < t->n_chunks; ch = atomic_fetch_add(&t->next_chunk, 1)) {
        const int lo = ch * t->chunk_rows;
        const int hi = lo + t->chunk_rows < n_out ? lo + t->chunk_rows : n_out;
        matmul_range(t, ith, lo, hi);
    }
}

/* dst(rows, n_out) = src(rows, n_in) W^T.  src rows are src_stride floats apart. */
static void matmul(struct lc_context *c, const struct lc_weight *w, const float *src,
                   size_t src_stride, int rows, float *dst, size_t ld)
{
    const struct lc_type_traits *tt = lc_type_traits(w->type);
    if (c->observer)
        c->observer(c->observer_user, w, src, rows, src_stride);
    convert_act(c, src, (int)w->ne[0], rows, src_stride, tt->vec_dot_type);
    const int n_out = (int)w->ne[1], nth = lc_threadpool_n_threads(c->tp);
    int chunk = 64;
    if (rows > 1) { /* four chunks per thread, whole tiles of 16 rows */
        chunk = (n_out + 4 * nth - 1) / (4 * nth);
        chunk = (chunk + 15) / 16 * 16;
    }
    struct matmul_task t = {c, w, dst, ld, rows, chunk, (n_out + chunk - 1) / chunk, nth};
    lc_threadpool_run(c->tp, matmul_rows, &t);
}

/* x += y (the residual connection) */
static void add_rows(float *x, const float *y, size_t n)
{
    for (size_t i = 0; i < n; i++)
        x[i] += y[i];
}

/* ---------------------------------------------------------------- RoPE */

/*
 * cos and sin of theta_j = scale * (pos * base^(-2j/n_rot) / ff[j]) for the pairs j of one
 * position, into cs[2j], cs[2j+1], as ggml_rope_cache_init and rope_yarn compute them (without
 * YaRN: ext_factor 0, mscale 1): base^(-2j/n_rot) by repeated multiplication in float, the angle
 * divided by the frequency factor (ff NULL: none), then multiplied by the linear scale.
 */
static void rope_angles(float *cs, float pos, int n_rot, float base, float scale, const float *ff)
{
    const float theta_scale = powf(base, -2.0f / (float)n_rot);
    float theta = pos;
    for (int j = 0; j < n_rot; j += 2) {
        const float th = scale * (ff ? theta / ff[j / 2] : theta);
        cs[j] = cosf(th);
        cs[j + 1] = sinf(th);
        theta *= theta_scale;
    }
}

/*
 * The RoPE table of the batch for a layer with this base and scale: (n_tok, n_rot) as [cos, sin]
 * pairs for positions pos .. pos+n_tok-1.  Computed once per batch per (base, scale), used by
 * every head of every layer that shares them (two tables at most: gemma3's window and global
 * layers).  Call rope_reset at the start of each batch.
 */
static void rope_reset(struct lc_context *c)
{
    c->rope_key[0][0] = c->rope_key[1][0] = 0.0f;
}

static const float *rope_table(struct lc_context *c, int n_tok, int pos, float base, float scale)
{
    const int n_rot = c->model->hp.n_rot;
    int t = 0;
    while (t < 2 && c->rope_key[t][0] != 0.0f &&
           !(c->rope_key[t][0] == base && c->rope_key[t][1] == scale))
        t++;
    if (t == 2) /* a third pair: never in the table of archs, but stay correct */
        t = 1, c->rope_key[1][0] = 0.0f;
    if (c->rope_key[t][0] == 0.0f) {
        for (int i = 0; i < n_tok; i++)
            rope_angles(c->rope_cs[t] + (size_t)i * (size_t)n_rot, (float)(pos + i), n_rot, base,
                        scale, c->freq_factors);
        c->rope_key[t][0] = base;
        c->rope_key[t][1] = scale;
    }
    return c->rope_cs[t];
}

/*
 * Rotate the pairs of the first n_rot dims of each head by the table cs: adjacent pairs
 * (x[2j], x[2j+1]) for LC_ROPE_NORM, (x[j], x[j + n_rot/2]) for LC_ROPE_NEOX; the other dims
 * are kept.  In the arithmetic of llama.cpp's x86 build (ggml_compute_forward_rope_f32's
 * x0*cos - x1*sin and x0*sin + x1*cos, which GCC contracts into fused multiply-adds on a CPU
 * with FMA): x0' = fma(x0, cos, -(x1*sin)), x1' = fma(x0, sin, x1*cos).  One ulp of RoPE can
 * flip an f16 rounding of the K cache and, tokens later, a greedy choice: with the unfused
 * form, stories260K Q4_0's greedy text left llama.cpp's after 99 tokens (found by comparing
 * every intermediate tensor with llama.cpp's, see bench/BENCHMARKS.md).  fmaf is exact on
 * every ISA (hardware FMA where there is one, glibc's exact emulation elsewhere).
 */
static void rope(float *x, int n_heads, int head_dim, int n_rot, enum lc_rope_kind kind,
                 const float *cs)
{
    const int half = n_rot / 2;
    for (int h = 0; h < n_heads; h++) {
        float *v = x + (size_t)h * (size_t)head_dim;
        for (int j = 0; j < n_rot; j += 2) {
            const int i0 = kind == LC_ROPE_NEOX ? j / 2 : j;
            const int i1 = kind == LC_ROPE_NEOX ? j / 2 + half : j + 1;
            const float x0 = v[i0], x1 = v[i1];
            v[i0] = fmaf(x0, cs[j], -(x1 * cs[j + 1]));
            v[i1] = fmaf(x0, cs[j + 1], x1 * cs[j]);
        }
    }
}

/*
 * K, and V under fused attention, are cached head-major, (n_layer, n_head_kv, n_ctx, head_dim)
 * in kv_type: one KV head's rows are contiguous, so attention streams them (rows of all heads,
 * n_kv apart, made each head's pass fetch lines at a stride the hardware prefetcher follows
 * badly; the state file and lc_context_k_row still see rows of n_kv).  The row of KV head kvh
 * at position pos of layer il.
 */
static char *kv_head_row(const struct lc_context *c, bool v, int il, int kvh, int32_t pos)
{
    const size_t n_hkv = (size_t)c->model->hp.n_head_kv;
    return (char *)(v ? c->v_cache : c->k_cache) +
           (((size_t)il * n_hkv + (size_t)kvh) * (size_t)c->n_ctx + (size_t)pos) * c->head_row;
}

/* Rotate the key row kr (n_heads heads of kv_type, n elements in all) by cs, through floats
 * (row: n of scratch) as ggml ropes an F16 or quantized cache. */
static void rope_k_row(struct lc_context *c, char *kr, int n_heads, int n, float *row,
                       const float *cs)
{
    const struct lc_hparams *hp = &c->model->hp;
    const enum lc_rope_kind kind = hp->arch->rope;
    if (c->kv_type == LC_TYPE_Q8_0) {
        lc_dequantize_row_q8_0((const lc_block_q8_0 *)kr, row, (int64_t)n);
        rope(row, n_heads, hp->head_dim, hp->n_rot, kind, cs);
        c->k->quantize_row[LC_TYPE_Q8_0](row, kr, (int64_t)n);
    } else if (c->kv_type == LC_TYPE_F16) {
        const lc_fp16 *h = (const lc_fp16 *)kr;
        for (int d = 0; d < n; d++)
            row[d] = lc_fp16_to_fp32(h[d]);
        rope(row, n_heads, hp->head_dim, hp->n_rot, kind, cs);
        lc_fp16 *o = (lc_fp16 *)kr;
        for (int d = 0; d < n; d++)
            o[d] = lc_fp32_to_fp16(row[d]);
    } else {
        rope((float *)kr, n_heads, hp->head_dim, hp->n_rot, kind, cs);
    }
}

/*
 * Every RoPE this pass applies can be shifted: angles add up per pair whatever the pairing,
 * the frequency factors divide the shift's angle as they divide the position's, and each
 * layer's keys are re-rotated with that layer's base and scale (as llama.cpp's build_k_shift
 * does with the layer's rope factors and freq base/scale).  Window layers stay correct too:
 * the mask is computed from the positions, which move with the entries.
 */
int lc_context_shift(struct lc_context *c, int32_t keep, int32_t n_discard)
{
    if (keep < 0 || n_discard <= 0 || keep + n_discard > c->n_past)
        return -1;
    const struct lc_hparams *hp = &c->model->hp;
    const int32_t n_move = c->n_past - keep - n_discard;
    const size_t es = c->kv_elt, nkv = (size_t)c->n_kv, nctx = (size_t)c->n_ctx, rb = c->kv_row;
    float *cs = malloc((size_t)(hp->n_rot > 0 ? hp->n_rot : 1) * sizeof(float));
    float *row = malloc(nkv * sizeof(float));
    if (!cs || !row) {
        free(cs);
        free(row);
        return -1;
    }
    float cs_base = 0.0f, cs_scale = 0.0f; /* the layer parameters cs was computed for */
    for (int32_t layer = 0; layer < hp->n_layer; layer++) {
        const struct lc_layer *L = &c->model->layers[layer];
        if (L->rope_base != cs_base || L->rope_scale != cs_scale) {
            /* the rotation by -n_discard positions, as rope_table computes a position's */
            rope_angles(cs, (float)(-n_discard), hp->n_rot, L->rope_base, L->rope_scale,
                        c->freq_factors);
            cs_base = L->rope_base;
            cs_scale = L->rope_scale;
        }
        /* head-major (kv_head_row): each head's rows move and turn on their own, through floats
         * as ggml ropes an F16 or quantized cache */
        const size_t hr = c->head_row;
        for (int h = 0; h < hp->n_head_kv; h++) {
            char *k = kv_head_row(c, false, layer, h, 0);
            memmove(k + (size_t)keep * hr, k + (size_t)(keep + n_discard) * hr, (size_t)n_move * hr);
            for (int32_t p = keep; p < keep + n_move; p++)
                rope_k_row(c, k + (size_t)p * hr, 1, hp->head_dim, row, cs);
            if (c->fa) {
                char *v = kv_head_row(c, true, layer, h, 0);
                memmove(v + (size_t)keep * hr, v + (size_t)(keep + n_discard) * hr, (size_t)n_move * hr);
            }
        }
        if (c->fa)
            continue;
        char *v = (char *)c->v_cache + (size_t)layer * nctx * rb;
        /* transposed: (n_kv, n_ctx) */
        for (size_t d = 0; d < nkv; d++) {
            char *vr = v + d * nctx * es;
            memmove(vr + (size_t)keep * es, vr + (size_t)(keep + n_discard) * es, (size_t)n_move * es);
        }
    }
    c->n_past -= n_discard;
    free(cs);
    free(row);
    return 0;
}

int lc_context_k_row(const struct lc_context *c, int il, int32_t pos, float *out)
{
    if (il < 0 || il >= c->model->hp.n_layer || pos < 0 || pos >= c->n_past)
        return -1;
    const int hd = c->model->hp.head_dim;
    for (int h = 0; h < c->model->hp.n_head_kv; h++) {
        const char *kr = kv_head_row(c, false, il, h, pos);
        float *o = out + (size_t)h * (size_t)hd;
        if (c->kv_type == LC_TYPE_Q8_0)
            lc_dequantize_row_q8_0((const lc_block_q8_0 *)kr, o, hd);
        else if (c->kv_type == LC_TYPE_F16)
            for (int d = 0; d < hd; d++)
                o[d] = lc_fp16_to_fp32(((const lc_fp16 *)kr)[d]);
        else
            memcpy(o, kr, (size_t)hd * sizeof(float));
    }
    return 0;
}

/* ---------------------------------------------------------------- saved cells (kvstate.h) */

enum lc_type lc_context_kv_type(const struct lc_context *c) { return c->kv_type; }
/* fast_math changes a product only for a repacked weight whose type has a faster kernel, or a
 * weight whose prompt batches are recoded into such a type (matmul_recoded) */
static bool fast_weight(const struct lc_kernels *k, const struct lc_weight *w)
{
    if (!w->data)
        return false;
    if (w->x16)
        return k->gemm_x16_fast[w->type] != NULL;
    const enum lc_type to = lc_recoded_type(w->type);
    return k->recode[w->type] && (k->x16_native >> to & 1) && k->gemm_x16_fast[to];
}

unsigned lc_context_compute_flags(const struct lc_context *c)
{
    const struct lc_model *m = c->model;
    bool fast = fast_weight(c->k, &m->output);
    for (int il = 0; c->fast_math && !fast && il < m->hp.n_layer; il++) {
        const struct lc_layer *L = &m->layers[il];
        fast = fast_weight(c->k, &L->wq) || fast_weight(c->k, &L->wk) ||
               fast_weight(c->k, &L->wv) || fast_weight(c->k, &L->wo) ||
               fast_weight(c->k, &L->ffn_gate) || fast_weight(c->k, &L->ffn_up) ||
               fast_weight(c->k, &L->ffn_down);
    }
    return (c->fast_math && fast ? LC_COMPUTE_FAST_MATH : 0u) | (c->fa ? LC_COMPUTE_FLASH_ATTN : 0u);
}
int32_t lc_context_kv_n_embd(const struct lc_context *c) { return c->n_kv; }
size_t lc_context_kv_row_bytes(const struct lc_context *c) { return c->kv_row; }

/* Copy rows [pos, pos + n) of layer il between the cache and buf (to_cache: buf -> cache), buf
 * holding rows of n_kv: each head's slice of K (and of V under fused attention, Q8_0 always) goes
 * to its kv_head_row; the transposed V (n_kv, n_ctx) of F16/F32 is gathered or scattered element
 * by element. */
static void kv_copy(struct lc_context *c, int il, bool v, int32_t pos, int32_t n, void *buf,
                    bool to_cache)
{
    if (!v || c->fa) {   /* head-major (kv_head_row): each head's slice of the rows */
        for (int h = 0; h < c->model->hp.n_head_kv; h++) {
            char *rows = kv_head_row(c, v, il, h, pos);
            char *b = (char *)buf + (size_t)h * c->head_row;
            for (int32_t t = 0; t < n; t++, rows += c->head_row, b += c->kv_row) {
                if (to_cache)
                    memcpy(rows, b, c->head_row);
                else
                    memcpy(b, rows, c->head_row);
            }
        }
        return;
    }
    const size_t es = c->kv_elt, nkv = (size_t)c->n_kv, nctx = (size_t)c->n_ctx;
    char *layer = (char *)c->v_cache + (size_t)il * nctx * nkv * es;
    for (size_t d = 0; d < nkv; d++) {
        char *col = layer + (d * nctx + (size_t)pos) * es;   /* element d of positions pos.. */
        char *b = (char *)buf + d * es;
        for (int32_t t = 0; t < n; t++, col += es, b += c->kv_row) {
            if (to_cache)
                memcpy(col, b, es);
            else
                memcpy(b, col, es);
        }
    }
}

int lc_context_kv_read(const struct lc_context *c, int il, bool v, int32_t pos, int32_t n, void *dst)
{
    if (il < 0 || il >= c->model->hp.n_layer || pos < 0 || n < 0 || pos > c->n_past - n)
        return -1;
    kv_copy((struct lc_context *)c, il, v, pos, n, dst, false);
    return 0;
}

int lc_context_kv_write(struct lc_context *c, int il, bool v, int32_t pos, int32_t n, const void *src)
{
    if (il < 0 || il >= c->model->hp.n_layer || pos < 0 || n < 0 || pos > c->n_ctx - n)
        return -1;
    if (c->n_past > pos)
        c->n_past = pos;
    kv_copy(c, il, v, pos, n, (void *)src, true);
    return 0;
}

int lc_context_kv_commit(struct lc_context *c, int32_t n_past)
{
    if (n_past < 0 || n_past > c->n_ctx)
        return -1;
    c->n_past = n_past;
    return 0;
}

/* ---------------------------------------------------------------- attention */

/*
 * The KV length llama.cpp attends over: the used cells rounded up to a multiple of kv_pad (32:
 * b4748's cache padding without flash attention), at most n_ctx.  The extra positions are
 * masked; they matter only because they fix the blocks in which softmax and the V product sum.
 */
static int kv_len_padded(const struct lc_context *c, int n_used)
{
    int n = (n_used + c->kv_pad - 1) / c->kv_pad * c->kv_pad;
    return n < c->n_ctx ? n : c->n_ctx;
}

struct attn_task {
    struct lc_context *c;
    int layer, n_tok, pos;
};

/*
 * s[r] = dot(x row r, y) for r in [0, nr), rows x_stride elements apart, in the order llama.cpp
 * uses: tinyBLAS for batches (the gemm entry), vec_dot for one token.
 */
static void dots16(const struct lc_kernels *k, bool batch, float *s, const lc_fp16 *x,
                   size_t x_stride, int nr, const lc_fp16 *y, int n)
{
    if (batch && k->gemm[LC_TYPE_F16]) {
        k->gemm[LC_TYPE_F16](n, s, 1, x, x_stride * sizeof *x, nr, y, 0, 1);
        return;
    }
    if (!batch && k->dot_f16_rows) {  /* the same bits, 16 rows at a time */
        k->dot_f16_rows(s, x, x_stride, nr, y, n);
        return;
    }
    for (int r = 0; r < nr; r++)
        s[r] = k->dot_f16(x + (size_t)r * x_stride, y, n);
}

static void dots32(const struct lc_kernels *k, bool batch, float *s, const float *x,
                   size_t x_stride, int nr, const float *y, int n)
{
    if (batch && k->gemm[LC_TYPE_F32]) {
        k->gemm[LC_TYPE_F32](n, s, 1, x, x_stride * sizeof *x, nr, y, 0, 1);
        return;
    }
    for (int r = 0; r < nr; r++)
        s[r] = k->dot_f32(x + (size_t)r * x_stride, y, n);
}

/*
 * One query's scores s[k0, n_keys) (the keys it sees) to softmax weights over the padded length
 * n_kv: soft-capped (cap > 0: cap * tanh(s / cap)), times kq_scale, the rest masked to -inf, then
 * the ISA's softmax -- attention_heads' and attention_groups' common step, in ggml's order.
 */
static void scores_to_weights(const struct lc_kernels *k, float *s, int k0, int n_keys, int n_kv,
                              float cap, float inv_cap, float scale)
{
    if (cap > 0.0f)
        for (int j = k0; j < n_keys; j++)
            s[j] = tanhf(s[j] * inv_cap) * cap;
    for (int j = k0; j < n_keys; j++)
        s[j] *= scale;
    for (int j = 0; j < k0; j++)
        s[j] = -INFINITY;
    for (int j = n_keys; j < n_kv; j++)
        s[j] = -INFINITY;
    k->softmax(s, n_kv);
}

/*
 * Per (token, head): scores = q.K^T over the keys the query sees (keys 0 .. pos+i, and on a
 * window layer only the last n_swa of them; the rest of the padded length masked), soft-capped
 * (gemma2: c * tanh(s / c), before the mask as llama.cpp's llm_build_kqv), times kq_scale,
 * softmax, out = V^T p.  K is stored one row per position and KV head (n_head_kv, n_ctx,
 * head_dim: kv_head_row, each head's keys contiguous); V is stored transposed (n_kv, n_ctx) so
 * that each output element is one contiguous dot product over positions, as in llama.cpp's
 * cache.
 */
static void attention_heads(void *arg, int ith, int nth)
{
    const struct attn_task *t = arg;
    struct lc_context *c = t->c;
    const struct lc_hparams *hp = &c->model->hp;
    const int hd = hp->head_dim, n_head = hp->n_head, n_swa = c->model->layers[t->layer].n_swa;
    const int group = hp->n_head / hp->n_head_kv;
    const float scale = hp->kq_scale, cap = hp->attn_softcap, inv_cap = cap > 0.0f ? 1.0f / cap : 0.0f;
    const size_t layer_off = (size_t)t->layer * (size_t)c->n_ctx * (size_t)c->n_kv;
    /* verification (c->exact): each token as if decoded alone -- vec_dot's order and its own
     * padded length -- so that its logits have the bits of a one-token decode */
    const bool batch = t->n_tok > 1 && !c->exact && !c->no_tinyblas;
    const int n_kv_batch = kv_len_padded(c, t->pos + t->n_tok);
    float *scores = c->scores + (size_t)ith * (size_t)c->n_ctx;
    lc_fp16 *q16 = c->q16 + (size_t)ith * (size_t)(hd > c->n_ctx ? hd : c->n_ctx);
    const struct lc_kernels *k = c->k;
    int lo, hi;
    lc_split_range(t->n_tok * n_head, ith, nth, &lo, &hi);
    for (int job = lo; job < hi; job++) {
        const int i = job / n_head, h = job % n_head;
        const int kvh = h / group;
        const int n_keys = t->pos + i + 1; /* causal: keys 0 .. pos+i */
        const int n_kv = c->exact ? kv_len_padded(c, n_keys) : n_kv_batch;
        /* the window: key pk is seen by query pq = n_keys - 1 iff pq - pk < n_swa */
        const int k0 = n_swa > 0 && n_keys > n_swa ? n_keys - n_swa : 0;
        const float *q = c->q + (size_t)i * (size_t)hp->n_q + (size_t)h * (size_t)hd;
        float *out = c->att + (size_t)i * (size_t)hp->n_q + (size_t)h * (size_t)hd;
        if (c->kv_type == LC_TYPE_F16) {
            const lc_fp16 *kc = (const lc_fp16 *)(const void *)kv_head_row(c, false, t->layer, kvh, 0);
            k->quantize_row[LC_TYPE_F16](q, q16, hd);
            dots16(k, batch, scores + k0, kc + (size_t)k0 * (size_t)hd, (size_t)hd,
                   n_keys - k0, q16, hd);
        } else {
            const float *kc = (const float *)(const void *)kv_head_row(c, false, t->layer, kvh, 0);
            dots32(k, batch, scores + k0, kc + (size_t)k0 * (size_t)hd, (size_t)hd,
                   n_keys - k0, q, hd);
        }
        scores_to_weights(k, scores, k0, n_keys, n_kv, cap, inv_cap, scale);
        if (c->kv_type == LC_TYPE_F16) {
            /* ggml rounds the softmax row to f16 for the product with the f16 V cache */
            k->quantize_row[LC_TYPE_F16](scores, q16, n_kv);
            const lc_fp16 *vc = (const lc_fp16 *)c->v_cache + layer_off +
                                (size_t)kvh * (size_t)hd * (size_t)c->n_ctx;
            dots16(k, batch, out, vc, (size_t)c->n_ctx, hd, q16, n_kv);
        } else {
            const float *vc = (const float *)c->v_cache + layer_off +
                              (size_t)kvh * (size_t)hd * (size_t)c->n_ctx;
            dots32(k, batch, out, vc, (size_t)c->n_ctx, hd, scores, n_kv);
        }
    }
}

static char *align64(char *p)
{
    return (char *)(((uintptr_t)p + 63) & ~(uintptr_t)63);
}

/*
 * attention_heads for one-token steps (decode, and verification's tokens decoded as if alone)
 * with an F16 cache where the ISA has dot_f16_rows_multi: one job is a token, a KV head and a
 * slice of the heads sharing it (GQA), so each K and V row is widened once for the slice's
 * heads instead of once per head.  Every head does the operations of attention_heads in the
 * same order (dot_f16_rows_multi has dot_f16's bits), so the logits do not change.
 */
static void attention_groups(void *arg, int ith, int nth)
{
    const struct attn_task *t = arg;
    struct lc_context *c = t->c;
    const struct lc_hparams *hp = &c->model->hp;
    const int hd = hp->head_dim, n_hkv = hp->n_head_kv, n_swa = c->model->layers[t->layer].n_swa;
    const int group = hp->n_head / hp->n_head_kv;
    const float scale = hp->kq_scale, cap = hp->attn_softcap, inv_cap = cap > 0.0f ? 1.0f / cap : 0.0f;
    const size_t layer_off = (size_t)t->layer * (size_t)c->n_ctx * (size_t)c->n_kv;
    const size_t w = (size_t)(hd > c->n_ctx ? hd : c->n_ctx);
    /* slices: enough jobs for every thread, at most grp_max heads each */
    int n_sl = (group + c->grp_max - 1) / c->grp_max;
    while (t->n_tok * n_hkv * n_sl < nth && n_sl < group)
        n_sl++;
    const int hs = (group + n_sl - 1) / n_sl;
    n_sl = (group + hs - 1) / hs;
    char *base = c->grp + (size_t)ith * c->grp_stride;
    float *scores = (float *)align64(base);
    lc_fp16 *p16 = (lc_fp16 *)align64((char *)(scores + (size_t)hs * (size_t)c->n_ctx));
    float *work = (float *)align64((char *)(p16 + (size_t)hs * w));
    const struct lc_kernels *k = c->k;
    float *sc[GRP_MAX], *out[GRP_MAX];
    const lc_fp16 *y[GRP_MAX];
    int lo, hi;
    lc_split_range(t->n_tok * n_hkv * n_sl, ith, nth, &lo, &hi);
    for (int job = lo; job < hi; job++) {
        const int i = job / (n_hkv * n_sl), kvh = job / n_sl % n_hkv, sl = job % n_sl;
        const int h0 = kvh * group + sl * hs;
        const int ng = sl * hs + hs <= group ? hs : group - sl * hs;
        const int n_keys = t->pos + i + 1;
        const int n_kv = kv_len_padded(c, c->exact ? n_keys : t->pos + t->n_tok);
        const int k0 = n_swa > 0 && n_keys > n_swa ? n_keys - n_swa : 0;
        const lc_fp16 *kc = (const lc_fp16 *)(const void *)kv_head_row(c, false, t->layer, kvh, 0);
        for (int g = 0; g < ng; g++) {
            lc_fp16 *qg = p16 + (size_t)g * w;
            k->quantize_row[LC_TYPE_F16](c->q + (size_t)i * (size_t)hp->n_q + (size_t)(h0 + g) * (size_t)hd,
                                         qg, hd);
            y[g] = qg;
            sc[g] = scores + (size_t)g * (size_t)c->n_ctx + k0;
        }
        k->dot_f16_rows_multi(sc, kc + (size_t)k0 * (size_t)hd, (size_t)hd, n_keys - k0, y,
                              ng, hd, work);
        for (int g = 0; g < ng; g++) {
            float *s = scores + (size_t)g * (size_t)c->n_ctx;
            scores_to_weights(k, s, k0, n_keys, n_kv, cap, inv_cap, scale);
            /* ggml rounds the softmax row to f16 for the product with the f16 V cache */
            lc_fp16 *pg = p16 + (size_t)g * w;
            k->quantize_row[LC_TYPE_F16](s, pg, n_kv);
            y[g] = pg;
            out[g] = c->att + (size_t)i * (size_t)hp->n_q + (size_t)(h0 + g) * (size_t)hd;
        }
        const lc_fp16 *vc = (const lc_fp16 *)c->v_cache + layer_off +
                            (size_t)kvh * (size_t)hd * (size_t)c->n_ctx;
        k->dot_f16_rows_multi(out, vc, (size_t)c->n_ctx, hd, y, ng, n_kv, work);
    }
}

/*
 * attention_heads for prompt batches (tinyBLAS's order: n_tok > 1, not exact, not no_tinyblas)
 * with an F16 cache, the same bits for every query and key: one job is a KV head, a block of
 * tokens and (when a GQA group has more than BAT_Q heads) a slice of the heads sharing it, so
 * that each K and V row is widened once for all the job's queries -- the F16 gemm entry is
 * called with them as its columns (up to BAT_Q; AVX-512's and AVX2's gemm_f16_cols) where
 * attention_heads calls it once per query.  Every output of that entry is one tinyBLAS-ordered dot, whatever the
 * rows and columns around it, so each query's scores over its keys, its softmax over the padded
 * length n_kv, the F16 rounding of that row and its p.V are attention_heads' operations on the
 * same values.  The keys computed are those of the block's last token from the first token's
 * window start; each query then masks the ones it does not see (scores_to_weights).  Jobs are
 * KV-head-major and, within a head, alternate early and late blocks (causal: a late block has
 * more keys), so that lc_split_range's contiguous ranges carry similar work.
 */
static void attention_batch(void *arg, int ith, int nth)
{
    const struct attn_task *t = arg;
    struct lc_context *c = t->c;
    const struct lc_hparams *hp = &c->model->hp;
    const int hd = hp->head_dim, n_hkv = hp->n_head_kv, n_swa = c->model->layers[t->layer].n_swa;
    const int group = hp->n_head / hp->n_head_kv;
    const float scale = hp->kq_scale, cap = hp->attn_softcap, inv_cap = cap > 0.0f ? 1.0f / cap : 0.0f;
    const size_t layer_off = (size_t)t->layer * (size_t)c->n_ctx * (size_t)c->n_kv;
    const size_t ctx = (size_t)c->n_ctx;
    const int n_kv = kv_len_padded(c, t->pos + t->n_tok);
    /* a job: nt tokens x hs heads <= BAT_Q queries, blocks and slices enough for every thread */
    const int n_sl = (group + BAT_Q - 1) / BAT_Q, hs = (group + n_sl - 1) / n_sl;
    int nt = BAT_Q / hs;
    while (nt > 1 && n_hkv * n_sl * ((t->n_tok + nt - 1) / nt) < nth)
        nt--;
    const int n_blk = (t->n_tok + nt - 1) / nt;
    char *base = align64(c->bat + (size_t)ith * c->bat_stride);
    lc_fp16 *q16 = (lc_fp16 *)(void *)base;
    float *sc = (float *)(void *)align64((char *)(q16 + (size_t)BAT_Q * (size_t)hd));
    lc_fp16 *p16 = (lc_fp16 *)(void *)align64((char *)(sc + (size_t)BAT_Q * ctx));
    float *o = (float *)(void *)align64((char *)(p16 + (size_t)BAT_Q * ctx));
    const struct lc_kernels *k = c->k;
    int lo, hi;
    lc_split_range(n_hkv * n_sl * n_blk, ith, nth, &lo, &hi);
    for (int job = lo; job < hi; job++) {
        const int kvh = job / (n_sl * n_blk), sl = job / n_blk % n_sl, jb = job % n_blk;
        const int b = jb % 2 ? n_blk - 1 - jb / 2 : jb / 2;   /* 0, last, 1, last - 1, .. */
        const int i0 = b * nt, ni = t->n_tok - i0 < nt ? t->n_tok - i0 : nt;
        const int h0 = kvh * group + sl * hs, ng = group - sl * hs < hs ? group - sl * hs : hs;
        const int nq = ni * ng;  /* query q: token i0 + q / ng, head h0 + q % ng */
        for (int q = 0; q < nq; q++)
            k->quantize_row[LC_TYPE_F16](c->q + (size_t)(i0 + q / ng) * (size_t)hp->n_q +
                                             (size_t)(h0 + q % ng) * (size_t)hd,
                                         q16 + (size_t)q * (size_t)hd, hd);
        /* keys [ka, kb): the first token's window start to the last token's causal end */
        const int kb = t->pos + i0 + ni, n_first = t->pos + i0 + 1;
        const int ka = n_swa > 0 && n_first > n_swa ? n_first - n_swa : 0;
        const lc_fp16 *kc = (const lc_fp16 *)(const void *)kv_head_row(c, false, t->layer, kvh, 0);
        k->gemm[LC_TYPE_F16](hd, sc + ka, ctx, kc + (size_t)ka * (size_t)hd, (size_t)hd * sizeof *kc,
                             kb - ka, q16, (size_t)hd * sizeof *q16, nq);
        for (int q = 0; q < nq; q++) {
            const int n_keys = t->pos + i0 + q / ng + 1;
            const int k0 = n_swa > 0 && n_keys > n_swa ? n_keys - n_swa : 0;
            float *s = sc + (size_t)q * ctx;
            scores_to_weights(k, s, k0, n_keys, n_kv, cap, inv_cap, scale);
            /* ggml rounds the softmax row to f16 for the product with the f16 V cache */
            k->quantize_row[LC_TYPE_F16](s, p16 + (size_t)q * ctx, n_kv);
        }
        const lc_fp16 *vc = (const lc_fp16 *)c->v_cache + layer_off + (size_t)kvh * (size_t)hd * ctx;
        k->gemm[LC_TYPE_F16](n_kv, o, (size_t)hd, vc, ctx * sizeof *vc, hd, p16, ctx * sizeof *p16, nq);
        for (int q = 0; q < nq; q++)
            memcpy(c->att + (size_t)(i0 + q / ng) * (size_t)hp->n_q + (size_t)(h0 + q % ng) * (size_t)hd,
                   o + (size_t)q * (size_t)hd, (size_t)hd * sizeof *o);
    }
}

/*
 * Fused attention (-fa): per query and head one pass over the keys it sees, with an online
 * softmax (Milakov & Gimelshein, "Online normalizer calculation for softmax", 2018; Dao et al.,
 * "FlashAttention", 2022) taken a chunk of FA_CHUNK keys at a time, as flash-decoding kernels do
 * (ggml's flash_attn_ext takes one key at a time with an F16 accumulator; this order is ours):
 *
 *   q converted to K's vec_dot type (F16 for F16 K, Q8_0 for Q8_0 K, F32 for F32 K);
 *   M = -inf, S = 0, acc = 0 (F32); for each chunk of the keys seen:
 *     s_j = dot(K_j, q) (F16: qk_f16_rows, F32 sums in the ISA's order; Q8_0: vec_dot), then
 *     kq_scale (softcap c: c tanh(s kq_scale / c))
 *     M' = max(M, max s_j); p_j = v_expf(s_j - M'); acc *= e^(M - M'), S = S e^(M - M') (when
 *     M' > M); S += sum p_j (exp_sum); acc += sum_j p_j V_j (mad_f16_rows / mad_f32_rows, V
 *     converted to F32 first when it is Q8_0; one fused multiply-add per key and element)
 *   out = acc * (1 / S)
 *
 * Masked keys (past the query, outside the window) are skipped, so the cache padding does not
 * matter.  One job is a token, a KV head and a slice of the heads sharing it (GQA), as
 * attention_groups: the chunk's K and V rows are widened once for the slice's heads
 * (qk_f16_rows, mad_f16_rows).  Every head does exactly its own sequence of
 * operations, so the results do not depend on the slicing or the thread split.  Accumulating in
 * F32 keeps it closer to the default order than ggml's F16 accumulator (test-kvcache).
 */
#define FA_CHUNK 128

/* Per-thread scratch for a slice of g heads: for each, q in K's vec_dot type (<= hd floats) and
 * widened back to F32 (F16), the F32 accumulator and the chunk's scores; then a chunk of V rows
 * in F32 (Q8_0 V). */
static size_t fa_scratch_size(int g, int hd)
{
    const size_t per_head = ((size_t)hd * sizeof(float) + 63) / 64 * 64 * 3 + FA_CHUNK * sizeof(float);
    return (size_t)g * per_head + FA_CHUNK * (size_t)hd * sizeof(float) + 64;
}

static void attention_fused(void *arg, int ith, int nth)
{
    const struct attn_task *t = arg;
    struct lc_context *c = t->c;
    const struct lc_hparams *hp = &c->model->hp;
    const struct lc_kernels *k = c->k;
    const int hd = hp->head_dim, n_hkv = hp->n_head_kv, n_swa = c->model->layers[t->layer].n_swa;
    const int group = hp->n_head / hp->n_head_kv;
    const float cap = hp->attn_softcap;
    const float scale = cap > 0.0f ? hp->kq_scale / cap : hp->kq_scale;
    const enum lc_type kt = c->kv_type;
    const size_t hr = c->head_row;   /* one head's row (kv_head_row) */
    /* slices: enough jobs for every thread, at most GRP_MAX heads each */
    int n_sl = (group + GRP_MAX - 1) / GRP_MAX;
    while (t->n_tok * n_hkv * n_sl < nth && n_sl < group)
        n_sl++;
    const int hs = (group + n_sl - 1) / n_sl;
    n_sl = (group + hs - 1) / hs;
    /* scratch layout (fa_scratch_size) */
    char *sp = align64((char *)c->fa_scratch + (size_t)ith * c->fa_scratch_bytes);
    const size_t row_f32 = ((size_t)hd * sizeof(float) + 63) / 64 * 64;
    float *qv[GRP_MAX], *q32[GRP_MAX], *acc[GRP_MAX], *sc[GRP_MAX], *out[GRP_MAX];
    float M[GRP_MAX], S[GRP_MAX];
    for (int g = 0; g < hs; g++) {
        qv[g] = (float *)sp, sp += row_f32;
        q32[g] = (float *)sp, sp += row_f32;
        acc[g] = (float *)sp, sp += row_f32;
        sc[g] = (float *)sp, sp += FA_CHUNK * sizeof(float);
    }
    float *v32 = (float *)sp;

    int lo, hi;
    lc_split_range(t->n_tok * n_hkv * n_sl, ith, nth, &lo, &hi);
    for (int job = lo; job < hi; job++) {
        const int i = job / (n_hkv * n_sl), kvh = job / n_sl % n_hkv, sl = job % n_sl;
        const int h0 = kvh * group + sl * hs;
        const int ng = sl * hs + hs <= group ? hs : group - sl * hs;
        const int n_keys = t->pos + i + 1;
        const int k0 = n_swa > 0 && n_keys > n_swa ? n_keys - n_swa : 0;
        for (int g = 0; g < ng; g++) {
            const float *q = c->q + (size_t)i * (size_t)hp->n_q + (size_t)(h0 + g) * (size_t)hd;
            if (kt == LC_TYPE_F32) {
                memcpy(qv[g], q, (size_t)hd * sizeof(float));
            } else {
                k->quantize_row[kt](q, qv[g], hd);
                if (kt == LC_TYPE_F16)  /* q rounded to K's type, as ggml's -fa, then widened */
                    for (int d = 0; d < hd; d++)
                        q32[g][d] = lc_fp16_to_fp32(((const lc_fp16 *)qv[g])[d]);
            }
            M[g] = -INFINITY;
            S[g] = 0.0f;
            memset(acc[g], 0, (size_t)hd * sizeof(float));
        }
        for (int j0 = k0; j0 < n_keys; j0 += FA_CHUNK) {
            const int nj = n_keys - j0 < FA_CHUNK ? n_keys - j0 : FA_CHUNK;
            const char *kc = kv_head_row(c, false, t->layer, kvh, j0);
            const char *vc = kv_head_row(c, true, t->layer, kvh, j0);
            /* the chunk's scores for every head of the slice */
            if (kt == LC_TYPE_F16) {
                k->qk_f16_rows(sc, ng, (const float *const *)q32, (const lc_fp16 *)kc, (size_t)hd,
                               nj, hd);
            } else {
                for (int g = 0; g < ng; g++) {
                    if (kt == LC_TYPE_F32)
                        dots32(k, false, sc[g], (const float *)kc, (size_t)hd, nj, qv[g], hd);
                    else if (k->gemv[kt])
                        k->gemv[kt](hd, sc[g], kc, hr, nj, qv[g]);
                    else
                        for (int j = 0; j < nj; j++)
                            k->vec_dot[kt](hd, &sc[g][j], kc + (size_t)j * hr, qv[g]);
                }
            }
            /* online softmax: p_j = e^(s_j - M'), the running sums rescaled when M grows */
            for (int g = 0; g < ng; g++) {
                float s_scale = scale;
                if (cap > 0.0f) {
                    for (int j = 0; j < nj; j++)
                        sc[g][j] = cap * tanhf(sc[g][j] * scale);
                    s_scale = 1.0f;
                }
                const float m_old = M[g];
                const float sum = k->exp_sum(sc[g], nj, s_scale, &M[g]);
                if (M[g] > m_old && S[g] != 0.0f) {
                    const float ms = expf(m_old - M[g]);
                    S[g] *= ms;
                    for (int d = 0; d < hd; d++)
                        acc[g][d] *= ms;
                }
                S[g] += sum;
            }
            if (kt == LC_TYPE_F16) {
                k->mad_f16_rows(acc, ng, (const float *const *)sc, (const lc_fp16 *)vc, (size_t)hd,
                                nj, hd);
            } else if (kt == LC_TYPE_F32) {
                k->mad_f32_rows(acc, ng, (const float *const *)sc, (const float *)vc, (size_t)hd,
                                nj, hd);
            } else {   /* the chunk's rows are contiguous: one conversion */
                lc_dequantize_row_q8_0((const lc_block_q8_0 *)vc, v32, (int64_t)nj * hd);
                k->mad_f32_rows(acc, ng, (const float *const *)sc, v32, (size_t)hd, nj, hd);
            }
        }
        for (int g = 0; g < ng; g++) {
            out[g] = c->att + (size_t)i * (size_t)hp->n_q + (size_t)(h0 + g) * (size_t)hd;
            const float s_inv = 1.0f / S[g];
            for (int d = 0; d < hd; d++)
                out[g][d] = acc[g][d] * s_inv;
        }
    }
}

/* ---------------------------------------------------------------- one batch */

/* Write the batch's k rows (one per position and KV head, kv_head_row) and v rows (the same,
 * under fused attention) or columns (V is stored transposed). */
static void store_kv(struct lc_context *c, int layer, int n_tok, int pos)
{
    const size_t lo = (size_t)layer * (size_t)c->n_ctx * (size_t)c->n_kv;
    /* converted as ggml_cpy does (the CPU from_float of the type; a Q8_0 block never straddles
     * two heads, head_dim % 32 == 0) */
    const int hd = c->model->hp.head_dim;
    for (int t = 0; t < n_tok; t++)
        for (int h = 0; h < c->model->hp.n_head_kv; h++) {
            const size_t src = (size_t)t * (size_t)c->n_kv + (size_t)h * (size_t)hd;
            char *kd = kv_head_row(c, false, layer, h, pos + t);
            char *vd = c->fa ? kv_head_row(c, true, layer, h, pos + t) : NULL;
            if (c->kv_type == LC_TYPE_F32) {
                memcpy(kd, c->kb + src, (size_t)hd * sizeof(float));
                if (vd)
                    memcpy(vd, c->vb + src, (size_t)hd * sizeof(float));
            } else {
                c->k->quantize_row[c->kv_type](c->kb + src, kd, hd);
                if (vd)
                    c->k->quantize_row[c->kv_type](c->vb + src, vd, hd);
            }
        }
    if (c->fa)
        return;
    if (c->kv_type == LC_TYPE_F16) {
        lc_fp16 *vc = (lc_fp16 *)c->v_cache + lo;
        for (int t = 0; t < n_tok; t++)
            for (int d = 0; d < c->n_kv; d++)
                vc[(size_t)d * (size_t)c->n_ctx + (size_t)(pos + t)] =
                    lc_fp32_to_fp16(c->vb[(size_t)t * (size_t)c->n_kv + (size_t)d]);
    } else {
        float *vc = (float *)c->v_cache + lo;
        for (int t = 0; t < n_tok; t++)
            for (int d = 0; d < c->n_kv; d++)
                vc[(size_t)d * (size_t)c->n_ctx + (size_t)(pos + t)] =
                    c->vb[(size_t)t * (size_t)c->n_kv + (size_t)d];
    }
}

/* x[r] += b for each of rows rows of n floats (a bias, as ggml_add broadcasts it) */
static void add_bias(float *x, const struct lc_weight *b, int rows, int n)
{
    const float *bd = b->data;
    for (int r = 0; r < rows; r++)
        for (int j = 0; j < n; j++)
            x[(size_t)r * (size_t)n + (size_t)j] += bd[j];
}

/* RMSNorm of each of rows rows of n floats, in place (n = head_dim: the q/k norm of each head) */
static void norm_rows(const struct lc_context *c, float *x, const struct lc_weight *w, int rows,
                      int n)
{
    for (int r = 0; r < rows; r++)
        c->k->rms_norm(x + (size_t)r * (size_t)n, x + (size_t)r * (size_t)n, w->data, n,
                       c->model->hp.rms_norm_eps);
}

/* x = c * tanh(x / c) for n floats: ggml_scale, ggml_tanh, ggml_scale */
static void softcap(float *x, size_t n, float cap)
{
    const float inv = 1.0f / cap;
    for (size_t i = 0; i < n; i++)
        x[i] = tanhf(x[i] * inv) * cap;
}

/* The attention block of layer il: x += [post-norm] Wo attention(attn_norm(x)). */
static void attention_block(struct lc_context *c, int il, int n_tok, int pos)
{
    const struct lc_hparams *hp = &c->model->hp;
    const struct lc_arch *a = hp->arch;
    const struct lc_layer *L = &c->model->layers[il];
    const int E = hp->n_embd, Q = hp->n_q, KV = c->n_kv, hd = hp->head_dim;

    for (int i = 0; i < n_tok; i++)
        c->k->rms_norm(c->xb + (size_t)i * (size_t)E, c->x + (size_t)i * (size_t)E,
                       L->attn_norm.data, E, hp->rms_norm_eps);
    c->act_type = LC_TYPE_COUNT;
    matmul(c, &L->wq, c->xb, (size_t)E, n_tok, c->q, (size_t)Q);
    matmul(c, &L->wk, c->xb, (size_t)E, n_tok, c->kb, (size_t)KV);
    matmul(c, &L->wv, c->xb, (size_t)E, n_tok, c->vb, (size_t)KV);
    if (a->qkv_bias) {
        add_bias(c->q, &L->bq, n_tok, Q);
        add_bias(c->kb, &L->bk, n_tok, KV);
        add_bias(c->vb, &L->bv, n_tok, KV);
    }
    if (a->qk_norm) {
        norm_rows(c, c->q, &L->q_norm, n_tok * hp->n_head, hd);
        norm_rows(c, c->kb, &L->k_norm, n_tok * hp->n_head_kv, hd);
    }
    const float *cs_all = rope_table(c, n_tok, pos, L->rope_base, L->rope_scale);
    for (int i = 0; i < n_tok; i++) {
        const float *cs = cs_all + (size_t)i * (size_t)hp->n_rot;
        rope(c->q + (size_t)i * (size_t)Q, hp->n_head, hd, hp->n_rot, a->rope, cs);
        rope(c->kb + (size_t)i * (size_t)KV, hp->n_head_kv, hd, hp->n_rot, a->rope, cs);
    }
    if (hp->q_scale != 1.0f)
        for (size_t j = 0; j < (size_t)n_tok * (size_t)Q; j++)
            c->q[j] *= hp->q_scale;
    store_kv(c, il, n_tok, pos);
    struct attn_task at = {c, il, n_tok, pos};
    const bool tiny = n_tok > 1 && !c->exact && !c->no_tinyblas;
    const bool grouped = c->grp && c->k->dot_f16_rows_multi && !tiny;
    lc_threadpool_run(c->tp, c->fa                ? attention_fused
                             : tiny && c->bat     ? attention_batch
                             : grouped            ? attention_groups
                                                  : attention_heads,
                      &at);
    c->act_type = LC_TYPE_COUNT;
    matmul(c, &L->wo, c->att, (size_t)Q, n_tok, c->xb, (size_t)E);
    if (a->post_norms)
        norm_rows(c, c->xb, &L->attn_post_norm, n_tok, E);
    add_rows(c->x, c->xb, (size_t)n_tok * (size_t)E);
}

/* The FFN block of layer il: x += [post-norm] down(act(gate h) * up h), h = ffn_norm(x). */
static void ffn_block(struct lc_context *c, int il, int n_tok)
{
    const struct lc_hparams *hp = &c->model->hp;
    const struct lc_layer *L = &c->model->layers[il];
    const int E = hp->n_embd, F = hp->n_ff;
    for (int i = 0; i < n_tok; i++)
        c->k->rms_norm(c->xb + (size_t)i * (size_t)E, c->x + (size_t)i * (size_t)E,
                       L->ffn_norm.data, E, hp->rms_norm_eps);
    c->act_type = LC_TYPE_COUNT;
    matmul(c, &L->ffn_gate, c->xb, (size_t)E, n_tok, c->hg, (size_t)F);
    matmul(c, &L->ffn_up, c->xb, (size_t)E, n_tok, c->hu, (size_t)F);
    {
        const enum lc_type ffn_at = lc_type_traits(L->ffn_down.type)->vec_dot_type;
        struct ffn_mid_task ft = {c, n_tok, F, ffn_at, lc_type_traits(ffn_at)->blck_size};
        lc_threadpool_run(c->tp, ffn_mid_rows, &ft);
        c->act_type = ffn_at; /* c->act holds hg in ffn_down's activation type */
        c->act_src = c->hg;
    }
    matmul(c, &L->ffn_down, c->hg, (size_t)F, n_tok, c->xb, (size_t)E);
    if (hp->arch->post_norms)
        norm_rows(c, c->xb, &L->ffn_post_norm, n_tok, E);
    add_rows(c->x, c->xb, (size_t)n_tok * (size_t)E);
}

/* One batch of n_tok tokens at pos.  done/total: the progress of the whole decode before this
 * batch, for the progress callback, which a prompt batch also consults between layers (a
 * 512-token batch of a large model takes seconds): when it asks to stop, returns 1 with the
 * batch unfinished (the caller keeps n_past before it; the cache rows it wrote are overwritten
 * later).  0 when done, -1 with *err. */
static int eval_batch(struct lc_context *c, const int32_t *tokens, int n_tok, int pos,
                      bool all_logits, int32_t done, int32_t total, char **err)
{
    const struct lc_model *m = c->model;
    const struct lc_hparams *hp = &m->hp;
    const int E = hp->n_embd;

    for (int i = 0; i < n_tok; i++) {
        if (tokens[i] < 0 || tokens[i] >= hp->n_vocab) {
            set_err(err, "token id %d is out of range [0, %d)", tokens[i], hp->n_vocab);
            return -1;
        }
        float *xi = c->x + (size_t)i * (size_t)E;
        lc_weight_get_row(&m->tok_embd, tokens[i], xi);
        if (hp->embd_scale != 1.0f)
            for (int j = 0; j < E; j++)
                xi[j] *= hp->embd_scale;
    }
    rope_reset(c);
    c->act_type = LC_TYPE_COUNT;

    for (int il = 0; il < hp->n_layer; il++) {
        if (il > 0 && n_tok > 1 && !c->exact && c->progress &&
            c->progress(c->progress_user, done + (int32_t)((int64_t)n_tok * il / hp->n_layer),
                        total))
            return 1;
        attention_block(c, il, n_tok, pos);
        ffn_block(c, il, n_tok);
    }

    /* Output: all rows for perplexity, else only the last token's. */
    const int first = all_logits ? 0 : n_tok - 1;
    const int n_out = n_tok - first;
    for (int i = first; i < n_tok; i++)
        c->k->rms_norm(c->xb + (size_t)(i - first) * (size_t)E, c->x + (size_t)i * (size_t)E,
                       m->output_norm.data, E, hp->rms_norm_eps);
    float *dst = c->logits;
    if (all_logits)
        dst = c->logits + (size_t)c->n_logits * (size_t)hp->n_vocab;
    c->act_type = LC_TYPE_COUNT;
    matmul(c, &m->output, c->xb, (size_t)E, n_out, dst, (size_t)hp->n_vocab);
    if (hp->final_softcap > 0.0f)
        softcap(dst, (size_t)n_out * (size_t)hp->n_vocab, hp->final_softcap);
    c->n_logits = all_logits ? c->n_logits + n_out : 1;
    return 0;
}

static int decode(struct lc_context *c, const int32_t *tokens, int32_t n, int32_t pos,
                  bool all_logits, bool verify, char **err)
{
    if (err)
        *err = NULL;
    if (n <= 0) {
        set_err(err, "nothing to decode");
        return -1;
    }
    if (pos < 0 || pos > c->n_past) {
        set_err(err, "position %d is past the cached %d tokens", pos, c->n_past);
        return -1;
    }
    if ((int64_t)pos + n > c->n_ctx) {
        set_err(err, "context is full: %d + %d tokens exceed n_ctx = %d", pos, n, c->n_ctx);
        return -1;
    }
    c->n_past = pos;
    c->logits_all = all_logits;
    c->n_logits = 0;
    if (all_logits && n > c->n_logits_cap) {
        float *l = realloc(c->logits, (size_t)n * (size_t)c->model->hp.n_vocab * sizeof(float));
        if (!l) {
            set_err(err, "out of memory for %d rows of logits", n);
            return -1;
        }
        c->logits = l;
        c->n_logits_cap = n;
    }
    const double t0 = now_s();
    c->exact = verify;
    /* a verification is one step of generation for the progress callback: (0, 1), (1, 1) */
    const int32_t total = verify ? 1 : n;
    for (int32_t done = 0; done < n;) {
        if (c->progress && c->progress(c->progress_user, done, total)) {
            c->exact = false;
            return 1;
        }
        const int32_t nb = n - done < c->n_batch ? n - done : c->n_batch;
        const int r = eval_batch(c, tokens + done, nb, pos + done, all_logits, done, total, err);
        if (r != 0) {
            c->exact = false;
            return r;
        }
        done += nb;
        c->n_past = pos + done;
    }
    c->exact = false;
    const double dt = now_s() - t0;
    if (verify) {
        c->stats.n_verify++;
        c->stats.n_verify_tokens += n;
        c->stats.t_gen_s += dt;
    } else if (n > 1) {
        c->stats.n_prompt_tokens += n;
        c->stats.t_prompt_s += dt;
    } else {
        c->stats.n_gen_tokens += n;
        c->stats.t_gen_s += dt;
    }
    if (c->progress)
        c->progress(c->progress_user, total, total);
    return 0;
}

int lc_context_decode(struct lc_context *c, const int32_t *tokens, int32_t n, int32_t pos,
                      bool all_logits, char **err)
{
    return decode(c, tokens, n, pos, all_logits, false, err);
}

int lc_context_verify(struct lc_context *c, const int32_t *tokens, int32_t n, int32_t pos,
                      char **err)
{
    if (n > c->n_batch) {
        if (err)
            *err = NULL;
        set_err(err, "%d tokens to verify exceed the batch of %d", n, c->n_batch);
        return -1;
    }
    return decode(c, tokens, n, pos, true, true, err);
}

void lc_context_add_gen_tokens(struct lc_context *c, int32_t n)
{
    c->stats.n_gen_tokens += n;
}
