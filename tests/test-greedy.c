/*
 * test-greedy.c - agree with llama.cpp on real models (../shared/reference/greedy).
 *
 * For each reference file given on the command line (or every stories260K* and supported
 * synth-small* file): the prompt tokenizes to prompt_ids; at generation steps 0-2 the ten
 * largest logits are the same ids with values within tolerance; greedy decoding for n_predict
 * tokens gives gen_ids exactly.  LLAMACHAT_ISA selects the kernels (the test runs per ISA).
 *
 * --arch: every reference of ../shared/reference/arch (six architectures, three types, two
 * prompts).  llama3, qwen2, phi3 and gemma2 were made by b4748 in its AVX-512 order, as the
 * references above: ids exactly, top-10 logits within the printed decimals (2e-5).
 *
 * qwen3 and gemma3 come from Debian's llama.cpp 0.7.0, which differs from b4748 in float order
 * only (found by comparing every intermediate tensor with its own, dumped through its eval
 * callback): it is built without llamafile, so batches are multiplied row by row in vec_dot's
 * order rather than tinyBLAS's, and it pads the KV cells attended over to 256 rather than 32.
 * With those two (lc_context_params.no_tinyblas, kv_pad) every tensor and logit is bit-exact
 * with 0.7.0's AVX-512 build: tests/data/arch-avx512 holds its references (same prompts, made
 * with its libggml-cpu-skylakex backend), checked like b4748's, ids exactly and top-10 within
 * 2e-5.  The shared references were made by 0.7.0's AVX2 backend, whose f16/f32 vec_dot,
 * softmax and SwiGLU work in 8 lanes (and its exp differs from the AVX-512 one in its last
 * steps); the two builds of 0.7.0 are themselves apart by up to 3.3e-2 in gemma3's F16 logits
 * and their ids part in the gemma3 Q4_1 texts.  lc_context_params.order = LC_ORDER_GGML_AVX2
 * emulates that order on every ISA (src/llm/arch/ggml-order-avx2.h), and with it the shared
 * qwen3 and gemma3 references are checked like b4748's: ids exactly, top-10 within 2e-5.
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

/*
 * --fast-math: the Q4_1, Q8_0, Q4_K_M and Q5_K_M references with lc_context_params.fast_math,
 * whose prompt batches take the faster float order where a kernel has one (kernels.h:
 * gemm_x16_fast): not llama.cpp's bits.  The products themselves are within float rounding of
 * the reference order (test-kernels bounds them), but each layer's input is quantized again
 * (Q8_1, Q8_0 or Q8_K), where a rounding moved by one ulp can move an activation by a whole int8
 * step: the logits of these small models then move by up to ~2.5 % (2026-12-03: max 0.40 on
 * logits of 16-30, the gemma2/gemma3 and synth-small random-weight models; about 0.1 for
 * stories260K and qwen3; many references stay within the printed decimals; 15 of the 58 texts
 * part in greedy ids).  Two llama.cpp builds of one version spread so too (0.7.0's AVX2 and
 * AVX-512 backends part in gemma3 Q4_1's ids), and perplexity does not move (tales.txt, -c 128:
 * stories260K-ff192-q4_1 4.2150 -> 4.2084, TinyStories-656K-Q4_1 108.6761 -> 108.6302,
 * TinyStories-656K-Q8_0 104.8507 -> 104.8224), so the check here is a gross one --
 * a wrong row or column moves logits by whole units -- and test-kernels is the precise one:
 * the top-10 logits of steps 0-2 within FM_TOL of the largest reference logit (absolute,
 * added to the rule's), until the greedy ids part (reported, not a failure), and the
 * reference's top-1 id within 2 FM_TOL of the top.
 */
static bool fast_math;
static double fm_max_dev; /* the largest deviation seen in --fast-math */
static int fm_parted;     /* references whose greedy ids parted */
#define FM_TOL 0.05 /* of the step's largest reference logit (at least 1) */

/* How closely a reference must be followed. */
struct rule {
    double tol;           /* top-10 logits at steps 0-2: absolute deviation */
    bool rel;             /* tol is relative to the logit (synth-small) */
    bool new_order;       /* made by Debian's llama.cpp 0.7.0: its float order (no tinyBLAS,
                             KV cells padded to 256; lc_context_params) */
    bool avx2_order;      /* and its AVX2 backend's order (LC_ORDER_GGML_AVX2) */
};

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

static void run_one(const char *path, const struct rule *rule)
{
    struct ref r;
    if (load_ref(path, &r)) {
        CHECK(0, "cannot parse %s", path);
        return;
    }
    char mpath[512], rel[300];
    /* the debug references of reference/arch name their model without the arch/ directory */
    snprintf(rel, sizeof(rel), "models/%s%s", strstr(path, "reference/arch/") && !strchr(r.model, '/') ? "arch/" : "", r.model);
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
    cp.fast_math = fast_math;
    if (rule->new_order) {
        cp.no_tinyblas = true;
        cp.kv_pad = 256;
        if (rule->avx2_order)
            cp.order = LC_ORDER_GGML_AVX2;
    }
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
        if (step < 3 && fast_math) {
            /* after the ids part the context is not the reference's: no more logit checks */
            for (int k = 0; first_diff < 0 && k < 10; k++) {
                const double want = r.top_val[step][k], got = l[r.top_id[step][k]];
                const double dev = fabs(got - want);
                if (dev > max_dev)
                    max_dev = dev;
                const double lim = (rule->rel ? rule->tol * fabs(want) : rule->tol) +
                                   FM_TOL * fmax(1.0, fabs((double)r.top_val[step][0]));
                CHECK(dev <= lim, "%s (fast-math): step %d logit[%d] = %.5f, want %.5f", path,
                      step, r.top_id[step][k], got, want);
            }
            int ids[10];
            top10(l, m->hp.n_vocab, ids);
            CHECK(first_diff >= 0 || (double)l[r.top_id[step][0]] >=
                                         (double)l[ids[0]] -
                                             2 * FM_TOL * fmax(1.0, fabs((double)r.top_val[step][0])),
                  "%s (fast-math): step %d top id %d (%.5f), the reference's %d has %.5f", path,
                  step, ids[0], (double)l[ids[0]], r.top_id[step][0],
                  (double)l[r.top_id[step][0]]);
        } else if (step < 3) {
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
                const double lim = rule->rel ? rule->tol * fabs(want) : rule->tol;
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
    if (fast_math) {
        if (max_dev > fm_max_dev)
            fm_max_dev = max_dev;
        if (first_diff >= 0 || n_gen != r.n_gen_ids) {
            fm_parted++;
            fprintf(stderr, "%s (fast-math): greedy ids part from the reference at %d\n", path,
                    first_diff >= 0 ? first_diff : n_gen);
        }
    } else {
        CHECK(n_gen == r.n_gen_ids && first_diff < 0,
              "%s: gen_ids differ: got %d tokens, want %d, first difference at %d", path, n_gen,
              r.n_gen_ids, first_diff);
    }
    fprintf(stderr, "%s [%s%s]: %d tokens, max top-10 logit deviation %.2e\n", r.model,
            lc_kernels()->isa, fast_math ? " fast-math" : "", n_gen, max_dev);
    lc_context_free(c);
    lc_model_free(m);
    free(r.prompt);
}

/* The rule for a reference file (by its name). */
static struct rule rule_for(const char *path)
{
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    /* stories: within 1e-3 absolute (issue 2); synth-small: 1e-3 relative (issue 5) */
    struct rule r = {1e-3, strncmp(base, "synth", 5) == 0, false, false};
    /* the quantized models of issue 13 (tinystories-656k, synth-small q5_x and q4/q5_k_m):
     * within the 5 printed decimals (half a unit of the last one, plus float rounding) */
    if (strstr(base, "tinystories-656k") ? !strstr(base, "-f16.")
                                         : strstr(base, "synth-small-q5_") || strstr(base, "_k_m.")) {
        r.tol = 1e-5;
        r.rel = false;
    }
    if (strstr(path, "data/arch-avx512/")) { /* llama.cpp 0.7.0's AVX-512 order, emulated */
        r.tol = 2e-5;
        r.rel = false;
        r.new_order = true;
        return r;
    }
    if (!strstr(path, "reference/arch/"))
        return r;
    r.tol = 2e-5; /* b4748, AVX-512 order: within the printed decimals */
    if (!strncmp(base, "qwen3", 5) || !strncmp(base, "gemma3", 6)) {
        /* llama.cpp 0.7.0's AVX2 backend, emulated: within the printed decimals, ids exactly */
        r.new_order = true;
        r.avx2_order = true;
    }
    return r;
}

/* Every reference of reference/arch (not the avx2-native or debug ones). */
static int run_arch(void)
{
    char dir[512];
    tu_shared("reference/arch", dir, sizeof(dir));
    DIR *d = opendir(dir);
    if (!d) {
        fprintf(stderr, "no reference directory %s\n", dir);
        return 77;
    }
    char *names[256];
    int nn = 0;
    struct dirent *e;
    while ((e = readdir(d)) && nn < 256) {
        const size_t len = strlen(e->d_name);
        if (len > 7 && !strcmp(e->d_name + len - 7, ".p0.txt") ? true
            : len > 7 && !strcmp(e->d_name + len - 7, ".p1.txt"))
            names[nn++] = strdup(e->d_name);
    }
    closedir(d);
    /* and the 40-token debug prompts (3 steps) */
    static const char *const debug[] = {"llama3", "qwen2", "phi3", "gemma2", "qwen3", "gemma3"};
    for (size_t i = 0; i < sizeof debug / sizeof debug[0] && nn < 256; i++)
        if (asprintf(&names[nn], "debug/%s-f16.d40.txt", debug[i]) > 0)
            nn++;
    for (int i = 0; i < nn; i++) {
        char p[1024];
        snprintf(p, sizeof(p), "%s/%s", dir, names[i]);
        const struct rule rule = rule_for(p);
        run_one(p, &rule);
        free(names[i]);
    }
    /* and llama.cpp 0.7.0's AVX-512 references of qwen3 and gemma3 (tests/data/arch-avx512) */
    const char *src = getenv("LC_SRCDIR");
    static const char *const newer[] = {"qwen3-f16", "qwen3-q4_1", "qwen3-q8_0",
                                        "gemma3-f16", "gemma3-q4_1", "gemma3-q8_0"};
    int n_newer = 0;
    for (size_t i = 0; i < sizeof newer / sizeof newer[0]; i++)
        for (int pi = 0; pi < 3; pi++) {
            if (pi == 2 && !strstr(newer[i], "f16"))
                continue;
            char p[1024];
            snprintf(p, sizeof p, "%s/tests/data/arch-avx512/%s.%s.txt", src ? src : ".", newer[i],
                     pi == 0 ? "p0" : pi == 1 ? "p1" : "d40");
            const struct rule rule = rule_for(p);
            run_one(p, &rule);
            n_newer++;
        }
    fprintf(stderr, "test-greedy --arch: %d references and %d of llama.cpp 0.7.0 (AVX-512), %d "
            "with repacked (x16) weights\n", nn, n_newer, n_repacked);
    return nn > 0 ? tu_finish("test-greedy --arch") : 77;
}

/* --fast-math: every Q4_1, Q8_0, Q4_K_M and Q5_K_M reference of reference/greedy and
 * reference/arch (the types with a gemm_x16_fast kernel) */
static int run_fast_math(void)
{
    static const char *const dirs[] = {"reference/greedy", "reference/arch"};
    int nn = 0;
    for (int di = 0; di < 2; di++) {
        char dir[512];
        tu_shared(dirs[di], dir, sizeof(dir));
        DIR *d = opendir(dir);
        if (!d)
            continue;
        struct dirent *e;
        while ((e = readdir(d))) {
            const size_t len = strlen(e->d_name);
            if ((!strstr(e->d_name, "q4_1.p") && !strstr(e->d_name, "q8_0.p") &&
                 !strstr(e->d_name, "q4_k_m.p") && !strstr(e->d_name, "q5_k_m.p")) ||
                len < 4 || strcmp(e->d_name + len - 4, ".txt"))
                continue;
            char p[1024];
            snprintf(p, sizeof(p), "%s/%s", dir, e->d_name);
            const struct rule rule = rule_for(p);
            run_one(p, &rule);
            nn++;
        }
        closedir(d);
    }
    const struct lc_kernels *K = lc_kernels();
    /* on AVX-512 the fast kernel must exist and be used (repacked weights), or this checked
     * the reference order against itself */
    if (!strcmp(K->isa, "avx512")) {
        CHECK(K->gemm_x16_fast[LC_TYPE_Q4_1] != NULL, "avx512: no --fast-math Q4_1 kernel");
        CHECK(K->gemm_x16_fast[LC_TYPE_Q8_0] != NULL, "avx512: no --fast-math Q8_0 kernel");
        CHECK(K->gemm_x16_fast[LC_TYPE_Q4_K] != NULL, "avx512: no --fast-math Q4_K kernel");
        CHECK(K->gemm_x16_fast[LC_TYPE_Q5_K] != NULL, "avx512: no --fast-math Q5_K kernel");
        CHECK(nn == 0 || n_repacked > 0, "--fast-math: no reference ran with repacked weights");
    }
    fprintf(stderr, "test-greedy --fast-math [%s, %s]: %d Q4_1, Q8_0, Q4_K_M and Q5_K_M references, %d with repacked (x16) "
            "weights, max top-10 logit deviation %.2e (tolerance + %.2f of the top logit), %d parted in greedy ids\n",
            K->isa, K->gemm_x16_fast[LC_TYPE_Q4_1] ? "fast Q4_1, Q8_0, Q4_K, Q5_K kernels" : "no fast kernel: reference order",
            nn, n_repacked, fm_max_dev, FM_TOL, fm_parted);
    return nn > 0 ? tu_finish("test-greedy --fast-math") : 77;
}

int main(int argc, char **argv)
{
    if (argc > 1 && !strcmp(argv[1], "--arch"))
        return run_arch();
    if (argc > 1 && !strcmp(argv[1], "--fast-math")) {
        fast_math = true;
        return run_fast_math();
    }
    if (argc > 1) {
        for (int i = 1; i < argc; i++) {
            const struct rule rule = rule_for(argv[i]);
            run_one(argv[i], &rule);
        }
        return tu_finish("test-greedy");
    }
    char dir[512];
    tu_shared("reference/greedy", dir, sizeof(dir));
    DIR *d = opendir(dir);
    if (!d) {
        fprintf(stderr, "no reference directory %s\n", dir);
        return 77;
    }
    /* every reference file of the models llamachat computes */
    static const char *prefixes[] = {"stories260K.", "stories260K-ff192-f32", "stories260K-ff192-f16",
                                     "stories260K-ff192-q8_0", "stories260K-ff192-q4_1",
                                     "stories260K-ff192-q4_0",
                                     "synth-small-q4_1", "synth-small-q4_0", "synth-small-q8_0",
                                     "synth-small-q6_k", "synth-small-f16",
                                     "synth-small-q5_0", "synth-small-q5_1", "synth-small-q4_k_m",
                                     "synth-small-q5_k_m", "tinystories-656k-"};
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
        const struct rule rule = rule_for(p);
        run_one(p, &rule);
        free(names[i]);
    }
    fprintf(stderr, "test-greedy: %d of %d references with repacked (x16) weights\n", n_repacked, nn);
    return tu_finish("test-greedy");
}
