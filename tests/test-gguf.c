/*
 * test-gguf.c - the GGUF reader on every model and vocab file in ../shared.
 *
 * Expected values were read from the files with an independent Python parser (struct.unpack
 * over the gguf.md layout) and match llama.cpp's reports in ../shared/reference/README.md.
 */
#include "gguf.h"
#include "testutil.h"

#include <glob.h>
#include <math.h>
#include <string.h>

struct expect {
    const char *file;
    int64_t n_kv;
    int64_t n_tensors;
    size_t data_offset;
    int embd_type;     /* token_embd.weight */
    int output_type;   /* output.weight */
    int ffn_down_ne0;  /* blk.0.ffn_down.weight ne[0] */
    int64_t n_embd;
};

static const struct expect models[] = {
    {"models/stories260K.gguf", 19, 48, 14176, LC_TYPE_F32, LC_TYPE_F32, 172, 64},
    {"models/stories260K-ff192-f32.gguf", 19, 48, 14176, LC_TYPE_F32, LC_TYPE_F32, 192, 64},
    {"models/stories260K-ff192-f16.gguf", 21, 48, 14240, LC_TYPE_F16, LC_TYPE_F16, 192, 64},
    {"models/stories260K-ff192-q8_0.gguf", 21, 48, 14240, LC_TYPE_Q8_0, LC_TYPE_Q8_0, 192, 64},
    {"models/stories260K-ff192-q4_0.gguf", 21, 48, 14240, LC_TYPE_Q4_0, LC_TYPE_Q8_0, 192, 64},
    {"models/stories260K-ff192-q4_1.gguf", 21, 48, 14240, LC_TYPE_Q4_1, LC_TYPE_Q8_0, 192, 64},
    {"models/synth-small-f16.gguf", 21, 21, 12672, LC_TYPE_F16, LC_TYPE_F16, 768, 256},
    {"models/synth-small-q8_0.gguf", 22, 21, 12704, LC_TYPE_Q8_0, LC_TYPE_Q8_0, 768, 256},
    {"models/synth-small-q4_0.gguf", 22, 21, 12704, LC_TYPE_Q4_0, LC_TYPE_Q6_K, 768, 256},
    {"models/synth-small-q4_1.gguf", 22, 21, 12704, LC_TYPE_Q4_1, LC_TYPE_Q6_K, 768, 256},
    {"models/synth-small-q5_0.gguf", 22, 21, 12704, LC_TYPE_Q5_0, LC_TYPE_Q6_K, 768, 256},
    {"models/synth-small-q5_1.gguf", 22, 21, 12704, LC_TYPE_Q5_1, LC_TYPE_Q6_K, 768, 256},
    {"models/synth-small-q4_k_m.gguf", 22, 21, 12704, LC_TYPE_Q4_K, LC_TYPE_Q6_K, 768, 256},
    {"models/synth-small-q5_k_m.gguf", 22, 21, 12704, LC_TYPE_Q5_K, LC_TYPE_Q6_K, 768, 256},
    {"models/synth-small-q6_k.gguf", 22, 21, 12704, LC_TYPE_Q6_K, LC_TYPE_Q6_K, 768, 256},
};

/* Every tensor lies inside the data section, aligned, and the infos agree with the traits. */
static void check_tensors_consistent(const struct lc_gguf *g, const char *file)
{
    const char *base = (const char *)lc_gguf_tensor(g, 0)->data - lc_gguf_data_offset(g);
    for (int64_t i = 0; i < lc_gguf_n_tensors(g); i++) {
        const struct lc_gguf_tensor *t = lc_gguf_tensor(g, i);
        int64_t nel = 1;
        for (int d = 0; d < LC_GGUF_MAX_DIMS; d++)
            nel *= t->ne[d];
        const struct lc_type_traits *tt = lc_type_traits((int)t->type);
        CHECK(tt != NULL, "%s: tensor %s type %d", file, t->name, (int)t->type);
        if (!tt)
            continue;
        CHECK(t->nbytes == (size_t)(nel / tt->blck_size) * tt->type_size, "%s: %s nbytes %zu",
              file, t->name, t->nbytes);
        CHECK(t->offset % lc_gguf_alignment(g) == 0, "%s: %s offset", file, t->name);
        CHECK((const char *)t->data == base + lc_gguf_data_offset(g) + t->offset, "%s: %s data",
              file, t->name);
        CHECK(lc_gguf_data_offset(g) + t->offset + t->nbytes <= lc_gguf_file_size(g),
              "%s: %s inside", file, t->name);
        CHECK(lc_gguf_find_tensor(g, t->name) == t, "%s: find %s", file, t->name);
    }
}

static void test_model(const struct expect *e)
{
    char path[4096], *err = NULL;
    tu_shared(e->file, path, sizeof(path));
    struct lc_gguf *g = lc_gguf_open(path, &err);
    CHECK(g != NULL, "%s: %s", e->file, err ? err : "?");
    free(err);
    if (!g)
        return;
    CHECK(lc_gguf_version(g) == 3, "%s: version %u", e->file, lc_gguf_version(g));
    CHECK(strcmp(lc_gguf_path(g), path) == 0, "%s: path", e->file);
    CHECK(lc_gguf_alignment(g) == 32, "%s: alignment", e->file);
    CHECK(lc_gguf_n_kv(g) == e->n_kv, "%s: n_kv %lld", e->file, (long long)lc_gguf_n_kv(g));
    CHECK(lc_gguf_n_tensors(g) == e->n_tensors, "%s: n_tensors %lld", e->file,
          (long long)lc_gguf_n_tensors(g));
    CHECK(lc_gguf_data_offset(g) == e->data_offset, "%s: data offset %zu", e->file,
          lc_gguf_data_offset(g));

    const char *arch = lc_gguf_get_str(g, "general.architecture");
    CHECK(arch && strcmp(arch, "llama") == 0, "%s: arch", e->file);
    uint32_t u = 0;
    CHECK(lc_gguf_get_u32(g, "llama.embedding_length", &u) && u == e->n_embd, "%s: n_embd %u",
          e->file, u);
    int64_t i64 = 0;
    CHECK(lc_gguf_get_i64(g, "llama.embedding_length", &i64) && i64 == e->n_embd, "%s: i64",
          e->file);
    float eps = 0;
    CHECK(lc_gguf_get_f32(g, "llama.attention.layer_norm_rms_epsilon", &eps) && eps == 1e-5f,
          "%s: eps", e->file);
    CHECK(!lc_gguf_get_f32(g, "llama.embedding_length", &eps), "%s: u32 is not a float", e->file);
    CHECK(!lc_gguf_get_u32(g, "general.architecture", &u), "%s: string is not a u32", e->file);
    CHECK(lc_gguf_get_str(g, "llama.embedding_length") == NULL, "%s: u32 is not a string",
          e->file);
    CHECK(!lc_gguf_get_u32(g, "no.such.key", &u) && lc_gguf_find_key(g, "no.such.key") == -1,
          "%s: missing key", e->file);
    CHECK(lc_gguf_key(g, lc_gguf_n_kv(g)) == NULL && lc_gguf_key(g, -1) == NULL, "%s: key range",
          e->file);

    int64_t k = lc_gguf_find_key(g, "tokenizer.ggml.tokens");
    CHECK(k >= 0 && lc_gguf_kv_type(g, k) == LC_GGUF_ARRAY &&
              lc_gguf_arr_type(g, k) == LC_GGUF_STRING && lc_gguf_arr_n(g, k) == 512,
          "%s: tokens", e->file);
    CHECK(strcmp(lc_gguf_key(g, k), "tokenizer.ggml.tokens") == 0, "%s: key name", e->file);
    const char *s1 = lc_gguf_arr_str(g, k, 1), *s300 = lc_gguf_arr_str(g, k, 300);
    CHECK(s1 && strcmp(s1, "<s>") == 0, "%s: token 1 '%s'", e->file, s1 ? s1 : "(null)");
    CHECK(s300 && strcmp(s300, "\xe2\x96\x81ha") == 0, "%s: token 300", e->file);
    CHECK(lc_gguf_arr_str(g, k, 512) == NULL && lc_gguf_arr_data(g, k) == NULL,
          "%s: string array bounds", e->file);
    k = lc_gguf_find_key(g, "tokenizer.ggml.scores");
    const float *scores = lc_gguf_arr_data(g, k);
    CHECK(scores && lc_gguf_arr_type(g, k) == LC_GGUF_FLOAT32 && scores[300] == -41.0f &&
              scores[511] == -252.0f,
          "%s: scores", e->file);
    k = lc_gguf_find_key(g, "tokenizer.ggml.token_type");
    const int32_t *tt = lc_gguf_arr_data(g, k);
    CHECK(tt && lc_gguf_arr_type(g, k) == LC_GGUF_INT32 && tt[0] == 2 && tt[1] == 3 && tt[511] == 1,
          "%s: token types", e->file);
    k = lc_gguf_find_key(g, "llama.block_count");
    const void *raw = lc_gguf_val_data(g, k);
    /* stories260K has 5 layers, synth-small 2 */
    CHECK(raw && memcmp(raw, e->n_embd == 64 ? "\x05\0\0\0" : "\x02\0\0\0", 4) == 0,
          "%s: raw block_count", e->file);
    CHECK(lc_gguf_get_u32(g, "tokenizer.ggml.bos_token_id", &u) && u == 1, "%s: bos", e->file);

    const struct lc_gguf_tensor *t = lc_gguf_find_tensor(g, "token_embd.weight");
    CHECK(t && t->n_dims == 2 && t->ne[0] == e->n_embd && t->ne[1] == 512 && t->ne[2] == 1 &&
              t->ne[3] == 1 && (int)t->type == e->embd_type,
          "%s: token_embd", e->file);
    t = lc_gguf_find_tensor(g, "output.weight");
    CHECK(t && (int)t->type == e->output_type, "%s: output type %d", e->file,
          t ? (int)t->type : -1);
    t = lc_gguf_find_tensor(g, "blk.0.ffn_down.weight");
    CHECK(t && t->ne[0] == e->ffn_down_ne0, "%s: ffn_down", e->file);
    t = lc_gguf_find_tensor(g, "output_norm.weight");
    CHECK(t && t->n_dims == 1 && t->ne[0] == e->n_embd && t->type == LC_TYPE_F32 &&
              t->nbytes == (size_t)e->n_embd * 4,
          "%s: output_norm", e->file);
    CHECK(lc_gguf_find_tensor(g, "blk.99.attn_q.weight") == NULL, "%s: absent tensor", e->file);
    check_tensors_consistent(g, e->file);
    lc_gguf_free(g);
}

/* Tensor infos of stories260K-ff192-q4_1, cross-checked with the Python
 * parser; output_norm.weight (F32) holds RMS-norm gains, finite and positive. */
static void test_data(void)
{
    char path[4096];
    struct lc_gguf *g = lc_gguf_open(tu_shared("models/stories260K-ff192-q4_1.gguf", path,
                                               sizeof(path)), NULL);
    CHECK(g != NULL, "open");
    if (!g)
        return;
    const struct lc_gguf_tensor *t = lc_gguf_find_tensor(g, "output.weight");
    CHECK(t && t->offset == 0 && t->nbytes == 34816 && t->type == LC_TYPE_Q8_0,
          "output.weight info");
    t = lc_gguf_find_tensor(g, "token_embd.weight");
    CHECK(t && t->offset == 35072 && t->nbytes == 20480, "token_embd info");
    t = lc_gguf_find_tensor(g, "output_norm.weight");
    if (t) {
        const float *w = t->data;
        int ok = 1;
        for (int i = 0; i < 64; i++)
            ok &= isfinite(w[i]) && w[i] > 0.0f;
        CHECK(ok, "output_norm values finite and positive");
    }
    lc_gguf_free(g);
}

static void test_vocab(void)
{
    char path[4096], *err = NULL;
    struct lc_gguf *g = lc_gguf_open(
        tu_shared("reference/tokenizer/ggml-vocab-llama-spm.gguf", path, sizeof(path)), &err);
    CHECK(g != NULL, "llama-spm: %s", err ? err : "?");
    free(err);
    err = NULL;
    if (g) {
        CHECK(lc_gguf_n_tensors(g) == 0 && lc_gguf_n_kv(g) == 22, "llama-spm counts");
        int64_t k = lc_gguf_find_key(g, "tokenizer.ggml.tokens");
        CHECK(lc_gguf_arr_n(g, k) == 32000, "llama-spm n tokens");
        const char *last = lc_gguf_arr_str(g, k, 31999);
        CHECK(last && strcmp(last, "\xe7\xbb\x99") == 0, "llama-spm token 31999");
        const float *sc = lc_gguf_arr_data(g, lc_gguf_find_key(g, "tokenizer.ggml.scores"));
        CHECK(sc && sc[31999] == -31740.0f, "llama-spm score 31999");
        bool b = false;
        CHECK(lc_gguf_get_bool(g, "tokenizer.ggml.add_bos_token", &b) && b, "add_bos");
        CHECK(lc_gguf_get_bool(g, "tokenizer.ggml.add_eos_token", &b) && !b, "add_eos");
        CHECK(!lc_gguf_get_bool(g, "llama.vocab_size", &b), "u32 is not a bool");
        CHECK(lc_gguf_data_offset(g) <= lc_gguf_file_size(g), "vocab data offset clamped");
        lc_gguf_free(g);
    }
    g = lc_gguf_open(tu_shared("reference/tokenizer/ggml-vocab-gpt-2.gguf", path, sizeof(path)),
                     &err);
    CHECK(g != NULL, "gpt-2: %s", err ? err : "?");
    free(err);
    if (g) {
        int64_t k = lc_gguf_find_key(g, "tokenizer.ggml.tokens");
        CHECK(lc_gguf_arr_n(g, k) == 50257, "gpt-2 n tokens");
        const char *eot = lc_gguf_arr_str(g, k, 50256);
        CHECK(eot && strcmp(eot, "<|endoftext|>") == 0, "gpt-2 eot");
        k = lc_gguf_find_key(g, "tokenizer.ggml.merges");
        CHECK(lc_gguf_arr_n(g, k) == 50000, "gpt-2 n merges");
        const char *m0 = lc_gguf_arr_str(g, k, 0), *ml = lc_gguf_arr_str(g, k, 49999);
        CHECK(m0 && strcmp(m0, "\xc4\xa0 t") == 0, "gpt-2 merge 0");
        CHECK(ml && strcmp(ml, "\xc4\xa0g azed") == 0, "gpt-2 merge 49999");
        const char *pre = lc_gguf_get_str(g, "tokenizer.ggml.pre");
        CHECK(pre && strcmp(pre, "gpt-2") == 0, "gpt-2 pre");
        lc_gguf_free(g);
    }
}

/* Every .gguf under models/ and reference/tokenizer/ opens (new files included). */
static void test_all_open(void)
{
    char pat[4096];
    const char *dirs[] = {"models/*.gguf", "reference/tokenizer/*.gguf"};
    int n = 0;
    for (int d = 0; d < 2; d++) {
        glob_t gl;
        if (glob(tu_shared(dirs[d], pat, sizeof(pat)), 0, NULL, &gl) != 0)
            continue;
        for (size_t i = 0; i < gl.gl_pathc; i++, n++) {
            char *err = NULL;
            struct lc_gguf *g = lc_gguf_open(gl.gl_pathv[i], &err);
            CHECK(g != NULL, "%s", err ? err : gl.gl_pathv[i]);
            free(err);
            lc_gguf_free(g);
        }
        globfree(&gl);
    }
    CHECK(n >= 17, "found %d gguf files", n);
}

static void test_open_errors(void)
{
    char *err = NULL;
    CHECK(lc_gguf_open("/nonexistent/x.gguf", &err) == NULL && err &&
              strstr(err, "/nonexistent/x.gguf") && strstr(err, "No such file"),
          "missing file: %s", err ? err : "(null)");
    free(err);
    err = NULL;
    CHECK(lc_gguf_open("/tmp", &err) == NULL && err && strstr(err, "regular file"), "dir: %s",
          err ? err : "(null)");
    free(err);
    lc_gguf_free(NULL);
}

int main(void)
{
    char probe[4096];
    FILE *f = fopen(tu_shared("models/stories260K-ff192-q4_1.gguf", probe, sizeof(probe)), "rb");
    if (!f) {
        fprintf(stderr, "test-gguf: %s missing, skipping\n", probe);
        return 77;
    }
    fclose(f);
    for (size_t i = 0; i < sizeof(models) / sizeof(models[0]); i++)
        test_model(&models[i]);
    test_data();
    test_vocab();
    test_all_open();
    test_open_errors();
    return tu_finish("test-gguf");
}
