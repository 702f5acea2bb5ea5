/*
 * spec.c - speculative decoding with prompt-lookup drafts (spec.h).
 */
#include "spec.h"

#include <stdlib.h>
#include <string.h>

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
    s->v = NULL;
}

void lc_spec_reset(struct lc_spec *s)
{
    s->n_v = 0;
    s->cur = 0;
}

int lc_spec_step(struct lc_spec *s, struct lc_context *ctx, const int32_t *hist, int32_t tok,
                 int32_t pos, int32_t max_new, bool greedy, char **err)
{
    if (err)
        *err = NULL;
    s->n_steps++;
    /* the next guess of the last batch: its logits are there already */
    if (greedy && s->n_v > 0 && pos == s->v_pos + s->cur + 1 && s->cur + 1 < s->n_v &&
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
    int32_t nd = greedy ? lc_spec_lookup(hist, pos, tok, room, s->v + 1) : 0;
    if (nd <= 0)
        return lc_context_decode(ctx, &tok, 1, pos, false, err);
    s->v[0] = tok;
    int r = lc_context_verify(ctx, s->v, nd + 1, pos, err);
    if (r != 0)
        return r;
    s->n_v = nd + 1;
    s->v_pos = pos;
    s->cur = 0;
    s->n_batches++;
    s->n_drafted += nd;
    lc_context_add_gen_tokens(ctx, 1);
    return 0;
}

const float *lc_spec_logits(const struct lc_spec *s, const struct lc_context *ctx)
{
    return lc_context_logits(ctx, s->n_v > 0 ? s->cur : -1);
}
