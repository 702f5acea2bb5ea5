/*
 * spec.c - speculative decoding with prompt-lookup or draft-model guesses (spec.h).
 */
#include "spec.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tokenizer.h"

/* token i of hist + tok */
static inline int32_t seq_at(const int32_t *hist, int32_t n_hist, int32_t tok, int32_t i)
{
    return i < n_hist ? hist[i] : tok;
}

int32_t lc_spec_lookup(const int32_t *hist, int32_t n_hist, int32_t tok, int32_t max_draft,
                       int32_t *out)
{
    const int32_t n = n_hist + 1;
    if (max_draft <= 0 || n_hist < 0)
        return 0;
    for (int32_t N = LC_SPEC_NGRAM_MAX; N >= LC_SPEC_NGRAM_MIN; N--) {
        if (n < N + 1)
            continue;
        /* candidates start at i, i + N <= n - 1 (followed by a token), most recent first */
        for (int32_t i = n - N - 1; i >= 0; i--) {
            int32_t j = 0;
            while (j < N && seq_at(hist, n_hist, tok, i + j) == seq_at(hist, n_hist, tok, n - N + j))
                j++;
            if (j < N)
                continue;
            int32_t k = 0;
            while (k < max_draft && i + N + k < n) {
                out[k] = seq_at(hist, n_hist, tok, i + N + k);
                k++;
            }
            return k;
        }
    }
    return 0;
}

int lc_spec_init(struct lc_spec *s, int32_t n_draft)
{
    memset(s, 0, sizeof(*s));
    s->n_draft = n_draft > 0 ? n_draft : 0;
    s->n_cur = s->n_draft;
    s->v = malloc((size_t)(s->n_draft + 1) * sizeof(*s->v));
    return s->v ? 0 : -1;
}

void lc_spec_free(struct lc_spec *s)
{
    free(s->v);
    free(s->d_tok);
    free(s->q);
    s->v = NULL;
    s->d_tok = NULL;
    s->q = NULL;
    s->draft = NULL;
}

void lc_spec_reset(struct lc_spec *s)
{
    s->n_v = 0;
    s->cur = 0;
    s->q_valid = false;
}

int lc_spec_set_draft(struct lc_spec *s, struct lc_context *draft)
{
    free(s->d_tok);
    free(s->q);
    s->d_tok = NULL;
    s->q = NULL;
    s->draft = NULL;
    s->d_n = 0;
    lc_spec_reset(s);
    if (!draft)
        return 0;
    const int32_t nv = lc_context_model(draft)->hp.n_vocab;
    s->d_tok = malloc((size_t)lc_context_n_ctx(draft) * sizeof(*s->d_tok));
    s->q = malloc((size_t)(s->n_draft > 0 ? s->n_draft : 1) * (size_t)nv * sizeof(*s->q));
    if (!s->d_tok || !s->q) {
        free(s->d_tok);
        free(s->q);
        s->d_tok = NULL;
        s->q = NULL;
        return -1;
    }
    s->draft = draft;
    s->n_vocab = nv;
    return 0;
}

static char *fmt_err(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static char *fmt_err(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char *out = NULL;
    if (vasprintf(&out, fmt, ap) < 0)
        out = NULL;
    va_end(ap);
    return out;
}

/* A token's text for a message: at most 24 bytes, control bytes and quotes as \\xNN. */
static void show_text(const char *t, char *buf, size_t cap)
{
    size_t o = 0;
    for (size_t i = 0; t && t[i] && i < 24 && o + 5 < cap; i++) {
        const unsigned char ch = (unsigned char)t[i];
        if (ch < 0x20 || ch == 0x7f || ch == '\'' || ch == '\\')
            o += (size_t)snprintf(buf + o, cap - o, "\\x%02x", ch);
        else
            buf[o++] = (char)ch;
    }
    buf[o] = '\0';
}

int lc_spec_check_vocab(const struct lc_model *target, const char *target_name,
                        const struct lc_model *draft, const char *draft_name, char **err)
{
    *err = NULL;
    const int32_t nt = lc_vocab_n_tokens(target->vocab), nd = lc_vocab_n_tokens(draft->vocab);
    if (nt != nd) {
        *err = fmt_err("the draft model %s has a vocabulary of %d tokens, the model %s one of %d: "
                       "a draft model must have the same vocabulary", draft_name, nd, target_name,
                       nt);
        return -1;
    }
    /* same tokens, other output widths: defensive (lc_model_load makes hp.n_vocab the token
     * count today), as the verification compares logit rows of both widths */
    if (target->hp.n_vocab != draft->hp.n_vocab) {
        *err = fmt_err("the draft model %s computes %d logits per token, the model %s %d (both "
                       "have %d tokens): a draft model must have the same vocabulary",
                       draft_name, (int)draft->hp.n_vocab, target_name, (int)target->hp.n_vocab,
                       nt);
        return -1;
    }
    for (int32_t i = 0; i < nt; i++) {
        const char *a = lc_vocab_text(target->vocab, i), *b = lc_vocab_text(draft->vocab, i);
        if ((a == NULL) != (b == NULL) || (a && strcmp(a, b) != 0)) {
            char sa[128], sb[128];
            show_text(a, sa, sizeof sa);
            show_text(b, sb, sizeof sb);
            *err = fmt_err("the draft model %s has another vocabulary than the model %s: token %d "
                           "is '%s' in the draft, '%s' in the model", draft_name, target_name, i,
                           sb, sa);
            return -1;
        }
    }
    return 0;
}

int32_t lc_spec_sample(struct lc_spec *s, const struct lc_context *ctx, struct lc_sampler *smp)
{
    const float *logits = lc_spec_logits(s, ctx);
    if (s->n_v > 0 && s->cur + 1 < s->n_v) {
        const float *q = s->q_valid ? s->q + (size_t)s->cur * (size_t)s->n_vocab : NULL;
        return lc_sampler_sample_spec(smp, logits, s->v[s->cur + 1], q);
    }
    return lc_sampler_sample(smp, logits);
}

/*
 * Up to room guesses after tok (at pos) from the draft model into out; the draft's cache is
 * first brought to hist[0 .. pos) + tok (rewound to the first token that differs).  With a
 * temperature, guess j is drawn from q[j] (its distribution with the sampler's settings) and
 * *sampled is set.  Returns the count (>= 0), or -(1) stopped / -(2) error as
 * lc_context_decode's 1 / -1 (with *err).
 */
static int32_t draft_guesses(struct lc_spec *s, struct lc_sampler *smp, const int32_t *hist,
                             int32_t tok, int32_t pos, int32_t room, int32_t *out, bool *sampled,
                             char **err)
{
    struct lc_context *d = s->draft;
    const int32_t n_ctx = lc_context_n_ctx(d);
    *sampled = false;
    if (room <= 0 || pos + 1 > n_ctx)
        return 0;
    if (pos + room > n_ctx)   /* guess j is decoded at pos + j (the last one is not) */
        room = n_ctx - pos;
    /* the tokens the draft holds that are still the text's */
    int32_t common = 0;
    const int32_t lim = s->d_n < pos ? s->d_n : pos;
    while (common < lim && s->d_tok[common] == hist[common])
        common++;
    /* read hist[common .. pos) and tok (tok again when cached: its logits are needed) */
    if (common < pos)
        memcpy(s->d_tok + common, hist + common, (size_t)(pos - common) * sizeof(*hist));
    s->d_tok[pos] = tok;
    s->d_n = common;   /* until the decode succeeds */
    int r = lc_context_decode(d, s->d_tok + common, pos + 1 - common, common, false, err);
    if (r != 0)
        return r == 1 ? -1 : -2;
    s->d_n = pos + 1;
    const bool greedy = lc_sampler_params(smp)->temp <= 0.0f;
    int32_t n = 0;
    for (;;) {
        float *q = s->q + (size_t)n * (size_t)s->n_vocab;
        const float *logits = lc_context_logits(d, -1);
        const int32_t best = lc_sampler_dist(smp, logits, out, n, q);
        const int32_t x = greedy ? best : lc_sampler_draw(smp, q);
        if (x < 0)
            break;
        out[n++] = x;
        if (n >= room)
            break;
        s->d_tok[pos + n] = x;
        r = lc_context_decode(d, &x, 1, pos + n, false, err);
        if (r != 0)
            return r == 1 ? -1 : -2;
        s->d_n = pos + n + 1;
    }
    *sampled = !greedy && n > 0;
    return n;
}

int lc_spec_step(struct lc_spec *s, struct lc_context *ctx, struct lc_sampler *smp,
                 const int32_t *hist, int32_t tok, int32_t pos, int32_t max_new, char **err)
{
    if (err)
        *err = NULL;
    s->n_steps++;
    /* the next guess of the last batch: its logits are there already */
    if (s->n_v > 0 && pos == s->v_pos + s->cur + 1 && s->cur + 1 < s->n_v &&
        s->v[s->cur + 1] == tok) {
        s->cur++;
        s->n_accepted++;
        lc_context_add_gen_tokens(ctx, 1);
        return 0;
    }
    if (s->n_v > 1) {   /* the last batch's outcome sets the next one's length */
        if (s->cur == s->n_v - 1)
            s->n_cur = s->n_cur + 2 < s->n_draft ? s->n_cur + 2 : s->n_draft;
        else if (s->n_cur > 1)
            s->n_cur--;
    }
    lc_spec_reset(s);
    int32_t room = lc_context_n_ctx(ctx) - pos - 1;           /* positions after tok */
    if (room > lc_context_n_batch(ctx) - 1)
        room = lc_context_n_batch(ctx) - 1;
    if (room > s->n_cur)
        room = s->n_cur;
    /* row j of the batch chooses token j + 1 after tok: max_new choices need max_new - 1
     * guesses at most */
    if (max_new >= 0 && room > max_new - 1)
        room = max_new - 1;
    int32_t nd = 0;
    bool sampled = false;
    if (s->draft && room > 0) {
        nd = draft_guesses(s, smp, hist, tok, pos, room, s->v + 1, &sampled, err);
        if (nd == -1)
            return 1;
        if (nd < 0)
            return -1;
    } else {
        nd = lc_spec_lookup(hist, pos, tok, room, s->v + 1);
    }
    if (nd <= 0)
        return lc_context_decode(ctx, &tok, 1, pos, false, err);
    s->v[0] = tok;
    int r = lc_context_verify(ctx, s->v, nd + 1, pos, err);
    if (r != 0)
        return r;
    s->n_v = nd + 1;
    s->v_pos = pos;
    s->cur = 0;
    s->q_valid = sampled;
    s->n_batches++;
    s->n_drafted += nd;
    lc_context_add_gen_tokens(ctx, 1);
    return 0;
}

const float *lc_spec_logits(const struct lc_spec *s, const struct lc_context *ctx)
{
    return lc_context_logits(ctx, s->n_v > 0 ? s->cur : -1);
}
