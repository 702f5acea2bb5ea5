/*
 * llamachat-perplexity - perplexity of a model on a text, with llama.cpp's protocol, and the KL
 * divergence of a (quantized) model against a base model's saved token distributions.
 *
 *   llamachat-perplexity -m MODEL -f TEXT [-c N_CTX] [-b N_BATCH] [-t THREADS]
 *                        [--kl-divergence-base FILE [--kl-divergence]]
 *
 * The protocol (llama.cpp tools/perplexity, build 4748, `perplexity`): tokenize the whole text
 * with BOS; cut it into n_chunk = n_tokens / n_ctx chunks of n_ctx tokens; for each chunk,
 * clear the KV cache, put BOS in its first position, evaluate it, and score the predictions of
 * the second half: the logits at positions first = n_ctx/2 .. n_ctx-2 against the tokens at
 * first+1 .. n_ctx-1 (n_ctx/2 - 1 tokens per chunk).  The negative log-likelihood of a token
 * is max + log(sum exp(l - max)) - l[tok] (sum in double); PPL = exp(mean NLL); the
 * uncertainty is PPL * sqrt(var(NLL) / (count - 1)).
 *
 * --kl-divergence-base FILE writes, while computing the perplexity, the log-probabilities of
 * every scored position in llama.cpp's format ("_logits_", i32 n_ctx, i32 n_vocab, i32 n_chunk,
 * the n_chunk * n_ctx i32 tokens, then per scored position {f32 scale, f32 min_log_prob} and
 * n_vocab u16 levels, padded to an even count), so a file from llama-perplexity works too.
 * With --kl-divergence the tokens and base distributions are read back from FILE and the
 * model is compared with them: mean KL(base || model), top-1 agreement, PPL and PPL ratio.
 * The base file is written to a temporary file beside it and renamed over it only when
 * complete (fileutil.h): a failed or interrupted run leaves an older FILE as it was.
 */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "fileutil.h"
#include "llm/context.h"
#include "llm/model.h"
#include "llm/tokenizer.h"
#include "util.h"

const char *const lc_tool_name = "llamachat-perplexity";

static void usage(FILE *f)
{
    fprintf(f, "usage: llamachat-perplexity -m MODEL -f TEXT [-c N_CTX] [-b N_BATCH] [-t N]\n"
               "                            [--kl-divergence-base FILE [--kl-divergence]] [--fast-math]\n"
               "\n"
               "  -m, --model FILE          the model (.gguf, or the first part of a split one)\n"
               "  -f, --file FILE           the text\n"
               "  -c, --ctx-size N          tokens per chunk (default 512)\n"
               "  -b, --batch-size N        tokens per forward batch (default: n_ctx)\n"
               "  -t, --threads N           threads (default: all CPUs)\n"
               "  --chunks N                stop after N chunks\n"
               "  --kl-divergence-base FILE save the token distributions to FILE\n"
               "  --kl-divergence           compare the model with those saved in FILE\n"
               "  --fast-math               batches in a faster float order where a kernel has\n"
               "                            one (AVX-512 Q4_1, Q8_0, Q5_0, IQ4_NL, Q4_K,\n"
               "                            Q5_K): not llama.cpp's bits\n"
               "  -h, --help                this help\n");
}

/* -log p(tok) from logits, as llama.cpp's log_softmax: (l[tok] - max) in float, then
 * - log(sum exp(l - max)) with the sum in double. */
static double nll_of(const float *logits, int n_vocab, int tok)
{
    float max = logits[0];
    for (int i = 1; i < n_vocab; i++)
        max = logits[i] > max ? logits[i] : max;
    double sum = 0.0;
    for (int i = 0; i < n_vocab; i++)
        sum += (double)expf(logits[i] - max);
    return -((double)(logits[tok] - max) - log(sum));
}

/* llama.cpp's compressed log-probabilities of one position: {scale, min_log_prob} + u16 levels. */
static void pack_log_probs(const float *logits, int n_vocab, uint16_t *out)
{
    float max = logits[0], min = logits[0];
    for (int i = 1; i < n_vocab; i++) {
        max = logits[i] > max ? logits[i] : max;
        min = logits[i] < min ? logits[i] : min;
    }
    min = min > max - 16 ? min : max - 16;
    double sum = 0.0;
    for (int i = 0; i < n_vocab; i++)
        sum += (double)expf(logits[i] - max);
    const float log_sum_exp = (float)log(sum);
    const float min_log_prob = min - max - log_sum_exp;
    const float scale = (max - min) / 65535.f;
    memcpy(out, &scale, 4);
    memcpy(out + 2, &min_log_prob, 4);
    out += 4;
    if (scale != 0.0f) {
        const float inv = 1 / scale;
        for (int i = 0; i < n_vocab; i++)
            out[i] = logits[i] > min ? (uint16_t)lrintf(inv * (logits[i] - min)) : 0;
    } else {
        memset(out, 0, (size_t)n_vocab * sizeof(uint16_t));
    }
}

struct kld_sums {
    double nll, nll2, nll_base, nll_base2, nll_nll_base, kld, kld2, max_kld;
    size_t same_top, count;
};

/* Compare one position's logits with the base distribution (llama.cpp's kl_divergence terms). */
static void kld_position(const float *logits, int n_vocab, const uint16_t *base, int tok,
                         struct kld_sums *k)
{
    float max = logits[0];
    int imax = 0;
    for (int i = 1; i < n_vocab; i++)
        if (logits[i] > max) {
            max = logits[i];
            imax = i;
        }
    double sum_exp = 0.0;
    for (int i = 0; i < n_vocab; i++)
        sum_exp += (double)expf(logits[i] - max);
    const float log_sum_exp = (float)log(sum_exp);
    float scale, min_log_prob;
    memcpy(&scale, base, 4);
    memcpy(&min_log_prob, base + 2, 4);
    base += 4;
    const float nll = max + log_sum_exp - logits[tok];
    const float nll_base = -(scale * (float)base[tok] + min_log_prob);
    k->nll += (double)nll;
    k->nll2 += (double)nll * (double)nll;
    k->nll_base += (double)nll_base;
    k->nll_base2 += (double)nll_base * (double)nll_base;
    k->nll_nll_base += (double)nll * (double)nll_base;
    const float norm = max + log_sum_exp; /* log p_model(i) = logits[i] - norm */
    double kl = 0;
    int imax_base = 0;
    float pmax_base = 0;
    for (int i = 0; i < n_vocab; i++) {
        const float lp_base = scale * (float)base[i] + min_log_prob;
        if (i == 0 || lp_base > pmax_base) {
            pmax_base = lp_base;
            imax_base = i;
        }
        if (lp_base > -16.f)
            kl += (double)expf(lp_base) * (double)(lp_base - logits[i] + norm);
    }
    k->kld += kl;
    k->kld2 += kl * kl;
    k->max_kld = kl > k->max_kld ? kl : k->max_kld;
    k->same_top += imax == imax_base;
    k->count++;
}

static void xwrite(FILE *f, const void *p, size_t n, const char *path)
{
    if (fwrite(p, 1, n, f) != n)
        die("%s: write failed: %s", path, strerror(errno));
}

/* The temporary --kl-divergence-base file while it is written: removed when the run fails
 * (die() exits: atexit) or is interrupted (SIGINT, SIGTERM, SIGHUP), so that nothing is left
 * beside the untouched FILE. */
static char *volatile out_tmp;

static void remove_out_tmp(void)
{
    if (out_tmp)
        unlink(out_tmp);
}

static void on_fatal_signal(int sig)
{
    if (out_tmp)
        unlink(out_tmp);   /* async-signal-safe */
    signal(sig, SIG_DFL);
    raise(sig);
}

static void xread(FILE *f, void *p, size_t n, const char *path)
{
    if (fread(p, 1, n, f) != n)
        die("%s: truncated or unreadable (not a --kl-divergence-base file?)", path);
}

int main(int argc, char **argv)
{
    const char *model_path = NULL, *text_path = NULL, *kl_path = NULL;
    int n_ctx = 512, n_batch = 0, n_threads = 0, n_chunks_max = -1;
    bool kl_mode = false, fast_math = false;
    enum { OPT_KLB = 256, OPT_KL, OPT_CHUNKS, OPT_FAST_MATH };
    static const struct option longopts[] = {
        {"model", required_argument, NULL, 'm'},
        {"file", required_argument, NULL, 'f'},
        {"ctx-size", required_argument, NULL, 'c'},
        {"batch-size", required_argument, NULL, 'b'},
        {"threads", required_argument, NULL, 't'},
        {"chunks", required_argument, NULL, OPT_CHUNKS},
        {"kl-divergence-base", required_argument, NULL, OPT_KLB},
        {"kl-divergence", no_argument, NULL, OPT_KL},
        {"fast-math", no_argument, NULL, OPT_FAST_MATH},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    int c;
    lc_check_stdout_at_exit();   /* results lost to a full disk: exit 1 */
    while ((c = getopt_long(argc, argv, "m:f:c:b:t:h", longopts, NULL)) != -1) {
        switch (c) {
        case 'm': model_path = optarg; break;
        case 'f': text_path = optarg; break;
        case 'c': n_ctx = (int)lc_parse_long("-c", optarg, 8, 1 << 20); break;
        case 'b': n_batch = (int)lc_parse_long("-b", optarg, 1, 1 << 20); break;
        case 't': n_threads = (int)lc_parse_long("-t", optarg, 1, 512); break;
        case OPT_CHUNKS: n_chunks_max = (int)lc_parse_long("--chunks", optarg, 1, 1 << 30); break;
        case OPT_KLB: kl_path = optarg; break;
        case OPT_KL: kl_mode = true; break;
        case OPT_FAST_MATH: fast_math = true; break;
        case 'h': usage(stdout); return 0;
        default: usage(stderr); return 2;
        }
    }
    if (optind != argc || !model_path || (!text_path && !kl_mode) || (kl_mode && !kl_path)) {
        usage(stderr);
        return 2;
    }

    char *err = NULL;
    /* --kl-divergence-base to write: the file a symlink points to; a FIFO or a device is
     * refused before the work, not replaced by a regular file after it (fileutil.h) */
    struct lc_file_target target = {0};
    if (kl_path && !kl_mode && lc_file_target(kl_path, &target, &err) != 0)
        die("%s", err ? err : kl_path);
    struct lc_model *m = lc_model_load(model_path, false, &err);
    if (!m)
        die("%s", err ? err : model_path);
    const struct lc_vocab *v = m->vocab;
    const int n_vocab = m->hp.n_vocab;
    const bool add_bos = lc_vocab_add_bos(v);
    const int32_t bos = lc_vocab_bos(v);

    /* the tokens: from the text, or (KL mode) from the base file */
    int32_t *tokens = NULL;
    int64_t n_tokens = 0;
    int n_chunk = 0;
    FILE *kl_file = NULL;
    const int nv = 2 * ((n_vocab + 1) / 2) + 4; /* u16 per saved position */
    if (kl_mode) {
        kl_file = fopen(kl_path, "rb");
        if (!kl_file)
            die("%s: %s", kl_path, strerror(errno));
        char magic[8];
        int32_t hdr[3];
        xread(kl_file, magic, 8, kl_path);
        if (memcmp(magic, "_logits_", 8) != 0)
            die("%s: not a --kl-divergence-base file (bad magic)", kl_path);
        xread(kl_file, hdr, sizeof(hdr), kl_path);
        if (hdr[0] < 8 || hdr[1] != n_vocab || hdr[2] < 1 || hdr[2] > (1 << 24))
            die("%s: n_ctx %d, n_vocab %d (model: %d), n_chunk %d: not for this model", kl_path,
                hdr[0], hdr[1], n_vocab, hdr[2]);
        n_ctx = hdr[0];
        n_chunk = hdr[2];
        n_tokens = (int64_t)n_chunk * n_ctx;
        tokens = xmalloc((size_t)n_tokens * sizeof(int32_t));
        xread(kl_file, tokens, (size_t)n_tokens * sizeof(int32_t), kl_path);
        for (int64_t i = 0; i < n_tokens; i++)
            if (tokens[i] < 0 || tokens[i] >= n_vocab)
                die("%s: token %lld out of range", kl_path, (long long)i);
    } else {
        size_t len;
        char *text = lc_read_file(text_path, &len);
        fprintf(stderr, "perplexity: tokenizing the input ..\n");
        int32_t cap = (int32_t)(len + 8 < INT32_MAX ? len + 8 : INT32_MAX);
        tokens = xmalloc((size_t)cap * sizeof(int32_t));
        int32_t n = lc_tokenize(v, text, len, true, false, tokens, cap);
        if (n < 0)
            die("%s: tokenization failed", text_path);
        free(text);
        n_tokens = n;
        if (n_tokens < 2 * (int64_t)n_ctx)
            die("%s: %lld tokens; at least %d needed for a context of %d", text_path,
                (long long)n_tokens, 2 * n_ctx, n_ctx);
        n_chunk = (int)(n_tokens / n_ctx);
    }
    if (n_chunks_max > 0 && n_chunk > n_chunks_max)
        n_chunk = n_chunks_max;

    struct lc_context_params cp = lc_context_default_params();
    cp.n_ctx = n_ctx;
    cp.n_batch = n_batch > 0 && n_batch < n_ctx ? n_batch : n_ctx;
    cp.n_threads = n_threads;
    cp.fast_math = fast_math;
    struct lc_context *ctx = lc_context_new(m, &cp, &err);
    if (!ctx)
        die("%s", err ? err : "cannot create a context");

    FILE *out_kl = NULL;
    uint16_t *packed = NULL;
    if (kl_path && !kl_mode) {
        char *tmp = NULL;
        atexit(remove_out_tmp);
        signal(SIGINT, on_fatal_signal);
        signal(SIGTERM, on_fatal_signal);
        signal(SIGHUP, on_fatal_signal);
        signal(SIGXFSZ, SIG_IGN);   /* over a file size limit: EFBIG, reported, not a crash */
        int fd = lc_file_temp(&target, kl_path, &tmp, &err);
        if (fd < 0)
            die("%s", err ? err : kl_path);
        out_tmp = tmp;
        out_kl = fdopen(fd, "wb");
        if (!out_kl)
            die("%s: %s", kl_path, strerror(errno));
        const int32_t hdr[3] = {n_ctx, n_vocab, n_chunk};
        xwrite(out_kl, "_logits_", 8, kl_path);
        xwrite(out_kl, hdr, sizeof(hdr), kl_path);
        xwrite(out_kl, tokens, (size_t)n_chunk * (size_t)n_ctx * sizeof(int32_t), kl_path);
    }
    if (kl_path)
        packed = xmalloc((size_t)nv * sizeof(uint16_t));

    fprintf(stderr, "perplexity: %lld tokens, %d chunks, n_ctx=%d, batch_size=%d, threads=%d\n",
            (long long)n_tokens, n_chunk, n_ctx, cp.n_batch, lc_context_n_threads(ctx));

    const int first = n_ctx / 2;
    int32_t *chunk = xmalloc((size_t)n_ctx * sizeof(int32_t));
    double nll = 0, nll2 = 0;
    int64_t count = 0;
    struct kld_sums k = {0};
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (int i = 0; i < n_chunk; i++) {
        const int64_t start = (int64_t)i * n_ctx;
        memcpy(chunk, tokens + start, (size_t)n_ctx * sizeof(int32_t));
        if (add_bos && bos >= 0)
            chunk[0] = bos;
        if (lc_context_decode(ctx, chunk, n_ctx, 0, true, &err) != 0)
            die("chunk %d: %s", i + 1, err ? err : "decode failed");
        for (int j = first; j < n_ctx - 1; j++) {
            const float *logits = lc_context_logits(ctx, j);
            if (!logits)
                die("chunk %d: no logits for position %d", i + 1, j);
            const int tok = tokens[start + j + 1];
            if (kl_mode) {
                xread(kl_file, packed, (size_t)nv * sizeof(uint16_t), kl_path);
                kld_position(logits, n_vocab, packed, tok, &k);
                continue;
            }
            const double e = nll_of(logits, n_vocab, tok);
            nll += e;
            nll2 += e * e;
            if (out_kl) {
                pack_log_probs(logits, n_vocab, packed);
                xwrite(out_kl, packed, (size_t)nv * sizeof(uint16_t), kl_path);
            }
        }
        count += n_ctx - 1 - first;
        if (i == 0) {
            clock_gettime(CLOCK_MONOTONIC, &t1);
            const double s =
                (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) * 1e-9;
            fprintf(stderr, "perplexity: %.2f seconds per pass - ETA %.2f minutes\n", s,
                    s * n_chunk / 60.0);
        }
        if (kl_mode)
            printf("[%d]%.4f,", i + 1, exp(k.nll / (double)k.count));
        else
            printf("[%d]%.4f,", i + 1, exp(nll / (double)count));
        fflush(stdout);
    }
    printf("\n");

    if (!kl_mode) {
        const double mean = nll / (double)count;
        const double ppl = exp(mean);
        const double var = nll2 / (double)count - mean * mean;
        if (var > 0 && count > 1)
            printf("Final estimate: PPL = %.4f +/- %.5f\n", ppl,
                   sqrt(var / (double)(count - 1)) * ppl);
        else
            printf("Final estimate: PPL = %.4f\n", ppl);
    } else {
        const double n = (double)k.count;
        const double m_q = k.nll / n, m_b = k.nll_base / n;
        const double v_q = k.nll2 / n - m_q * m_q, v_b = k.nll_base2 / n - m_b * m_b;
        const double cov = k.nll_nll_base / n - m_q * m_b;
        const double u_q = v_q > 0 ? sqrt(v_q / (n - 1)) : 0;
        const double u_b = v_b > 0 ? sqrt(v_b / (n - 1)) : 0;
        const double ppl_q = exp(m_q), ppl_b = exp(m_b);
        /* ln(PPL(Q)/PPL(base)) = mean(nll - nll_base); its variance uses the covariance */
        const double d = m_q - m_b;
        const double v_d = v_q + v_b - 2 * cov;
        const double u_d = v_d > 0 ? sqrt(v_d / (n - 1)) : 0;
        const double kl_mean = k.kld / n, kl_var = k.kld2 / n - kl_mean * kl_mean;
        const double p_top = (double)k.same_top / n;
        printf("Mean PPL(Q)               : %10.6f +/- %10.6f\n", ppl_q, ppl_q * u_q);
        printf("Mean PPL(base)            : %10.6f +/- %10.6f\n", ppl_b, ppl_b * u_b);
        printf("Mean ln(PPL(Q)/PPL(base)) : %10.6f +/- %10.6f\n", d, u_d);
        printf("Mean PPL(Q)/PPL(base)     : %10.6f +/- %10.6f\n", exp(d), exp(d) * u_d);
        printf("Mean    KLD               : %10.6f +/- %10.6f\n", kl_mean,
               kl_var > 0 ? sqrt(kl_var / (n - 1)) : 0.0);
        printf("Maximum KLD               : %10.6f\n", k.max_kld);
        printf("Same top p                : %6.3f +/- %5.3f %%\n", 100 * p_top,
               100 * sqrt(p_top * (1 - p_top) / (n - 1)));
    }
    if (out_kl) {
        /* complete: synced, closed, then renamed over FILE */
        if (fflush(out_kl) != 0 || ferror(out_kl))
            die("%s: write failed: %s", kl_path, strerror(errno));
        if (fsync(fileno(out_kl)) != 0 && errno != EINVAL)
            die("%s: write failed: %s", kl_path, strerror(errno));
        if (fclose(out_kl) != 0)
            die("%s: write failed: %s", kl_path, strerror(errno));
        char *tmp = out_tmp;
        out_tmp = NULL;   /* from here lc_file_commit removes it on failure */
        if (lc_file_commit(&target, kl_path, tmp, &err) != 0)
            die("%s", err ? err : kl_path);
        free(tmp);
    }
    lc_file_target_free(&target);
    if (kl_file)
        fclose(kl_file);
    free(packed);
    free(chunk);
    free(tokens);
    lc_context_free(ctx);
    lc_model_free(m);
    return 0;
}
