/*
 * sampler.c - repetition penalty, top-k, top-p, min-p, temperature and a seeded draw.
 *
 * The steps and their order are llama.cpp's default sampler chain (common/sampling.cpp,
 * llama-sampling.cpp, Feb 2025): penalties -> top-k -> top-p -> min-p -> temperature -> dist.
 * The RNG is xoshiro256** seeded through splitmix64, so one seed gives one text on every
 * machine (it is not llama.cpp's mt19937: the same seed gives different text there).
 */
#include "sampler.h"

#include <math.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

struct cand {
    int32_t id;
    float logit;
    float p;
};

struct lc_sampler {
    struct lc_sampler_params p;
    int32_t n_vocab;
    struct cand *cands;     /* n_vocab */
    float *pbuf;            /* n_vocab: lc_sampler_sample_spec's distribution */
    int32_t *hist;          /* ring of recent tokens, cap entries */
    int32_t hist_cap, hist_n, hist_head;
    uint64_t rng[4];
    uint64_t seeded_with;   /* the seed asked for (may be LC_SEED_RANDOM) */
    uint64_t seed_used;     /* the seed the RNG was actually seeded with (never LC_SEED_RANDOM) */
};

struct lc_sampler_params lc_sampler_default_params(void)
{
    struct lc_sampler_params p = {
        .temp = 0.8f,
        .top_k = 40,
        .top_p = 0.95f,
        .min_p = 0.05f,
        .repeat_penalty = 1.0f,
        .repeat_last_n = 64,
        .seed = LC_SEED_RANDOM,
    };
    return p;
}

static uint64_t splitmix64(uint64_t *x)
{
    uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

static uint64_t xoshiro(uint64_t s[4])
{
    const uint64_t result = rotl(s[1] * 5, 7) * 9;
    const uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return result;
}

uint64_t lc_sampler_random_seed(void)
{
    uint32_t x = 0;
    int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
        if (read(fd, &x, sizeof(x)) != (ssize_t)sizeof(x))
            x = 0;
        close(fd);
    }
    if (x == 0) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        x = (uint32_t)((uint64_t)ts.tv_sec * 1000000007ull ^ (uint64_t)ts.tv_nsec);
    }
    return x % 1000000u;
}

static void seed_rng(struct lc_sampler *s, uint64_t seed)
{
    s->seeded_with = seed;
    if (seed == LC_SEED_RANDOM)   /* reported by lc_sampler_seed, to repeat with --seed */
        seed = lc_sampler_random_seed();
    s->seed_used = seed;
    uint64_t x = seed;
    for (int i = 0; i < 4; i++)
        s->rng[i] = splitmix64(&x);
}

/* Uniform in [0, 1) with 53 random bits. */
static double rng_uniform(struct lc_sampler *s)
{
    return (double)(xoshiro(s->rng) >> 11) * 0x1.0p-53;
}

struct lc_sampler *lc_sampler_new(const struct lc_sampler_params *p, int32_t n_vocab)
{
    if (n_vocab <= 0)
        return NULL;
    struct lc_sampler *s = calloc(1, sizeof(*s));
    if (!s)
        return NULL;
    s->n_vocab = n_vocab;
    s->cands = malloc((size_t)n_vocab * sizeof(*s->cands));
    s->pbuf = malloc((size_t)n_vocab * sizeof(*s->pbuf));
    s->hist_cap = 4096;
    s->hist = malloc((size_t)s->hist_cap * sizeof(*s->hist));
    if (!s->cands || !s->pbuf || !s->hist) {
        lc_sampler_free(s);
        return NULL;
    }
    s->p = *p;
    seed_rng(s, p->seed);
    return s;
}

void lc_sampler_free(struct lc_sampler *s)
{
    if (!s)
        return;
    free(s->cands);
    free(s->pbuf);
    free(s->hist);
    free(s);
}

void lc_sampler_set_params(struct lc_sampler *s, const struct lc_sampler_params *p)
{
    const bool reseed = p->seed != s->p.seed;
    s->p = *p;
    if (reseed)
        seed_rng(s, p->seed);
}

const struct lc_sampler_params *lc_sampler_params(const struct lc_sampler *s) { return &s->p; }

uint64_t lc_sampler_seed(const struct lc_sampler *s) { return s->seed_used; }

void lc_sampler_accept(struct lc_sampler *s, int32_t tok)
{
    s->hist[s->hist_head] = tok;
    s->hist_head = (s->hist_head + 1) % s->hist_cap;
    if (s->hist_n < s->hist_cap)
        s->hist_n++;
}

void lc_sampler_reset(struct lc_sampler *s)
{
    s->hist_n = 0;
    s->hist_head = 0;
}

static int cmp_logit_desc(const void *a, const void *b)
{
    const struct cand *x = a, *y = b;
    if (x->logit > y->logit)
        return -1;
    if (x->logit < y->logit)
        return 1;
    return x->id - y->id; /* deterministic order among equal logits */
}

/* Token j back from the end of history + extra (j = 0: the last one). */
static int32_t recent(const struct lc_sampler *s, const int32_t *extra, int32_t n_extra, int32_t j)
{
    if (j < n_extra)
        return extra[n_extra - 1 - j];
    j -= n_extra;
    return s->hist[(s->hist_head - 1 - j + s->hist_cap) % s->hist_cap];
}

/*
 * The sampler's steps up to the draw, with extra[0 .. n_extra) counted as accepted after the
 * history: s->cands[0 .. n) are the kept candidates, sorted, with .p their unnormalised weight
 * exp((logit - max) / temp); *sum their total.  Greedy (temp <= 0): returns 0 and *best is the
 * first maximum of the penalised logits.  Otherwise returns n >= 1.
 */
static int32_t candidates(struct lc_sampler *s, const float *logits, const int32_t *extra,
                          int32_t n_extra, double *sum_out, int32_t *best_out)
{
    const struct lc_sampler_params *p = &s->p;
    const int32_t nv = s->n_vocab;
    struct cand *c = s->cands;
    for (int32_t i = 0; i < nv; i++)
        c[i] = (struct cand){i, logits[i], 0.0f};

    /* Repetition penalty (CTRL paper, as llama.cpp): each distinct recent token once. */
    int32_t avail = s->hist_n + n_extra;   /* what the ring would hold after accepting extra */
    if (avail > s->hist_cap)
        avail = s->hist_cap;
    int32_t last_n = p->repeat_last_n < 0 ? avail : p->repeat_last_n;
    if (last_n > avail)
        last_n = avail;
    if (p->repeat_penalty != 1.0f && last_n > 0) {
        for (int32_t j = 0; j < last_n; j++) {
            const int32_t t = recent(s, extra, n_extra, j);
            if (t < 0 || t >= nv)
                continue;
            bool seen = false;
            for (int32_t k = 0; k < j && !seen; k++)
                seen = recent(s, extra, n_extra, k) == t;
            if (seen)
                continue;
            c[t].logit = c[t].logit > 0 ? c[t].logit / p->repeat_penalty
                                        : c[t].logit * p->repeat_penalty;
        }
    }

    if (p->temp <= 0.0f) { /* greedy: the first maximum */
        int32_t best = 0;
        for (int32_t i = 1; i < nv; i++)
            if (c[i].logit > c[best].logit)
                best = i;
        *best_out = best;
        return 0;
    }

    /* top-k: a partial selection for small k, a full sort otherwise; candidates end sorted. */
    int32_t n = nv;
    if (p->top_k > 0 && p->top_k < n && p->top_k <= 64) {
        for (int32_t i = 0; i < p->top_k; i++) {
            int32_t best = i;
            for (int32_t j = i + 1; j < n; j++)
                if (cmp_logit_desc(&c[j], &c[best]) < 0)
                    best = j;
            const struct cand tmp = c[i];
            c[i] = c[best];
            c[best] = tmp;
        }
    } else {
        qsort(c, (size_t)n, sizeof(*c), cmp_logit_desc);
    }
    if (p->top_k > 0 && p->top_k < n)
        n = p->top_k;

    /* Softmax over the candidates (sorted, descending). */
    double sum = 0.0;
    for (int32_t i = 0; i < n; i++) {
        c[i].p = expf(c[i].logit - c[0].logit);
        sum += (double)c[i].p;
    }
    for (int32_t i = 0; i < n; i++)
        c[i].p = (float)((double)c[i].p / sum);

    /* top-p: the smallest prefix whose mass reaches top_p (at least one). */
    if (p->top_p < 1.0f) {
        double cum = 0.0;
        for (int32_t i = 0; i < n; i++) {
            cum += (double)c[i].p;
            if (cum >= (double)p->top_p) {
                n = i + 1;
                break;
            }
        }
    }
    /* min-p: drop tokens less likely than min_p times the most likely one. */
    if (p->min_p > 0.0f) {
        const float thr = c[0].p * p->min_p;
        int32_t keep = 1;
        while (keep < n && c[keep].p >= thr)
            keep++;
        n = keep;
    }
    /* Temperature: the weights the draw uses. */
    sum = 0.0;
    for (int32_t i = 0; i < n; i++) {
        c[i].p = expf((c[i].logit - c[0].logit) / p->temp);
        sum += (double)c[i].p;
    }
    *sum_out = sum;
    *best_out = c[0].id;
    return n;
}

int32_t lc_sampler_sample(struct lc_sampler *s, const float *logits)
{
    double sum = 0.0;
    int32_t best = 0;
    const int32_t n = candidates(s, logits, NULL, 0, &sum, &best);
    if (n == 0)
        return best;
    const struct cand *c = s->cands;
    double r = rng_uniform(s) * sum;
    for (int32_t i = 0; i < n; i++) {
        r -= (double)c[i].p;
        if (r < 0.0)
            return c[i].id;
    }
    return c[n - 1].id;
}

int32_t lc_sampler_dist(struct lc_sampler *s, const float *logits, const int32_t *extra,
                        int32_t n_extra, float *p)
{
    double sum = 0.0;
    int32_t best = 0;
    const int32_t n = candidates(s, logits, extra, n_extra, &sum, &best);
    memset(p, 0, (size_t)s->n_vocab * sizeof(*p));
    if (n == 0) {
        p[best] = 1.0f;
        return best;
    }
    for (int32_t i = 0; i < n; i++)
        p[s->cands[i].id] = (float)((double)s->cands[i].p / sum);
    return best;
}

int32_t lc_sampler_draw(struct lc_sampler *s, const float *w)
{
    double sum = 0.0;
    int32_t last = -1;
    for (int32_t i = 0; i < s->n_vocab; i++)
        if (w[i] > 0.0f) {
            sum += (double)w[i];
            last = i;
        }
    if (last < 0)
        return -1;
    double r = rng_uniform(s) * sum;
    for (int32_t i = 0; i < last; i++) {
        if (w[i] > 0.0f)
            r -= (double)w[i];
        if (r < 0.0)
            return i;
    }
    return last;
}

int32_t lc_sampler_sample_spec(struct lc_sampler *s, const float *logits, int32_t x,
                               const float *q)
{
    if (s->p.temp <= 0.0f)   /* greedy: the choice does not depend on the guess */
        return lc_sampler_sample(s, logits);
    if (x < 0 || x >= s->n_vocab || (q && !(q[x] > 0.0f)))
        return lc_sampler_sample(s, logits);   /* x could not have been drawn from q */
    float *p = s->pbuf;
    lc_sampler_dist(s, logits, NULL, 0, p);
    const double qx = q ? (double)q[x] : 1.0;
    /* accept x with probability min(1, p(x) / q(x)) */
    if (rng_uniform(s) * qx < (double)p[x])
        return x;
    /* otherwise a draw from the residual max(0, p - q), normalised by lc_sampler_draw; for a
     * point mass q that is p without x */
    if (q) {
        for (int32_t i = 0; i < s->n_vocab; i++)
            p[i] = p[i] > q[i] ? p[i] - q[i] : 0.0f;
    } else {
        p[x] = 0.0f;
    }
    const int32_t y = lc_sampler_draw(s, p);
    return y >= 0 ? y : lc_sampler_sample(s, logits);   /* no residual mass left: rounding */
}
