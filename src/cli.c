/*
 * cli.c - the one-shot mode: load, tokenize, evaluate the prompt as a batch, then sample one
 * token at a time, printing text (or ids) to stdout and figures to stderr.
 *
 * On a terminal the prompt echo and the generated text are written in their visible form
 * (textsafe.h: a model's ESC shows as U+241B instead of driving the terminal); to a pipe or a
 * file they are the exact bytes, for scripts.  Messages on stderr, which can name the model
 * (general.name) or carry a file's error, are always in their visible form.
 */
#include "lcconfig.h"

#include "cli.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine.h"

#include "llm/arch/kernels.h"
#include "llm/context.h"
#include "llm/model.h"
#include "llm/sampler.h"
#include "llm/spec.h"
#include "llm/tokenizer.h"
#include "textsafe.h"

const char *lc_default_model_path(void)
{
    static const char *candidates[] = {
#ifdef LC_DEFAULT_MODEL_INSTALLED
        LC_DEFAULT_MODEL_INSTALLED,
#endif
        LC_DEFAULT_MODEL,
    };
    for (size_t i = 0; i < sizeof(candidates) / sizeof(candidates[0]); i++) {
        FILE *f = fopen(candidates[i], "rb");
        if (f) {
            fclose(f);
            return candidates[i];
        }
    }
    return LC_DEFAULT_MODEL;
}

/*
 * Flush stdout; on a write error (a full disk, a closed pipe when SIGPIPE is ignored) say so on
 * stderr once and return -1, so that the caller stops and exits non-zero instead of reporting
 * success for output that was lost.
 */
static int stdout_flush(void)
{
    static bool said;
    errno = 0;
    if (fflush(stdout) == 0 && !ferror(stdout))
        return 0;
    if (!said) {
        int e = errno ? errno : EIO;
        fprintf(stderr, "llamachat: cannot write to standard output: %s\n", strerror(e));
        said = true;
    }
    return -1;
}

/* lc_token_log, and the first write error in *log_errno (a full disk) */
/* One-shot's seed line when the temperature is 0: greedy decoding takes the most likely token
 * and draws nothing, so no seed is used (a seed given is said to be unused, not shown as if it
 * made the text). */
static void seed_line_greedy(const struct lc_options *o)
{
    if (o->sampling.seed == LC_SEED_RANDOM)
        fprintf(stderr, "llamachat: greedy (temp 0): no seed used\n");
    else
        fprintf(stderr, "llamachat: greedy (temp 0): seed %llu not used\n",
                (unsigned long long)o->sampling.seed);
}

static void log_tokens(FILE *log, int *log_errno, const struct lc_vocab *v, const char *what,
                       const int32_t *t, int32_t n, int32_t pos)
{
    if (!log)
        return;
    errno = 0;
    lc_token_log(log, v, what, t, n, pos);
    if (ferror(log) && !*log_errno)
        *log_errno = errno ? errno : EIO;
}

/* Tokenize text into a malloc'd array; returns the count or -1. */
static int32_t tokenize_alloc(const struct lc_vocab *v, const char *text, bool bos, bool special,
                              int32_t **out)
{
    const size_t len = strlen(text);
    int32_t cap = (int32_t)(len + 8);
    int32_t *toks = malloc((size_t)cap * sizeof(int32_t));
    if (!toks)
        return -1;
    int32_t n = lc_tokenize(v, text, len, bos, special, toks, cap);
    if (n < 0 && n != INT32_MIN) {
        cap = -n;
        int32_t *t2 = realloc(toks, (size_t)cap * sizeof(int32_t));
        if (!t2) {
            free(toks);
            return -1;
        }
        toks = t2;
        n = lc_tokenize(v, text, len, bos, special, toks, cap);
    }
    /* exactly one BOS: a prompt that spells it (with --special) gets no second one */
    if (bos && n >= 2 && toks[1] == lc_vocab_bos(v) && toks[0] == toks[1]) {
        memmove(toks, toks + 1, (size_t)(n - 1) * sizeof(*toks));
        n--;
    }
    if (n < 0) {
        free(toks);
        return -1;
    }
    *out = toks;
    return n;
}

int lc_cli_run(const struct lc_options *o)
{
    const char *path = o->model_path ? o->model_path : lc_default_model_path();
    const bool vocab_only = o->mode == LC_MODE_TOKENIZE;
    char *err = NULL;
    int status = 1;
    struct lc_model *m = lc_model_load(path, vocab_only, &err);
    struct lc_context *ctx = NULL;
    struct lc_sampler *smp = NULL;
    int32_t *toks = NULL;
    struct lc_spec spec = { 0 };
    struct lc_model *dm = NULL;       /* --draft */
    struct lc_context *dctx = NULL;
    FILE *log = NULL;                 /* --log-file, LLAMACHAT_LOG: every decode (engine.h) */
    int log_errno = 0;                /* its first write error */
    if (!m) {
        lc_text_fprintf(stderr, "llamachat: %s\n", err ? err : "cannot load the model");
        goto out;
    }
    if (m->x16_note[0])
        lc_text_fprintf(stderr, "llamachat: note: %s\n", m->x16_note);
    const struct lc_vocab *v = m->vocab;
    const bool bos = !o->no_bos && lc_vocab_add_bos(v);
    const char *prompt = o->prompt ? o->prompt : "";
    int32_t n_prompt = tokenize_alloc(v, prompt, bos, o->special, &toks);
    if (n_prompt < 0) {
        fprintf(stderr, "llamachat: cannot tokenize the prompt\n");
        goto out;
    }
    if (o->mode == LC_MODE_TOKENIZE) {
        for (int32_t i = 0; i < n_prompt; i++)
            printf("%s%d", i ? " " : "", toks[i]);
        printf("\n");
        status = stdout_flush() == 0 ? 0 : 1;
        goto out;
    }
    if (n_prompt == 0) {   /* refused: the model would have nothing to read */
        fprintf(stderr, "llamachat: the prompt is empty and %s: nothing for the model to read\n",
                o->no_bos ? "--no-bos adds no BOS token" : "the model adds no BOS token");
        goto out;
    }
    const char *log_path = o->log_path ? o->log_path : getenv("LLAMACHAT_LOG");
    if (log_path && *log_path && !(log = fopen(log_path, "we"))) {   /* as the chat's engine */
        lc_text_fprintf(stderr, "llamachat: cannot open the token log %s: %s\n", log_path,
                        strerror(errno));
        goto out;
    }
    if (o->verbose_prompt) {   /* as llama.cpp's --verbose-prompt */
        lc_text_fprintf(stderr, "prompt: '%s'\nnumber of tokens in prompt = %d\n", prompt, n_prompt);
        for (int32_t i = 0; i < n_prompt; i++) {
            size_t pl;
            const char *pc = lc_vocab_piece(v, toks[i], true, &pl);
            char *piece = strndup(pc, pl);
            lc_text_fprintf(stderr, "%6d -> '%s'\n", toks[i], piece ? piece : "");
            free(piece);
        }
        fputc('\n', stderr);
    }
    struct lc_context_params cp = lc_context_default_params();
    cp.n_ctx = o->n_ctx;
    cp.n_threads = o->n_threads;
    cp.n_batch = o->n_batch;
    cp.kv_type = o->kv_f32 ? LC_TYPE_F32 : o->kv_q8_0 ? LC_TYPE_Q8_0 : LC_TYPE_F16;
    cp.flash_attn = o->flash_attn;
    cp.fast_math = o->fast_math;
    ctx = lc_context_new(m, &cp, &err);
    if (!ctx) {
        lc_text_fprintf(stderr, "llamachat: %s\n", err ? err : "cannot create a context");
        goto out;
    }
    const int32_t n_ctx = lc_context_n_ctx(ctx);
    if (n_ctx > m->hp.n_ctx_train)   /* accepted with a warning, as llama.cpp does */
        fprintf(stderr, "llamachat: warning: the context (%d tokens) is larger than the %d the model "
                "was trained with\n", n_ctx, m->hp.n_ctx_train);
    if (n_prompt >= n_ctx) {
        fprintf(stderr,
                "llamachat: the prompt is %d tokens but the context holds %d; use -c to enlarge "
                "it\n",
                n_prompt, n_ctx);
        goto out;
    }
    smp = lc_sampler_new(&o->sampling, m->hp.n_vocab);
    /* speculative decoding (spec.h): prompt lookup, or the draft model's guesses */
    const bool use_spec = o->spec || o->draft_path;
    if (o->draft_path) {
        dm = lc_model_load(o->draft_path, false, &err);
        if (!dm) {
            lc_text_fprintf(stderr, "llamachat: draft model: %s\n", err ? err : "cannot load it");
            goto out;
        }
        if (lc_spec_check_vocab(m, path, dm, o->draft_path, &err) != 0) {
            lc_text_fprintf(stderr, "llamachat: %s\n", err ? err : "out of memory");
            goto out;
        }
        struct lc_context_params dp = lc_context_default_params();
        dp.n_ctx = n_ctx;
        dp.threads_from = ctx;   /* the target's workers: the two take turns (context.h) */
        dp.n_batch = o->n_batch;
        dctx = lc_context_new(dm, &dp, &err);
        if (!dctx) {
            lc_text_fprintf(stderr, "llamachat: draft model: %s\n",
                            err ? err : "cannot create a context");
            goto out;
        }
    }
    /* toks grows to hold the generated tokens too: the lookup's history */
    int32_t *all = realloc(toks, (size_t)n_ctx * sizeof(*toks));
    if (all)
        toks = all;
    if (!smp || !all || lc_spec_init(&spec, use_spec ? o->draft_max : 0) != 0 ||
        (dctx && lc_spec_set_draft(&spec, dctx) != 0)) {
        fprintf(stderr, "llamachat: out of memory\n");
        goto out;
    }
    /* a terminal gets the visible form of the text (the prompt may come from a file) */
    const bool tty = isatty(STDOUT_FILENO);
    struct lc_text_stream ts = { 0 };
    if (!o->print_token_ids) {
        if (tty)
            lc_text_stream_write(&ts, stdout, prompt, strlen(prompt));
        else
            fputs(prompt, stdout);
        if (stdout_flush() != 0)
            goto out;
    }
    for (int32_t i = 0; i < n_prompt; i++)
        lc_sampler_accept(smp, toks[i]);
    log_tokens(log, &log_errno, v, "prompt", toks, n_prompt, 0);
    if (lc_context_decode(ctx, toks, n_prompt, 0, false, &err) != 0) {
        lc_text_fprintf(stderr, "llamachat: %s\n", err ? err : "decode failed");
        goto out;
    }
    /* what reading the prompt took: the context counts a batch of one token (an empty prompt:
     * BOS alone) as generation; the summary counts the prompt as the n_prompt tokens read */
    struct lc_context_stats st0;
    lc_context_stats(ctx, &st0);
    int32_t n_gen = 0, pos = n_prompt;
    bool first = true;
    const char *why = "";
    for (;;) {
        if (o->n_predict >= 0 && n_gen >= o->n_predict)
            break;
        int32_t tok = lc_spec_sample(&spec, ctx, smp);
        if (lc_vocab_is_eog(v, tok)) {
            why = "end of text";
            break;
        }
        lc_sampler_accept(smp, tok);
        n_gen++;
        if (o->print_token_ids) {
            printf("%s%d", first ? "" : " ", tok);
        } else {
            size_t len;
            const char *piece = lc_vocab_piece(v, tok, o->special, &len);   /* any length */
            if (len > 0 && tty)
                lc_text_stream_write(&ts, stdout, piece, len);
            else if (len > 0)
                fwrite(piece, 1, len, stdout);
        }
        if (stdout_flush() != 0)
            goto out;
        first = false;
        if (o->n_predict >= 0 && n_gen >= o->n_predict)
            break;
        if (pos >= n_ctx) {
            fprintf(stderr, "\nllamachat: context full (%d tokens); stopping\n", n_ctx);
            why = "context full";
            break;
        }
        toks[pos] = tok;
        log_tokens(log, &log_errno, v, "reply", &tok, 1, pos);   /* drafts verified with it: not logged */
        if (lc_spec_step(&spec, ctx, smp, toks, tok, pos,
                         o->n_predict >= 0 ? o->n_predict - n_gen : -1, &err) != 0) {
            lc_text_fprintf(stderr, "\nllamachat: %s\n", err ? err : "decode failed");
            goto out;
        }
        pos++;
    }
    if (tty)
        lc_text_stream_flush(&ts, stdout);   /* a character cut short shows as U+FFFD */
    printf("\n");
    if (stdout_flush() != 0)
        goto out;
    struct lc_context_stats st;
    lc_context_stats(ctx, &st);
    const double t_prompt = st0.t_prompt_s + st0.t_gen_s, t_gen = st.t_gen_s - st0.t_gen_s;
    const int64_t n_gen_eval = st.n_gen_tokens - st0.n_gen_tokens;
    char desc[160];
    lc_model_desc(m, desc, sizeof(desc));
    lc_text_fprintf(stderr,
            "llamachat: %s, %d threads, %s kernels%s%s\n"
            "llamachat: prompt %lld tokens in %.3f s (%.1f t/s), generated %d tokens "
            "(%lld evaluated one by one in %.3f s: %.1f t/s)\n",
            desc, lc_context_n_threads(ctx), lc_kernels()->isa, *why ? "; stopped: " : "", why,
            (long long)n_prompt, t_prompt, t_prompt > 0 ? (double)n_prompt / t_prompt : 0.0, n_gen,
            (long long)n_gen_eval, t_gen, t_gen > 0 ? (double)n_gen_eval / t_gen : 0.0);
    /* the draft model's time (its reading of the prompt included) counts as generation's */
    double t_spec = t_gen;
    if (dctx) {
        struct lc_context_stats ds;
        lc_context_stats(dctx, &ds);
        t_spec += ds.t_prompt_s + ds.t_gen_s;
    }
    if (use_spec)
        fprintf(stderr,
                "llamachat: speculative (%s): %d tokens in %.3f s (%.1f t/s); %lld drafted in "
                "%lld batches, %lld accepted (%.0f %%)\n",
                dctx ? "draft model" : "lookup",
                n_gen, t_spec, t_spec > 0 ? (double)n_gen / t_spec : 0.0,
                (long long)spec.n_drafted, (long long)spec.n_batches,
                (long long)spec.n_accepted,
                spec.n_drafted > 0 ? 100.0 * (double)spec.n_accepted / (double)spec.n_drafted
                                   : 0.0);
    /* The seed in use, so that a reply sampled with a random seed can be reproduced; greedy
     * (temp 0) draws nothing: no seed is reported as used (seed_line) */
    const unsigned long long seed = (unsigned long long)lc_sampler_seed(smp);
    if (o->sampling.temp <= 0.0f)
        seed_line_greedy(o);
    else if (o->sampling.seed == LC_SEED_RANDOM)
        fprintf(stderr, "llamachat: seed %llu (random; --seed %llu repeats this text)\n", seed,
                seed);
    else
        fprintf(stderr, "llamachat: seed %llu\n", seed);
    status = 0;
out:
    if (log_errno) {   /* the log of what was read is lost: not a success */
        fprintf(stderr, "llamachat: cannot write the token log: %s\n", strerror(log_errno));
        status = 1;
    }
    if (log)
        fclose(log);
    free(err);
    free(toks);
    lc_sampler_free(smp);
    lc_spec_free(&spec);
    lc_context_free(dctx);
    lc_model_free(dm);
    lc_context_free(ctx);
    lc_model_free(m);
    return status;
}

/* Print an event's text on stderr as one "llamachat: PREFIX: text" line (visible form). */
static void chat_note(const char *prefix, const char *text)
{
    lc_text_fprintf(stderr, "llamachat: %s%s\n", prefix, text);
}

int lc_cli_chat(const struct lc_options *o)
{
    const char *model = o->model_path ? o->model_path : lc_default_model_path();
    struct lc_engine_config cfg = {
        .model_path = model,
        .n_ctx = o->n_ctx,
        .n_threads = o->n_threads,
        .n_batch = o->n_batch,
        .kv_f32 = o->kv_f32,
        .spec_draft = o->spec || o->draft_path ? o->draft_max : 0,   /* as the full-screen chat's */
        .draft_path = o->draft_path,
        .kv_q8_0 = o->kv_q8_0,
        .flash_attn = o->flash_attn,
        .fast_math = o->fast_math,
        .sampling = o->sampling,
        .n_predict = o->n_predict,
        .system_prompt = o->system_prompt,
        .chat_template = o->chat_template,
        .log_path = o->log_path,
        .chat_template_text = o->chat_template_text,
        .verbose_prompt = o->verbose_prompt,
        .remote_url = o->remote_url && *o->remote_url ? o->remote_url : NULL,
        .remote_model = o->remote_model,
        .remote_api_key_env = o->remote_api_key_env,
    };
    char *err = NULL;
    struct lc_engine *e = lc_engine_start(&cfg, &err);
    if (!e) {
        lc_text_fprintf(stderr, "llamachat: %s\n", err ? err : "cannot start the engine");
        free(err);
        return 1;
    }
    const bool tty = isatty(STDOUT_FILENO);
    struct lc_text_stream ts = { 0 };
    char desc[192] = "", isa[32] = "", tmpl[48] = "", seed[32] = "";
    int threads = 0, status = 1;
    bool loaded = false, done = false, log_failed = false;
    char *text = NULL;   /* an event's text, assembled from its records */
    size_t tlen = 0, tcap = 0;
    struct lc_event ev;
    while (!done) {
        if (!lc_engine_poll(e, &ev)) {
            struct pollfd p = { lc_engine_fd(e), POLLIN, 0 };
            if (poll(&p, 1, -1) < 0 && errno != EINTR)
                break;
            continue;
        }
        if (ev.type == LC_EV_TEXT) {   /* the reply streams straight out */
            if (tty)
                lc_text_stream_write(&ts, stdout, ev.text, ev.len);
            else
                fwrite(ev.text, 1, ev.len, stdout);
            if (stdout_flush() != 0) {
                status = 1;
                break;   /* the reply is lost: stop the engine rather than write on */
            }
            continue;
        }
        if (tlen + ev.len + 1 > tcap) {
            size_t cap = (tlen + ev.len + 1) * 2;
            char *t2 = realloc(text, cap);
            if (!t2)
                break;
            text = t2;
            tcap = cap;
        }
        memcpy(text + tlen, ev.text, ev.len);
        tlen += ev.len;
        text[tlen] = '\0';
        if (ev.more)
            continue;
        tlen = 0;
        switch (ev.type) {
        case LC_EV_INFO:
            if (!strncmp(text, "isa=", 4))
                snprintf(isa, sizeof(isa), "%s", text + 4);
            else if (!strncmp(text, "template=", 9))
                snprintf(tmpl, sizeof(tmpl), "%s", text + 9);
            else if (!strncmp(text, "seed=", 5))
                snprintf(seed, sizeof(seed), "%s", text + 5);
            else if (!strncmp(text, "threads=", 8))
                threads = atoi(text + 8);
            break;
        case LC_EV_LOADED:
            snprintf(desc, sizeof(desc), "%s", text);
            loaded = true;
            if (lc_engine_submit(e, o->prompt ? o->prompt : "") != 0) {
                fprintf(stderr, "llamachat: out of memory\n");
                done = true;
            }
            break;
        case LC_EV_NOTE:
            chat_note("note: ", text);
            if (!strncmp(text, "cannot write the token log", 26))
                log_failed = true;   /* the reply is printed; the exit status says the rest */
            break;
        case LC_EV_ERROR: {
            /* the chat's wording for a message too long: there is no input line here */
            static const char tail[] = "; it is back in the input line";
            size_t n = strlen(text);
            if (n > sizeof(tail) - 1 && !strcmp(text + n - (sizeof(tail) - 1), tail))
                text[n - (sizeof(tail) - 1)] = '\0';
            chat_note("", text);
            if (!loaded)   /* no model: nothing follows */
                done = true;
            break;
        }
        case LC_EV_DONE: {
            done = true;
            const char *why = ev.a == LC_DONE_EOG ? "end of turn"
                              : ev.a == LC_DONE_LIMIT ? "max tokens (-n)"
                              : ev.a == LC_DONE_CONTEXT ? "the context is full (-c)"
                              : ev.a == LC_DONE_STOPPED ? "stopped"
                              : "error";
            if (ev.a == LC_DONE_TOO_LONG || ev.a == LC_DONE_ERROR)
                break;
            if (tty)
                lc_text_stream_flush(&ts, stdout);
            printf("\n");
            if (stdout_flush() != 0)
                break;
            status = 0;
            if (cfg.remote_url) {   /* the server's figures are its own */
                lc_text_fprintf(stderr, "llamachat: %s; stopped: %s\n", desc, why);
                break;
            }
            lc_text_fprintf(stderr,
                            "llamachat: %s, %d threads, %s kernels, %s chat template; stopped: %s\n"
                            "llamachat: prompt %.0f tokens evaluated, generated %d tokens "
                            "(%.3f s: %.1f t/s)\n",
                            desc, threads, isa[0] ? isa : "?", tmpl[0] ? tmpl : "?", why, ev.x,
                            ev.b, ev.y, ev.y > 0 && ev.b > 1 ? (ev.b - 1) / ev.y : 0.0);
            if (o->sampling.temp <= 0.0f)
                seed_line_greedy(o);
            else if (seed[0] && strcmp(seed, "none") != 0 && o->sampling.seed == LC_SEED_RANDOM)
                fprintf(stderr, "llamachat: seed %s (random; --seed %s repeats this text)\n", seed,
                        seed);
            else if (seed[0] && strcmp(seed, "none") != 0)
                fprintf(stderr, "llamachat: seed %s\n", seed);
            break;
        }
        default:
            break;
        }
    }
    free(text);
    lc_engine_free(e);
    return log_failed ? 1 : status;
}
