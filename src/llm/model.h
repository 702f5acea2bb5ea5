/*
 * model.h - a decoder-only transformer loaded from GGUF: llama (LLaMA 1-3, Mistral), qwen2,
 * qwen3, phi3, gemma2, gemma3.
 *
 * The architectures differ in data only (struct lc_arch: which tensors exist, norm placement,
 * activation, RoPE pairing, attention window per layer, scalings), and one forward pass
 * (context.c) reads that data.  Hyper-parameters come from the `<arch>.*` keys with llama.cpp's
 * defaults when a key is absent; weights are bound by their GGUF names and stay in the read-only
 * mapping.  Shapes use ggml's order: ne[0] is the row length.  For a weight W of shape
 * (n_in, n_out) the product is y[n_out] = W x[n_in], one dot product per row.
 */
#ifndef LC_MODEL_H
#define LC_MODEL_H

#include <stdbool.h>
#include <stdint.h>

#include "gguf.h"
#include "tokenizer.h"

/* RoPE pairing (llama.cpp's rope type): NORM rotates (x[2i], x[2i+1]), NEOX (x[i], x[i+n_rot/2]). */
enum lc_rope_kind { LC_ROPE_NORM, LC_ROPE_NEOX };
/* The gated FFN's activation: down(act(gate x) * (up x)). */
enum lc_ffn_act {
    LC_FFN_SILU,  /* SwiGLU */
    LC_FFN_GELU   /* GeGLU, tanh approximation through ggml's f16 table */
};

/*
 * What one architecture is, as data for the one forward pass (model.c: the table, with the
 * llama.cpp graph function each row follows).  Per layer, with x the residual stream:
 *
 *   h = attn_norm(x); q, k, v = Wq h (+ bq), Wk h (+ bk), Wv h (+ bv)   [fused_qkv: one matrix]
 *   q, k = per-head RMSNorm (qk_norm); RoPE(rope); q *= q_scale
 *   a = Wo softmax(softcap(q.K) * kq_scale, window) V;  x += post_norms ? post_attn_norm(a) : a
 *   h = ffn_norm(x); f = down(act(gate h) * (up h))                     [fused_gate_up: one matrix]
 *   x += post_norms ? post_ffw_norm(f) : f
 */
struct lc_arch {
    const char *name;       /* general.architecture, also the prefix of its keys */
    enum lc_rope_kind rope;
    enum lc_ffn_act act;
    bool fused_qkv;         /* blk.N.attn_qkv: rows Q | K | V */
    bool fused_gate_up;     /* blk.N.ffn_up: rows gate | up, no ffn_gate */
    bool qkv_bias;          /* blk.N.attn_{q,k,v}.bias */
    bool qk_norm;           /* blk.N.attn_{q,k}_norm (head_dim), RMSNorm per head before RoPE */
    bool post_norms;        /* blk.N.post_attention_norm, post_ffw_norm on the block outputs */
    bool embd_scale;        /* token embeddings * sqrtf(n_embd) */
    bool always_tied;       /* output = token_embd even when output.weight exists (gemma2) */
    bool q_scaled;          /* q *= 1/sqrt(d) after RoPE, kq_scale 1 (phi3, gemma) */
    bool softcaps;          /* read attn/final logit soft-capping (gemma2; defaults 50, 30) */
    bool rope_factors_ls;   /* rope_factors_long/short.weight by context size (phi3) */
    int swa_pattern;        /* -1: no window; else layer il uses attention.sliding_window iff
                               p == 0 or il % p < p - 1 (llama.cpp's set_swa_pattern) */
    float swa_rope_base;    /* RoPE base of window layers (unscaled), 0 = the model's (gemma3: 1e4) */
};

/* The table entry for general.architecture name, or NULL. */
const struct lc_arch *lc_arch_find(const char *name);
/* Space-separated names of the architectures llamachat runs. */
const char *lc_arch_names(void);

struct lc_hparams {
    const struct lc_arch *arch;
    int32_t n_vocab;
    int32_t n_ctx_train;
    int32_t n_embd;
    int32_t n_layer;
    int32_t n_head;
    int32_t n_head_kv;
    int32_t n_ff;
    int32_t n_rot;          /* rope dimension count, default head_dim */
    int32_t head_dim;       /* attention.key_length, default n_embd / n_head */
    int32_t n_q;            /* n_head * head_dim (not always n_embd: gemma2, qwen3) */
    float rms_norm_eps;     /* <arch>.attention.layer_norm_rms_epsilon, default 1e-5 */
    float rope_freq_base;   /* default 10000 */
    float rope_freq_scale;  /* 1 / <arch>.rope.scaling.factor for linear scaling, default 1 */
    int32_t n_ctx_orig;     /* rope.scaling.original_context_length, default n_ctx_train */
    int32_t n_swa;          /* attention.sliding_window: a query at pq sees keys pk with
                               pq - pk < n_swa on window layers; 0 = no window */
    float q_scale;          /* q *= q_scale after RoPE (1 when the scores are scaled instead) */
    float kq_scale;         /* scores *= kq_scale before the softmax */
    float attn_softcap;     /* scores = c * tanh(scores / c) first; 0 = none */
    float final_softcap;    /* logits = c * tanh(logits / c); 0 = none */
    float embd_scale;       /* embeddings *= embd_scale (1 = none) */
};

/* A weight: a view of a GGUF tensor. */
struct lc_weight {
    enum lc_type type;
    int64_t ne[2];          /* ne[0] = row length (n_in), ne[1] = rows (n_out) */
    size_t row_bytes;
    const void *data;
    /*
     * Q4_0 with a multiple of 8 rows: llama.cpp's x86 build repacks these into its Q4_0x8
     * layout at load and multiplies them with its own kernels, whose float order differs from
     * vec_dot's (kernels.h: q4_0x8); products with such a weight follow that order.
     */
    bool q4_0x8;
    /*
     * data is in the x16 layout (repack.h), a copy made at load when the kernels in use have
     * fast x16 kernels: rows come in groups of 16 and are not addressable one by one.
     */
    bool x16;
};

/*
 * A layer.  Fused matrices (phi3's attn_qkv, ffn_up = gate | up) are bound as views of their
 * row ranges, so wq/wk/wv and ffn_gate/ffn_up are always set.  Optional tensors the
 * architecture lacks have data == NULL.
 */
struct lc_layer {
    struct lc_weight attn_norm;  /* (n_embd) F32 */
    struct lc_weight wq;         /* (n_embd, n_q) */
    struct lc_weight wk;         /* (n_embd, n_head_kv * head_dim) */
    struct lc_weight wv;         /* (n_embd, n_head_kv * head_dim) */
    struct lc_weight bq, bk, bv; /* (n_q), (n_kv), (n_kv) F32, qkv_bias only */
    struct lc_weight q_norm;     /* (head_dim) F32, qk_norm only */
    struct lc_weight k_norm;     /* (head_dim) F32, qk_norm only */
    struct lc_weight wo;         /* (n_q, n_embd) */
    struct lc_weight attn_post_norm; /* (n_embd) F32, post_norms only */
    struct lc_weight ffn_norm;   /* (n_embd) */
    struct lc_weight ffn_gate;   /* (n_embd, n_ff) */
    struct lc_weight ffn_up;     /* (n_embd, n_ff) */
    struct lc_weight ffn_down;   /* (n_ff, n_embd) */
    struct lc_weight ffn_post_norm; /* (n_embd) F32, post_norms only */
    int32_t n_swa;               /* attention window of this layer, 0 = all previous tokens */
    float rope_base, rope_scale; /* RoPE theta = pos * rope_scale * rope_base^(-2i/n_rot) / ff[i] */
};

struct lc_model {
    struct lc_gguf *gguf;         /* owned; first part when split */
    struct lc_gguf **parts;       /* all parts of a split model (parts[0] == gguf), owned */
    int n_parts;
    struct lc_vocab *vocab;       /* owned */
    struct lc_hparams hp;
    bool vocab_only;
    struct lc_weight tok_embd;    /* (n_embd, n_vocab) */
    struct lc_weight output_norm; /* (n_embd) */
    struct lc_weight output;      /* (n_embd, n_vocab); tok_embd when the file has no output.weight */
    /* RoPE frequency factors (n_rot / 2) F32, dividing each pair's angle: rope_freqs.weight
     * (Llama 3), or phi3's rope_factors_long / _short (the context picks by n_ctx); data NULL
     * when absent */
    struct lc_weight rope_freqs, rope_long, rope_short;
    struct lc_layer *layers;      /* n_layer */
    enum lc_type ftype;           /* most common 2-D weight type, for display */
    uint64_t n_params;
    uint64_t n_bytes;             /* bytes of tensor data */
    void *x16_buf;                /* the x16 copies of the repacked weights (an anonymous, read-only
                                     mapping owned by the model), or NULL */
    size_t x16_size;              /* bytes of x16_buf */
    char x16_note[160];           /* why the weights were not repacked though the kernels would
                                     gain (memory), for the user; "" otherwise */
    char name[128];               /* general.name or the file's base name */
};

/*
 * Load a model.  path is a .gguf file or the first part of a split model (-00001-of-0000N.gguf).
 * With vocab_only, only the tokenizer is loaded (files without tensors are accepted).
 * Returns NULL with a malloc'd *err naming the file and the problem.
 */
struct lc_model *lc_model_load(const char *path, bool vocab_only, char **err);
void lc_model_free(struct lc_model *m);
/* "llama 260K Q4_1" style description (architecture, parameters, type) into buf. */
void lc_model_desc(const struct lc_model *m, char *buf, size_t len);
/* Read weight row r (of w) into floats: y has w->ne[0] entries.  Returns 0, or -1 if the type
 * has no dequantizer, r is out of range, or w is in the x16 layout (w->x16: rows are not
 * addressable; token_embd, the only weight read by row, is never repacked). */
int lc_weight_get_row(const struct lc_weight *w, int64_t r, float *y);

#endif
