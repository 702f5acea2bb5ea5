/*
 * llamachat-imatrix - collect an importance matrix over a text, as llama.cpp's llama-imatrix.
 *
 *   llamachat-imatrix -m MODEL -f TEXT -o FILE [-c N_CTX] [-t THREADS] [--chunks N]
 *
 * The text is tokenized with BOS and cut into chunks of n_ctx tokens, each evaluated from an
 * empty cache with BOS first (the perplexity protocol).  A matmul observer on the context
 * (context.h) sees the input rows of every matrix product; for each weight matrix the sums of
 * squared inputs per column are kept (imatrix.h), so FILE holds the mean squared activation of
 * every input column of every matrix -- output.weight (or the tied token_embd.weight) included,
 * which llama-imatrix leaves out unless --process-output.
 *
 * FILE is written in llama.cpp's GGUF imatrix format when its name ends in ".gguf", else in the
 * legacy ".dat" format; both are read by llamachat-quantize --imatrix and by llama-quantize.
 * Fused matrices (phi3's attn_qkv, ffn_up = gate|up) are recorded once, under the file's name.
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "llm/context.h"
#include "llm/imatrix.h"
#include "llm/model.h"
#include "llm/tokenizer.h"
#include "util.h"

const char *const lc_tool_name = "llamachat-imatrix";

/* The model's weights and their tensor names. */
struct wname {
    const struct lc_weight *w;
    char name[64];
};

struct collector {
    struct wname *names;
    int n;
    struct lc_imatrix *im;
    bool failed;
};

static void usage(FILE *f)
{
    fprintf(f, "usage: llamachat-imatrix -m MODEL -f TEXT -o FILE [-c N_CTX] [-t N] [--chunks N]\n"
               "                         [--cov[=MAX_N]]\n"
               "\n"
               "  -m, --model FILE    the model (F32/F16 preferably: the one to be quantized)\n"
               "  -f, --file FILE     the text\n"
               "  -o, --output FILE   the importance matrix: GGUF format when FILE ends in .gguf,\n"
               "                      else llama.cpp's legacy .dat format\n"
               "  -c, --ctx-size N    tokens per chunk (default 512)\n"
               "  -t, --threads N     threads (default: all CPUs)\n"
               "  --chunks N          stop after N chunks\n"
               "  --cov[=MAX_N]       also collect the sums of x x^T of every matrix with at most\n"
               "                      MAX_N (4096) input columns, for llamachat-quantize\n"
               "                      --method gptq (GGUF output only; n^2 floats per matrix)\n");
}

static void add_name(struct collector *c, const struct lc_weight *w, const char *name)
{
    if (!w->data)
        return;
    c->names = realloc(c->names, (size_t)(c->n + 1) * sizeof(*c->names));
    if (!c->names)
        die("out of memory");
    c->names[c->n].w = w;
    snprintf(c->names[c->n].name, sizeof(c->names[c->n].name), "%s", name);
    c->n++;
}

/* Which lc_weight is which tensor: the names llama.cpp gives them (llm_tensor names). */
static void map_names(struct collector *c, const struct lc_model *m)
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

static void observe(void *user, const struct lc_weight *w, const float *src, int rows,
                    size_t stride)
{
    struct collector *c = user;
    for (int i = 0; i < c->n; i++)
        if (c->names[i].w == w) {
            if (lc_imatrix_add(c->im, c->names[i].name, src, rows, (int)w->ne[0], stride) != 0)
                c->failed = true;
            return;
        }
}

static bool ends_with(const char *s, const char *sfx)
{
    size_t n = strlen(s), m = strlen(sfx);
    return n >= m && strcmp(s + n - m, sfx) == 0;
}

int main(int argc, char **argv)
{
    const char *model_path = NULL, *text_path = NULL, *out_path = NULL;
    int n_ctx = 512, n_threads = 0, n_chunks_max = -1;
    long cov_max = 0;
    enum { OPT_CHUNKS = 256, OPT_COV };
    static const struct option longopts[] = {
        {"model", required_argument, NULL, 'm'},
        {"file", required_argument, NULL, 'f'},
        {"output", required_argument, NULL, 'o'},
        {"ctx-size", required_argument, NULL, 'c'},
        {"threads", required_argument, NULL, 't'},
        {"chunks", required_argument, NULL, OPT_CHUNKS},
        {"cov", optional_argument, NULL, OPT_COV},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    int opt;
    while ((opt = getopt_long(argc, argv, "m:f:o:c:t:h", longopts, NULL)) != -1) {
        switch (opt) {
        case 'm': model_path = optarg; break;
        case 'f': text_path = optarg; break;
        case 'o': out_path = optarg; break;
        case 'c': n_ctx = (int)lc_parse_long("-c", optarg, 8, 1 << 20); break;
        case 't': n_threads = (int)lc_parse_long("-t", optarg, 1, 512); break;
        case OPT_CHUNKS: n_chunks_max = (int)lc_parse_long("--chunks", optarg, 1, 1 << 30); break;
        case OPT_COV: cov_max = optarg ? lc_parse_long("--cov", optarg, 1, 1 << 15) : 4096; break;
        case 'h': usage(stdout); return 0;
        default: usage(stderr); return 2;
        }
    }
    if (optind != argc || !model_path || !text_path || !out_path) {
        usage(stderr);
        return 2;
    }
    if (cov_max > 0 && !ends_with(out_path, ".gguf"))
        die("--cov: the x x^T sums need the GGUF format (an output name ending in .gguf)");
    char *err = NULL;
    struct lc_model *m = lc_model_load(model_path, false, &err);
    if (!m)
        die("%s", err ? err : model_path);
    const struct lc_vocab *v = m->vocab;

    size_t len;
    char *text = lc_read_file(text_path, &len);
    int32_t cap = (int32_t)(len + 8 < INT32_MAX ? len + 8 : INT32_MAX);
    int32_t *tokens = xmalloc((size_t)cap * sizeof(int32_t));
    int32_t n_tokens = lc_tokenize(v, text, len, true, false, tokens, cap);
    free(text);
    if (n_tokens < 0)
        die("%s: tokenization failed", text_path);
    if (n_tokens < n_ctx)
        die("%s: %d tokens; at least %d needed for a context of %d", text_path, n_tokens, n_ctx,
            n_ctx);
    int n_chunk = n_tokens / n_ctx;
    if (n_chunks_max > 0 && n_chunk > n_chunks_max)
        n_chunk = n_chunks_max;

    struct lc_context_params cp = lc_context_default_params();
    cp.n_ctx = n_ctx;
    cp.n_batch = n_ctx;
    cp.n_threads = n_threads;
    struct lc_context *ctx = lc_context_new(m, &cp, &err);
    if (!ctx)
        die("%s", err ? err : "cannot create a context");
    struct collector col = {0};
    col.im = lc_imatrix_new();
    if (!col.im)
        die("out of memory");
    lc_imatrix_collect_cov(col.im, cov_max);
    map_names(&col, m);
    lc_context_set_matmul_observer(ctx, observe, &col);

    fprintf(stderr, "imatrix: %d tokens, %d chunks of %d, %d matrices\n", n_tokens, n_chunk, n_ctx,
            col.n);
    const bool add_bos = lc_vocab_add_bos(v);
    const int32_t bos = lc_vocab_bos(v);
    int32_t *chunk = xmalloc((size_t)n_ctx * sizeof(int32_t));
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (int i = 0; i < n_chunk; i++) {
        memcpy(chunk, tokens + (size_t)i * (size_t)n_ctx, (size_t)n_ctx * sizeof(int32_t));
        if (add_bos && bos >= 0)
            chunk[0] = bos;
        /* all_logits: the output matrix then sees every row, as the others do */
        if (lc_context_decode(ctx, chunk, n_ctx, 0, true, &err) != 0)
            die("chunk %d: %s", i + 1, err ? err : "decode failed");
        if (col.failed)
            die("out of memory (or a matrix seen with two row lengths)");
        lc_imatrix_end_chunk(col.im);
        fprintf(stderr, "\rimatrix: chunk %d/%d", i + 1, n_chunk);
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    fprintf(stderr, "\n");
    if (lc_imatrix_save(col.im, out_path, ends_with(out_path, ".gguf"), text_path,
                        (uint32_t)n_ctx, &err) != 0)
        die("%s", err ? err : out_path);
    printf("wrote %s: %d matrices, %d chunks of %d tokens, %.2f s\n", out_path,
           lc_imatrix_count(col.im), n_chunk, n_ctx,
           (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) * 1e-9);
    lc_imatrix_free(col.im);
    free(col.names);
    free(chunk);
    free(tokens);
    lc_context_free(ctx);
    lc_model_free(m);
    return 0;
}
