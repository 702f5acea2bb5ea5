/*
 * calib.c - importance matrices over a text or the model's own samples (calib.h).
 *
 * The context's matmul observer (context.h) hands over each product's weight -- a member of
 * the model, which tells which tensor it is -- and its float input rows; a table built once from
 * the model maps the weight to its GGUF name, under which the rows go to lc_imatrix_add.
 */
#include "calib.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model.h"
#include "tokenizer.h"

/* One weight matrix and its tensor name. */
struct wname {
    const struct lc_weight *w;
    char name[64];
};

struct lc_calib {
    struct lc_context *ctx;
    struct lc_imatrix *im;
    struct wname *names;
    int n, cap;
    bool failed; /* lc_imatrix_add failed during the current chunk */
    bool oom;    /* the name table could not grow */
};

static void add_name(struct lc_calib *c, const struct lc_weight *w, const char *name)
{
    if (!w->data)
        return;
    if (c->n == c->cap) {
        int cap = c->cap ? 2 * c->cap : 64;
        struct wname *p = realloc(c->names, (size_t)cap * sizeof(*p));
        if (!p) {
            c->oom = true;
            return;
        }
        c->names = p;
        c->cap = cap;
    }
    c->names[c->n].w = w;
    snprintf(c->names[c->n].name, sizeof(c->names[c->n].name), "%s", name);
    c->n++;
}

/* Which lc_weight is which tensor: the names llama.cpp gives them (llm_tensor names). */
static void map_names(struct lc_calib *c, const struct lc_model *m)
{
    char a[64], b[64];
    for (int il = 0; il < m->hp.n_layer; il++) {
        const struct lc_layer *L = &m->layers[il];
        snprintf(a, sizeof(a), "blk.%d.attn_q.weight", il);
        if (lc_gguf_find_tensor(m->gguf, a) || m->n_parts > 1) {
            add_name(c, &L->wq, a);
            snprintf(a, sizeof(a), "blk.%d.attn_k.weight", il);
            add_name(c, &L->wk, a);
            snprintf(a, sizeof(a), "blk.%d.attn_v.weight", il);
            add_name(c, &L->wv, a);
        } else { /* fused q|k|v: one input, one name */
            snprintf(a, sizeof(a), "blk.%d.attn_qkv.weight", il);
            add_name(c, &L->wq, a);
        }
        snprintf(a, sizeof(a), "blk.%d.attn_output.weight", il);
        add_name(c, &L->wo, a);
        snprintf(a, sizeof(a), "blk.%d.ffn_gate.weight", il);
        snprintf(b, sizeof(b), "blk.%d.ffn_up.weight", il);
        if (lc_gguf_find_tensor(m->gguf, a) || m->n_parts > 1) {
            add_name(c, &L->ffn_gate, a);
            add_name(c, &L->ffn_up, b);
        } else { /* fused gate|up */
            add_name(c, &L->ffn_gate, b);
        }
        snprintf(a, sizeof(a), "blk.%d.ffn_down.weight", il);
        add_name(c, &L->ffn_down, a);
    }
    add_name(c, &m->output,
             m->output.data == m->tok_embd.data ? "token_embd.weight" : "output.weight");
}

struct lc_calib *lc_calib_new(struct lc_context *ctx, struct lc_imatrix *im)
{
    struct lc_calib *c = calloc(1, sizeof(*c));
    if (!c)
        return NULL;
    c->ctx = ctx;
    c->im = im;
    map_names(c, lc_context_model(ctx));
    if (c->oom) {
        lc_calib_free(c);
        return NULL;
    }
    return c;
}

void lc_calib_free(struct lc_calib *c)
{
    if (!c)
        return;
    free(c->names);
    free(c);
}

int lc_calib_n_matrices(const struct lc_calib *c)
{
    return c->n;
}

static void observe(void *user, const struct lc_weight *w, const float *src, int rows,
                    size_t stride)
{
    struct lc_calib *c = user;
    for (int i = 0; i < c->n; i++)
        if (c->names[i].w == w) {
            if (lc_imatrix_add(c->im, c->names[i].name, src, rows, (int)w->ne[0], stride) != 0)
                c->failed = true;
            return;
        }
}

static void set_err(char **err, const char *msg)
{
    if (err)
        *err = strdup(msg);
}

int lc_calib_chunk(struct lc_calib *c, const int32_t *tokens, int32_t n, char **err)
{
    c->failed = false;
    lc_context_set_matmul_observer(c->ctx, observe, c);
    /* all_logits: the output matrix then sees every row, as the others do */
    const int rc = lc_context_decode(c->ctx, tokens, n, 0, true, err);
    lc_context_set_matmul_observer(c->ctx, NULL, NULL);
    if (rc != 0)
        return -1;
    if (c->failed) {
        set_err(err, "out of memory (or a matrix seen with two row lengths)");
        return -1;
    }
    lc_imatrix_end_chunk(c->im);
    return 0;
}

int32_t lc_calib_sample(struct lc_calib *c, struct lc_sampler *s, int32_t *out, int32_t n_max,
                        char **err)
{
    const struct lc_vocab *v = lc_context_model(c->ctx)->vocab;
    const int32_t bos = lc_vocab_bos(v);
    if (bos < 0) {
        set_err(err, "the model has no BOS token to start a sequence from");
        return -1;
    }
    lc_sampler_reset(s);
    out[0] = bos;
    lc_sampler_accept(s, bos);
    int32_t n = 1;
    while (n < n_max) {
        if (lc_context_decode(c->ctx, &out[n - 1], 1, n - 1, false, err) != 0)
            return -1;
        const int32_t tok = lc_sampler_sample(s, lc_context_logits(c->ctx, -1));
        if (lc_vocab_is_eog(v, tok))
            break;
        lc_sampler_accept(s, tok);
        out[n++] = tok;
    }
    return n;
}

int lc_calib_generate(struct lc_calib *c, const struct lc_sampler_params *sp, int64_t n_tokens,
                      int max_seqs, lc_calib_seq_fn cb, void *user, char **err)
{
    const struct lc_model *m = lc_context_model(c->ctx);
    const int32_t n_ctx = lc_context_n_ctx(c->ctx);
    struct lc_sampler *s = lc_sampler_new(sp, lc_vocab_n_tokens(m->vocab));
    int32_t *seq = malloc((size_t)n_ctx * sizeof(int32_t));
    int n_seq = 0;
    if (!s || !seq) {
        set_err(err, "out of memory");
        n_seq = -1;
    }
    int64_t left = n_tokens;
    while (n_seq >= 0 && left >= 2 && (max_seqs <= 0 || n_seq < max_seqs)) {
        const int32_t n_max = left < n_ctx ? (int32_t)left : n_ctx;
        const int32_t n = lc_calib_sample(c, s, seq, n_max, err);
        if (n < 0 || lc_calib_chunk(c, seq, n, err) != 0) {
            n_seq = -1;
            break;
        }
        if (cb)
            cb(user, seq, n, n_seq);
        left -= n;
        n_seq++;
    }
    free(seq);
    lc_sampler_free(s);
    return n_seq;
}

struct lc_sampler_params lc_calib_sampler_params(float temp, uint64_t seed)
{
    struct lc_sampler_params p = lc_sampler_default_params();
    p.temp = temp;
    p.top_k = 0;
    p.top_p = 1.0f;
    p.min_p = 0.0f;
    p.repeat_penalty = 1.0f;
    p.repeat_last_n = 0;
    p.seed = seed;
    return p;
}
