/*
 * test-spec.c - speculative decoding (src/llm/spec.h):
 *   - lc_spec_lookup: exact drafts for hand-made histories (longest n-gram first, most recent
 *     occurrence, at most max_draft, none without a match);
 *   - speculative sampling's rule (lc_sampler_sample_spec) on synthetic distributions: many
 *     draws with a fixed seed, total variation from the exact p under several sampler settings,
 *     certain and drawn guesses, the share kept; greedy ignores the guesses;
 *   - lc_context_verify: with every ISA built and the CPU has, on models of every weight-kernel
 *     kind (Q4_1 x16 / gemm, Q4_0, Q8_0, F16, F32, IQ4_NL, K-quants with a Q6_K output) and both KV
 *     types, row i of a verified batch has the same bits as a one-token decode after tokens
 *     0 .. i-1 -- also after a rejected tail was verified and is overwritten;
 *   - greedy generation with speculation (lookup, and a draft model: stories260K with its
 *     Q4_1 / Q8_0 ff192 twins) gives exactly the tokens of plain greedy decoding, on a
 *     repetitive and an ordinary prompt, for several lengths and a context that fills up, and
 *     drafts are really accepted;
 *   - sampling with a draft model and with lookup: the draft's distributions row by row, the
 *     first tokens' marginals against exact enumeration, the guesses kept against sum min(p, q);
 *   - a draft of another vocabulary is refused (size, one token's text) with its message;
 *   - the engine (chat) gives the same greedy reply with and without speculation (lookup, draft
 *     model), refuses a draft of another vocabulary, and samples with a draft model.
 */
#include <math.h>
#include <poll.h>
#include <string.h>
#include <unistd.h>

#include "engine.h"
#include "llm/arch/kernels.h"
#include "llm/context.h"
#include "llm/model.h"
#include "llm/sampler.h"
#include "llm/spec.h"
#include "llm/tokenizer.h"
#include "testutil.h"

static const char *const REPETITIVE =
    "One two three four five six. One two three four five six. One two three four five six. "
    "One two three four five six. One two three four five six. One two three";
static const char *const ORDINARY = "Once upon a time, there was a little girl named Lily.";

static void test_lookup(void)
{
    int32_t out[16];
    /* 1 2 3 4 9 1 2 3 | tok 4: the 4-gram 1 2 3 4 occurred at 0, followed by 9 1 2 3 4 */
    const int32_t h1[] = {1, 2, 3, 4, 9, 1, 2, 3};
    int32_t n = lc_spec_lookup(h1, 8, 4, 8, out);
    CHECK(n == 5 && out[0] == 9 && out[1] == 1 && out[2] == 2 && out[3] == 3 && out[4] == 4,
          "lookup 4-gram: %d drafted, first %d", n, n > 0 ? out[0] : -1);
    n = lc_spec_lookup(h1, 8, 4, 2, out);
    CHECK(n == 2 && out[0] == 9 && out[1] == 1, "lookup max_draft 2: %d", n);
    CHECK(lc_spec_lookup(h1, 8, 4, 0, out) == 0, "lookup max_draft 0");
    /* the most recent occurrence wins: 5 6 7 | 5 6 8 | 5 | tok 6 -> 8 5 6 */
    const int32_t h2[] = {5, 6, 7, 5, 6, 8, 5};
    n = lc_spec_lookup(h2, 7, 6, 8, out);
    CHECK(n == 3 && out[0] == 8 && out[1] == 5 && out[2] == 6, "lookup most recent: %d, %d", n,
          n > 0 ? out[0] : -1);
    /* a longer n-gram first: 1 2 3 X 2 3 Y 1 2 | tok 3: the 3-gram 1 2 3 -> X, not 2 3 -> Y */
    const int32_t h3[] = {1, 2, 3, 40, 2, 3, 50, 1, 2};
    n = lc_spec_lookup(h3, 9, 3, 1, out);
    CHECK(n == 1 && out[0] == 40, "lookup longest n-gram first: %d, %d", n, n > 0 ? out[0] : -1);
    /* single-token matches are not used (n-grams of 2 at least) */
    const int32_t h4[] = {7, 1, 8, 2};
    CHECK(lc_spec_lookup(h4, 4, 7, 8, out) == 0, "lookup 1-gram");
    CHECK(lc_spec_lookup(NULL, 0, 7, 8, out) == 0, "lookup empty history");
    /* the n-gram at the very end is not its own match: 3 3 | tok 3 -> 3 (from 3 3 3) */
    const int32_t h5[] = {3, 3};
    n = lc_spec_lookup(h5, 2, 3, 8, out);
    CHECK(n == 1 && out[0] == 3, "lookup overlapping: %d", n);
}

/* ---------------------------------------------------------------- speculative sampling */

#define SV 24          /* the synthetic vocabulary */
#define N_DRAWS 100000 /* draws per case: TV of an exact sampler ~ 0.005 here */
#define TV_OK 0.015    /* bound for a correct rule (the seed is fixed: no flakes) */

/* total variation between counts (of n draws) and p */
static double tv_counts(const long *count, long n, const float *p, int nv)
{
    double d = 0.0;
    for (int i = 0; i < nv; i++)
        d += fabs((double)count[i] / (double)n - (double)p[i]);
    return d / 2.0;
}

static void synth_logits(float *l, int salt)
{
    for (int i = 0; i < SV; i++)
        l[i] = 3.0f * sinf(0.7f * (float)i + 1.3f * (float)salt) + 0.1f * (float)(i % 5);
}

static struct lc_sampler *new_sampler(const struct lc_sampler_params *sp, const int32_t *hist,
                                      int n_hist)
{
    struct lc_sampler *s = lc_sampler_new(sp, SV);
    CHECK(s != NULL, "sampler");
    for (int i = 0; s && i < n_hist; i++)
        lc_sampler_accept(s, hist[i]);
    return s;
}

/*
 * One case: target logits l under params sp (history hist), drafts x from q (q NULL: x = fixed
 * every time, a point mass).  The choices of lc_sampler_sample_spec must be distributed as p
 * = lc_sampler_dist, and x kept with probability sum_i min(p_i, q_i).
 */
static void check_rule(const char *what, const struct lc_sampler_params *sp, const int32_t *hist,
                       int n_hist, const float *l, const float *q, int32_t fixed)
{
    struct lc_sampler *s = new_sampler(sp, hist, n_hist);
    if (!s)
        return;
    float p[SV];
    lc_sampler_dist(s, l, NULL, 0, p);
    long count[SV] = { 0 }, kept = 0;
    for (long k = 0; k < N_DRAWS; k++) {
        const int32_t x = q ? lc_sampler_draw(s, q) : fixed;
        const int32_t y = lc_sampler_sample_spec(s, l, x, q);
        if (y < 0 || y >= SV) {
            CHECK(0, "%s: token %d", what, y);
            break;
        }
        count[y]++;
        kept += y == x;
    }
    double acc = 0.0;   /* the acceptance rate: sum min(p, q) */
    for (int i = 0; i < SV; i++)
        acc += (double)(q ? (p[i] < q[i] ? p[i] : q[i]) : (i == fixed ? p[i] : 0.0f));
    const double d = tv_counts(count, N_DRAWS, p, SV);
    fprintf(stderr, "test-spec: %s: TV %.4f, kept %.4f (exact %.4f)\n", what, d,
            (double)kept / N_DRAWS, acc);
    CHECK(d < TV_OK, "%s: the choices are not distributed as plain sampling's: TV %.4f", what, d);
    CHECK(fabs((double)kept / N_DRAWS - acc) < 0.01, "%s: guesses kept %.4f, expected %.4f", what,
          (double)kept / N_DRAWS, acc);
    lc_sampler_free(s);
}

static void test_sampling_rule(void)
{
    struct lc_sampler_params sets[3];
    sets[0] = lc_sampler_default_params();   /* temp 0.8, top-k 40, top-p 0.95, min-p 0.05 */
    sets[0].seed = 11;
    sets[1] = sets[0];                       /* the whole vocabulary */
    sets[1].temp = 1.3f;
    sets[1].top_k = 0;
    sets[1].top_p = 1.0f;
    sets[1].min_p = 0.0f;
    sets[2] = sets[0];                       /* every step, the history's penalty included */
    sets[2].temp = 0.7f;
    sets[2].top_k = 10;
    sets[2].top_p = 0.9f;
    sets[2].min_p = 0.02f;
    sets[2].repeat_penalty = 1.5f;
    sets[2].repeat_last_n = 6;
    const int32_t hist[] = {2, 9, 3, 5, 7, 3, 11, 20};
    float l[SV], ld[SV], q[SV], p[SV];
    synth_logits(l, 1);
    synth_logits(ld, 2);   /* a draft model that disagrees */
    for (int i = 0; i < SV; i++)
        ld[i] = 0.5f * ld[i] + 0.5f * l[i];
    for (int k = 0; k < 3; k++) {
        char what[96];
        /* the distribution is the one lc_sampler_sample draws from */
        struct lc_sampler *s = new_sampler(&sets[k], hist, 8);
        if (!s)
            continue;
        const int32_t best = lc_sampler_dist(s, l, NULL, 0, p);
        long count[SV] = { 0 };
        for (long i = 0; i < N_DRAWS; i++)
            count[lc_sampler_sample(s, l)]++;
        double d = tv_counts(count, N_DRAWS, p, SV);
        CHECK(d < TV_OK, "set %d: lc_sampler_sample against lc_sampler_dist: TV %.4f", k, d);
        int32_t zero = -1, mid = -1;   /* a token outside the candidates, one inside */
        for (int i = 0; i < SV; i++) {
            if (p[i] == 0.0f && zero < 0)
                zero = i;
            if (p[i] > 0.0f && i != best && mid < 0)
                mid = i;
        }
        /* point masses (prompt lookup): the most likely token, another, an impossible one */
        snprintf(what, sizeof what, "set %d, certain guess of the most likely", k);
        check_rule(what, &sets[k], hist, 8, l, NULL, best);
        if (mid >= 0) {
            snprintf(what, sizeof what, "set %d, certain guess of token %d", k, mid);
            check_rule(what, &sets[k], hist, 8, l, NULL, mid);
        }
        if (zero >= 0) {
            snprintf(what, sizeof what, "set %d, certain guess of an excluded token", k);
            check_rule(what, &sets[k], hist, 8, l, NULL, zero);
        }
        /* a draft model's distribution under the same settings, and a narrower one */
        lc_sampler_dist(s, ld, NULL, 0, q);
        snprintf(what, sizeof what, "set %d, guesses drawn from a draft model", k);
        check_rule(what, &sets[k], hist, 8, l, q, -1);
        struct lc_sampler_params narrow = sets[k];
        narrow.top_k = 3;
        narrow.temp = 0.5f;
        struct lc_sampler *sn = new_sampler(&narrow, hist, 8);
        if (sn) {
            lc_sampler_dist(sn, ld, NULL, 0, q);
            snprintf(what, sizeof what, "set %d, guesses drawn from a narrow draft", k);
            check_rule(what, &sets[k], hist, 8, l, q, -1);
            lc_sampler_free(sn);
        }
        /* the test can fail: drawing from p itself after a rejection is biased */
        long naive[SV] = { 0 };
        for (long i = 0; i < N_DRAWS; i++) {
            const int32_t y = lc_sampler_sample_spec(s, l, best, NULL);
            naive[y == best ? best : lc_sampler_sample(s, l)]++;
        }
        d = tv_counts(naive, N_DRAWS, p, SV);
        CHECK(d > 3 * TV_OK, "set %d: the biased rule is not told apart: TV %.4f", k, d);
        lc_sampler_free(s);
    }

    /* the draft's guesses count in the penalty's history as accepted tokens would */
    struct lc_sampler *a = new_sampler(&sets[2], hist, 8), *b = new_sampler(&sets[2], hist, 8);
    if (a && b) {
        const int32_t extra[] = {4, 9, 13};
        float pa[SV], pb[SV];
        for (int n = 0; n <= 3; n++) {
            const int32_t ba = lc_sampler_dist(a, l, extra, n, pa);
            if (n > 0)
                lc_sampler_accept(b, extra[n - 1]);
            const int32_t bb = lc_sampler_dist(b, l, NULL, 0, pb);
            CHECK(ba == bb && memcmp(pa, pb, sizeof pa) == 0,
                  "dist with %d extra tokens differs from the history with them", n);
        }
    }
    lc_sampler_free(a);
    lc_sampler_free(b);

    /* temperature 0: the choice is the argmax, whatever the guess and its q */
    struct lc_sampler_params g = sets[2];
    g.temp = 0.0f;
    struct lc_sampler *s = new_sampler(&g, hist, 8);
    if (s) {
        const int32_t want = lc_sampler_sample(s, l);
        CHECK(want == lc_sampler_dist(s, l, NULL, 0, p) && p[want] == 1.0f,
              "greedy dist: %d, p %f", want, (double)p[want]);
        for (int32_t x = 0; x < SV; x++) {
            const int32_t y1 = lc_sampler_sample_spec(s, l, x, NULL);
            const int32_t y2 = lc_sampler_sample_spec(s, l, x, q);
            CHECK(y1 == want && y2 == want, "greedy with guess %d: %d %d, want %d", x, y1, y2,
                  want);
        }
        float zeros[SV] = { 0 };
        CHECK(lc_sampler_draw(s, zeros) == -1, "draw from nothing");
    }
    lc_sampler_free(s);
}

static int32_t tokenize(const struct lc_model *m, const char *text, int32_t *toks, int32_t cap)
{
    return lc_tokenize(m->vocab, text, strlen(text), lc_vocab_add_bos(m->vocab), false, toks, cap);
}

static struct lc_context *new_ctx(const struct lc_model *m, int n_ctx, enum lc_type kv, int nt)
{
    struct lc_context_params cp = lc_context_default_params();
    cp.n_ctx = n_ctx;
    cp.n_threads = nt;
    cp.kv_type = kv;
    char *err = NULL;
    struct lc_context *c = lc_context_new(m, &cp, &err);
    CHECK(c != NULL, "context: %s", err ? err : "?");
    free(err);
    return c;
}

/* verified rows against one-token decodes, bit for bit */
static void test_verify_bits(const struct lc_model *m, const char *name, enum lc_type kv)
{
    const int32_t V = m->hp.n_vocab;
    struct lc_context *a = new_ctx(m, 128, kv, 2), *b = new_ctx(m, 128, kv, 2);
    if (!a || !b)
        goto out;
    int32_t t[256];
    int32_t n = tokenize(m, REPETITIVE, t, 256);
    CHECK(n > 30, "%s: %d tokens", name, n);
    const int32_t np = 12, nv = 9; /* prompt, then batches of 9 */
    char *err = NULL;
    CHECK(lc_context_decode(a, t, np, 0, false, &err) == 0, "%s: prompt a", name);
    CHECK(lc_context_decode(b, t, np, 0, false, &err) == 0, "%s: prompt b", name);
    /* a wrong tail first, then overwritten by the right one at the same positions */
    int32_t wrong[9];
    for (int i = 0; i < nv; i++)
        wrong[i] = (t[np + i] + 7) % V;
    CHECK(lc_context_verify(a, wrong, nv, np, &err) == 0, "%s: verify wrong", name);
    CHECK(lc_context_n_past(a) == np + nv, "%s: n_past %d", name, lc_context_n_past(a));
    int32_t pos = np;
    for (int round = 0; round < 2; round++) {
        CHECK(lc_context_verify(a, t + pos, nv, pos, &err) == 0, "%s: verify", name);
        for (int i = 0; i < nv; i++) {
            CHECK(lc_context_decode(b, t + pos + i, 1, pos + i, false, &err) == 0, "%s: decode",
                  name);
            const float *la = lc_context_logits(a, i), *lb = lc_context_logits(b, -1);
            CHECK(la && lb && memcmp(la, lb, (size_t)V * sizeof(float)) == 0,
                  "%s (%s KV, %s): row %d of the batch at %d differs from a one-token decode",
                  name, kv == LC_TYPE_F16 ? "f16" : "f32", lc_kernels()->isa, i, pos);
        }
        pos += nv;
    }
    /* too many tokens for the batch: a clear error, nothing evaluated */
    CHECK(lc_context_verify(a, t, 513, 0, &err) == -1 && err && strstr(err, "exceed the batch"),
          "%s: oversize verify: %s", name, err ? err : "(null)");
    free(err);
out:
    lc_context_free(a);
    lc_context_free(b);
}

/*
 * A context computing with another's workers (threads_from, as the draft model's does): the same
 * logits as one with its own, the pool counted as shared, and still working when the context it
 * borrowed from is freed first (the pool is reference-counted).
 */
static void test_shared_threads(const struct lc_model *m, const char *name)
{
    const int32_t V = m->hp.n_vocab;
    struct lc_context *own = new_ctx(m, 128, LC_TYPE_F16, 2), *a = new_ctx(m, 128, LC_TYPE_F16, 2);
    struct lc_context_params cp = lc_context_default_params();
    cp.n_ctx = 128;
    cp.n_threads = 1;   /* ignored: a's count is used */
    cp.threads_from = a;
    char *err = NULL;
    struct lc_context *b = a ? lc_context_new(m, &cp, &err) : NULL;
    CHECK(b != NULL, "%s: shared context: %s", name, err ? err : "?");
    free(err);
    err = NULL;
    if (!own || !a || !b)
        goto out;
    CHECK(lc_context_same_threads(a, b) && !lc_context_same_threads(a, own) &&
          lc_context_n_threads(b) == 2, "%s: shared pool: same %d/%d, %d threads", name,
          lc_context_same_threads(a, b), lc_context_same_threads(a, own), lc_context_n_threads(b));
    int32_t t[256];
    const int32_t n = tokenize(m, REPETITIVE, t, 256);
    CHECK(n > 20, "%s: %d tokens", name, n);
    CHECK(lc_context_decode(own, t, 16, 0, false, &err) == 0 &&
          lc_context_decode(a, t, 8, 0, false, &err) == 0 &&
          lc_context_decode(b, t, 16, 0, false, &err) == 0, "%s: prompts", name);
    CHECK(memcmp(lc_context_logits(own, -1), lc_context_logits(b, -1), (size_t)V * sizeof(float)) == 0,
          "%s: the shared pool's logits differ", name);
    lc_context_free(a);
    a = NULL;
    for (int i = 16; i < 20; i++) {
        CHECK(lc_context_decode(own, t + i, 1, i, false, &err) == 0 &&
              lc_context_decode(b, t + i, 1, i, false, &err) == 0, "%s: decode %d", name, i);
        CHECK(memcmp(lc_context_logits(own, -1), lc_context_logits(b, -1),
                     (size_t)V * sizeof(float)) == 0,
              "%s: after the lender was freed, token %d's logits differ", name, i);
    }
    free(err);
out:
    lc_context_free(own);
    lc_context_free(a);
    lc_context_free(b);
}

/*
 * Greedy generation as the CLI does it, with (draft > 0) or without speculation: the ids into
 * out, the count returned.  Stops at n_predict, end of text or a full context.
 */
static int generate(const struct lc_model *m, const struct lc_model *dm, const char *text,
                    int n_predict, int n_ctx, int draft, int32_t *out, struct lc_spec *stats)
{
    struct lc_context *c = new_ctx(m, n_ctx, LC_TYPE_F16, 2);
    struct lc_context *dc = dm ? new_ctx(dm, n_ctx, LC_TYPE_F16, 2) : NULL;
    struct lc_sampler_params sp = lc_sampler_default_params();
    sp.temp = 0;
    struct lc_sampler *s = lc_sampler_new(&sp, m->hp.n_vocab);
    struct lc_spec spec;
    int32_t *hist = calloc((size_t)n_ctx, sizeof(int32_t));
    int n_gen = 0;
    char *err = NULL;
    if (!c || !s || !hist || (dm && !dc) || lc_spec_init(&spec, draft) != 0)
        goto out;
    if (dc && lc_spec_set_draft(&spec, dc) != 0) {
        lc_spec_free(&spec);
        goto out;
    }
    int32_t n = tokenize(m, text, hist, n_ctx);
    const bool ok = n > 0 && lc_context_decode(c, hist, n, 0, false, &err) == 0;
    CHECK(ok, "prompt: %d tokens, %s", n, err ? err : "(null)");
    if (!ok) {
        lc_spec_free(&spec);
        goto out;
    }
    for (int32_t i = 0; i < n; i++)
        lc_sampler_accept(s, hist[i]);
    int32_t pos = n;
    while (n_gen < n_predict) {
        int32_t tok = lc_spec_sample(&spec, c, s);
        if (lc_vocab_is_eog(m->vocab, tok))
            break;
        lc_sampler_accept(s, tok);
        out[n_gen++] = tok;
        if (n_gen >= n_predict || pos >= n_ctx)
            break;
        hist[pos] = tok;
        int r = lc_spec_step(&spec, c, s, hist, tok, pos, n_predict - n_gen, &err);
        CHECK(r == 0, "spec step at %d: %s", pos, err ? err : "(null)");
        if (r != 0)
            break;
        pos++;
    }
    if (stats)
        *stats = spec;
    else
        lc_spec_free(&spec);
out:
    free(err);
    free(hist);
    lc_sampler_free(s);
    lc_context_free(dc);
    lc_context_free(c);
    return n_gen;
}

static void test_generate(const struct lc_model *m, const char *name)
{
    static int32_t plain[512], fast[512];
    static const int lengths[] = {1, 2, 3, 9, 40, 300};
    const char *texts[] = {REPETITIVE, ORDINARY};
    for (int ti = 0; ti < 2; ti++)
        for (size_t li = 0; li < sizeof lengths / sizeof lengths[0]; li++) {
            const int len = lengths[li];
            struct lc_spec st;
            const int np = generate(m, NULL, texts[ti], len, 512, 0, plain, NULL);
            const int nf = generate(m, NULL, texts[ti], len, 512, 8, fast, &st);
            CHECK(np == nf && memcmp(plain, fast, (size_t)np * sizeof(int32_t)) == 0,
                  "%s (%s): %s prompt, %d tokens: speculation changed the tokens (%d vs %d)",
                  name, lc_kernels()->isa, ti ? "ordinary" : "repetitive", len, np, nf);
            if (ti == 0 && len == 300)
                CHECK(st.n_accepted >= 20 && st.n_batches > 0,
                      "%s: repetitive prompt: %lld of %lld drafts accepted", name,
                      (long long)st.n_accepted, (long long)st.n_drafted);
            lc_spec_free(&st);
        }
    /* a context that fills up during the reply: drafts never go past n_ctx */
    const int np = generate(m, NULL, ORDINARY, 500, 80, 0, plain, NULL);
    const int nf = generate(m, NULL, ORDINARY, 500, 80, 8, fast, NULL);
    CHECK(np == nf && np > 0 && memcmp(plain, fast, (size_t)np * sizeof(int32_t)) == 0,
          "%s: full context: %d vs %d tokens", name, np, nf);
}

/* Greedy generation with a draft model: exactly plain greedy's tokens. */
static void test_generate_draft(const struct lc_model *m, const struct lc_model *dm,
                                const char *name)
{
    static int32_t plain[512], fast[512];
    static const int lengths[] = {1, 2, 3, 9, 40, 300};
    const char *texts[] = {REPETITIVE, ORDINARY};
    for (int ti = 0; ti < 2; ti++)
        for (size_t li = 0; li < sizeof lengths / sizeof lengths[0]; li++) {
            const int len = lengths[li];
            struct lc_spec st;
            const int np = generate(m, NULL, texts[ti], len, 512, 0, plain, NULL);
            const int draft = li % 2 ? 8 : 3;
            const int nf = generate(m, dm, texts[ti], len, 512, draft, fast, &st);
            CHECK(np == nf && memcmp(plain, fast, (size_t)np * sizeof(int32_t)) == 0,
                  "draft %s (%s): %s prompt, %d tokens, --draft-max %d: the tokens changed (%d vs "
                  "%d)", name, lc_kernels()->isa, ti ? "ordinary" : "repetitive", len, draft, np, nf);
            if (len == 300)
                CHECK(st.n_accepted >= 100 && st.n_batches > 0,
                      "draft %s: %lld of %lld guesses accepted", name,
                      (long long)st.n_accepted, (long long)st.n_drafted);
            lc_spec_free(&st);
        }
    const int np = generate(m, NULL, ORDINARY, 500, 80, 0, plain, NULL);
    const int nf = generate(m, dm, ORDINARY, 500, 80, 8, fast, NULL);
    CHECK(np == nf && np > 0 && memcmp(plain, fast, (size_t)np * sizeof(int32_t)) == 0,
          "draft %s: full context: %d vs %d tokens", name, np, nf);
}

/*
 * Speculative sampling end to end: the first three tokens after a prompt, sampled RUNS times
 * through lc_spec_sample / lc_spec_step (drafts from dm, or prompt lookup when dm is NULL),
 * against the exact marginals of plain sampling at each position (every path through the
 * candidates enumerated with one-token decodes and lc_sampler_dist).
 */
#define CHAIN_RUNS 6000
static void test_sampling_chain(const struct lc_model *m, const struct lc_model *dm,
                                const char *text, float penalty, const char *what)
{
    const int32_t V = m->hp.n_vocab;
    struct lc_sampler_params sp = lc_sampler_default_params();
    sp.temp = 0.9f;
    sp.repeat_penalty = penalty;
    sp.seed = 5;
    struct lc_context *c = new_ctx(m, 256, LC_TYPE_F16, 1);
    struct lc_context *dc = dm ? new_ctx(dm, 256, LC_TYPE_F16, 1) : NULL;
    struct lc_sampler *s = lc_sampler_new(&sp, V);
    float *exact = calloc((size_t)3 * (size_t)V, sizeof(float));
    float *p1 = malloc((size_t)V * sizeof(float)), *p2 = malloc((size_t)V * sizeof(float));
    float *p3 = malloc((size_t)V * sizeof(float));
    long *count = calloc((size_t)3 * (size_t)V, sizeof(long));
    int32_t hist[256];
    struct lc_spec spec = { 0 };
    char *err = NULL;
    long keep_obs = 0;
    double keep_exp = 0.0, keep_var = 0.0;
    if (!c || (dm && !dc) || !s || !exact || !p1 || !p2 || !p3 || !count ||
        lc_spec_init(&spec, 4) != 0 || (dc && lc_spec_set_draft(&spec, dc) != 0)) {
        CHECK(0, "%s: setup", what);
        goto out;
    }
    const int32_t n = tokenize(m, text, hist, 200);
    for (int32_t i = 0; i < n; i++)
        lc_sampler_accept(s, hist[i]);
    /* the prompt, its last token again alone: every run starts from these logits */
    CHECK(lc_context_decode(c, hist, n, 0, false, &err) == 0 &&
          lc_context_decode(c, hist + n - 1, 1, n - 1, false, &err) == 0, "%s: prompt", what);
    lc_sampler_dist(s, lc_context_logits(c, -1), NULL, 0, p1);
    for (int32_t a = 0; a < V; a++) {
        if (p1[a] == 0.0f)
            continue;
        exact[a] += p1[a];
        CHECK(lc_context_decode(c, &a, 1, n, false, &err) == 0, "%s: decode", what);
        const int32_t pa[1] = {a};
        lc_sampler_dist(s, lc_context_logits(c, -1), pa, 1, p2);
        for (int32_t b = 0; b < V; b++) {
            if (p2[b] == 0.0f)
                continue;
            exact[V + b] += p1[a] * p2[b];
            CHECK(lc_context_decode(c, &b, 1, n + 1, false, &err) == 0, "%s: decode", what);
            const int32_t pab[2] = {a, b};
            lc_sampler_dist(s, lc_context_logits(c, -1), pab, 2, p3);
            for (int32_t t = 0; t < V; t++)
                exact[2 * V + t] += p1[a] * p2[b] * p3[t];
        }
    }
    /* the runs: one sampler (one random stream), the prompt's history each time */
    for (int r = 0; r < CHAIN_RUNS; r++) {
        lc_sampler_reset(s);
        for (int32_t i = 0; i < n; i++)
            lc_sampler_accept(s, hist[i]);
        lc_spec_reset(&spec);
        spec.n_cur = spec.n_draft;   /* 4 guesses each time: tokens 2 and 3 both guessed */
        if (lc_context_decode(c, hist + n - 1, 1, n - 1, false, &err) != 0) {
            CHECK(0, "%s: run %d", what, r);
            break;
        }
        for (int32_t k = 0; k < 3; k++) {
            /* a guessed position: the guess is kept with probability sum min(p, q) (p(x) for
             * a certain guess) -- the row of q that x was drawn from must be the one used */
            int32_t x = -1;
            if (spec.n_v > 0 && spec.cur + 1 < spec.n_v) {
                x = spec.v[spec.cur + 1];
                lc_sampler_dist(s, lc_spec_logits(&spec, c), NULL, 0, p3);
                double a = 0.0;
                if (spec.q_valid) {
                    const float *q = spec.q + (size_t)spec.cur * (size_t)V;
                    for (int32_t t = 0; t < V; t++)
                        a += (double)fminf(p3[t], q[t]);
                } else {
                    a = (double)p3[x];
                }
                keep_exp += a;
                keep_var += a * (1.0 - a);
            }
            const int32_t tok = lc_spec_sample(&spec, c, s);
            keep_obs += x >= 0 && tok == x;
            count[k * V + tok]++;
            if (k == 2)
                break;
            lc_sampler_accept(s, tok);
            hist[n + k] = tok;
            if (lc_spec_step(&spec, c, s, hist, tok, n + k, -1, &err) != 0) {
                CHECK(0, "%s: step: %s", what, err ? err : "(null)");
                goto out;
            }
        }
    }
    fprintf(stderr, "test-spec: %s: guesses kept %ld, expected %.1f\n", what, keep_obs, keep_exp);
    CHECK(fabs((double)keep_obs - keep_exp) < 4.0 * sqrt(keep_var) + 1.0,
          "%s: %ld guesses kept, expected %.1f +- %.1f", what, keep_obs, keep_exp,
          sqrt(keep_var));
    for (int k = 0; k < 3; k++) {
        const double d = tv_counts(count + (size_t)k * (size_t)V, CHAIN_RUNS, exact + (size_t)k * (size_t)V, V);
        int support = 0;
        for (int32_t t = 0; t < V; t++)
            support += exact[(size_t)k * (size_t)V + (size_t)t] > 1e-4f;
        fprintf(stderr, "test-spec: %s: token %d: TV %.4f over %d tokens (%lld of %lld guesses "
                "kept)\n", what, k + 1, d, support, (long long)spec.n_accepted,
                (long long)spec.n_drafted);
        /* an exact sampler's TV here is about 0.4 sqrt(support / runs) */
        const double bound = 0.7 * sqrt((double)support / CHAIN_RUNS) + 0.005;
        CHECK(d < bound, "%s: token %d: not distributed as plain sampling's: TV %.4f >= %.4f",
              what, k + 1, d, bound);
    }
    CHECK(spec.n_drafted > 1000 && spec.n_accepted > 300, "%s: %lld of %lld guesses kept", what,
          (long long)spec.n_accepted, (long long)spec.n_drafted);
out:
    free(err);
    lc_spec_free(&spec);
    free(exact);
    free(p1);
    free(p2);
    free(p3);
    free(count);
    lc_sampler_free(s);
    lc_context_free(dc);
    lc_context_free(c);
}

/*
 * The draft's distributions, step by step: after lc_spec_step, row j of spec.q is what a
 * separate context of the draft model gives after the text, tok and guesses 1 .. j under the
 * sampler's settings (with the guesses in the penalty's history), and each guess was possible
 * under it.  Several steps, with a rejection, so that the draft's cache is rewound.
 */
static void test_draft_rows(const struct lc_model *m, const struct lc_model *dm)
{
    const int32_t V = m->hp.n_vocab;
    struct lc_sampler_params sp = lc_sampler_default_params();
    sp.temp = 1.1f;
    sp.repeat_penalty = 1.3f;
    sp.seed = 17;
    struct lc_context *c = new_ctx(m, 256, LC_TYPE_F16, 1);
    struct lc_context *dc = new_ctx(dm, 256, LC_TYPE_F16, 1);
    struct lc_context *ref = new_ctx(dm, 256, LC_TYPE_F16, 1);
    struct lc_sampler *s = lc_sampler_new(&sp, V);
    float *want = malloc((size_t)V * sizeof(float));
    int32_t hist[256];
    struct lc_spec spec = { 0 };
    char *err = NULL;
    if (!c || !dc || !ref || !s || !want || lc_spec_init(&spec, 5) != 0 ||
        lc_spec_set_draft(&spec, dc) != 0) {
        CHECK(0, "draft rows: setup");
        goto out;
    }
    int32_t n = tokenize(m, ORDINARY, hist, 200);
    for (int32_t i = 0; i < n; i++)
        lc_sampler_accept(s, hist[i]);
    CHECK(lc_context_decode(c, hist, n, 0, false, &err) == 0, "draft rows: prompt");
    int checked = 0, rejected = 0;
    for (int step = 0; step < 60 && n + 8 < 256; step++) {
        const int32_t tok = lc_spec_sample(&spec, c, s);
        const bool guessed = spec.n_v > 0 && spec.cur + 1 < spec.n_v;
        rejected += guessed && spec.v[spec.cur + 1] != tok;
        lc_sampler_accept(s, tok);
        hist[n] = tok;
        const int32_t batches = (int32_t)spec.n_batches;
        if (lc_spec_step(&spec, c, s, hist, tok, n, -1, &err) != 0) {
            CHECK(0, "draft rows: step: %s", err ? err : "(null)");
            break;
        }
        n++;
        if (spec.n_batches == batches)
            continue;   /* tok was a guess: no new batch */
        /* a new batch: hist[0 .. n) then the guesses, read by the reference context */
        CHECK(lc_context_decode(ref, hist, n, 0, false, &err) == 0, "draft rows: ref");
        for (int32_t j = 0; j + 1 < spec.n_v; j++) {
            if (j > 0)
                CHECK(lc_context_decode(ref, &spec.v[j], 1, n + j - 1, false, &err) == 0,
                      "draft rows: ref guess");
            lc_sampler_dist(s, lc_context_logits(ref, -1), spec.v + 1, j, want);
            const float *q = spec.q + (size_t)j * (size_t)V;
            float worst = 0.0f;
            for (int32_t t = 0; t < V; t++)
                worst = fmaxf(worst, fabsf(q[t] - want[t]));
            CHECK(spec.q_valid && worst < 1e-4f && q[spec.v[j + 1]] > 0.0f,
                  "draft rows: step %d, row %d: differs by %g from the draft's distribution "
                  "(guess %d, q %g)", step, j, (double)worst, spec.v[j + 1],
                  (double)q[spec.v[j + 1]]);
            checked++;
        }
    }
    fprintf(stderr, "test-spec: draft rows: %d rows checked, %d rejections\n", checked, rejected);
    CHECK(checked >= 10 && rejected >= 1, "draft rows: %d rows checked, %d rejections", checked,
          rejected);
out:
    free(err);
    free(want);
    lc_spec_free(&spec);
    lc_sampler_free(s);
    lc_context_free(ref);
    lc_context_free(dc);
    lc_context_free(c);
}

/* ---------------------------------------------------------------- the engine */

static bool collect(struct lc_engine *e, char *text, size_t cap, bool want_loaded)
{
    size_t len = 0;
    text[0] = '\0';
    for (int spins = 0; spins < 600;) {
        struct lc_event ev;
        if (!lc_engine_poll(e, &ev)) {
            struct pollfd p = { lc_engine_fd(e), POLLIN, 0 };
            if (poll(&p, 1, 100) == 0)
                spins++;
            continue;
        }
        if (ev.type == LC_EV_LOADED && want_loaded && !ev.more)
            return true;
        if (ev.type == LC_EV_ERROR && want_loaded)
            return false;
        if (ev.type == LC_EV_TEXT && len + ev.len < cap) {
            memcpy(text + len, ev.text, ev.len);
            len += ev.len;
            text[len] = '\0';
        }
        if (ev.type == LC_EV_DONE)
            return true;
    }
    return false;
}

static void engine_replies(const char *path, int draft, const char *draft_path, float temp,
                           char out[2][4096])
{
    struct lc_engine_config cfg = { .model_path = path, .n_ctx = 512, .n_threads = 2,
                                    .n_batch = 512, .n_predict = 120, .spec_draft = draft,
                                    .draft_path = draft_path };
    cfg.sampling = lc_sampler_default_params();
    cfg.sampling.temp = temp;
    cfg.sampling.seed = 21;
    char *err = NULL;
    struct lc_engine *e = lc_engine_start(&cfg, &err);
    CHECK(e != NULL, "engine: %s", err ? err : "(null)");
    free(err);
    if (!e)
        return;
    char tmp[64];
    CHECK(collect(e, tmp, sizeof tmp, true), "engine: no LOADED");
    lc_engine_submit(e, REPETITIVE);
    CHECK(collect(e, out[0], 4096, false), "engine: first reply");
    lc_engine_submit(e, "One two three four five six. One two");
    CHECK(collect(e, out[1], 4096, false), "engine: second reply");
    lc_engine_free(e);
}

/* The engine refuses a draft model of another vocabulary: the error event's text. */
static void engine_refuses(const char *path, const char *draft_path, const char *want)
{
    struct lc_engine_config cfg = { .model_path = path, .n_ctx = 256, .n_threads = 1,
                                    .n_batch = 512, .n_predict = 8, .spec_draft = 8,
                                    .draft_path = draft_path };
    cfg.sampling = lc_sampler_default_params();
    char *err = NULL;
    struct lc_engine *e = lc_engine_start(&cfg, &err);
    CHECK(e != NULL, "engine: %s", err ? err : "(null)");
    free(err);
    if (!e)
        return;
    char got[1200] = "";
    size_t len = 0;
    bool whole = false;
    for (int spins = 0; spins < 300 && !whole;) {
        struct lc_event ev;
        if (!lc_engine_poll(e, &ev)) {
            struct pollfd pf = { lc_engine_fd(e), POLLIN, 0 };
            if (poll(&pf, 1, 100) == 0)
                spins++;
            continue;
        }
        CHECK(ev.type != LC_EV_LOADED, "engine: loaded with a draft of another vocabulary");
        if (ev.type == LC_EV_LOADED)
            break;
        if (ev.type == LC_EV_ERROR && len + ev.len < sizeof got) {   /* in pieces: more */
            memcpy(got + len, ev.text, ev.len);
            len += ev.len;
            got[len] = '\0';
            whole = !ev.more;
        }
    }
    CHECK(strcmp(got, want) == 0, "engine: draft refused with\n[%s], want\n[%s]", got, want);
    lc_engine_free(e);
}

/* Events until LC_EV_DONE: the error text (pieces joined), the reply text, the done reason. */
static int until_done(struct lc_engine *e, char *error, char *text, size_t cap)
{
    size_t el = 0, tl = 0;
    error[0] = text[0] = '\0';
    for (int spins = 0; spins < 600;) {
        struct lc_event ev;
        if (!lc_engine_poll(e, &ev)) {
            struct pollfd pf = { lc_engine_fd(e), POLLIN, 0 };
            if (poll(&pf, 1, 100) == 0)
                spins++;
            continue;
        }
        if (ev.type == LC_EV_ERROR && el + ev.len < cap) {
            memcpy(error + el, ev.text, ev.len);
            error[el += ev.len] = '\0';
        }
        if (ev.type == LC_EV_TEXT && tl + ev.len < cap) {
            memcpy(text + tl, ev.text, ev.len);
            text[tl += ev.len] = '\0';
        }
        if (ev.type == LC_EV_DONE)
            return (int)ev.a;
    }
    return -1;
}

/* /model with a draft: a model of another vocabulary is refused and the chat goes on with the
 * draft; one of the same vocabulary is taken, and its replies use the draft too. */
static void engine_switch(const char *path, const char *draft, const char *other,
                          const char *same)
{
    struct lc_engine_config cfg = { .model_path = path, .n_ctx = 512, .n_threads = 1,
                                    .n_batch = 512, .n_predict = 40, .spec_draft = 6,
                                    .draft_path = draft };
    cfg.sampling = lc_sampler_default_params();
    cfg.sampling.temp = 0;
    char *err = NULL;
    struct lc_engine *e = lc_engine_start(&cfg, &err);
    CHECK(e != NULL, "engine: %s", err ? err : "(null)");
    free(err);
    if (!e)
        return;
    static char error[2048], text[4096];
    char tmp[64];
    CHECK(collect(e, tmp, sizeof tmp, true), "switch: no LOADED");
    lc_engine_submit(e, ORDINARY);
    int r = until_done(e, error, text, sizeof text);
    CHECK((r == LC_DONE_LIMIT || r == LC_DONE_EOG) && text[0] && !error[0], "switch: first reply %d [%s] [%s]", r, text,
          error);
    lc_engine_load_model(e, other);
    r = until_done(e, error, text, sizeof text);
    char want[1200];
    snprintf(want, sizeof want, "the draft model %s has a vocabulary of 512 tokens, the model %s "
             "one of 2048: a draft model must have the same vocabulary", draft, other);
    CHECK(r == LC_DONE_ERROR && strcmp(error, want) == 0, "switch to another vocabulary: %d [%s]",
          r, error);
    lc_engine_submit(e, "One two three");
    r = until_done(e, error, text, sizeof text);
    CHECK((r == LC_DONE_LIMIT || r == LC_DONE_EOG) && text[0] && !error[0], "switch: reply after the refusal %d [%s]", r,
          error);
    lc_engine_load_model(e, same);
    r = until_done(e, error, text, sizeof text);
    CHECK(r == LC_DONE_EOG && !error[0], "switch to the same vocabulary: %d [%s]", r, error);
    lc_engine_submit(e, "One two three");
    r = until_done(e, error, text, sizeof text);
    CHECK((r == LC_DONE_LIMIT || r == LC_DONE_EOG) && text[0] && !error[0], "switch: reply with the new model %d [%s]",
          r, error);
    lc_engine_free(e);
}

/* --draft: greedy tokens (generation and the engine), sampling's distribution, refusals. */
static void test_draft_model(void)
{
    char tp[512], dp[2][512], bad[512];
    tu_shared("models/stories260K.gguf", tp, sizeof tp);
    tu_shared("models/stories260K-ff192-q4_1.gguf", dp[0], sizeof dp[0]);
    tu_shared("models/stories260K-ff192-q8_0.gguf", dp[1], sizeof dp[1]);
    tu_shared("models/tinystories-656k/TinyStories-656K-Q4_1.gguf", bad, sizeof bad);
    char *err = NULL;
    struct lc_model *tm = lc_model_load(tp, false, &err);
    CHECK(tm != NULL, "load %s: %s", tp, err ? err : "(null)");
    free(err);
    err = NULL;
    for (int i = 0; tm && i < 2; i++) {
        struct lc_model *dm = lc_model_load(dp[i], false, &err);
        CHECK(dm != NULL, "load %s: %s", dp[i], err ? err : "(null)");
        free(err);
        err = NULL;
        if (!dm)
            continue;
        CHECK(lc_spec_check_vocab(tm, "t", dm, "d", &err) == 0, "vocab: %s", err ? err : "");
        free(err);
        err = NULL;
        test_generate_draft(tm, dm, dp[i]);
        if (i == 0) {
            test_draft_rows(tm, dm);
            test_sampling_chain(tm, dm, ORDINARY, 1.2f, "sampling, Q4_1 draft");
            /* the model's own words again: lookup guesses, some kept (penalised ones not) */
            test_sampling_chain(tm, NULL, "Once upon a time, there was a little girl named Lily. "
                                "She loved to play outside in the park. One day, she saw a big "
                                "tree. Once upon a time, there was a little girl named Lily.",
                                1.05f, "sampling, lookup");
        }
        lc_model_free(dm);
    }
    /* a draft of another vocabulary: refused, both files named */
    struct lc_model *other = lc_model_load(bad, false, &err);
    free(err);
    err = NULL;
    if (tm && other) {
        char want[1200];
        snprintf(want, sizeof want, "the draft model %s has a vocabulary of 2048 tokens, the model "
                 "%s one of 512: a draft model must have the same vocabulary", bad, tp);
        CHECK(lc_spec_check_vocab(tm, tp, other, bad, &err) == -1 && err &&
              strcmp(err, want) == 0, "vocab refusal: [%s]", err ? err : "(null)");
        free(err);
        err = NULL;
        engine_refuses(tp, bad, want);
        engine_switch(tp, dp[1], bad, dp[0]);
    }
    /* same size, one token text changed: the first difference is named */
    if (tm) {
        struct lc_model *twin = lc_model_load(dp[0], false, &err);
        free(err);
        err = NULL;
        if (twin) {
            /* the texts are the vocabulary's own heap copy (tokenizer.c): one is changed */
            char *t = (char *)lc_vocab_text(twin->vocab, 300);
            CHECK(t && t[0], "token 300 of the twin");
            if (t && t[0]) {
                const char old = t[0];
                t[0] = old == 'x' ? 'y' : 'x';
                char want[1200];
                snprintf(want, sizeof want, "the draft model d.gguf has another vocabulary than "
                         "the model t.gguf: token 300 is '%s' in the draft, '%s' in the model",
                         t, lc_vocab_text(tm->vocab, 300));
                CHECK(lc_spec_check_vocab(tm, "t.gguf", twin, "d.gguf", &err) == -1 && err &&
                      strcmp(err, want) == 0, "vocab text refusal: [%s]", err ? err : "(null)");
                free(err);
                err = NULL;
                t[0] = old;
            }
            /* the same tokens, another logit width (an output matrix padded otherwise) */
            const int32_t nv = twin->hp.n_vocab;
            twin->hp.n_vocab = nv + 64;
            char want[1200];
            snprintf(want, sizeof want, "the draft model d.gguf computes %d logits per token, the "
                     "model t.gguf %d (both have %d tokens): a draft model must have the same "
                     "vocabulary", (int)nv + 64, (int)tm->hp.n_vocab,
                     (int)lc_vocab_n_tokens(tm->vocab));
            CHECK(lc_spec_check_vocab(tm, "t.gguf", twin, "d.gguf", &err) == -1 && err &&
                  strcmp(err, want) == 0, "logit width refusal: [%s]", err ? err : "(null)");
            free(err);
            err = NULL;
            twin->hp.n_vocab = nv;
            lc_model_free(twin);
        }
    }
    lc_model_free(other);
    lc_model_free(tm);
    /* the chat: the same greedy replies with the draft model as without */
    static char plain[2][4096], fast[2][4096];
    engine_replies(tp, 0, NULL, 0.0f, plain);
    engine_replies(tp, 5, dp[1], 0.0f, fast);
    CHECK(plain[0][0] && strcmp(plain[0], fast[0]) == 0,
          "engine: first reply with the draft model differs:\n[%s]\n[%s]", plain[0], fast[0]);
    CHECK(plain[1][0] && strcmp(plain[1], fast[1]) == 0,
          "engine: second reply with the draft model differs:\n[%s]\n[%s]", plain[1], fast[1]);
    /* sampled with the draft model: replies, and one seed gives one text */
    engine_replies(tp, 5, dp[0], 0.8f, plain);
    engine_replies(tp, 5, dp[0], 0.8f, fast);
    CHECK(plain[0][0] && plain[1][0] && strcmp(plain[0], fast[0]) == 0 &&
          strcmp(plain[1], fast[1]) == 0, "engine: sampled replies with the draft model:\n[%s]\n"
          "[%s]\n[%s]\n[%s]", plain[0], fast[0], plain[1], fast[1]);
}

int main(void)
{
    test_lookup();
    test_sampling_rule();
    char path[512];
    tu_shared("models/stories260K-ff192-q4_1.gguf", path, sizeof(path));
    if (access(path, R_OK) != 0) {
        fprintf(stderr, "SKIP: %s missing\n", path);
        return tu_finish("test-spec");
    }
    static const char *const models[] = {
        "stories260K-ff192-q4_1.gguf", "stories260K-ff192-q4_0.gguf", "stories260K-ff192-q8_0.gguf",
        "stories260K-ff192-f16.gguf",  "stories260K.gguf",            "synth-small-q4_1.gguf",
        "synth-small-q4_k_m.gguf",     "tinystories-656k/TinyStories-656K-IQ4_NL.gguf",
    };
    static const char *const isas[] = {"scalar", "avx2", "avx512", "neon"};
    for (int i = 0; i < 4; i++) {
        if (!lc_kernels_isa_available(isas[i]))
            continue;
        CHECK(lc_kernels_select(isas[i], NULL) == 0, "select %s", isas[i]);
        for (size_t k = 0; k < sizeof models / sizeof models[0]; k++) {
            char mp[512], rel[256];
            snprintf(rel, sizeof rel, "models/%s", models[k]);
            tu_shared(rel, mp, sizeof mp);
            char *err = NULL;
            struct lc_model *m = lc_model_load(mp, false, &err);
            CHECK(m != NULL, "load %s: %s", models[k], err ? err : "(null)");
            free(err);
            if (!m)
                continue;
            test_verify_bits(m, models[k], LC_TYPE_F16);
            test_verify_bits(m, models[k], LC_TYPE_F32);
            if (k == 0)
                test_shared_threads(m, models[k]);
            /* whole generations: the default model with every ISA, the others with the best */
            if (k == 0 || i == 2 || (i == 1 && !lc_kernels_isa_available("avx512")) || i == 3)
                test_generate(m, models[k]);
            lc_model_free(m);
        }
        fprintf(stderr, "test-spec: %s: %zu models\n", isas[i], sizeof models / sizeof models[0]);
    }
    CHECK(lc_kernels_select("auto", NULL) == 0, "select auto");
    static char plain[2][4096], fast[2][4096];
    engine_replies(path, 0, NULL, 0.0f, plain);
    engine_replies(path, 8, NULL, 0.0f, fast);
    CHECK(plain[0][0] && strcmp(plain[0], fast[0]) == 0,
          "engine: first reply with speculation differs:\n[%s]\n[%s]", plain[0], fast[0]);
    CHECK(plain[1][0] && strcmp(plain[1], fast[1]) == 0,
          "engine: second reply with speculation differs:\n[%s]\n[%s]", plain[1], fast[1]);
    test_draft_model();
    return tu_finish("test-spec");
}
