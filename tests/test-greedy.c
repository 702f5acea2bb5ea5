/*
 * test-greedy.c - agree with llama.cpp on real models (../shared/reference/greedy).
 *
 * For each reference file given on the command line (or every stories260K* and supported
 * synth-small* file): the prompt tokenizes to prompt_ids; at generation steps 0-2 the ten
 * largest logits are the same ids with values within tolerance; greedy decoding for n_predict
 * tokens gives gen_ids exactly.  LLAMACHAT_ISA selects the kernels (the test runs per ISA).
 */
#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "llm/arch/kernels.h"
#include "llm/context.h"
#include "llm/model.h"
#include "llm/tokenizer.h"
#include "testutil.h"

struct ref {
    char model[256];
    char *prompt;
    int n_predict;
    int top_id[3][10];
    float top_val[3][10];
    int32_t prompt_ids[512];
    int n_prompt_ids;
    int32_t gen_ids[1024];
    int n_gen_ids;
};

static int n_repacked; /* references run with x16 weights (repack.h) */

static int parse_ids(const char *s, int32_t *out, int cap)
{
    int n = 0;
    char *end;
    for (;;) {
        long v = strtol(s, &end, 10);
        if (end == s || n >= cap)
            break;
        out[n++] = (int32_t)v;
        s = end;
    }
    return n;
}

static int load_ref(const char *path, struct ref *r)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return -1;
    memset(r, 0, sizeof(*r));
    char *line = NULL;
    size_t cap = 0;
    ssize_t len;
    while ((len = getline(&line, &cap, f)) > 0) {
        if (line[len - 1] == '\n')
            line[--len] = 0;
        if (!strncmp(line, "model: ", 7))
            snprintf(r->model, sizeof(r->model), "%s", line + 7);
        else if (!strncmp(line, "prompt: ", 8))
            r->prompt = strdup(line + 8);
        else if (!strncmp(line, "n_predict: ", 11))
            r->n_predict = atoi(line + 11);
        else if (!strncmp(line, "top10_step", 10)) {
            int step = line[10] - '0';
            const char *s = strchr(line, ':') + 1;
            for (int i = 0; i < 10 && step >= 0 && step < 3; i++) {
                char *end;
                r->top_id[step][i] = (int)strtol(s, &end, 10);
                r->top_val[step][i] = strtof(end + 1, &end);
                s = end;
            }
        } else if (!strncmp(line, "prompt_ids: ", 12))
            r->n_prompt_ids = parse_ids(line + 12, r->prompt_ids, 512);
        else if (!strncmp(line, "gen_ids: ", 9))
            r->n_gen_ids = parse_ids(line + 9, r->gen_ids, 1024);
        else if (!strncmp(line, "gen_text: ", 10))
            break;
    }
    free(line);
    fclose(f);
    return r->prompt && r->n_prompt_ids > 0 ? 0 : -1;
}

/* Indices of the 10 largest logits, descending. */
static void top10(const float *l, int n, int *ids)
{
    for (int k = 0; k < 10; k++) {
        int best = -1;
        for (int i = 0; i < n; i++) {
            bool used = false;
            for (int j = 0; j < k; j++)
                used |= ids[j] == i;
            if (!used && (best < 0 || l[i] > l[best]))
                best = i;
        }
        ids[k] = best;
    }
}

static void run_one(const char *path, double tol)
{
    struct ref r;
    if (load_ref(path, &r)) {
        CHECK(0, "cannot parse %s", path);
        return;
    }
    char mpath[512], rel[300];
    snprintf(rel, sizeof(rel), "models/%s", r.model);
    tu_shared(rel, mpath, sizeof(mpath));
    char *err = NULL;
    struct lc_model *m = lc_model_load(mpath, false, &err);
    CHECK(m != NULL, "%s: %s", mpath, err ? err : "?");
    free(err);
    err = NULL;
    if (!m) {
        free(r.prompt);
        return;
    }
    /* the layout under test: with kernels that have x16 ones, the Q4_1 / Q4_0 / Q6_K layer
     * matrices (all with a multiple of 16 rows in these models) are repacked unless
     * LLAMACHAT_REPACK=0 (test-greedy-isa.sh runs both) */
    {
        const struct lc_weight *wq = &m->layers[0].wq;
        const char *rp = getenv("LLAMACHAT_REPACK");
        const unsigned native = rp && !strcmp(rp, "1") ? ~0u : lc_kernels()->x16_native;
        const bool want = (native >> wq->type & 1u) && !(rp && !strcmp(rp, "0")) &&
                          (wq->type != LC_TYPE_Q4_0 || wq->q4_0x8) && wq->ne[1] % 16 == 0;
        CHECK(wq->x16 == want, "%s: blk.0.attn_q.weight (%s) %s repacked", r.model,
              lc_type_name(wq->type), wq->x16 ? "was" : "was not");
        if (wq->x16)
            n_repacked++;
    }
    int32_t toks[2048];
    int32_t n = lc_tokenize(m->vocab, r.prompt, strlen(r.prompt), lc_vocab_add_bos(m->vocab), false,
                            toks, 2048);
    bool same = n == r.n_prompt_ids;
    for (int i = 0; same && i < n; i++)
        same = toks[i] == r.prompt_ids[i];
    CHECK(same, "%s: prompt_ids differ (got %d tokens, want %d)", path, n, r.n_prompt_ids);

    struct lc_context_params cp = lc_context_default_params();
    cp.n_ctx = 512;
    cp.n_threads = 2;
    struct lc_context *c = lc_context_new(m, &cp, &err);
    CHECK(c != NULL, "context: %s", err ? err : "?");
    free(err);
    err = NULL;
    if (!c) {
        lc_model_free(m);
        free(r.prompt);
        return;
    }
    int rc = lc_context_decode(c, r.prompt_ids, r.n_prompt_ids, 0, false, &err);
    CHECK(rc == 0, "decode: %s", err ? err : "?");
    free(err);
    err = NULL;
    int n_gen = 0, pos = r.n_prompt_ids, first_diff = -1;
    double max_dev = 0;
    for (int step = 0; rc == 0 && step < r.n_predict; step++) {
        const float *l = lc_context_logits(c, -1);
        if (step < 3) {
            int ids[10];
            top10(l, m->hp.n_vocab, ids);
            for (int k = 0; k < 10; k++) {
                CHECK(ids[k] == r.top_id[step][k], "%s: step %d top-%d id %d, want %d", path,
                      step, k, ids[k], r.top_id[step][k]);
                const double want = r.top_val[step][k];
                const double got = l[r.top_id[step][k]];
                const double dev = fabs(got - want);
                if (dev > max_dev)
                    max_dev = dev;
                /* stories: within 1e-3 absolute (issue 2); synth-small: 1e-3 relative (issue 5) */
                const double lim = strncmp(r.model, "synth", 5) == 0 ? tol * fabs(want) : tol;
                CHECK(dev <= lim, "%s: step %d logit[%d] = %.5f, want %.5f",
                      path, step, r.top_id[step][k], got, want);
            }
        }
        int32_t best = 0;
        for (int i = 1; i < m->hp.n_vocab; i++)
            if (l[i] > l[best])
                best = i;
        if (lc_vocab_is_eog(m->vocab, best))
            break;
        n_gen++;
        if (first_diff < 0 && (n_gen > r.n_gen_ids || best != r.gen_ids[n_gen - 1]))
            first_diff = n_gen - 1;
        rc = lc_context_decode(c, &best, 1, pos++, false, &err);
        CHECK(rc == 0, "decode step %d: %s", step, err ? err : "?");
        free(err);
        err = NULL;
    }
    CHECK(n_gen == r.n_gen_ids && first_diff < 0,
          "%s: gen_ids differ: got %d tokens, want %d, first difference at %d", path, n_gen,
          r.n_gen_ids, first_diff);
    fprintf(stderr, "%s [%s]: %d tokens, max top-10 logit deviation %.2e\n", r.model,
            lc_kernels()->isa, n_gen, max_dev);
    lc_context_free(c);
    lc_model_free(m);
    free(r.prompt);
}

int main(int argc, char **argv)
{
    const double tol = 1e-3;
    if (argc > 1) {
        for (int i = 1; i < argc; i++)
            run_one(argv[i], tol);
        return tu_finish("test-greedy");
    }
    char dir[512];
    tu_shared("reference/greedy", dir, sizeof(dir));
    DIR *d = opendir(dir);
    if (!d) {
        fprintf(stderr, "no reference directory %s\n", dir);
        return 77;
    }
    /* every reference file of the models llamachat computes (not the q4_k/q5 synth-small) */
    static const char *prefixes[] = {"stories260K.", "stories260K-ff192-f32", "stories260K-ff192-f16",
                                     "stories260K-ff192-q8_0", "stories260K-ff192-q4_1",
                                     "stories260K-ff192-q4_0",
                                     "synth-small-q4_1", "synth-small-q4_0", "synth-small-q8_0",
                                     "synth-small-q6_k", "synth-small-f16"};
    char *names[256];
    int nn = 0;
    struct dirent *e;
    while ((e = readdir(d)) && nn < 256) {
        for (size_t i = 0; i < sizeof(prefixes) / sizeof(prefixes[0]); i++)
            if (!strncmp(e->d_name, prefixes[i], strlen(prefixes[i]))) {
                names[nn++] = strdup(e->d_name);
                break;
            }
    }
    closedir(d);
    for (int i = 0; i < nn; i++) {
        char p[1024];
        snprintf(p, sizeof(p), "%s/%s", dir, names[i]);
        run_one(p, tol);
        free(names[i]);
    }
    fprintf(stderr, "test-greedy: %d of %d references with repacked (x16) weights\n", n_repacked, nn);
    return tu_finish("test-greedy");
}
