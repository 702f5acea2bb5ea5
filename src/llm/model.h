/*
 * model.h - a LLaMA-family model loaded from GGUF.
 *
 * Hyper-parameters come from the `llama.*` keys with llama.cpp's defaults when a key is absent;
 * weights are bound by their GGUF names and stay in the read-only mapping.  Shapes use ggml's
 * order: ne[0] is the row length.  For a weight W of shape (n_in, n_out) the product is
 * y[n_out] = W x[n_in], one dot product per row.
 */
#ifndef LC_MODEL_H
#define LC_MODEL_H

#include <stdbool.h>
#include <stdint.h>

#include "gguf.h"
#include "tokenizer.h"

struct lc_hparams {
    int32_t n_vocab;
    int32_t n_ctx_train;
    int32_t n_embd;
    int32_t n_layer;
    int32_t n_head;
    int32_t n_head_kv;
    int32_t n_ff;
    int32_t n_rot;          /* rope dimension count, default n_embd / n_head */
    int32_t head_dim;       /* n_embd / n_head */
    float rms_norm_eps;     /* llama.attention.layer_norm_rms_epsilon, default 1e-5 */
    float rope_freq_base;   /* default 10000 */
    float rope_freq_scale;  /* 1 / llama.rope.scaling.factor for linear scaling, default 1 */
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

struct lc_layer {
    struct lc_weight attn_norm;  /* (n_embd) F32 */
    struct lc_weight wq;         /* (n_embd, n_embd) */
    struct lc_weight wk;         /* (n_embd, n_head_kv * head_dim) */
    struct lc_weight wv;         /* (n_embd, n_head_kv * head_dim) */
    struct lc_weight wo;         /* (n_embd, n_embd) */
    struct lc_weight ffn_norm;   /* (n_embd) */
    struct lc_weight ffn_gate;   /* (n_embd, n_ff) */
    struct lc_weight ffn_up;     /* (n_embd, n_ff) */
    struct lc_weight ffn_down;   /* (n_ff, n_embd) */
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
/* "llama 260K Q4_1" style description into buf. */
void lc_model_desc(const struct lc_model *m, char *buf, size_t len);
/* Read weight row r (of w) into floats: y has w->ne[0] entries.  Returns 0, or -1 if the type
 * has no dequantizer, r is out of range, or w is in the x16 layout (w->x16: rows are not
 * addressable; token_embd, the only weight read by row, is never repacked). */
int lc_weight_get_row(const struct lc_weight *w, int64_t r, float *y);

#endif
