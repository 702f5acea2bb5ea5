/*
 * spec.h - speculative decoding with prompt-lookup drafts, greedy only.
 *
 * A decode step normally evaluates one token and reads every weight for it.  Here, after the
 * token just chosen, up to n_cur (<= n_draft, adapted to how many were accepted) more are guessed from the text so far (prompt lookup: the
 * tokens that followed the most recent earlier occurrence of the last 2-4 tokens -- Saxena's
 * "prompt lookup decoding", 2023, the n-gram idea of llama.cpp's lookup example and its
 * --lookup-ngram-min), and the token with its guesses is evaluated as one batch
 * (lc_context_verify), which reads the weights once.  The caller then picks the next token
 * from the first row of logits as usual; while its choice equals the next guess, the following
 * rows are already computed and no evaluation happens (Leviathan et al. 2023, "Fast inference
 * from transformers via speculative decoding", with greedy verification).  The first choice
 * that differs ends the batch: the positions of the rejected guesses are overwritten by the
 * next evaluation (or dropped by lc_context_truncate).
 *
 * Since lc_context_verify gives each row the bits of a one-token decode and the caller's own
 * sampler makes every choice, the tokens are exactly those of plain greedy decoding
 * (tests/test-spec.sh).  With temperature > 0 the caller passes greedy = false and every step
 * is a plain one-token decode (sampling's acceptance rule is not implemented).
 *
 * It pays only where a decode is bound by reading the weights and the text repeats: a batch of
 * k tokens costs about k decodes when the model fits in cache (bench/BENCHMARKS.md), hence
 * off by default.
 */
#ifndef LC_SPEC_H
#define LC_SPEC_H

#include <stdbool.h>
#include <stdint.h>

#include "context.h"

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
    /* statistics since lc_spec_init */
    int64_t n_steps;    /* tokens fed */
    int64_t n_batches;  /* verify calls */
    int64_t n_drafted;  /* guesses evaluated */
    int64_t n_accepted; /* guesses that were then chosen */
};

/* n_draft >= 0 guesses per batch at most (e.g. 8).  Returns 0, or -1 when out of memory. */
int lc_spec_init(struct lc_spec *s, int32_t n_draft);
void lc_spec_free(struct lc_spec *s);
/* Forget the last batch: call after any other decode on the context (its logits are gone). */
void lc_spec_reset(struct lc_spec *s);

/*
 * Feed tok, the token chosen at position pos: afterwards the logits for position pos + 1 are
 * lc_spec_logits(s, ctx).  hist[0 .. pos) are the tokens cached before it (the lookup reads
 * them; hist is not kept).  max_new is how many tokens can still be chosen after tok (the
 * reply's limit; < 0: no limit).  When tok is the next guess of the last batch, nothing is evaluated; otherwise
 * tok and up to n_draft guesses are verified at pos (one-token decode when greedy is false,
 * there are no guesses, or the context or batch has no room).  Returns as lc_context_decode:
 * 0, 1 stopped by the progress callback (tok is then not cached), -1 with a malloc'd *err.
 */
int lc_spec_step(struct lc_spec *s, struct lc_context *ctx, const int32_t *hist, int32_t tok,
                 int32_t pos, int32_t max_new, bool greedy, char **err);
/* The logits after the last fed token (n_vocab floats), valid until the next decode. */
const float *lc_spec_logits(const struct lc_spec *s, const struct lc_context *ctx);

#endif
