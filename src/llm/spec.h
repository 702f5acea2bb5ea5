/*
 * spec.h - speculative decoding: drafts from prompt lookup or from a small draft model,
 * verified in one batch, greedy or sampled.
 *
 * A decode step normally evaluates one token and reads every weight for it.  Here, after the
 * token just chosen, up to n_cur (<= n_draft, adapted to how many were accepted) more are
 * guessed, and the token with its guesses is evaluated as one batch (lc_context_verify), which
 * reads the weights once.  The guesses come from
 *   - prompt lookup: the tokens that followed the most recent earlier occurrence of the last
 *     2-4 tokens (Saxena's "prompt lookup decoding", 2023, the n-gram idea of llama.cpp's
 *     lookup example and its --lookup-ngram-min), or
 *   - a draft model (lc_spec_set_draft): a small model with the same vocabulary, in its own
 *     context, writes them one by one with the caller's sampler settings (llama.cpp's
 *     speculative example with -md).  Its cache follows the text: before drafting, the tokens
 *     it holds are compared with the text and it is rewound to the first difference (the
 *     rejected guesses of the last batch, a context shift, another conversation).
 * The caller then picks the next token from the first row of logits (lc_spec_sample); while
 * its choice equals the next guess, the following rows are already computed and no
 * evaluation happens (Leviathan et al. 2023, "Fast inference from transformers via
 * speculative decoding").  The first choice that differs ends the batch: the positions of the
 * rejected guesses are overwritten by the next evaluation (or dropped by lc_context_truncate).
 *
 * Greedy (temp <= 0): lc_context_verify gives each row the bits of a one-token decode and the
 * choice is the sampler's argmax, so the tokens are exactly those of plain greedy decoding
 * (tests/test-spec.sh, test-spec-cli.sh).  Sampling: at a row followed by a guess x the choice
 * is lc_sampler_sample_spec (keep x with probability min(1, p(x)/q(x)), else draw from the
 * residual), so each token is distributed as plain sampling's at that position, with the
 * same history for the repetition penalty (tests/test-spec.c's statistical tests).  The random
 * stream differs, so one seed gives another text than without speculation.
 *
 * It pays only where a decode is bound by reading the weights and the guesses are good: a
 * batch of k tokens costs about k decodes when the model fits in cache (bench/BENCHMARKS.md),
 * hence off by default.
 */
#ifndef LC_SPEC_H
#define LC_SPEC_H

#include <stdbool.h>
#include <stdint.h>

#include "context.h"
#include "model.h"
#include "sampler.h"

#define LC_SPEC_NGRAM_MIN 2   /* shortest n-gram looked up */
#define LC_SPEC_NGRAM_MAX 4   /* longest, tried first */

/*
 * Prompt lookup: the sequence s = hist[0 .. n_hist) followed by tok.  For N from
 * LC_SPEC_NGRAM_MAX down to LC_SPEC_NGRAM_MIN, find the most recent earlier occurrence of
 * s's last N tokens that is followed by at least one token, and copy up to max_draft of the
 * tokens that follow it into out (which holds max_draft).  Returns the count (0: no match or
 * max_draft <= 0).  No allocation; O(n_hist * N) per N.
 */
int32_t lc_spec_lookup(const int32_t *hist, int32_t n_hist, int32_t tok, int32_t max_draft,
                       int32_t *out);

struct lc_spec {
    int32_t n_draft;    /* most guesses per batch (0: never verify, plain decodes) */
    int32_t n_cur;      /* guesses for the next batch, 1 .. n_draft: +2 after a batch whose
                           guesses were all chosen, -1 after one with a rejected guess (the
                           "heuristic" schedule of transformers' assisted generation), so that
                           guessing costs little when the text does not repeat */
    /* the last verified batch: v[0 .. n_v) at positions v_pos ..; row cur is in use */
    int32_t *v;         /* (n_draft + 1) */
    int32_t n_v, v_pos, cur;
    /* draft model (lc_spec_set_draft; NULL: prompt lookup) */
    struct lc_context *draft;   /* not owned */
    int32_t n_vocab;
    int32_t *d_tok;     /* (draft's n_ctx): the tokens its cache holds, d_tok[0 .. d_n) */
    int32_t d_n;
    float *q;           /* (n_draft, n_vocab): the distribution guess v[j + 1] was drawn from */
    bool q_valid;       /* q holds the last batch's (sampled guesses); false: guesses certain */
    /* statistics since lc_spec_init */
    int64_t n_steps;    /* tokens fed */
    int64_t n_batches;  /* verify calls */
    int64_t n_drafted;  /* guesses evaluated */
    int64_t n_accepted; /* guesses that were then chosen */
};

/* n_draft >= 0 guesses per batch at most (e.g. 8).  Returns 0, or -1 when out of memory. */
int lc_spec_init(struct lc_spec *s, int32_t n_draft);
/* Frees what lc_spec_init and lc_spec_set_draft allocated (not the draft context). */
void lc_spec_free(struct lc_spec *s);
/*
 * Draft with the model of context draft (owned by the caller, kept until lc_spec_free or the
 * next call; NULL: back to prompt lookup) instead of prompt lookup.  Its vocabulary must be
 * the target's (lc_spec_check_vocab) and its n_ctx at least the target context's for guesses
 * to the end of it.  Its progress callback is consulted when it reads text in batches (a stop
 * returns 1 from lc_spec_step).  Returns 0, or -1 when out of memory (the draft is not set).
 */
int lc_spec_set_draft(struct lc_spec *s, struct lc_context *draft);
/*
 * A draft model must have the target's vocabulary: the same n_vocab and, for every id, the
 * same token text.  Returns 0, or -1 with a malloc'd *err naming both files (target_name,
 * draft_name) and the first difference.
 */
int lc_spec_check_vocab(const struct lc_model *target, const char *target_name,
                        const struct lc_model *draft, const char *draft_name, char **err);
/* Forget the last batch: call after any other decode on the context (its logits are gone). */
void lc_spec_reset(struct lc_spec *s);

/*
 * The next token: from the logits after the last fed token (lc_spec_logits), with the
 * sampler's settings; where the last batch guessed the next token, by the acceptance rule
 * (lc_sampler_sample_spec), else by lc_sampler_sample.  The caller then passes it to
 * lc_sampler_accept and, unless it ends the text, to lc_spec_step.
 */
int32_t lc_spec_sample(struct lc_spec *s, const struct lc_context *ctx, struct lc_sampler *smp);
/*
 * Feed tok, the token chosen at position pos: afterwards the logits for position pos + 1 are
 * lc_spec_logits(s, ctx).  hist[0 .. pos) are the tokens cached before it (the lookup and the
 * draft model read them; hist is not kept).  max_new is how many tokens can still be chosen
 * after tok (the reply's limit; < 0: no limit).  smp is the caller's sampler, tok already
 * accepted into it: the draft model guesses with its settings (greedy: the argmax of its
 * penalised logits; else a draw from its distribution, with the guesses before in the
 * penalty's history).  When tok is the next guess of the last batch, nothing is evaluated;
 * otherwise tok and up to n_cur guesses are verified at pos (a one-token decode when n_draft
 * is 0, there are no guesses, or the context or batch has no room).  Returns as
 * lc_context_decode: 0, 1 stopped by a progress callback (tok is then not cached), -1 with a
 * malloc'd *err.
 */
int lc_spec_step(struct lc_spec *s, struct lc_context *ctx, struct lc_sampler *smp,
                 const int32_t *hist, int32_t tok, int32_t pos, int32_t max_new, char **err);
/* The logits after the last fed token (n_vocab floats), valid until the next decode. */
const float *lc_spec_logits(const struct lc_spec *s, const struct lc_context *ctx);

#endif
