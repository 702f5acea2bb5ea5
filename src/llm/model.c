/*
 * model.c - hyper-parameters and weight binding for the architectures in lc_archs.
 *
 * Keys and tensor names follow llama.cpp (llama-arch.cpp, llama-model.cpp): `<arch>.*` keys with
 * its defaults when absent, tensors `token_embd.weight`, `output_norm.weight`, `output.weight`
 * (absent: tied to token_embd), `blk.N.{attn_norm,attn_q,attn_k,attn_v,attn_output,ffn_norm,
 * ffn_gate,ffn_up,ffn_down}.weight` and the optional ones an architecture declares (biases,
 * q/k norms, post-norms, fused attn_qkv).  Every shape is checked against the hyper-parameters
 * so that the forward pass can trust them.
 */
#include "model.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "arch/kernels.h"
#include "repack.h"
#include "threadpool.h"

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

/*
 * The architectures, as data for the one forward pass in context.c.  Each row says how
 * llama.cpp's graph for it (llm_build_<name> in b4748's llama.cpp / newer llama-model.cpp)
 * departs from build_llama.
 */
static const struct lc_arch lc_archs[] = {
    /* build_llama: RMSNorm, SwiGLU, RoPE on adjacent pairs; Llama 3: rope_freqs.weight */
    {.name = "llama", .rope = LC_ROPE_NORM, .act = LC_FFN_SILU, .swa_pattern = -1},
    /* build_qwen2: biases on q, k, v; NEOX RoPE */
    {.name = "qwen2", .rope = LC_ROPE_NEOX, .act = LC_FFN_SILU, .qkv_bias = true,
     .swa_pattern = -1},
    /* build_qwen3: per-head RMSNorm of q and k before RoPE, head_dim from key_length */
    {.name = "qwen3", .rope = LC_ROPE_NEOX, .act = LC_FFN_SILU, .qk_norm = true,
     .swa_pattern = -1},
    /* build_phi3: one attn_qkv matrix, ffn_up = gate | up, q scaled after RoPE, the window
     * (when attention.sliding_window is set) on every layer as b4748 does, long/short factors */
    {.name = "phi3", .rope = LC_ROPE_NEOX, .act = LC_FFN_SILU, .fused_qkv = true,
     .fused_gate_up = true, .q_scaled = true, .rope_factors_ls = true, .swa_pattern = 0},
    /* build_gemma2: embeddings * sqrt(n_embd), GeGLU, post-norms, soft-capping, window on even
     * layers, always the tied LM head */
    {.name = "gemma2", .rope = LC_ROPE_NEOX, .act = LC_FFN_GELU, .post_norms = true,
     .embd_scale = true, .always_tied = true, .q_scaled = true, .softcaps = true,
     .swa_pattern = 2},
    /* build_gemma3_iswa: gemma2 with q/k norms and no soft-capping; 5 window layers with RoPE
     * base 10000 (hard-coded in llama.cpp), then one global layer with the model's base/scale */
    {.name = "gemma3", .rope = LC_ROPE_NEOX, .act = LC_FFN_GELU, .qk_norm = true,
     .post_norms = true, .embd_scale = true, .q_scaled = true, .swa_pattern = 6,
     .swa_rope_base = 10000.0f},
};

const struct lc_arch *lc_arch_find(const char *name)
{
    for (size_t i = 0; name && i < sizeof(lc_archs) / sizeof(lc_archs[0]); i++)
        if (strcmp(lc_archs[i].name, name) == 0)
            return &lc_archs[i];
    return NULL;
}

const char *lc_arch_names(void) { return "llama qwen2 qwen3 phi3 gemma2 gemma3"; }

/* Weight types the forward pass can multiply with (a vec_dot kernel and an activation type). */
static bool type_supported(enum lc_type t)
{
    switch (t) {
    case LC_TYPE_F32:
    case LC_TYPE_F16:
    case LC_TYPE_BF16:
    case LC_TYPE_Q4_0:
    case LC_TYPE_Q4_1:
    case LC_TYPE_Q8_0:
    case LC_TYPE_Q6_K:
    case LC_TYPE_Q5_0:
    case LC_TYPE_Q5_1:
    case LC_TYPE_IQ4_NL:
    case LC_TYPE_Q2_K:
    case LC_TYPE_Q3_K:
    case LC_TYPE_Q4_K:
    case LC_TYPE_Q5_K:
    case LC_TYPE_IQ4_XS:
        return lc_kernels()->vec_dot[t] != NULL;
    default:
        return false;
    }
}

/*
 * Find tensor `name` in any part and check it has exactly the shape (ne0, ne1) (ne1 = 1 for
 * vectors).  Returns 0, or -1 with *err.
 */
static int bind(const struct lc_model *m, struct lc_weight *w, const char *name, int64_t ne0,
                int64_t ne1, bool required, bool need_f32, char **err)
{
    const struct lc_gguf_tensor *t = NULL;
    for (int p = 0; p < m->n_parts && !t; p++)
        t = lc_gguf_find_tensor(m->parts[p], name);
    if (!t) {
        if (required)
            set_err(err, "%s: tensor '%s' is missing", lc_gguf_path(m->gguf), name);
        return required ? -1 : 1;
    }
    const uint32_t want_dims = ne1 == 1 ? 1 : 2;
    if (t->n_dims > want_dims || t->ne[0] != ne0 || t->ne[1] != ne1 || t->ne[2] != 1 ||
        t->ne[3] != 1) {
        set_err(err,
                "%s: tensor '%s' has shape [%lld, %lld, %lld, %lld], expected [%lld, %lld]",
                lc_gguf_path(m->gguf), name, (long long)t->ne[0], (long long)t->ne[1],
                (long long)t->ne[2], (long long)t->ne[3], (long long)ne0, (long long)ne1);
        return -1;
    }
    if (need_f32 && t->type != LC_TYPE_F32) {
        set_err(err, "%s: tensor '%s' is %s; norms, biases and factors must be f32", lc_gguf_path(m->gguf),
                name, lc_type_name(t->type));
        return -1;
    }
    if (!need_f32 && !type_supported(t->type)) {
        set_err(err, "%s: tensor '%s' has type %s, which is not supported (llamachat computes with "
                     "f32, f16, bf16, q4_0, q4_1, q5_0, q5_1, q8_0, q2_K, q3_K, q4_K, q5_K, q6_K, "
                     "iq4_nl, iq4_xs)",
                lc_gguf_path(m->gguf), name, lc_type_name(t->type));
        return -1;
    }
    w->type = t->type;
    w->ne[0] = t->ne[0];
    w->ne[1] = t->ne[1];
    w->row_bytes = lc_row_size(t->type, t->ne[0]);
    w->data = t->data;
    /* llama.cpp (ggml-cpu-aarch64.cpp, ggml_aarch64_get_optimal_repack_type): Q4_0 matrices
     * with ne[1] % 8 == 0 are repacked to Q4_0x8 on AVX2 CPUs.  token_embd is only read by row
     * (the flag does not matter there), but when it doubles as the output matrix (tied
     * embeddings) llama.cpp loads a second copy for the matrix product, which is repacked:
     * so the flag travels with the tied output too (checked against llama.cpp 0.7.0 on a tied
     * Q4_0 stories260K: same logits for 64 steps, and not without the flag). */
    w->q4_0x8 = t->type == LC_TYPE_Q4_0 && t->ne[1] % 8 == 0;
    return 0;
}

static int get_i32(const struct lc_gguf *g, const char *key, int32_t *out, bool required,
                   int32_t lo, int32_t hi, char **err)
{
    int64_t v;
    if (!lc_gguf_get_i64(g, key, &v)) {
        if (lc_gguf_find_key(g, key) >= 0) {
            set_err(err, "%s: key '%s' has the wrong type", lc_gguf_path(g), key);
            return -1;
        }
        if (required) {
            set_err(err, "%s: key '%s' is missing", lc_gguf_path(g), key);
            return -1;
        }
        return 0;
    }
    if (v < lo || v > hi) {
        set_err(err, "%s: key '%s' = %lld is out of range [%d, %d]", lc_gguf_path(g), key,
                (long long)v, lo, hi);
        return -1;
    }
    *out = (int32_t)v;
    return 0;
}

/* "<arch>.<suffix>" into buf */
static const char *akey(char *buf, size_t len, const struct lc_arch *a, const char *suffix)
{
    snprintf(buf, len, "%s.%s", a->name, suffix);
    return buf;
}

/* Optional positive float key; 0, or -1 with *err when present but not positive. */
static int get_pos_f32(const struct lc_gguf *g, const char *key, float *out, char **err)
{
    float f;
    if (!lc_gguf_get_f32(g, key, &f))
        return 0;
    if (!(f > 0.0f && f < 1e30f)) {
        set_err(err, "%s: key '%s' = %g is not a positive number", lc_gguf_path(g), key,
                (double)f);
        return -1;
    }
    *out = f;
    return 0;
}

static int load_hparams(struct lc_model *m, char **err)
{
    const struct lc_gguf *g = m->gguf;
    struct lc_hparams *hp = &m->hp;
    const char *name = lc_gguf_get_str(g, "general.architecture");
    if (!name) {
        set_err(err, "%s: no general.architecture key", lc_gguf_path(g));
        return -1;
    }
    const struct lc_arch *a = lc_arch_find(name);
    if (!a) {
        set_err(err, "%s: architecture '%s' is not supported (llamachat runs: %s)",
                lc_gguf_path(g), name, lc_arch_names());
        return -1;
    }
    char k[96];
#define K(suffix) akey(k, sizeof k, a, suffix)
    memset(hp, 0, sizeof(*hp));
    hp->arch = a;
    hp->n_ctx_train = 2048;
    hp->rms_norm_eps = 1e-5f;
    hp->rope_freq_base = 10000.0f;
    hp->rope_freq_scale = 1.0f;
    if (get_i32(g, K("context_length"), &hp->n_ctx_train, false, 1, 1 << 24, err) ||
        get_i32(g, K("embedding_length"), &hp->n_embd, true, 1, 1 << 16, err) ||
        get_i32(g, K("block_count"), &hp->n_layer, true, 1, 1024, err) ||
        get_i32(g, K("feed_forward_length"), &hp->n_ff, true, 1, 1 << 20, err) ||
        get_i32(g, K("attention.head_count"), &hp->n_head, true, 1, 4096, err))
        return -1;
    hp->n_head_kv = hp->n_head;
    if (get_i32(g, K("attention.head_count_kv"), &hp->n_head_kv, false, 1, 4096, err))
        return -1;
    if (hp->n_head % hp->n_head_kv != 0) {
        set_err(err, "%s: n_head %d is not a multiple of n_head_kv %d", lc_gguf_path(g),
                hp->n_head, hp->n_head_kv);
        return -1;
    }
    /* head_dim: key_length when given (gemma, qwen3: n_head * head_dim != n_embd) */
    hp->head_dim = 0;
    if (get_i32(g, K("attention.key_length"), &hp->head_dim, false, 2, 1 << 16, err))
        return -1;
    if (hp->head_dim == 0) {
        if (hp->n_embd % hp->n_head != 0) {
            set_err(err, "%s: n_embd %d is not a multiple of n_head %d", lc_gguf_path(g),
                    hp->n_embd, hp->n_head);
            return -1;
        }
        hp->head_dim = hp->n_embd / hp->n_head;
    }
    int32_t vlen = hp->head_dim;
    if (get_i32(g, K("attention.value_length"), &vlen, false, 1, 1 << 16, err))
        return -1;
    if (vlen != hp->head_dim) {
        set_err(err, "%s: attention.value_length %d differs from key_length %d (not supported)",
                lc_gguf_path(g), vlen, hp->head_dim);
        return -1;
    }
    if ((int64_t)hp->n_head * hp->head_dim > 1 << 20) {
        set_err(err, "%s: n_head * head_dim is too large", lc_gguf_path(g));
        return -1;
    }
    hp->n_q = hp->n_head * hp->head_dim;
    hp->n_rot = hp->head_dim;
    if (get_i32(g, K("rope.dimension_count"), &hp->n_rot, false, 0, hp->head_dim, err))
        return -1;
    if (hp->n_rot % 2 != 0) {
        set_err(err, "%s: rope dimension count %d is odd", lc_gguf_path(g), hp->n_rot);
        return -1;
    }
    float f;
    if (lc_gguf_get_f32(g, K("attention.layer_norm_rms_epsilon"), &f)) {
        if (!(f > 0.0f && f < 1.0f)) {
            set_err(err, "%s: layer_norm_rms_epsilon %g is out of range", lc_gguf_path(g),
                    (double)f);
            return -1;
        }
        hp->rms_norm_eps = f;
    }
    if (get_pos_f32(g, K("rope.freq_base"), &hp->rope_freq_base, err))
        return -1;
    /* Linear RoPE scaling: <arch>.rope.scaling.factor (or the older rope.scale_linear). */
    const char *stype = lc_gguf_get_str(g, K("rope.scaling.type"));
    if ((!stype || strcmp(stype, "linear") == 0) &&
        (lc_gguf_get_f32(g, K("rope.scaling.factor"), &f) ||
         lc_gguf_get_f32(g, K("rope.scale_linear"), &f)) &&
        f > 0.0f)
        hp->rope_freq_scale = 1.0f / f;
    hp->n_ctx_orig = hp->n_ctx_train;
    if (get_i32(g, K("rope.scaling.original_context_length"), &hp->n_ctx_orig, false, 1, 1 << 24,
                err))
        return -1;
    if (a->swa_pattern >= 0 &&
        get_i32(g, K("attention.sliding_window"), &hp->n_swa, false, 0, 1 << 24, err))
        return -1;
    /* Query scaling: 1/sqrt(head_dim) on q after RoPE (phi3, gemma) or on the scores.  The
     * Gemma 27B models scale by 1/sqrt(n_embd / n_head) instead; llama.cpp knows them by their
     * layer count (gemma2 46, gemma3 62). */
    float qd = (float)hp->head_dim;
    if ((!strcmp(a->name, "gemma2") && hp->n_layer == 46) ||
        (!strcmp(a->name, "gemma3") && hp->n_layer == 62))
        qd = (float)(hp->n_embd / hp->n_head);
    hp->q_scale = a->q_scaled ? 1.0f / sqrtf(qd) : 1.0f;
    hp->kq_scale = a->q_scaled ? 1.0f : 1.0f / sqrtf(qd);
    if (a->softcaps) {
        hp->attn_softcap = 50.0f;
        hp->final_softcap = 30.0f;
        if (get_pos_f32(g, K("attn_logit_softcapping"), &hp->attn_softcap, err) ||
            get_pos_f32(g, K("final_logit_softcapping"), &hp->final_softcap, err))
            return -1;
    }
    hp->embd_scale = a->embd_scale ? sqrtf((float)hp->n_embd) : 1.0f;
#undef K
    return 0;
}

/* dst = rows [r0, r0 + n) of src (a fused matrix) */
static void view_rows(struct lc_weight *dst, const struct lc_weight *src, int64_t r0, int64_t n)
{
    *dst = *src;
    dst->ne[1] = n;
    dst->data = (const uint8_t *)src->data + (size_t)r0 * src->row_bytes;
}

static int bind_weights(struct lc_model *m, char **err)
{
    const struct lc_hparams *hp = &m->hp;
    const struct lc_arch *a = hp->arch;
    const int64_t n_embd = hp->n_embd, n_ff = hp->n_ff, n_vocab = hp->n_vocab;
    const int64_t n_kv = (int64_t)hp->n_head_kv * hp->head_dim, n_q = hp->n_q;
    const int64_t hd = hp->head_dim, n_pairs = hp->n_rot / 2;
    if (bind(m, &m->tok_embd, "token_embd.weight", n_embd, n_vocab, true, false, err) ||
        bind(m, &m->output_norm, "output_norm.weight", n_embd, 1, true, true, err))
        return -1;
    int r = a->always_tied ? 1 : bind(m, &m->output, "output.weight", n_embd, n_vocab, false, false, err);
    if (r < 0)
        return -1;
    if (r > 0)
        m->output = m->tok_embd; /* tied embeddings */
    /* RoPE frequency factors: absent is fine (bind returns 1, data stays NULL) */
    if (bind(m, &m->rope_freqs, "rope_freqs.weight", n_pairs, 1, false, true, err) < 0)
        return -1;
    if (a->rope_factors_ls &&
        (bind(m, &m->rope_long, "rope_factors_long.weight", n_pairs, 1, false, true, err) < 0 ||
         bind(m, &m->rope_short, "rope_factors_short.weight", n_pairs, 1, false, true, err) < 0))
        return -1;
    m->layers = calloc((size_t)hp->n_layer, sizeof(*m->layers));
    if (!m->layers) {
        set_err(err, "out of memory");
        return -1;
    }
    for (int il = 0; il < hp->n_layer; il++) {
        struct lc_layer *L = &m->layers[il];
        char name[96];
#define B(field, suffix, ne0, ne1, f32)                                                          \
    snprintf(name, sizeof(name), "blk.%d.%s", il, suffix);                                       \
    if (bind(m, &L->field, name, ne0, ne1, true, f32, err))                                      \
        return -1;
        B(attn_norm, "attn_norm.weight", n_embd, 1, true);
        if (a->fused_qkv) {
            struct lc_weight qkv;
            B(wq, "attn_qkv.weight", n_embd, n_q + 2 * n_kv, false);
            qkv = L->wq;
            view_rows(&L->wq, &qkv, 0, n_q);
            view_rows(&L->wk, &qkv, n_q, n_kv);
            view_rows(&L->wv, &qkv, n_q + n_kv, n_kv);
        } else {
            B(wq, "attn_q.weight", n_embd, n_q, false);
            B(wk, "attn_k.weight", n_embd, n_kv, false);
            B(wv, "attn_v.weight", n_embd, n_kv, false);
        }
        if (a->qkv_bias) {
            B(bq, "attn_q.bias", n_q, 1, true);
            B(bk, "attn_k.bias", n_kv, 1, true);
            B(bv, "attn_v.bias", n_kv, 1, true);
        }
        if (a->qk_norm) {
            B(q_norm, "attn_q_norm.weight", hd, 1, true);
            B(k_norm, "attn_k_norm.weight", hd, 1, true);
        }
        B(wo, "attn_output.weight", n_q, n_embd, false);
        if (a->post_norms) {
            B(attn_post_norm, "post_attention_norm.weight", n_embd, 1, true);
            B(ffn_post_norm, "post_ffw_norm.weight", n_embd, 1, true);
        }
        B(ffn_norm, "ffn_norm.weight", n_embd, 1, true);
        if (a->fused_gate_up) {
            struct lc_weight gu;
            B(ffn_up, "ffn_up.weight", n_embd, 2 * n_ff, false);
            gu = L->ffn_up;
            view_rows(&L->ffn_gate, &gu, 0, n_ff);
            view_rows(&L->ffn_up, &gu, n_ff, n_ff);
        } else {
            B(ffn_gate, "ffn_gate.weight", n_embd, n_ff, false);
            B(ffn_up, "ffn_up.weight", n_embd, n_ff, false);
        }
        B(ffn_down, "ffn_down.weight", n_ff, n_embd, false);
#undef B
        /* the attention window and RoPE of this layer */
        const bool swa = hp->n_swa > 0 && a->swa_pattern >= 0 &&
                         (a->swa_pattern == 0 || il % a->swa_pattern < a->swa_pattern - 1);
        L->n_swa = swa ? hp->n_swa : 0;
        L->rope_base = hp->rope_freq_base;
        L->rope_scale = hp->rope_freq_scale;
        if (swa && a->swa_rope_base > 0.0f) {
            L->rope_base = a->swa_rope_base;
            L->rope_scale = 1.0f;
        }
    }
    /* The most common type among the big matrices names the model's quantization. */
    int64_t count[LC_TYPE_COUNT] = {0};
    for (int il = 0; il < hp->n_layer; il++) {
        const struct lc_layer *L = &m->layers[il];
        const struct lc_weight *ws[] = {&L->wq, &L->wk, &L->wv, &L->wo, &L->ffn_gate,
                                        &L->ffn_up, &L->ffn_down};
        for (size_t i = 0; i < sizeof(ws) / sizeof(ws[0]); i++)
            count[ws[i]->type] += ws[i]->ne[0] * ws[i]->ne[1];
    }
    int best = 0;
    for (int t = 0; t < LC_TYPE_COUNT; t++)
        if (count[t] > count[best])
            best = t;
    m->ftype = (enum lc_type)best;
    return 0;
}

/* A weight worth an x16 copy (repack.h) with the kernels in use. */
static bool x16_wanted(const struct lc_model *m, const struct lc_weight *w, unsigned native)
{
    return lc_x16_type(w->type) && (native >> w->type & 1u) && w->ne[1] % LC_X16_ROWS == 0 &&
           w->ne[0] % lc_type_traits(w->type)->blck_size == 0 &&
           /* Q4_0 only where it follows the Q4_0x8 order, which the x16 kernels keep */
           (w->type != LC_TYPE_Q4_0 || w->q4_0x8) &&
           /* token_embd is read by row (and a tied output shares it) */
           w->data != m->tok_embd.data;
}

/* madvise(advice) on the whole pages inside [p, p + n) (inward) or touching it (outward) */
static void advise_pages(const void *p, size_t n, bool inward, int advice)
{
    const uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
    const uintptr_t in = inward ? page - 1 : 0, out = inward ? 0 : page - 1;
    const uintptr_t lo = ((uintptr_t)p + in) & ~(page - 1);
    const uintptr_t hi = ((uintptr_t)p + n + out) & ~(page - 1);
    if (hi > lo)
        madvise((void *)lo, hi - lo, advice);
}

/* One matrix to repack: its place in the copy, and where its groups start in the job. */
struct x16_item {
    struct lc_weight *w;
    size_t off; /* in the copy */
    size_t group_bytes;
    int64_t first_group, n_groups;
};

struct x16_job {
    uint8_t *buf; /* the copy */
    struct x16_item *items;
    int n_items;
    int64_t n_groups;
};

/*
 * Bytes of memory the system can give without swapping (/proc/meminfo MemAvailable), or
 * SIZE_MAX when unknown.  LLAMACHAT_MEM_AVAILABLE_MIB overrides it (tests).
 */
static size_t mem_available(void)
{
    const char *env = getenv("LLAMACHAT_MEM_AVAILABLE_MIB");
    if (env && *env)
        return (size_t)strtoull(env, NULL, 10) << 20;
    FILE *f = fopen("/proc/meminfo", "r");
    if (!f)
        return SIZE_MAX;
    char line[128];
    size_t kib = 0;
    bool found = false;
    while (!found && fgets(line, sizeof line, f))
        found = sscanf(line, "MemAvailable: %zu kB", &kib) == 1;
    fclose(f);
    return found ? kib << 10 : SIZE_MAX;
}

/* thread ith of nth: its share of all groups, across matrices */
static void x16_task(void *arg, int ith, int nth)
{
    const struct x16_job *job = arg;
    const int64_t lo = job->n_groups * ith / nth, hi = job->n_groups * (ith + 1) / nth;
    for (int k = 0; k < job->n_items; k++) {
        const struct x16_item *it = &job->items[k];
        const int64_t g0 = lo > it->first_group ? lo - it->first_group : 0;
        const int64_t g1 = hi < it->first_group + it->n_groups ? hi - it->first_group : it->n_groups;
        if (g0 >= g1)
            continue;
        const size_t off = (size_t)g0 * it->group_bytes, size = (size_t)(g1 - g0) * it->group_bytes;
        const uint8_t *src = (const uint8_t *)it->w->data + off;
        uint8_t *dst = job->buf + it->off + off;
#ifdef MADV_POPULATE_WRITE
        /* the pages of the copy taken by the thread that fills them, at once */
        advise_pages(dst, size, false, MADV_POPULATE_WRITE);
#endif
        lc_x16_repack(it->w->type, dst, src, it->w->ne[0], (g1 - g0) * LC_X16_ROWS);
        /* the file's pages under it will not be read again (RSS) */
        advise_pages(src, size, true, MADV_DONTNEED);
    }
}

/*
 * Copy the matrices the kernels in use multiply faster in the x16 layout (kernels.h:
 * x16_native) into one anonymous mapping, in that layout, and drop the file's pages under them
 * so that resident memory stays about the file's size.  Same bytes, same results (the x16
 * kernels give vec_dot's bits).  Done by lc_n_cpus() threads: most of the time goes to getting
 * the fresh pages from the kernel (and, in a VM, from the host), which is done in parallel.
 * Nothing to do, not enough memory available (then m->x16_note says so), or no mapping or
 * threads for it: the weights stay in the file mapping in ggml's layout, which every kernel
 * reads too.  LLAMACHAT_REPACK=0 turns it off (to compare,
 * or to keep the pages shared with other processes); LLAMACHAT_REPACK=1 repacks even for
 * kernels without their own x16 ones (then slow: for tests).  The copy is anonymous memory:
 * under memory pressure it is swapped, not dropped and re-read from the file.
 */
static void repack_weights(struct lc_model *m)
{
    const char *env = getenv("LLAMACHAT_REPACK");
    unsigned native = lc_kernels()->x16_native;
    if (env && strcmp(env, "1") == 0) /* tests: the scalar x16 kernels too */
        native = ~0u; /* every type with an x16 layout (lc_x16_type) */
    if (!native || (env && strcmp(env, "0") == 0))
        return;
    const int n_per_layer = 7;
    const int n_w = m->hp.n_layer * n_per_layer + 1;
    struct x16_item *items = calloc((size_t)n_w, sizeof(*items));
    if (!items)
        return;
    struct x16_job job = {NULL, items, 0, 0};
    size_t total = 0;
    for (int k = 0; k < n_w; k++) {
        struct lc_weight *w = &m->output;
        if (k < n_w - 1) {
            struct lc_layer *L = &m->layers[k / n_per_layer];
            struct lc_weight *lw[] = {&L->wq,       &L->wk,     &L->wv,      &L->wo,
                                      &L->ffn_gate, &L->ffn_up, &L->ffn_down};
            w = lw[k % n_per_layer];
        }
        if (!x16_wanted(m, w, native))
            continue;
        struct x16_item *it = &items[job.n_items++];
        it->w = w;
        it->group_bytes = LC_X16_ROWS * w->row_bytes;
        it->first_group = job.n_groups;
        it->n_groups = w->ne[1] / LC_X16_ROWS;
        job.n_groups += it->n_groups;
        it->off = total;
        total += ((size_t)w->ne[1] * w->row_bytes + 63) & ~(size_t)63;
    }
    if (!total) {
        free(items);
        return;
    }
    /* The copy is anonymous memory, which cannot be dropped and re-read from the file as the
     * mapping's pages can: with too little memory free, keep the mapping rather than swap or
     * meet the OOM killer (the file's pages are released only as they are repacked). */
    const size_t avail = mem_available(), margin = total / 8 + ((size_t)256 << 20);
    if (avail < SIZE_MAX && total + margin > avail) {
        snprintf(m->x16_note, sizeof m->x16_note,
                 "weights kept in the file's layout (decoding is slower): repacking them needs "
                 "%zu MiB and %zu MiB of memory are available",
                 (total + margin) >> 20, avail >> 20);
        free(items);
        return;
    }
    void *buf = mmap(NULL, total, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    struct lc_threadpool *tp = buf != MAP_FAILED ? lc_threadpool_new(lc_n_cpus(), NULL) : NULL;
    if (!tp) {
        if (buf != MAP_FAILED)
            munmap(buf, total);
        free(items);
        return;
    }
    job.buf = buf;
    lc_threadpool_run(tp, x16_task, &job);
    lc_threadpool_free(tp);
    for (int k = 0; k < job.n_items; k++) {
        items[k].w->data = job.buf + items[k].off;
        items[k].w->x16 = true;
    }
    mprotect(buf, total, PROT_READ);
    m->x16_buf = buf;
    m->x16_size = total;
    free(items);
}

struct lc_model *lc_model_load(const char *path, bool vocab_only, char **err)
{
    if (err)
        *err = NULL;
    lc_quant_init();
    struct lc_model *m = calloc(1, sizeof(*m));
    if (!m) {
        set_err(err, "out of memory");
        return NULL;
    }
    m->vocab_only = vocab_only;
    /* a plain file, or all parts of a split model given its first part (gguf_split.c) */
    m->parts = lc_gguf_open_split(path, &m->n_parts, err);
    if (!m->parts)
        goto fail;
    m->gguf = m->parts[0];

    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    const char *gname = lc_gguf_get_str(m->gguf, "general.name");
    snprintf(m->name, sizeof(m->name), "%s", gname && *gname ? gname : base);

    m->vocab = lc_vocab_load(m->gguf, err);
    if (!m->vocab)
        goto fail;
    if (vocab_only)
        return m;

    if (load_hparams(m, err))
        goto fail;
    const struct lc_gguf_tensor *te = lc_gguf_find_tensor(m->gguf, "token_embd.weight");
    m->hp.n_vocab = lc_vocab_n_tokens(m->vocab);
    if (te && te->ne[1] != m->hp.n_vocab) {
        set_err(err, "%s: token_embd.weight has %lld rows but the vocabulary has %d tokens",
                path, (long long)te->ne[1], m->hp.n_vocab);
        goto fail;
    }
    if (bind_weights(m, err))
        goto fail;
    repack_weights(m);
    for (int p = 0; p < m->n_parts; p++)
        for (int64_t i = 0; i < lc_gguf_n_tensors(m->parts[p]); i++) {
            const struct lc_gguf_tensor *t = lc_gguf_tensor(m->parts[p], i);
            m->n_bytes += t->nbytes;
            m->n_params += (uint64_t)(t->ne[0] * t->ne[1] * t->ne[2] * t->ne[3]);
        }
    return m;
fail:
    lc_model_free(m);
    return NULL;
}

void lc_model_free(struct lc_model *m)
{
    if (!m)
        return;
    lc_vocab_free(m->vocab);
    free(m->layers);
    if (m->x16_buf)
        munmap(m->x16_buf, m->x16_size);
    if (m->parts) {
        for (int p = 0; p < m->n_parts; p++)
            lc_gguf_free(m->parts[p]);
        free(m->parts);
    } else {
        lc_gguf_free(m->gguf);
    }
    free(m);
}

void lc_model_desc(const struct lc_model *m, char *buf, size_t len)
{
    const uint64_t n = m->n_params;
    char size[32];
    if (n >= 1000000000ull)
        snprintf(size, sizeof(size), "%.1fB", (double)n / 1e9);
    else if (n >= 1000000ull)
        snprintf(size, sizeof(size), "%.0fM", (double)n / 1e6);
    else
        snprintf(size, sizeof(size), "%.0fK", (double)n / 1e3);
    char tname[16];
    snprintf(tname, sizeof(tname), "%s", lc_type_name(m->ftype));
    for (char *p = tname; *p; p++)
        if (*p >= 'a' && *p <= 'z')
            *p = (char)(*p - 'a' + 'A');
    snprintf(buf, len, "%s %s %s", m->hp.arch ? m->hp.arch->name : "llama", size, tname);
}

int lc_weight_get_row(const struct lc_weight *w, int64_t r, float *y)
{
    const struct lc_type_traits *tt = lc_type_traits(w->type);
    if (!tt || !tt->to_float || r < 0 || r >= w->ne[1] || w->x16)
        return -1;
    tt->to_float((const uint8_t *)w->data + (size_t)r * w->row_bytes, y, w->ne[0]);
    return 0;
}
