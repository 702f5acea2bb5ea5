/*
 * llamachat-imatrix - collect an importance matrix over a text, as llama.cpp's llama-imatrix.
 *
 *   llamachat-imatrix -m MODEL -f TEXT -o FILE [-c N_CTX] [-t THREADS] [--chunks N] [--cov]
 *   llamachat-imatrix -m MODEL --generate N [--seed S] [--temp T] [--save-text F] -o FILE ...
 *
 * The text is tokenized with BOS and cut into chunks of n_ctx tokens, each evaluated from an
 * empty cache with BOS first (the perplexity protocol).  With --generate there is no text: the
 * model samples N tokens itself, in sequences of up to n_ctx from BOS (calib.h), and each
 * sequence is evaluated as a chunk.  A matmul observer on the context (calib.c) sees the input
 * rows of every matrix product; for each weight matrix the sums of squared inputs per column
 * are kept (imatrix.h), so FILE holds the mean squared activation of every input column of
 * every matrix -- output.weight (or the tied token_embd.weight) included, which llama-imatrix
 * leaves out unless --process-output.
 *
 * FILE is written in llama.cpp's GGUF imatrix format when its name ends in ".gguf", else in the
 * legacy ".dat" format; both are read by llamachat-quantize --imatrix and by llama-quantize.
 * Fused matrices (phi3's attn_qkv, ffn_up = gate|up) are recorded once, under the file's name.
 */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "fileutil.h"
#include "llm/calib.h"
#include "llm/context.h"
#include "llm/imatrix.h"
#include "llm/model.h"
#include "llm/tokenizer.h"
#include "util.h"

const char *const lc_tool_name = "llamachat-imatrix";

static void usage(FILE *f)
{
    fprintf(f, "usage: llamachat-imatrix -m MODEL (-f TEXT | --generate N) -o FILE [-c N_CTX]\n"
               "                         [-t N] [--chunks N] [--cov[=MAX_N]] [--seed S]\n"
               "                         [--temp T] [--save-text FILE]\n"
               "\n"
               "  -m, --model FILE    the model (F32/F16 preferably: the one to be quantized)\n"
               "  -f, --file FILE     the text\n"
               "  --generate N        no text: the model samples N tokens itself, in sequences\n"
               "                      of up to N_CTX tokens from BOS, and they are collected as\n"
               "                      chunks of a text would be (reproducible: fixed seed)\n"
               "  --seed S            --generate's random seed (default 1)\n"
               "  --temp T            --generate's temperature (default 1.0: the model's own\n"
               "                      distribution; no top-k, top-p, min-p or penalty)\n"
               "  --save-text FILE    write the generated text to FILE\n"
               "  -o, --output FILE   the importance matrix: GGUF format when FILE ends in .gguf,\n"
               "                      else llama.cpp's legacy .dat format\n"
               "  -c, --ctx-size N    tokens per chunk (default 512)\n"
               "  -t, --threads N     threads (default: all CPUs)\n"
               "  --chunks N          stop after N chunks (sequences with --generate)\n"
               "  --cov[=MAX_N]       also collect the sums of x x^T of every matrix with at most\n"
               "                      MAX_N (4096) input columns, for\n"
               "                      llamachat-quantize --method gptq (GGUF output only; n^2\n"
               "                      floats per matrix)\n"
               "  -h, --help          this help\n");
}

static bool ends_with(const char *s, const char *sfx)
{
    size_t n = strlen(s), m = strlen(sfx);
    return n >= m && strcmp(s + n - m, sfx) == 0;
}

/* --save-text: each generated sequence as text, one after the other, a newline after each. */
struct gen_out {
    const struct lc_vocab *v;
    FILE *text;
    const char *text_path;
    long n_tokens, done; /* tokens asked for, and sampled so far */
    bool regular;        /* text_path is a regular file (not /dev/stdout, a FIFO...) */
};

/* --save-text failed: no half-written text left behind, but only a file of ours is removed */
static void drop_text(struct gen_out *g)
{
    if (g->text)
        fclose(g->text);
    g->text = NULL;
    if (g->regular)
        remove(g->text_path);
}

static void on_sequence(void *user, const int32_t *tokens, int32_t n, int i_seq)
{
    struct gen_out *g = user;
    if (g->text) {
        char *s = lc_detokenize(g->v, tokens, n, false, true);
        if (!s)
            die("out of memory");
        if (fprintf(g->text, "%s\n", s) < 0) {
            drop_text(g);
            die("%s: write error", g->text_path);
        }
        free(s);
    }
    g->done += n;
    fprintf(stderr, "\rimatrix: sequence %d, %ld/%ld tokens", i_seq + 1, g->done, g->n_tokens);
}

int main(int argc, char **argv)
{
    const char *model_path = NULL, *text_path = NULL, *out_path = NULL, *save_text = NULL;
    int n_ctx = 512, n_threads = 0, n_chunks_max = -1;
    long cov_max = 0, n_generate = 0;
    uint64_t seed = 1;
    float temp = 1.0f;
    bool gen_opt = false; /* --seed or --temp given: they go with --generate */
    enum { OPT_CHUNKS = 256, OPT_COV, OPT_GENERATE, OPT_SEED, OPT_TEMP, OPT_SAVE_TEXT };
    static const struct option longopts[] = {
        {"model", required_argument, NULL, 'm'},
        {"file", required_argument, NULL, 'f'},
        {"output", required_argument, NULL, 'o'},
        {"ctx-size", required_argument, NULL, 'c'},
        {"threads", required_argument, NULL, 't'},
        {"chunks", required_argument, NULL, OPT_CHUNKS},
        {"cov", optional_argument, NULL, OPT_COV},
        {"generate", required_argument, NULL, OPT_GENERATE},
        {"seed", required_argument, NULL, OPT_SEED},
        {"temp", required_argument, NULL, OPT_TEMP},
        {"save-text", required_argument, NULL, OPT_SAVE_TEXT},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    int opt;
    lc_check_stdout_at_exit();   /* results lost to a full disk: exit 1 */
    while ((opt = getopt_long(argc, argv, "m:f:o:c:t:h", longopts, NULL)) != -1) {
        switch (opt) {
        case 'm': model_path = optarg; break;
        case 'f': text_path = optarg; break;
        case 'o': out_path = optarg; break;
        case 'c': n_ctx = (int)lc_parse_long("-c", optarg, 8, 1 << 20); break;
        case 't': n_threads = (int)lc_parse_long("-t", optarg, 1, 512); break;
        case OPT_CHUNKS: n_chunks_max = (int)lc_parse_long("--chunks", optarg, 1, 1 << 30); break;
        case OPT_COV: cov_max = optarg ? lc_parse_long("--cov", optarg, 1, 1 << 15) : 4096; break;
        case OPT_GENERATE: n_generate = lc_parse_long("--generate", optarg, 2, 1L << 30); break;
        case OPT_SEED:
            seed = (uint64_t)lc_parse_long("--seed", optarg, 0, LONG_MAX);
            gen_opt = true;
            break;
        case OPT_TEMP: {
            char *end;
            errno = 0;
            const double t = strtod(optarg, &end);
            if (errno || end == optarg || *end || !(t > 0.0 && t <= 100.0))
                die("--temp: '%s' is not a temperature in (0, 100]", optarg);
            temp = (float)t;
            gen_opt = true;
            break;
        }
        case OPT_SAVE_TEXT: save_text = optarg; break;
        case 'h': usage(stdout); return 0;
        default: usage(stderr); return 2;
        }
    }
    if (optind != argc || !model_path || !out_path || !text_path == !n_generate) {
        if (text_path && n_generate)
            fprintf(stderr, "%s: -f and --generate: one or the other\n", lc_tool_name);
        usage(stderr);
        return 2;
    }
    if ((save_text || gen_opt) && !n_generate) { /* a usage error, as the ones above */
        fprintf(stderr, "%s: %s goes with --generate\n", lc_tool_name,
                save_text ? "--save-text" : "--seed / --temp");
        return 2;
    }
    if (cov_max > 0 && !ends_with(out_path, ".gguf"))
        die("--cov: the x x^T sums need the GGUF format (an output name ending in .gguf)");
    char *err = NULL;
    /* -o: the file a symlink points to; a FIFO or a device (/dev/full) is refused before the
     * work, not replaced by a regular file after it (fileutil.h) */
    struct lc_file_target target;
    if (lc_file_target(out_path, &target, &err) != 0)
        die("%s", err ? err : out_path);
    struct lc_model *m = lc_model_load(model_path, false, &err);
    if (!m)
        die("%s", err ? err : model_path);
    const struct lc_vocab *v = m->vocab;

    int32_t *tokens = NULL;
    int32_t n_tokens = 0;
    int n_chunk = 0;
    if (text_path) {
        size_t len;
        char *text = lc_read_file(text_path, &len);
        int32_t cap = (int32_t)(len + 8 < INT32_MAX ? len + 8 : INT32_MAX);
        tokens = xmalloc((size_t)cap * sizeof(int32_t));
        n_tokens = lc_tokenize(v, text, len, true, false, tokens, cap);
        free(text);
        if (n_tokens < 0)
            die("%s: tokenization failed", text_path);
        if (n_tokens < n_ctx)
            die("%s: %d tokens; at least %d needed for a context of %d", text_path, n_tokens,
                n_ctx, n_ctx);
        n_chunk = n_tokens / n_ctx;
        if (n_chunks_max > 0 && n_chunk > n_chunks_max)
            n_chunk = n_chunks_max;
    }

    struct lc_context_params cp = lc_context_default_params();
    cp.n_ctx = n_ctx;
    cp.n_batch = n_ctx;
    cp.n_threads = n_threads;
    struct lc_context *ctx = lc_context_new(m, &cp, &err);
    if (!ctx)
        die("%s", err ? err : "cannot create a context");
    struct lc_imatrix *im = lc_imatrix_new();
    if (!im)
        die("out of memory");
    lc_imatrix_collect_cov(im, cov_max);
    struct lc_calib *cal = lc_calib_new(ctx, im);
    if (!cal)
        die("out of memory");

    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    char dataset[128];
    if (n_generate) {
        /* the model's own text: sequences of up to n_ctx tokens from BOS */
        struct gen_out g = {v, NULL, save_text, n_generate, 0, false};
        if (save_text && !(g.text = fopen(save_text, "w")))
            die("%s: %s", save_text, strerror(errno));
        struct stat st;
        g.regular = g.text && fstat(fileno(g.text), &st) == 0 && S_ISREG(st.st_mode);
        fprintf(stderr, "imatrix: generating %ld tokens (seed %" PRIu64 ", temp %g), sequences "
                        "of up to %d, %d matrices\n",
                n_generate, seed, (double)temp, n_ctx, lc_calib_n_matrices(cal));
        const struct lc_sampler_params sp = lc_calib_sampler_params(temp, seed);
        n_chunk = lc_calib_generate(cal, &sp, n_generate, n_chunks_max, on_sequence, &g, &err);
        if (n_chunk < 0) {
            drop_text(&g);
            die("%s", err ? err : "generation failed");
        }
        if (g.text && fclose(g.text) != 0) {
            g.text = NULL;
            drop_text(&g);
            die("%s: write error", save_text);
        }
        /* what was sampled (--chunks can stop it early; BOS counted) */
        snprintf(dataset, sizeof(dataset), "generated: %ld tokens, seed %" PRIu64 ", temp %g",
                 g.done, seed, (double)temp);
    } else {
        snprintf(dataset, sizeof(dataset), "%s", text_path);
        fprintf(stderr, "imatrix: %d tokens, %d chunks of %d, %d matrices\n", n_tokens, n_chunk,
                n_ctx, lc_calib_n_matrices(cal));
        const bool add_bos = lc_vocab_add_bos(v);
        const int32_t bos = lc_vocab_bos(v);
        int32_t *chunk = xmalloc((size_t)n_ctx * sizeof(int32_t));
        for (int i = 0; i < n_chunk; i++) {
            memcpy(chunk, tokens + (size_t)i * (size_t)n_ctx, (size_t)n_ctx * sizeof(int32_t));
            if (add_bos && bos >= 0)
                chunk[0] = bos;
            if (lc_calib_chunk(cal, chunk, n_ctx, &err) != 0)
                die("chunk %d: %s", i + 1, err ? err : "decode failed");
            fprintf(stderr, "\rimatrix: chunk %d/%d", i + 1, n_chunk);
        }
        free(chunk);
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    fprintf(stderr, "\n");
    if (lc_imatrix_save(im, target.path, ends_with(out_path, ".gguf"), dataset,
                        (uint32_t)n_ctx, &err) != 0)
        die("%s", err ? err : out_path);
    lc_file_target_free(&target);
    printf("wrote %s: %d matrices, %d %s %d tokens, %.2f s\n", out_path,
           lc_imatrix_count(im), n_chunk, n_generate ? "sequences of up to" : "chunks of", n_ctx,
           (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) * 1e-9);
    lc_calib_free(cal);
    lc_imatrix_free(im);
    free(tokens);
    lc_context_free(ctx);
    lc_model_free(m);
    return 0;
}
