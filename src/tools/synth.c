/*
 * synth.c - llamachat-synth: write a random-weight GGUF of a given shape and architecture.
 *
 * Benchmarks need models of a real size (TinyLlama-1.1B's shape) in every weight type without
 * shipping gigabytes: this tool writes one in seconds.  The weights are random, so the text
 * such a model writes is noise, but every byte the forward pass reads is laid out exactly as in
 * a llama.cpp file of that shape and type:
 *
 *   token_embd.weight   (n_embd, n_vocab)  the chosen type
 *   output_norm.weight  (n_embd)           f32, all 1
 *   output.weight       (n_embd, n_vocab)  q6_K when n_embd % 256 == 0, else q8_0 (llama.cpp's
 *                                          rule for quantized files); f16/q8_0 files keep their type
 *   blk.N.attn_norm / ffn_norm (n_embd)    f32, all 1
 *   blk.N.attn_q, attn_output (n_embd, n_embd), attn_k, attn_v (n_embd, n_head_kv * head_dim),
 *   blk.N.ffn_gate, ffn_up (n_embd, n_ff), ffn_down (n_ff, n_embd)   the chosen type
 *
 * --arch writes another architecture of model.h's table, with the tensors and keys its
 * llama.cpp conversion has (names as in llama.cpp's llm_tensor / LLM_KV lists):
 *
 *   llama3  llama with rope.freq_base 500000 and rope_freqs.weight (head_dim / 2, f32): the
 *           Llama-3 factors convert_hf_to_gguf.py computes for factor 8, low 1, high 4 and an
 *           original context of 8192
 *   qwen2   blk.N.attn_{q,k,v}.bias (f32, random), tied output (no output.weight), base 1e6
 *   qwen3   blk.N.attn_{q,k}_norm (head_dim, f32), attention.key_length/value_length, base 1e6
 *   phi3    blk.N.attn_qkv (rows Q | K | V) and blk.N.ffn_up (rows gate | up), no ffn_gate;
 *           attention.sliding_window = context_length (never acts)
 *   gemma2  post_attention_norm, post_ffw_norm, attention.sliding_window 16 (even layers),
 *           attn/final_logit_softcapping 50 / 30, key_length, tied output
 *   gemma3  attn_{q,k}_norm, post norms, sliding_window 16 (5 local : 1 global), key_length,
 *           tied output
 *
 * Each gets its family's chat template in tokenizer.chat_template (ChatML for llama and qwen,
 * Llama 3's for llama3, Gemma's, Phi-3's), replacing a copied vocabulary's (except plain llama,
 * which keeps the copied one and gets ChatML only when there is none): the control tokens
 * of a real vocabulary are text in the generated one, which the chat shows but does not stop at.
 * A tied model's token_embd gets the output type (llama-quantize's rule).  --head-dim sets
 * key_length (qwen3, gemma: n_head * head_dim may differ from n_embd).
 *
 * Weights are normal with standard deviation --scale (default 0.02, as in GPT-2/LLaMA
 * initialisation), quantized with the reference (ggml `_ref`) quantizers of quant.h.  Each row
 * has its own random stream seeded from (seed, tensor, row), so the file is the same whatever
 * the thread count.  The generator is xorshift64*, and a normal deviate is the centred and
 * rescaled sum of the four 16-bit uniforms of one 64-bit draw (Irwin-Hall): no true Gaussian
 * tail, which a benchmark does not need, and fast enough that the 1.1B model takes seconds.
 *
 * Vocabulary: with --vocab FILE the tokenizer.* keys of that GGUF are copied (its token count
 * sets n_vocab); otherwise n_vocab 512 copies the stories260K vocabulary from the shared models
 * directory, and any other n_vocab gets a generated SentencePiece ("llama") vocabulary:
 * <unk>, <s>, </s>, the 256 byte tokens <0x00>..<0xFF>, then pieces (printable ASCII characters,
 * then runs of lowercase letters, each also with the U+2581 word-start marker) with scores
 * decreasing by id, as in a real SentencePiece model.
 *
 * Not installed (noinst): a random-weight model is a benchmarking fixture, not something a
 * user chats with; bench/run.sh and the tests run it from the build tree.
 */
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "llm/gguf.h"
#include "llm/quant.h"

#ifndef LC_SHARED_DIR
#define LC_SHARED_DIR "../shared"
#endif

/* llama.cpp's general.file_type values (enum llama_ftype) for the types we write. */
static int ftype_of(enum lc_type t)
{
    switch (t) {
    case LC_TYPE_F32: return 0;
    case LC_TYPE_F16: return 1;
    case LC_TYPE_Q4_0: return 2;
    case LC_TYPE_Q4_1: return 3;
    case LC_TYPE_Q8_0: return 7;
    default: return -1;
    }
}

struct synth_opts {
    long n_embd, n_layer, n_head, n_head_kv, n_ff, n_vocab, n_ctx;
    enum lc_type type;
    int output_type; /* -1: llama.cpp's rule */
    float scale;
    uint64_t seed;
    long n_threads;
    const char *out;
    const char *vocab_path;
    const char *name;
    bool quiet;
    const struct synth_arch *arch;
    long head_dim; /* -1: n_embd / n_head */
};

/* One tensor to write. */
struct synth_tensor {
    char name[64];
    enum lc_type type;
    int64_t ne0, ne1;
    bool is_norm; /* f32 vector of ones */
    bool is_bias; /* f32 vector, random */
    const float *data; /* f32 vector of these values (rope_freqs), or NULL */
};

/* One architecture llamachat-synth writes (see the top of the file). */
struct synth_arch {
    const char *name;       /* --arch */
    const char *gguf;       /* general.architecture */
    float rope_base;
    bool rope_freqs, qkv_bias, qk_norm, fused, post_norms, tied, softcaps, key_length;
    int swa;                /* attention.sliding_window, 0 none, -1 context_length */
    const char *tmpl;       /* tokenizer.chat_template */
};

static const char TMPL_CHATML[] =
    "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + "
    "'<|im_end|>' + '\\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}"
    "{% endif %}";
static const char TMPL_LLAMA3[] =
    "{{ bos_token }}{% for message in messages %}{{ '<|start_header_id|>' + message['role'] + "
    "'<|end_header_id|>\\n\\n' + message['content'] | trim + '<|eot_id|>' }}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}"
    "{% endif %}";
static const char TMPL_GEMMA[] =
    "{{ bos_token }}{% for message in messages %}{% set role = 'model' if message['role'] == "
    "'assistant' else message['role'] %}{{ '<start_of_turn>' + role + '\\n' + message['content'] "
    "| trim + '<end_of_turn>\\n' }}{% endfor %}{% if add_generation_prompt %}"
    "{{ '<start_of_turn>model\\n' }}{% endif %}";
static const char TMPL_PHI3[] =
    "{% for message in messages %}{{ '<|' + message['role'] + '|>\\n' + message['content'] + "
    "'<|end|>\\n' }}{% endfor %}{% if add_generation_prompt %}{{ '<|assistant|>\\n' }}{% endif %}";

static const struct synth_arch synth_archs[] = {
    /* name     gguf      base  freqs  bias   qknorm fused  post   tied   caps   keylen swa */
    {"llama",  "llama",  1e4f, false, false, false, false, false, false, false, false, 0, TMPL_CHATML},
    {"llama3", "llama",  5e5f, true,  false, false, false, false, false, false, false, 0, TMPL_LLAMA3},
    {"qwen2",  "qwen2",  1e6f, false, true,  false, false, false, true,  false, false, 0, TMPL_CHATML},
    {"qwen3",  "qwen3",  1e6f, false, false, true,  false, false, false, false, true,  0, TMPL_CHATML},
    {"phi3",   "phi3",   1e4f, false, false, false, true,  false, false, false, false, -1, TMPL_PHI3},
    {"gemma2", "gemma2", 1e4f, false, false, false, false, true,  true,  true,  true,  16, TMPL_GEMMA},
    {"gemma3", "gemma3", 1e6f, false, false, true,  false, true,  true,  false, true,  16, TMPL_GEMMA},
};

/* ------------------------------------------------------------------ random numbers */

/* splitmix64: turns (seed, tensor, row) into a well-mixed 64-bit stream seed. */
static uint64_t splitmix64(uint64_t x)
{
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

/* xorshift64* (Vigna): one multiply and three shifts per 64 random bits. */
static inline uint64_t xorshift64s(uint64_t *s)
{
    uint64_t x = *s;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    *s = x;
    return x * 0x2545F4914F6CDD1Dull;
}

/*
 * A row of n approximately normal deviates with standard deviation sd.  The sum of four
 * independent uniforms on [0, 65535] has mean 4 * 32767.5 and variance 4 * (65536^2 - 1) / 12;
 * centring and dividing by its standard deviation gives mean 0, variance 1.
 */
static void normal_row(uint64_t *state, float *y, int64_t n, float sd)
{
    const float mean = 4.0f * 32767.5f;
    const float inv_sd = 1.0f / 37837.23f; /* sqrt(4 * (65536^2 - 1) / 12) = 37837.226... */
    const float k = sd * inv_sd;
    for (int64_t i = 0; i < n; i++) {
        uint64_t r = xorshift64s(state);
        uint32_t s = (uint32_t)(r & 0xFFFF) + (uint32_t)((r >> 16) & 0xFFFF) +
                     (uint32_t)((r >> 32) & 0xFFFF) + (uint32_t)(r >> 48);
        y[i] = ((float)s - mean) * k;
    }
}

/* ------------------------------------------------------------------ parallel generation */

struct gen_job {
    const struct synth_tensor *t;
    int tensor_index;
    uint64_t seed;
    float scale;
    uint8_t *out;        /* ne1 rows of row_bytes */
    size_t row_bytes;
    atomic_long next_row; /* dynamic scheduling in chunks of rows */
    lc_from_float_fn quantize;
};

#define GEN_CHUNK 16

static void *gen_worker(void *arg)
{
    struct gen_job *j = arg;
    const struct synth_tensor *t = j->t;
    float *row = malloc((size_t)t->ne0 * sizeof(float));
    if (!row)
        return (void *)1;
    for (;;) {
        long r0 = atomic_fetch_add(&j->next_row, GEN_CHUNK);
        if (r0 >= t->ne1)
            break;
        long r1 = r0 + GEN_CHUNK < t->ne1 ? r0 + GEN_CHUNK : (long)t->ne1;
        for (long r = r0; r < r1; r++) {
            uint64_t state = splitmix64(j->seed ^ splitmix64(((uint64_t)j->tensor_index << 32) |
                                                             (uint64_t)r));
            if (state == 0) /* xorshift must not start at 0 */
                state = 1;
            normal_row(&state, row, t->ne0, j->scale);
            j->quantize(row, j->out + (size_t)r * j->row_bytes, t->ne0);
        }
    }
    free(row);
    return NULL;
}

/* Fill buf with tensor t: ones for a norm, else random rows quantized to t->type.  0 or -1. */
static int gen_tensor(const struct synth_tensor *t, int index, const struct synth_opts *o,
                      uint8_t *buf)
{
    if (t->is_norm) {
        float *f = (float *)buf;
        for (int64_t i = 0; i < t->ne0; i++)
            f[i] = t->data ? t->data[i] : 1.0f;
        return 0;
    }
    struct gen_job j = {
        .t = t, .tensor_index = index, .seed = o->seed, .scale = o->scale, .out = buf,
        .row_bytes = lc_row_size(t->type, t->ne0),
        .quantize = lc_type_traits(t->type)->from_float_ref,
    };
    atomic_init(&j.next_row, 0);
    long nth = o->n_threads;
    if (nth > (t->ne1 + GEN_CHUNK - 1) / GEN_CHUNK)
        nth = (t->ne1 + GEN_CHUNK - 1) / GEN_CHUNK;
    pthread_t tid[256];
    long started = 0;
    for (long i = 1; i < nth; i++, started++)
        if (pthread_create(&tid[i - 1], NULL, gen_worker, &j))
            break;
    int bad = gen_worker(&j) != NULL;
    for (long i = 0; i < started; i++) {
        void *rv;
        pthread_join(tid[i], &rv);
        bad |= rv != NULL;
    }
    return bad ? -1 : 0;
}

/* ------------------------------------------------------------------ vocabulary */

#define SPM_SPACE "\xe2\x96\x81" /* U+2581, SentencePiece's word-start marker */

/* Generated SentencePiece vocabulary of n tokens (n >= 260). */
static int set_generated_vocab(struct lc_gguf_writer *w, int64_t n)
{
    char **tok = calloc((size_t)n, sizeof(*tok));
    float *score = calloc((size_t)n, sizeof(*score));
    int32_t *type = calloc((size_t)n, sizeof(*type));
    int rc = -1;
    if (!tok || !score || !type)
        goto out;
    int64_t id = 0;
    tok[id] = strdup("<unk>"), type[id++] = 2;  /* LLAMA_TOKEN_TYPE_UNKNOWN */
    tok[id] = strdup("<s>"), type[id++] = 3;    /* CONTROL */
    tok[id] = strdup("</s>"), type[id++] = 3;
    for (int b = 0; b < 256; b++) {
        char s[8];
        snprintf(s, sizeof(s), "<0x%02X>", b);
        tok[id] = strdup(s), type[id++] = 6;    /* BYTE */
    }
    const int64_t first_normal = id;
    /* Pieces: U+2581 alone, printable ASCII with and without the marker, then runs of lowercase
     * letters of length 2, 3, ... (each also with the marker) until the vocabulary is full. */
    char piece[64];
    if (id < n)
        tok[id] = strdup(SPM_SPACE), type[id++] = 1;
    for (int c = 0x21; c < 0x7f && id < n; c++) {
        snprintf(piece, sizeof(piece), "%c", c);
        tok[id] = strdup(piece), type[id++] = 1;
        if (id < n) {
            snprintf(piece, sizeof(piece), SPM_SPACE "%c", c);
            tok[id] = strdup(piece), type[id++] = 1;
        }
    }
    for (int len = 2; id < n && len < 16; len++) {
        /* Enumerate all 26^len words in order; digits[] is the word in base 26. */
        int digits[16] = {0};
        for (;;) {
            char word[17];
            for (int k = 0; k < len; k++)
                word[k] = (char)('a' + digits[k]);
            word[len] = 0;
            tok[id] = strdup(word), type[id++] = 1;
            if (id >= n)
                break;
            snprintf(piece, sizeof(piece), SPM_SPACE "%s", word);
            tok[id] = strdup(piece), type[id++] = 1;
            if (id >= n)
                break;
            int k = len - 1;
            while (k >= 0 && ++digits[k] == 26)
                digits[k--] = 0;
            if (k < 0)
                break;
        }
    }
    for (int64_t i = 0; i < n; i++) {
        if (!tok[i])
            goto out;
        score[i] = i >= first_normal ? -(float)(i - first_normal) : 0.0f;
    }
    if (lc_gguf_writer_set_str(w, "tokenizer.ggml.model", "llama") ||
        lc_gguf_writer_set_arr_str(w, "tokenizer.ggml.tokens", (const char *const *)tok,
                                   (uint64_t)n) ||
        lc_gguf_writer_set_arr(w, "tokenizer.ggml.scores", LC_GGUF_FLOAT32, score, (uint64_t)n) ||
        lc_gguf_writer_set_arr(w, "tokenizer.ggml.token_type", LC_GGUF_INT32, type,
                               (uint64_t)n) ||
        lc_gguf_writer_set_u32(w, "tokenizer.ggml.unknown_token_id", 0) ||
        lc_gguf_writer_set_u32(w, "tokenizer.ggml.bos_token_id", 1) ||
        lc_gguf_writer_set_u32(w, "tokenizer.ggml.eos_token_id", 2) ||
        lc_gguf_writer_set_bool(w, "tokenizer.ggml.add_bos_token", true) ||
        lc_gguf_writer_set_bool(w, "tokenizer.ggml.add_eos_token", false))
        goto out;
    rc = 0;
out:
    if (tok)
        for (int64_t i = 0; i < n; i++)
            free(tok[i]);
    free(tok);
    free(score);
    free(type);
    return rc;
}

/* Copy the tokenizer.* keys of the GGUF at path.  Returns its token count, or -1 with *err. */
static int64_t copy_vocab(struct lc_gguf_writer *w, const char *path, char **err)
{
    struct lc_gguf *g = lc_gguf_open(path, err);
    if (!g)
        return -1;
    int64_t it = lc_gguf_find_key(g, "tokenizer.ggml.tokens");
    if (it < 0 || lc_gguf_kv_type(g, it) != LC_GGUF_ARRAY ||
        lc_gguf_arr_type(g, it) != LC_GGUF_STRING) {
        if (asprintf(err, "%s: no tokenizer.ggml.tokens string array", path) < 0)
            *err = NULL;
        lc_gguf_free(g);
        return -1;
    }
    int64_t n = (int64_t)lc_gguf_arr_n(g, it);
    /* copy_kvs takes every key; drop the ones that describe the source model, not its vocab. */
    int rc = lc_gguf_writer_copy_kvs(w, g);
    for (int64_t i = 0; rc == 0 && i < lc_gguf_n_kv(g); i++) {
        const char *k = lc_gguf_key(g, i);
        if (strncmp(k, "tokenizer.", 10) != 0)
            rc = lc_gguf_writer_remove_key(w, k);
    }
    lc_gguf_free(g);
    if (rc) {
        if (asprintf(err, "%s: cannot copy its vocabulary", path) < 0)
            *err = NULL;
        return -1;
    }
    return n;
}

/* ------------------------------------------------------------------ main */

static void usage(FILE *f)
{
    fprintf(f,
            "usage: llamachat-synth -o OUT.gguf [options]\n"
            "Write a random-weight GGUF of the given shape and architecture.\n"
            "  --arch A        llama (default), llama3, qwen2, qwen3, phi3, gemma2 or gemma3\n"
            "  --head-dim N    attention.key_length (default n-embd / n-head)\n"
            "  --type T        f16, q8_0, q4_0 or q4_1 (default q4_1)\n"
            "  --tinyllama     TinyLlama-1.1B's shape: --n-embd 2048 --n-layer 22 --n-head 32\n"
            "                  --n-head-kv 4 --n-ff 5632 --n-vocab 32000 --ctx 2048\n"
            "  --n-embd N      (default 256)      --n-layer N   (default 2)\n"
            "  --n-head N      (default 4)        --n-head-kv N (default n-head)\n"
            "  --n-ff N        (default 768)      --n-vocab N   (default 512)\n"
            "  --ctx N         llama.context_length (default 2048)\n"
            "  --output-type T type of output.weight (default: q6_K for q4_0/q4_1 when n-embd is\n"
            "                  a multiple of 256, else q8_0; f16 and q8_0 files keep their type)\n"
            "  --vocab FILE    copy the tokenizer of this GGUF (n-vocab = its size); default:\n"
            "                  stories260K's for n-vocab 512, else a generated SentencePiece vocab\n"
            "  --scale S       weight standard deviation (default 0.02)\n"
            "  --seed N        (default 1)\n"
            "  --name NAME     general.name (default synth-<n_embd>x<n_layer>-<type>)\n"
            "  -t N            threads (default: all CPUs)\n"
            "  -q, --quiet     no summary line\n");
}

static int parse_long(const char *opt, const char *s, long lo, long hi, long *out)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < lo || v > hi) {
        fprintf(stderr, "llamachat-synth: %s: '%s' is not an integer in [%ld, %ld]\n", opt, s, lo,
                hi);
        return -1;
    }
    *out = v;
    return 0;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Describe a tensor: a vector of ones when ne1 == 1 (the norms), else random rows. */
static void add_tensor(struct synth_tensor *t, enum lc_type type, int64_t ne0, int64_t ne1,
                       const char *fmt, ...) __attribute__((format(printf, 5, 6)));
static void add_tensor(struct synth_tensor *t, enum lc_type type, int64_t ne0, int64_t ne1,
                       const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(t->name, sizeof(t->name), fmt, ap);
    va_end(ap);
    t->type = type, t->ne0 = ne0, t->ne1 = ne1, t->is_norm = ne1 == 1;
    t->is_bias = false, t->data = NULL;
}

static int fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int fail(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("llamachat-synth: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    return 1;
}

int main(int argc, char **argv)
{
    struct synth_opts o = {
        .n_embd = 256, .n_layer = 2, .n_head = 4, .n_head_kv = -1, .n_ff = 768,
        .n_vocab = 512, .n_ctx = 2048, .type = LC_TYPE_Q4_1, .output_type = -1, .scale = 0.02f, .seed = 1,
        .n_threads = sysconf(_SC_NPROCESSORS_ONLN), .arch = &synth_archs[0], .head_dim = -1,
    };
    bool vocab_given = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        long *dst = NULL;
        long lo = 1, hi = 1L << 20;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            return 0;
        } else if (!strcmp(a, "-q") || !strcmp(a, "--quiet")) {
            o.quiet = true;
            continue;
        } else if (!strcmp(a, "--tinyllama")) {
            o.n_embd = 2048, o.n_layer = 22, o.n_head = 32, o.n_head_kv = 4, o.n_ff = 5632;
            o.n_vocab = 32000, o.n_ctx = 2048;
            continue;
        }
        if (!v)
            return fail("%s needs a value (see --help)", a);
        i++;
        if (!strcmp(a, "-o") || !strcmp(a, "--out")) {
            o.out = v;
        } else if (!strcmp(a, "--type")) {
            int t = lc_type_from_name(v);
            if (ftype_of((enum lc_type)t) < 1)
                return fail("--type: '%s' is not one of f16, q8_0, q4_0, q4_1", v);
            o.type = (enum lc_type)t;
        } else if (!strcmp(a, "--output-type")) {
            o.output_type = lc_type_from_name(v);
            if (o.output_type != LC_TYPE_Q6_K && ftype_of((enum lc_type)o.output_type) < 1)
                return fail("--output-type: '%s' is not one of f16, q8_0, q4_0, q4_1, q6_K", v);
        } else if (!strcmp(a, "--arch")) {
            o.arch = NULL;
            for (size_t k = 0; k < sizeof synth_archs / sizeof synth_archs[0]; k++)
                if (!strcmp(v, synth_archs[k].name))
                    o.arch = &synth_archs[k];
            if (!o.arch)
                return fail("--arch: '%s' is not one of llama, llama3, qwen2, qwen3, phi3, gemma2, "
                            "gemma3", v);
        } else if (!strcmp(a, "--head-dim")) {
            if (parse_long(a, v, 2, 1 << 16, &o.head_dim))
                return 1;
        } else if (!strcmp(a, "--vocab")) {
            o.vocab_path = v;
            vocab_given = true;
        } else if (!strcmp(a, "--name")) {
            o.name = v;
        } else if (!strcmp(a, "--scale")) {
            char *end;
            o.scale = strtof(v, &end);
            if (*end || !(o.scale > 0.0f && o.scale < 100.0f))
                return fail("--scale: '%s' is not a number in (0, 100)", v);
        } else if (!strcmp(a, "--seed")) {
            char *end;
            errno = 0;
            o.seed = strtoull(v, &end, 0);
            if (errno || *end || end == v)
                return fail("--seed: '%s' is not an integer", v);
        } else {
            if (!strcmp(a, "--n-embd")) dst = &o.n_embd, hi = 1 << 16;
            else if (!strcmp(a, "--n-layer")) dst = &o.n_layer, hi = 1024;
            else if (!strcmp(a, "--n-head")) dst = &o.n_head, hi = 4096;
            else if (!strcmp(a, "--n-head-kv")) dst = &o.n_head_kv, hi = 4096;
            else if (!strcmp(a, "--n-ff")) dst = &o.n_ff;
            else if (!strcmp(a, "--n-vocab")) dst = &o.n_vocab, lo = 260, hi = 1 << 22;
            else if (!strcmp(a, "--ctx")) dst = &o.n_ctx, hi = 1 << 24;
            else if (!strcmp(a, "-t") || !strcmp(a, "--threads")) dst = &o.n_threads, hi = 256;
            else
                return fail("unknown option '%s' (see --help)", a);
            if (parse_long(a, v, lo, hi, dst))
                return 2;
        }
    }
    if (!o.out)
        return fail("no output file: -o OUT.gguf (see --help)");
    if (o.n_head_kv < 0)
        o.n_head_kv = o.n_head;
    if (o.n_threads < 1)
        o.n_threads = 1;
    const struct synth_arch *A = o.arch;
    if (o.head_dim < 0 && o.n_embd % o.n_head)
        return fail("--n-embd %ld is not a multiple of --n-head %ld", o.n_embd, o.n_head);
    if (o.n_head % o.n_head_kv)
        return fail("--n-head %ld is not a multiple of --n-head-kv %ld", o.n_head, o.n_head_kv);
    if (o.head_dim > 0 && !A->key_length && o.head_dim * o.n_head != o.n_embd)
        return fail("--head-dim %ld: %s needs n-head * head-dim = n-embd", o.head_dim, A->name);
    const long head_dim = o.head_dim > 0 ? o.head_dim : o.n_embd / o.n_head;
    const long n_q = o.n_head * head_dim;
    if (head_dim % 2)
        return fail("head dimension %ld is odd; RoPE rotates pairs", head_dim);
    const int blck = lc_type_traits(o.type)->blck_size;
    if (o.n_embd % blck || o.n_ff % blck || n_q % blck)
        return fail("--n-embd %ld and --n-ff %ld must be multiples of %d, the %s block size",
                    o.n_embd, o.n_ff, blck, lc_type_name(o.type));

    lc_quant_init();
    struct lc_gguf_writer *w = lc_gguf_writer_new();
    if (!w)
        return fail("out of memory");
    char *err = NULL;

    /* Vocabulary first: a copied one fixes n_vocab. */
    char shared_vocab[4096];
    if (!vocab_given && o.n_vocab == 512) {
        const char *sh = getenv("LC_SHARED");
        snprintf(shared_vocab, sizeof(shared_vocab), "%s/models/stories260K.gguf",
                 sh && *sh ? sh : LC_SHARED_DIR);
        o.vocab_path = shared_vocab;
    }
    if (o.vocab_path) {
        int64_t n = copy_vocab(w, o.vocab_path, &err);
        if (n < 0)
            return fail("%s", err ? err : "cannot read the vocabulary");
        if (vocab_given)
            o.n_vocab = (long)n;
        else if (n != o.n_vocab)
            return fail("%s has %lld tokens, not %ld", o.vocab_path, (long long)n, o.n_vocab);
    } else if (set_generated_vocab(w, o.n_vocab)) {
        return fail("out of memory generating the vocabulary");
    }

    /* a copied vocabulary's chat template (the plain llama keeps it) */
    char *copied_tmpl = NULL;
    if (o.vocab_path) {
        struct lc_gguf *vg = lc_gguf_open(o.vocab_path, NULL);
        const char *t = vg ? lc_gguf_get_str(vg, "tokenizer.chat_template") : NULL;
        copied_tmpl = t ? strdup(t) : NULL;
        lc_gguf_free(vg);
    }
    char name[128];
    if (o.name)
        snprintf(name, sizeof(name), "%s", o.name);
    else
        snprintf(name, sizeof(name), "synth-%ldx%ld-%s", o.n_embd, o.n_layer,
                 lc_type_name(o.type));
    char key[128];
#define KEY(suffix) (snprintf(key, sizeof key, "%s." suffix, A->gguf), key)
    if (lc_gguf_writer_set_str(w, "general.architecture", A->gguf) ||
        lc_gguf_writer_set_str(w, "general.name", name) ||
        lc_gguf_writer_set_u32(w, "general.file_type", (uint32_t)ftype_of(o.type)) ||
        lc_gguf_writer_set_u32(w, "general.quantization_version", 2) ||
        lc_gguf_writer_set_u32(w, KEY("context_length"), (uint32_t)o.n_ctx) ||
        lc_gguf_writer_set_u32(w, KEY("embedding_length"), (uint32_t)o.n_embd) ||
        lc_gguf_writer_set_u32(w, KEY("block_count"), (uint32_t)o.n_layer) ||
        lc_gguf_writer_set_u32(w, KEY("feed_forward_length"), (uint32_t)o.n_ff) ||
        lc_gguf_writer_set_u32(w, KEY("attention.head_count"), (uint32_t)o.n_head) ||
        lc_gguf_writer_set_u32(w, KEY("attention.head_count_kv"), (uint32_t)o.n_head_kv) ||
        lc_gguf_writer_set_u32(w, KEY("rope.dimension_count"), (uint32_t)head_dim) ||
        lc_gguf_writer_set_f32(w, KEY("rope.freq_base"), A->rope_base) ||
        lc_gguf_writer_set_f32(w, KEY("attention.layer_norm_rms_epsilon"),
                               A->gguf[0] == 'l' ? 1e-5f : 1e-6f) ||
        (A->key_length && (lc_gguf_writer_set_u32(w, KEY("attention.key_length"), (uint32_t)head_dim) ||
                           lc_gguf_writer_set_u32(w, KEY("attention.value_length"), (uint32_t)head_dim))) ||
        (A->swa && lc_gguf_writer_set_u32(w, KEY("attention.sliding_window"),
                                          A->swa > 0 ? (uint32_t)A->swa : (uint32_t)o.n_ctx)) ||
        (A->softcaps && (lc_gguf_writer_set_f32(w, KEY("attn_logit_softcapping"), 50.0f) ||
                         lc_gguf_writer_set_f32(w, KEY("final_logit_softcapping"), 30.0f))) ||
        lc_gguf_writer_set_str(w, "tokenizer.chat_template", A->tmpl) ||
        /* plain llama keeps a copied vocabulary's template, as before --arch */
        (A == &synth_archs[0] && copied_tmpl && lc_gguf_writer_set_str(w, "tokenizer.chat_template",
                                                                       copied_tmpl)))
        return fail("cannot set metadata");
#undef KEY

    /* The tensor list, in llama.cpp's order. */
    enum lc_type out_type = o.type;
    if (o.type == LC_TYPE_Q4_0 || o.type == LC_TYPE_Q4_1)
        out_type = o.n_embd % LC_QK_K == 0 ? LC_TYPE_Q6_K : LC_TYPE_Q8_0;
    if (o.output_type >= 0)
        out_type = (enum lc_type)o.output_type;
    if (o.n_embd % lc_type_traits(out_type)->blck_size)
        return fail("--n-embd %ld is not a multiple of %d, the %s block size", o.n_embd,
                    lc_type_traits(out_type)->blck_size, lc_type_name(out_type));
    const int64_t n_tensors = 4 + 16 * (int64_t)o.n_layer;
    struct synth_tensor *ts = calloc((size_t)n_tensors, sizeof(*ts));
    if (!ts)
        return fail("out of memory");
    int64_t nt = 0;
    const long n_kv = o.n_head_kv * head_dim;
    /* Llama 3's RoPE frequency factors, as convert_hf_to_gguf.py computes them (float32) */
    float *freqs = calloc((size_t)head_dim / 2, sizeof(float));
    if (!freqs)
        return fail("out of memory");
    for (long i = 0; i < head_dim / 2; i++) {
        const float factor = 8.0f, low = 1.0f, high = 4.0f, orig = 8192.0f;
        const float freq = 1.0f / powf(A->rope_base, (float)(2 * i) / (float)head_dim);
        const float wavelen = 2.0f * 3.14159265358979f / freq;
        if (wavelen < orig / high)
            freqs[i] = 1.0f;
        else if (wavelen > orig / low)
            freqs[i] = factor;
        else {
            const float smooth = (orig / wavelen - low) / (high - low);
            freqs[i] = 1.0f / ((1.0f - smooth) / factor + smooth);
        }
    }
    add_tensor(&ts[nt++], A->tied ? out_type : o.type, o.n_embd, o.n_vocab, "token_embd.weight");
    add_tensor(&ts[nt++], LC_TYPE_F32, o.n_embd, 1, "output_norm.weight");
    if (!A->tied)
        add_tensor(&ts[nt++], out_type, o.n_embd, o.n_vocab, "output.weight");
    if (A->rope_freqs) {
        add_tensor(&ts[nt], LC_TYPE_F32, head_dim / 2, 1, "rope_freqs.weight");
        ts[nt++].data = freqs;
    }
    for (long il = 0; il < o.n_layer; il++) {
        add_tensor(&ts[nt++], LC_TYPE_F32, o.n_embd, 1, "blk.%ld.attn_norm.weight", il);
        if (A->fused) {
            add_tensor(&ts[nt++], o.type, o.n_embd, n_q + 2 * n_kv, "blk.%ld.attn_qkv.weight", il);
        } else {
            add_tensor(&ts[nt++], o.type, o.n_embd, n_q, "blk.%ld.attn_q.weight", il);
            add_tensor(&ts[nt++], o.type, o.n_embd, n_kv, "blk.%ld.attn_k.weight", il);
            add_tensor(&ts[nt++], o.type, o.n_embd, n_kv, "blk.%ld.attn_v.weight", il);
        }
        if (A->qkv_bias) {
            static const char *const b[] = {"q", "k", "v"};
            for (int k = 0; k < 3; k++) {
                add_tensor(&ts[nt], LC_TYPE_F32, k ? n_kv : n_q, 1, "blk.%ld.attn_%s.bias", il, b[k]);
                ts[nt].is_norm = false, ts[nt++].is_bias = true;
            }
        }
        if (A->qk_norm) {
            add_tensor(&ts[nt++], LC_TYPE_F32, head_dim, 1, "blk.%ld.attn_q_norm.weight", il);
            add_tensor(&ts[nt++], LC_TYPE_F32, head_dim, 1, "blk.%ld.attn_k_norm.weight", il);
        }
        add_tensor(&ts[nt++], o.type, n_q, o.n_embd, "blk.%ld.attn_output.weight", il);
        if (A->post_norms)
            add_tensor(&ts[nt++], LC_TYPE_F32, o.n_embd, 1, "blk.%ld.post_attention_norm.weight", il);
        add_tensor(&ts[nt++], LC_TYPE_F32, o.n_embd, 1, "blk.%ld.ffn_norm.weight", il);
        if (A->fused) {
            add_tensor(&ts[nt++], o.type, o.n_embd, 2 * o.n_ff, "blk.%ld.ffn_up.weight", il);
        } else {
            add_tensor(&ts[nt++], o.type, o.n_embd, o.n_ff, "blk.%ld.ffn_gate.weight", il);
            add_tensor(&ts[nt++], o.type, o.n_embd, o.n_ff, "blk.%ld.ffn_up.weight", il);
        }
        add_tensor(&ts[nt++], o.type, o.n_ff, o.n_embd, "blk.%ld.ffn_down.weight", il);
        if (A->post_norms)
            add_tensor(&ts[nt++], LC_TYPE_F32, o.n_embd, 1, "blk.%ld.post_ffw_norm.weight", il);
    }
    size_t max_bytes = 0, total = 0;
    for (int64_t i = 0; i < nt; i++) {
        const int64_t ne[2] = {ts[i].ne0, ts[i].ne1};
        if (lc_gguf_writer_add_tensor(w, ts[i].name, ts[i].type,
                                      ts[i].is_norm || ts[i].is_bias ? 1 : 2, ne))
            return fail("cannot add tensor %s", ts[i].name);
        size_t b = lc_row_size(ts[i].type, ts[i].ne0) * (size_t)ts[i].ne1;
        max_bytes = b > max_bytes ? b : max_bytes;
        total += b;
    }

    /* Write to OUT.tmp and rename at the end: an interrupted run leaves no truncated model. */
    char *tmp;
    if (asprintf(&tmp, "%s.tmp", o.out) < 0)
        return fail("out of memory");
    uint8_t *buf = malloc(max_bytes);
    if (!buf)
        return fail("out of memory (%zu bytes for the largest tensor)", max_bytes);
    const double t0 = now_s();
    if (lc_gguf_writer_begin(w, tmp, &err))
        return fail("%s", err);
    for (int64_t i = 0; i < nt; i++) {
        if (gen_tensor(&ts[i], (int)i, &o, buf)) {
            unlink(tmp);
            return fail("out of memory generating %s", ts[i].name);
        }
        size_t b = lc_row_size(ts[i].type, ts[i].ne0) * (size_t)ts[i].ne1;
        if (lc_gguf_writer_write_data(w, buf, b, &err)) {
            unlink(tmp);
            return fail("%s", err);
        }
    }
    if (lc_gguf_writer_end(w, &err)) {
        unlink(tmp);
        return fail("%s", err);
    }
    if (rename(tmp, o.out)) {
        int e = errno;
        unlink(tmp);
        return fail("cannot rename %s to %s: %s", tmp, o.out, strerror(e));
    }
    if (!o.quiet)
        printf("%s: %s, n_embd %ld, %ld layers, %ld/%ld heads, n_ff %ld, n_vocab %ld, %lld "
               "tensors, %.1f MiB of weights, written in %.1f s with %ld threads\n",
               o.out, name, o.n_embd, o.n_layer, o.n_head, o.n_head_kv, o.n_ff, o.n_vocab,
               (long long)nt, (double)total / 1048576.0, now_s() - t0, o.n_threads);
    free(buf);
    free(tmp);
    free(ts);
    free(freqs);
    free(copied_tmpl);
    lc_gguf_writer_free(w);
    return 0;
}
