/*
 * test-repack.c - the x16 layout (repack.h) end to end: a model loaded with its Q4_1 / Q4_0 /
 * Q6_K / Q4_K / Q5_K / Q5_1 / Q8_0 matrices repacked gives exactly the logits (memcmp) of the same model in ggml's layout,
 * for a prompt batch (the GEMM path, every token's logits) and single-token steps (the GEMV
 * path), with 1 and 3 threads (row groups split between threads), with every ISA this CPU has
 * (LLAMACHAT_REPACK=1 repacks for the scalar and AVX2 kernels too, which then use the scalar
 * x16 reference).  Also: what was repacked (the layer matrices and an untied output; never
 * token_embd), and that rows of a repacked weight are refused by lc_weight_get_row.
 * And the prompt batches of Q5_0, IQ4_NL and Q3_K weights, recoded into Q8_0 / Q6_K and
 * repacked on the fly, and of IQ4_XS and Q2_K weights (their tiled GEMMs) (check_recoded),
 * against the scalar kernels.
 */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "llm/arch/kernels.h"
#include "llm/context.h"
#include "llm/model.h"
#include "llm/repack.h"
#include "testutil.h"

enum { N_PROMPT = 12, N_STEPS = 3, MAX_LOGITS = (N_PROMPT + N_STEPS) * 32000 };

/* All logits of a 12-token prompt batch then 3 single-token steps; NULL on failure. */
static float *run(const struct lc_model *m, int n_threads)
{
    struct lc_context_params cp = lc_context_default_params();
    cp.n_ctx = 64;
    cp.n_threads = n_threads;
    char *err = NULL;
    struct lc_context *c = lc_context_new(m, &cp, &err);
    CHECK(c != NULL, "context: %s", err ? err : "?");
    free(err);
    if (!c)
        return NULL;
    const int nv = m->hp.n_vocab;
    float *out = malloc((size_t)(N_PROMPT + N_STEPS) * (size_t)nv * sizeof(float));
    int32_t toks[N_PROMPT];
    for (int i = 0; i < N_PROMPT; i++)
        toks[i] = (int32_t)((i * 37 + 5) % nv);
    int ok = lc_context_decode(c, toks, N_PROMPT, 0, true, &err) == 0;
    for (int i = 0; ok && i < N_PROMPT; i++)
        memcpy(out + (size_t)i * nv, lc_context_logits(c, i), (size_t)nv * sizeof(float));
    for (int s = 0; ok && s < N_STEPS; s++) {
        const int32_t t = (int32_t)((s * 101 + 7) % nv);
        ok = lc_context_decode(c, &t, 1, N_PROMPT + s, false, &err) == 0;
        if (ok)
            memcpy(out + (size_t)(N_PROMPT + s) * nv, lc_context_logits(c, -1),
                   (size_t)nv * sizeof(float));
    }
    CHECK(ok, "decode: %s", err ? err : "?");
    free(err);
    lc_context_free(c);
    if (!ok) {
        free(out);
        return NULL;
    }
    return out;
}

static struct lc_model *load(const char *path, const char *repack)
{
    setenv("LLAMACHAT_REPACK", repack, 1);
    char *err = NULL;
    struct lc_model *m = lc_model_load(path, false, &err);
    CHECK(m != NULL, "%s: %s", path, err ? err : "?");
    free(err);
    return m;
}

static void check_model(const char *name, const char *isa)
{
    char path[512], rel[300];
    snprintf(rel, sizeof(rel), "models/%s", name);
    tu_shared(rel, path, sizeof(path));
    struct lc_model *ref = load(path, "0"), *x16 = load(path, "1");
    if (!ref || !x16) {
        lc_model_free(ref);
        lc_model_free(x16);
        return;
    }
    /* the layout: every layer matrix of a type with an x16 layout (Q4_0 only as q4_0x8) and a
     * multiple of 16 rows is repacked (Q4_1, Q4_0 and Q6_K models: all of them; the K-quant
     * mixes also hold Q5_0 / Q5_1 fallbacks), and no weight of the reference is */
    int n_x16 = 0, n_mat = 0;
    for (int il = 0; il < x16->hp.n_layer; il++) {
        const struct lc_layer *L = &x16->layers[il], *R = &ref->layers[il];
        const struct lc_weight *ws[] = {&L->wq, &L->wk, &L->wv, &L->wo, &L->ffn_gate, &L->ffn_up, &L->ffn_down};
        const struct lc_weight *rs[] = {&R->wq, &R->wk, &R->wv, &R->wo, &R->ffn_gate, &R->ffn_up, &R->ffn_down};
        for (int k = 0; k < 7; k++) {
            n_mat += lc_x16_type(ws[k]->type) && ws[k]->ne[1] % 16 == 0 &&
                     (ws[k]->type != LC_TYPE_Q4_0 || ws[k]->q4_0x8);
            n_x16 += ws[k]->x16;
            CHECK(!rs[k]->x16, "%s: LLAMACHAT_REPACK=0 repacked layer %d matrix %d", name, il, k);
        }
    }
    CHECK(n_x16 == n_mat, "%s (%s): %d of %d layer matrices repacked", name, isa, n_x16, n_mat);
    CHECK(!x16->tok_embd.x16, "%s: token_embd was repacked", name);
    const bool tied = x16->output.data == x16->tok_embd.data;
    const bool out_x16 = !tied && x16->output.ne[1] % 16 == 0 && lc_x16_type(x16->output.type) &&
                         (x16->output.type != LC_TYPE_Q4_0 || x16->output.q4_0x8);
    CHECK(x16->output.x16 == out_x16, "%s: output (%s, %s) %s repacked", name,
          lc_type_name(x16->output.type), tied ? "tied" : "untied",
          x16->output.x16 ? "was" : "was not");
    float row[8192];
    if (x16->layers[0].wq.x16 && x16->layers[0].wq.ne[0] <= 8192)
        CHECK(lc_weight_get_row(&x16->layers[0].wq, 0, row) == -1,
              "%s: lc_weight_get_row read a row of a repacked weight", name);

    float *want = run(ref, 1);
    const size_t bytes = (size_t)(N_PROMPT + N_STEPS) * (size_t)ref->hp.n_vocab * sizeof(float);
    static const int threads[] = {1, 3};
    for (int ti = 0; ti < 2 && want; ti++) {
        float *got = run(x16, threads[ti]);
        if (!got)
            continue;
        size_t first = bytes;
        for (size_t i = 0; i < bytes / sizeof(float); i++)
            if (memcmp(got + i, want + i, sizeof(float)) != 0) {
                first = i;
                break;
            }
        CHECK(first == bytes, "%s (%s, %d threads): x16 logits differ from ggml layout's at %zu "
              "(token %zu): %.9g vs %.9g", name, isa, threads[ti], first,
              first / (size_t)ref->hp.n_vocab, first < bytes ? (double)got[first] : 0.0,
              first < bytes ? (double)want[first] : 0.0);
        free(got);
    }
    free(want);
    lc_model_free(ref);
    lc_model_free(x16);
}

/*
 * Prompt batches of Q5_0, IQ4_NL and Q3_K weights recoded into Q8_0 / Q6_K blocks and multiplied
 * by that type's x16 GEMM (context.c matmul_recoded, on the ISAs with x16 kernels): every
 * logit equals the scalar kernels' (which never recode), with 1 and 3 threads (the rows past a
 * whole group of 16 in a thread's chunk by the type's own kernels).  The Q3_K model is made
 * here (llamachat-quantize q3_k_m of synth-small-f16: 256-wide rows, real Q3_K matrices): no
 * shared model has Q3_K matrices.  So are an IQ4_XS and a Q2_K one (iq4_xs, q2_k: real IQ4_XS
 * and Q2_K matrices), whose batches take x86-kquants.h's gemm_iq4_xs / gemm_q2_K tiles (on
 * AVX-512 groups of 16 rows expanded, gemm_iq4_xs_x16 / gemm_q2_K_x16, the rest by the tiles).
 */
enum { N_RECODED = 5 };
static char recoded_path[N_RECODED][512];
static float *recoded_want[N_RECODED];

static void recoded_models(void)
{
    tu_shared("models/synth-small-q5_0.gguf", recoded_path[0], sizeof(recoded_path[0]));
    tu_shared("models/tinystories-656k/TinyStories-656K-IQ4_NL.gguf", recoded_path[1],
              sizeof(recoded_path[1]));
    char f16[512], cmd[2048];
    tu_shared("models/synth-small-f16.gguf", f16, sizeof(f16));
    static const char *const made[] = {"q3_k_m", "iq4_xs", "q2_k"}; /* IQ4_XS, Q2_K: tiles */
    for (int k = 2; k < N_RECODED; k++) {
        snprintf(recoded_path[k], sizeof(recoded_path[k]), "%s/test-repack-%s.%d.gguf",
                 getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp", made[k - 2], (int)getpid());
        const char *b = getenv("LC_BUILDDIR") ? getenv("LC_BUILDDIR") : ".";
        snprintf(cmd, sizeof(cmd), "'%s/llamachat-quantize' '%s' '%s' %s >/dev/null 2>&1", b,
                 f16, recoded_path[k], made[k - 2]);
        if (access(f16, R_OK) != 0 || system(cmd) != 0) {
            fprintf(stderr, "test-repack: no %s model (%s)\n", made[k - 2], cmd);
            recoded_path[k][0] = '\0';
        }
    }
}

static void check_recoded(const char *isa)
{
    for (int k = 0; k < N_RECODED; k++) {
        if (!recoded_path[k][0] || access(recoded_path[k], R_OK) != 0)
            continue;
        struct lc_model *m = load(recoded_path[k], "auto");
        if (!m)
            continue;
        const size_t bytes = (size_t)(N_PROMPT + N_STEPS) * (size_t)m->hp.n_vocab * sizeof(float);
        if (!recoded_want[k]) {   /* the scalar kernels' logits: the reference */
            recoded_want[k] = run(m, 1);
            lc_model_free(m);
            continue;
        }
        static const int threads[] = {1, 3};
        for (int ti = 0; ti < 2; ti++) {
            float *got = run(m, threads[ti]);
            if (!got)
                continue;
            size_t first = bytes;
            for (size_t i = 0; i < bytes / sizeof(float); i++)
                if (memcmp(got + i, recoded_want[k] + i, sizeof(float)) != 0) {
                    first = i;
                    break;
                }
            CHECK(first == bytes, "%s (%s, %d threads): logits differ from the scalar kernels' "
                  "at %zu (token %zu): %.9g vs %.9g", recoded_path[k], isa, threads[ti], first,
                  first / (size_t)m->hp.n_vocab, first < bytes ? (double)got[first] : 0.0,
                  first < bytes ? (double)recoded_want[k][first] : 0.0);
            free(got);
        }
        lc_model_free(m);
    }
}

int main(void)
{
    static const char *const models[] = {
        "stories260K-ff192-q4_1.gguf", "stories260K-ff192-q4_0.gguf", "synth-small-q4_1.gguf",
        "synth-small-q4_0.gguf",       "synth-small-q6_k.gguf",       "synth-small-q4_k_m.gguf",
        "synth-small-q5_k_m.gguf",     "synth-small-q5_1.gguf",       "synth-small-q8_0.gguf",
        "stories260K-ff192-q8_0.gguf",
    };
    static const char *const isas[] = {"scalar", "avx2", "avx512", "neon"};
    char probe[512];
    tu_shared("models/stories260K-ff192-q4_1.gguf", probe, sizeof(probe));
    FILE *f = fopen(probe, "rb");
    if (!f) {
        fprintf(stderr, "test-repack: no %s\n", probe);
        return 77;
    }
    fclose(f);
    recoded_models();
    for (int i = 0; i < 4; i++) {
        if (!lc_kernels_isa_available(isas[i]))
            continue;
        CHECK(lc_kernels_select(isas[i], NULL) == 0, "select %s", isas[i]);
        for (size_t k = 0; k < sizeof models / sizeof models[0]; k++)
            check_model(models[k], isas[i]);
        check_recoded(isas[i]);
        fprintf(stderr, "test-repack: %s: %zu models compared\n", isas[i],
                sizeof models / sizeof models[0]);
    }
    for (int k = 0; k < N_RECODED; k++)
        free(recoded_want[k]);
    for (int k = 2; k < N_RECODED; k++)
        if (recoded_path[k][0])
            unlink(recoded_path[k]);
    return tu_finish("test-repack");
}
