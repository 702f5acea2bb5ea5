/*
 * test-synth.c - llamachat-synth writes the model it promises.
 *
 * Runs the built tool ($LC_BUILDDIR/llamachat-synth) on small shapes and checks the files with
 * the GGUF reader and the model loader: tensor names, types (output.weight Q6_K only when
 * n_embd is a multiple of 256, as llama.cpp), shapes, metadata, the stories260K vocabulary
 * copied token for token, the generated vocabulary's byte tokens, weight statistics (mean 0,
 * standard deviation --scale), files byte-identical whatever the thread count, a forward pass
 * with finite logits, and the error for a shape the block size cannot hold; for each --arch
 * (llama, llama3, qwen2, qwen3, phi3, gemma2, gemma3) the loader's reading of it (architecture,
 * head_dim, tied output, rope_freqs, biases, q/k norms, post norms, fused views, windows, soft
 * caps, per-layer RoPE bases), its family's chat template and a forward pass.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "llm/arch/kernels.h"
#include "llm/context.h"
#include "llm/gguf.h"
#include "llm/model.h"
#include "testutil.h"

static char synth[4096];
static char tmpdir[] = "/tmp/lc-test-synth-XXXXXX";

/* Run llamachat-synth with args, stderr into errbuf; returns the exit status. */
static int run_synth(const char *args, char *errbuf, size_t len)
{
    char cmd[8192], errfile[4200];
    snprintf(errfile, sizeof(errfile), "%s/stderr", tmpdir);
    if (snprintf(cmd, sizeof(cmd), "'%s' -q %s 2>'%s'", synth, args, errfile) >= (int)sizeof(cmd))
        return -1;
    int st = system(cmd);
    if (errbuf) {
        errbuf[0] = 0;
        FILE *f = fopen(errfile, "r");
        if (f) {
            size_t n = fread(errbuf, 1, len - 1, f);
            errbuf[n] = 0;
            fclose(f);
        }
    }
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static bool files_equal(const char *a, const char *b)
{
    FILE *fa = fopen(a, "rb"), *fb = fopen(b, "rb");
    bool eq = fa && fb;
    while (eq) {
        int ca = fgetc(fa), cb = fgetc(fb);
        if (ca != cb)
            eq = false;
        if (ca == EOF || cb == EOF)
            break;
    }
    if (fa)
        fclose(fa);
    if (fb)
        fclose(fb);
    return eq;
}

static void check_tensor(const struct lc_gguf *g, const char *name, enum lc_type type,
                         int64_t ne0, int64_t ne1)
{
    const struct lc_gguf_tensor *t = lc_gguf_find_tensor(g, name);
    CHECK(t != NULL, "%s missing", name);
    if (!t)
        return;
    CHECK(t->type == type, "%s type %s, expected %s", name, lc_type_name(t->type),
          lc_type_name(type));
    CHECK(t->ne[0] == ne0 && t->ne[1] == ne1, "%s shape [%lld, %lld], expected [%lld, %lld]",
          name, (long long)t->ne[0], (long long)t->ne[1], (long long)ne0, (long long)ne1);
}

static void check_u32(const struct lc_gguf *g, const char *key, uint32_t want)
{
    uint32_t v = 0;
    CHECK(lc_gguf_get_u32(g, key, &v) && v == want, "%s = %u, expected %u", key, v, want);
}

/* Mean and standard deviation of a whole weight, dequantized. */
static void weight_stats(const struct lc_gguf_tensor *t, double *mean, double *sd)
{
    const struct lc_type_traits *tr = lc_type_traits(t->type);
    float *row = malloc((size_t)t->ne[0] * sizeof(float));
    double s = 0, s2 = 0;
    const size_t rb = lc_row_size(t->type, t->ne[0]);
    for (int64_t r = 0; r < t->ne[1]; r++) {
        tr->to_float((const uint8_t *)t->data + (size_t)r * rb, row, t->ne[0]);
        for (int64_t i = 0; i < t->ne[0]; i++)
            s += (double)row[i], s2 += (double)row[i] * (double)row[i];
    }
    const double n = (double)(t->ne[0] * t->ne[1]);
    *mean = s / n;
    *sd = sqrt(s2 / n - *mean * *mean);
    free(row);
}

int main(void)
{
    const char *bd = getenv("LC_BUILDDIR");
    snprintf(synth, sizeof(synth), "%s/llamachat-synth", bd ? bd : ".");
    if (access(synth, X_OK)) {
        fprintf(stderr, "test-synth: %s not built\n", synth);
        return 77;
    }
    char stories[4096];
    tu_shared("models/stories260K.gguf", stories, sizeof(stories));
    if (access(stories, R_OK)) {
        fprintf(stderr, "test-synth: %s missing\n", stories);
        return 77;
    }
    if (!mkdtemp(tmpdir)) {
        perror("mkdtemp");
        return 1;
    }
    lc_quant_init();
    char args[8192], a[4200], b[4200], errbuf[1024];
    char *err = NULL;

    /* 1. Q4_1, n_embd 256 (output Q6_K), stories vocab; -t 1 and -t 3 give the same bytes. */
    snprintf(a, sizeof(a), "%s/a.gguf", tmpdir);
    snprintf(b, sizeof(b), "%s/b.gguf", tmpdir);
    snprintf(args, sizeof(args),
             "--type q4_1 --n-embd 256 --n-layer 2 --n-head 4 --n-head-kv 2 --n-ff 768 "
             "--ctx 4096 --scale 0.05 --seed 7 -t 1 -o '%s'", a);
    CHECK(run_synth(args, errbuf, sizeof(errbuf)) == 0, "synth failed: %s", errbuf);
    snprintf(args, sizeof(args),
             "--type q4_1 --n-embd 256 --n-layer 2 --n-head 4 --n-head-kv 2 --n-ff 768 "
             "--ctx 4096 --scale 0.05 --seed 7 -t 3 -o '%s'", b);
    CHECK(run_synth(args, errbuf, sizeof(errbuf)) == 0, "synth failed: %s", errbuf);
    CHECK(files_equal(a, b), "-t 1 and -t 3 files differ");
    char tmp[4300];
    snprintf(tmp, sizeof(tmp), "%s.tmp", a);
    CHECK(access(tmp, F_OK) != 0, "temporary file %s left behind", tmp);

    struct lc_gguf *g = lc_gguf_open(a, &err);
    CHECK(g != NULL, "open: %s", err ? err : "");
    if (g) {
        CHECK(lc_gguf_n_tensors(g) == 3 + 9 * 2, "%lld tensors", (long long)lc_gguf_n_tensors(g));
        check_tensor(g, "token_embd.weight", LC_TYPE_Q4_1, 256, 512);
        check_tensor(g, "output.weight", LC_TYPE_Q6_K, 256, 512);
        check_tensor(g, "output_norm.weight", LC_TYPE_F32, 256, 1);
        check_tensor(g, "blk.1.attn_q.weight", LC_TYPE_Q4_1, 256, 256);
        check_tensor(g, "blk.1.attn_k.weight", LC_TYPE_Q4_1, 256, 128);
        check_tensor(g, "blk.1.attn_v.weight", LC_TYPE_Q4_1, 256, 128);
        check_tensor(g, "blk.1.attn_output.weight", LC_TYPE_Q4_1, 256, 256);
        check_tensor(g, "blk.1.ffn_gate.weight", LC_TYPE_Q4_1, 256, 768);
        check_tensor(g, "blk.1.ffn_up.weight", LC_TYPE_Q4_1, 256, 768);
        check_tensor(g, "blk.1.ffn_down.weight", LC_TYPE_Q4_1, 768, 256);
        check_tensor(g, "blk.1.ffn_norm.weight", LC_TYPE_F32, 256, 1);
        const char *arch = lc_gguf_get_str(g, "general.architecture");
        CHECK(arch && !strcmp(arch, "llama"), "architecture %s", arch ? arch : "(none)");
        check_u32(g, "general.file_type", 3);
        check_u32(g, "llama.context_length", 4096);
        check_u32(g, "llama.embedding_length", 256);
        check_u32(g, "llama.block_count", 2);
        check_u32(g, "llama.feed_forward_length", 768);
        check_u32(g, "llama.attention.head_count", 4);
        check_u32(g, "llama.attention.head_count_kv", 2);
        check_u32(g, "llama.rope.dimension_count", 64);
        const struct lc_gguf_tensor *n = lc_gguf_find_tensor(g, "blk.0.attn_norm.weight");
        CHECK(n && ((const float *)n->data)[0] == 1.0f && ((const float *)n->data)[255] == 1.0f,
              "norm weights are not 1");
        double mean, sd;
        weight_stats(lc_gguf_find_tensor(g, "blk.0.ffn_up.weight"), &mean, &sd);
        CHECK(fabs(mean) < 0.002 && fabs(sd - 0.05) < 0.0025, "ffn_up mean %g sd %g, want 0, 0.05",
              mean, sd);
        weight_stats(lc_gguf_find_tensor(g, "output.weight"), &mean, &sd);
        CHECK(fabs(mean) < 0.002 && fabs(sd - 0.05) < 0.0025, "output mean %g sd %g, want 0, 0.05",
              mean, sd);
        /* The stories260K vocabulary, token for token; none of its model keys. */
        struct lc_gguf *s = lc_gguf_open(stories, &err);
        CHECK(s != NULL, "open %s: %s", stories, err ? err : "");
        if (s) {
            int64_t ka = lc_gguf_find_key(g, "tokenizer.ggml.tokens");
            int64_t ks = lc_gguf_find_key(s, "tokenizer.ggml.tokens");
            CHECK(ka >= 0 && lc_gguf_arr_n(g, ka) == 512, "tokens missing or not 512");
            int diff = 0;
            for (uint64_t i = 0; ka >= 0 && i < 512; i++)
                diff += strcmp(lc_gguf_arr_str(g, ka, i), lc_gguf_arr_str(s, ks, i)) != 0;
            CHECK(diff == 0, "%d tokens differ from stories260K's", diff);
            lc_gguf_free(s);
        }
        const char *name = lc_gguf_get_str(g, "general.name");
        CHECK(name && !strcmp(name, "synth-256x2-q4_1"), "general.name %s", name ? name : "");
        lc_gguf_free(g);
    }
    if (lc_kernels()->vec_dot[LC_TYPE_Q6_K]) {
        struct lc_model *m = lc_model_load(a, false, &err);
        CHECK(m != NULL, "load %s: %s", a, err ? err : "");
        lc_model_free(m);
    }

    /* 2. Q4_0 with n_embd 64 (not a multiple of 256: output Q8_0) and a generated vocab;
     *    it loads and a forward pass gives finite logits. */
    snprintf(args, sizeof(args),
             "--type q4_0 --n-embd 64 --n-layer 1 --n-head 2 --n-ff 128 --n-vocab 1000 -o '%s'", a);
    CHECK(run_synth(args, errbuf, sizeof(errbuf)) == 0, "synth failed: %s", errbuf);
    g = lc_gguf_open(a, &err);
    CHECK(g != NULL, "open: %s", err ? err : "");
    if (g) {
        check_tensor(g, "output.weight", LC_TYPE_Q8_0, 64, 1000);
        check_tensor(g, "token_embd.weight", LC_TYPE_Q4_0, 64, 1000);
        check_u32(g, "general.file_type", 2);
        check_u32(g, "llama.attention.head_count_kv", 2);
        int64_t k = lc_gguf_find_key(g, "tokenizer.ggml.tokens");
        CHECK(k >= 0 && lc_gguf_arr_n(g, k) == 1000, "generated vocab size");
        if (k >= 0) {
            CHECK(!strcmp(lc_gguf_arr_str(g, k, 0), "<unk>"), "token 0");
            CHECK(!strcmp(lc_gguf_arr_str(g, k, 1), "<s>"), "token 1");
            CHECK(!strcmp(lc_gguf_arr_str(g, k, 3), "<0x00>"), "token 3");
            CHECK(!strcmp(lc_gguf_arr_str(g, k, 3 + 0x41), "<0x41>"), "token 3+0x41");
            CHECK(!strcmp(lc_gguf_arr_str(g, k, 258), "<0xFF>"), "token 258");
            CHECK(!strcmp(lc_gguf_arr_str(g, k, 259), "\xe2\x96\x81"), "token 259");
        }
        int64_t kt = lc_gguf_find_key(g, "tokenizer.ggml.token_type");
        const int32_t *tt = kt >= 0 ? lc_gguf_arr_data(g, kt) : NULL;
        CHECK(tt && tt[0] == 2 && tt[1] == 3 && tt[2] == 3 && tt[3] == 6 && tt[258] == 6 &&
                  tt[259] == 1 && tt[999] == 1,
              "token types");
        lc_gguf_free(g);
    }
    struct lc_model *m = lc_model_load(a, false, &err);
    CHECK(m != NULL, "load %s: %s", a, err ? err : "");
    if (m) {
        CHECK(m->hp.n_vocab == 1000 && m->hp.n_embd == 64 && m->hp.n_ff == 128,
              "hparams %d %d %d", m->hp.n_vocab, m->hp.n_embd, m->hp.n_ff);
        struct lc_context_params cp = lc_context_default_params();
        cp.n_ctx = 16;
        cp.n_threads = 2;
        struct lc_context *c = lc_context_new(m, &cp, &err);
        CHECK(c != NULL, "context: %s", err ? err : "");
        if (c) {
            int32_t toks[4] = {1, 300, 500, 999};
            CHECK(lc_context_decode(c, toks, 4, 0, false, &err) == 0, "decode: %s",
                  err ? err : "");
            const float *lg = lc_context_logits(c, -1);
            int finite = 0;
            for (int i = 0; lg && i < 1000; i++)
                finite += isfinite(lg[i]) != 0;
            CHECK(finite == 1000, "%d of 1000 logits finite", finite);
            lc_context_free(c);
        }
        lc_model_free(m);
    }

    /* 2b. Every architecture (--arch): the loader reads it as that architecture, with the
     * tensors that make it one, its family's chat template, and a forward pass. */
    static const struct {
        const char *arch, *gguf, *tmpl_start;
        int head_dim;
    } ar[] = {
        {"llama", "llama", "{% for message in messages %}{{'<|im_start|>'", 32},
        {"llama3", "llama", "{{ bos_token }}{% for message in messages %}{{ '<|start_header_id|>'", 32},
        {"qwen2", "qwen2", "{% for message in messages %}{{'<|im_start|>'", 32},
        {"qwen3", "qwen3", "{% for message in messages %}{{'<|im_start|>'", 48},
        {"phi3", "phi3", "{% for message in messages %}{{ '<|' + message['role']", 32},
        {"gemma2", "gemma2", "{{ bos_token }}{% for message in messages %}{% set role", 48},
        {"gemma3", "gemma3", "{{ bos_token }}{% for message in messages %}{% set role", 48},
    };
    for (size_t k = 0; k < sizeof ar / sizeof ar[0]; k++) {
        snprintf(b, sizeof(b), "%s/%s.gguf", tmpdir, ar[k].arch);
        snprintf(args, sizeof(args),
                 "--arch %s --type q8_0 --n-embd 64 --n-layer 6 --n-head 2 --n-head-kv 1 "
                 "--n-ff 128 --n-vocab 1000 --head-dim %d -o '%s'", ar[k].arch, ar[k].head_dim, b);
        CHECK(run_synth(args, errbuf, sizeof(errbuf)) == 0, "%s: synth failed: %s", ar[k].arch,
              errbuf);
        struct lc_gguf *ga = lc_gguf_open(b, &err);
        CHECK(ga != NULL, "%s: open: %s", ar[k].arch, err ? err : "");
        if (ga) {
            const char *t = lc_gguf_get_str(ga, "tokenizer.chat_template");
            CHECK(t && !strncmp(t, ar[k].tmpl_start, strlen(ar[k].tmpl_start)),
                  "%s: chat template %.60s", ar[k].arch, t ? t : "(none)");
            lc_gguf_free(ga);
        }
        struct lc_model *ma = lc_model_load(b, false, &err);
        CHECK(ma != NULL, "%s: load: %s", ar[k].arch, err ? err : "");
        if (!ma)
            continue;
        const struct lc_hparams *hp = &ma->hp;
        const struct lc_layer *L0 = &ma->layers[0], *L5 = &ma->layers[5];
        CHECK(!strcmp(hp->arch->name, ar[k].gguf), "%s: loaded as %s", ar[k].arch, hp->arch->name);
        CHECK(hp->head_dim == ar[k].head_dim && hp->n_q == 2 * ar[k].head_dim, "%s: head_dim %d",
              ar[k].arch, hp->head_dim);
        const bool tied = ar[k].arch[0] == 'g' || !strcmp(ar[k].arch, "qwen2");
        CHECK((ma->output.data == ma->tok_embd.data) == tied, "%s: tied output %d", ar[k].arch,
              ma->output.data == ma->tok_embd.data);
        if (!strcmp(ar[k].arch, "llama3")) {
            const float *ff = ma->rope_freqs.data;
            CHECK(ff && ff[0] == 1.0f && ff[15] == 8.0f && ff[8] > 1.0f && ff[8] < 8.0f &&
                      hp->rope_freq_base == 5e5f,
                  "llama3: rope_freqs %g %g %g, base %g", ff ? (double)ff[0] : -1.0,
                  ff ? (double)ff[8] : -1.0, ff ? (double)ff[15] : -1.0, (double)hp->rope_freq_base);
        } else {
            CHECK(ma->rope_freqs.data == NULL, "%s: rope_freqs", ar[k].arch);
        }
        CHECK((L0->bq.data != NULL) == !strcmp(ar[k].arch, "qwen2"), "%s: q bias", ar[k].arch);
        CHECK((L0->q_norm.data != NULL) == (!strcmp(ar[k].arch, "qwen3") || !strcmp(ar[k].arch, "gemma3")),
              "%s: q norm", ar[k].arch);
        CHECK((L0->attn_post_norm.data != NULL) == (ar[k].arch[0] == 'g'), "%s: post norm",
              ar[k].arch);
        CHECK(L0->wq.data && L0->wk.data && L0->wv.data && L0->ffn_gate.data && L0->ffn_up.data,
              "%s: q/k/v and gate/up bound", ar[k].arch);
        if (!strcmp(ar[k].arch, "phi3")) /* views of the fused matrices */
            CHECK((const uint8_t *)L0->wk.data == (const uint8_t *)L0->wq.data + 64 * L0->wq.row_bytes &&
                      (const uint8_t *)L0->ffn_up.data ==
                          (const uint8_t *)L0->ffn_gate.data + 128 * L0->ffn_gate.row_bytes,
                  "phi3: fused views");
        if (!strcmp(ar[k].arch, "gemma2"))
            CHECK(L0->n_swa == 16 && ma->layers[1].n_swa == 0 && hp->attn_softcap == 50.0f &&
                      hp->final_softcap == 30.0f && hp->embd_scale == 8.0f,
                  "gemma2: window %d/%d, caps %g %g", L0->n_swa, ma->layers[1].n_swa,
                  (double)hp->attn_softcap, (double)hp->final_softcap);
        if (!strcmp(ar[k].arch, "gemma3"))
            CHECK(L0->n_swa == 16 && L5->n_swa == 0 && L0->rope_base == 1e4f &&
                      L5->rope_base == 1e6f && hp->final_softcap == 0.0f,
                  "gemma3: windows %d/%d, bases %g/%g", L0->n_swa, L5->n_swa,
                  (double)L0->rope_base, (double)L5->rope_base);
        struct lc_context_params cp = lc_context_default_params();
        cp.n_ctx = 32;
        cp.n_threads = 2;
        struct lc_context *c = lc_context_new(ma, &cp, &err);
        CHECK(c != NULL, "%s: context: %s", ar[k].arch, err ? err : "");
        if (c) {
            int32_t toks[20];
            for (int i = 0; i < 20; i++)
                toks[i] = 1 + 37 * i;
            CHECK(lc_context_decode(c, toks, 20, 0, false, &err) == 0, "%s: decode: %s",
                  ar[k].arch, err ? err : "");
            const float *lg = lc_context_logits(c, -1);
            int finite = 0;
            for (int i = 0; lg && i < 1000; i++)
                finite += isfinite(lg[i]) != 0;
            CHECK(finite == 1000, "%s: %d of 1000 logits finite", ar[k].arch, finite);
            lc_context_free(c);
        }
        lc_model_free(ma);
        unlink(b);
    }

    /* 3. Shapes the block size cannot hold are refused with a message; no file is written. */
    snprintf(b, sizeof(b), "%s/bad.gguf", tmpdir);
    snprintf(args, sizeof(args), "--type q4_1 --n-embd 64 --n-head 2 --n-ff 172 -o '%s'", b);
    CHECK(run_synth(args, errbuf, sizeof(errbuf)) == 1, "n_ff 172 accepted");
    CHECK(strstr(errbuf, "--n-ff 172 must be multiples of 32") != NULL, "message: %s", errbuf);
    CHECK(access(b, F_OK) != 0, "file written for a bad shape");
    snprintf(args, sizeof(args), "--type q5_0 -o '%s'", b);
    CHECK(run_synth(args, errbuf, sizeof(errbuf)) == 1, "q5_0 accepted");
    CHECK(strstr(errbuf, "'q5_0' is not one of") != NULL, "message: %s", errbuf);

    free(err);
    unlink(a);
    char ef[4200];
    snprintf(ef, sizeof(ef), "%s/stderr", tmpdir);
    unlink(ef);
    rmdir(tmpdir);
    return tu_finish("test-synth");
}
