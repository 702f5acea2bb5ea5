/*
 * test-context-shift.c - after lc_context_shift, each kept key equals the key computed at its
 * new position, for every RoPE this pass applies: adjacent pairs with Llama-3 frequency
 * factors (llama3), NEOX halves (qwen2, phi3), NEOX on per-head normed q/k (qwen3), window
 * layers (gemma2) and per-layer bases with a linearly scaled global layer (gemma3: base 1e4 on
 * layers 0-4, 1e6 with scale 1/8 on layer 5).
 *
 * For each model of ../shared/models/arch (F16 weights, F32 KV cache so that no f16 rounding
 * of the cache hides a difference): N tokens are evaluated, d of them after the first `keep`
 * are discarded (lc_context_shift); a fresh context evaluates the kept tokens alone, at
 * positions 0 .. N-d-1.  A key depends on the tokens before it through attention; so that it
 * depends only on its own token and position, the test points every attn_output at zeros
 * (the attention block adds nothing to the residual stream: x = embedding + FFNs).  Then each
 * kept key of every layer must be the fresh one up to the rounding of a rotation by -d on top
 * of one by p (measured: at most 1.7e-5 on keys of magnitude up to 9.5); a wrong angle on one layer moves
 * that layer's keys by O(1).  The same with fused attention (-fa), whose cache is head-major.
 */
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "llm/context.h"
#include "llm/model.h"
#include "testutil.h"

#define N_PROMPT 48
#define KEEP 4
#define DISCARD 20

static struct lc_context *new_ctx(struct lc_model *m, bool fa)
{
    struct lc_context_params cp = lc_context_default_params();
    cp.n_ctx = 128;
    cp.n_threads = 2;
    cp.kv_type = LC_TYPE_F32;
    cp.flash_attn = fa;   /* its cache is head-major: the shift moves and turns each head's rows */
    char *err = NULL;
    struct lc_context *c = lc_context_new(m, &cp, &err);
    CHECK(c != NULL, "context: %s", err ? err : "?");
    free(err);
    return c;
}

static void run(const char *arch, bool fa)
{
    char rel[128], path[512];
    snprintf(rel, sizeof rel, "models/arch/%s-f16.gguf", arch);
    tu_shared(rel, path, sizeof path);
    char *err = NULL;
    struct lc_model *m = lc_model_load(path, false, &err);
    CHECK(m != NULL, "%s: %s", path, err ? err : "?");
    free(err);
    err = NULL;
    if (!m)
        return;
    /* attention contributes nothing: every key depends on its own token and position only */
    const struct lc_weight *wo = &m->layers[0].wo;
    void *zeros = calloc((size_t)wo->ne[1], wo->row_bytes);
    CHECK(zeros && !wo->x16, "%s: zero attn_output", arch);
    for (int il = 0; zeros && il < m->hp.n_layer; il++)
        m->layers[il].wo.data = zeros;

    const int nv = m->hp.n_vocab, nkv = m->hp.n_head_kv * m->hp.head_dim;
    int32_t toks[N_PROMPT], kept[N_PROMPT];
    uint64_t s = 12345;
    for (int i = 0; i < N_PROMPT; i++) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        toks[i] = 3 + (int32_t)((s >> 33) % (uint64_t)(nv - 10));
    }
    int n = 0;
    for (int i = 0; i < N_PROMPT; i++)
        if (i < KEEP || i >= KEEP + DISCARD)
            kept[n++] = toks[i];

    struct lc_context *a = new_ctx(m, fa), *b = new_ctx(m, fa);
    float *ka = malloc((size_t)nkv * sizeof(float)), *kb = malloc((size_t)nkv * sizeof(float));
    int ok = a && b && ka && kb && zeros;
    ok = ok && lc_context_decode(a, toks, N_PROMPT, 0, false, &err) == 0;
    ok = ok && lc_context_shift(a, KEEP, DISCARD) == 0 && lc_context_n_past(a) == n;
    ok = ok && lc_context_decode(b, kept, n, 0, false, &err) == 0;
    CHECK(ok, "%s: evaluate and shift: %s", arch, err ? err : "?");
    free(err);
    double worst = 0, mx = 0, moved = 0;
    int worst_layer = -1;
    for (int il = 0; ok && il < m->hp.n_layer; il++)
        for (int p = 0; p < n; p++) {
            lc_context_k_row(a, il, p, ka);
            lc_context_k_row(b, il, p, kb);
            for (int d = 0; d < nkv; d++) {
                const double diff = fabs((double)ka[d] - (double)kb[d]);
                mx = fmax(mx, fabs((double)kb[d]));
                if (diff > worst)
                    worst = diff, worst_layer = il;
            }
        }
    /* the shift did rotate: the key at `keep` came from position keep + d */
    if (ok && lc_context_decode(a, toks, KEEP + DISCARD + 1, 0, false, NULL) == 0) {
        lc_context_k_row(a, m->hp.n_layer - 1, KEEP + DISCARD, ka);
        lc_context_k_row(b, m->hp.n_layer - 1, KEEP, kb);
        for (int d = 0; d < nkv; d++)
            moved = fmax(moved, fabs((double)ka[d] - (double)kb[d]));
    }
    fprintf(stderr, "%-7s%s %d layers: shifted vs fresh keys: max diff %.2e (layer %d; max |k| %.1f); "
            "unshifted key %.2f away\n", arch, fa ? " -fa" : "", m->hp.n_layer, worst, worst_layer, mx,
            moved);
    CHECK(ok && worst <= 1e-5 * fmax(mx, 1.0), "%s%s: a shifted key of layer %d is %.3e off", arch,
          fa ? " -fa" : "", worst_layer, worst);
    CHECK(moved > 0.1, "%s%s: the key at its old position is the same as at the new one", arch,
          fa ? " -fa" : "");
    free(ka);
    free(kb);
    lc_context_free(a);
    lc_context_free(b);
    free(zeros);
    lc_model_free(m);
}

int main(void)
{
    char path[512];
    tu_shared("models/arch/gemma3-f16.gguf", path, sizeof path);
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "SKIP: %s missing\n", path);
        return 77;
    }
    fclose(f);
    static const char *const archs[] = {"llama3", "qwen2", "qwen3", "phi3", "gemma2", "gemma3"};
    for (size_t i = 0; i < sizeof archs / sizeof archs[0]; i++) {
        run(archs[i], false);
        run(archs[i], true);
    }
    return tu_finish("test-context-shift");
}
