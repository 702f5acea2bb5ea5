/*
 * sampler.h - choosing the next token from logits.
 *
 * Order (as llama.cpp's default chain): repetition penalty over the last repeat_last_n tokens,
 * top-k, top-p, min-p, temperature, then a draw from the softmax with a seeded RNG.
 * temp <= 0 means greedy (argmax of the penalized logits).  Parameters may change between any
 * two calls (the chat's live parameter pane).
 */
#ifndef LC_SAMPLER_H
#define LC_SAMPLER_H

#include <stdbool.h>
#include <stdint.h>

struct lc_sampler_params {
    float temp;            /* 0.8 default; <= 0 greedy */
    int32_t top_k;         /* 40; <= 0 disables */
    float top_p;           /* 0.95; >= 1 disables */
    float min_p;           /* 0.05; <= 0 disables */
    float repeat_penalty;  /* 1.0 (off, as llama.cpp); logit > 0 ? logit / p : logit * p */
    int32_t repeat_last_n; /* 64; 0 disables, -1 = whole context */
    uint64_t seed;         /* RNG seed; LC_SEED_RANDOM picks one from the clock */
};
#define LC_SEED_RANDOM UINT64_MAX

/* llama.cpp's defaults (common.h). */
struct lc_sampler_params lc_sampler_default_params(void);

/* A seed for "random" (LC_SEED_RANDOM): from /dev/urandom (the clock if that fails), below
 * 10^6 so that it is easy to read back and type with --seed or /set seed.  Never fails. */
uint64_t lc_sampler_random_seed(void);

struct lc_sampler;
/* n_vocab > 0.  NULL on allocation failure. */
struct lc_sampler *lc_sampler_new(const struct lc_sampler_params *p, int32_t n_vocab);
void lc_sampler_free(struct lc_sampler *s);
/* Replace the parameters; the RNG is re-seeded only when the seed changed. */
void lc_sampler_set_params(struct lc_sampler *s, const struct lc_sampler_params *p);
const struct lc_sampler_params *lc_sampler_params(const struct lc_sampler *s);
/*
 * The seed the RNG was last seeded with: the params' seed, or, when that is LC_SEED_RANDOM, the
 * one picked from the clock (never LC_SEED_RANDOM).  Passing it back as the seed (with the same
 * parameters and prompt) reproduces the text.  Reading it does not touch the random stream.
 */
uint64_t lc_sampler_seed(const struct lc_sampler *s);
/* Pick a token from n_vocab logits (not modified).  Returns the token id. */
int32_t lc_sampler_sample(struct lc_sampler *s, const float *logits);
/*
 * The distribution lc_sampler_sample would draw from now (after repetition penalty, top-k,
 * top-p, min-p and temperature), as if extra[0 .. n_extra) had been passed to
 * lc_sampler_accept first (a draft's own guesses; extra may be NULL when n_extra is 0): p gets
 * n_vocab probabilities summing to 1, zero outside the kept candidates; greedy (temp <= 0): 1
 * at the greedy choice.  Returns the most likely token.  The RNG and the history are untouched.
 */
int32_t lc_sampler_dist(struct lc_sampler *s, const float *logits, const int32_t *extra,
                        int32_t n_extra, float *p);
/* A draw with the sampler's RNG from w (n_vocab weights >= 0, any positive total).  Returns
 * the token, or -1 when every weight is 0 (no random number used then). */
int32_t lc_sampler_draw(struct lc_sampler *s, const float *w);
/*
 * The choice at a position where a draft guessed x (speculative sampling: Leviathan et al.
 * 2023, "Fast inference from transformers via speculative decoding", algorithm 1; Chen et al.
 * 2023, "Accelerating large language model decoding with speculative sampling").  With p the
 * distribution lc_sampler_sample draws from here (lc_sampler_dist) and q the one x was drawn
 * from (n_vocab probabilities; NULL: x was certain, as prompt-lookup guesses are), x is kept
 * with probability min(1, p(x) / q(x)); otherwise the token is drawn from max(0, p - q)
 * normalised (for q = NULL: p without x).  The result is distributed as p, whatever q is, as
 * long as x was drawn from q.  Greedy (temp <= 0): exactly lc_sampler_sample.  Returns the
 * token (never x after a rejection).
 */
int32_t lc_sampler_sample_spec(struct lc_sampler *s, const float *logits, int32_t x,
                               const float *q);
/* Record a token in the penalty history (prompt tokens and sampled ones). */
void lc_sampler_accept(struct lc_sampler *s, int32_t tok);
/* Forget the history (new conversation). */
void lc_sampler_reset(struct lc_sampler *s);

#endif
