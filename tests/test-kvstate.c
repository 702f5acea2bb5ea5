/*
 * test-kvstate.c - instant resume (llm/kvstate.h, lc_engine_save_state / lc_engine_load_state)
 * on stories260K:
 *   - CRC-32 against its check value, in pieces and whole;
 *   - cells saved from a context and loaded into another (F16 and F32, V transposed or by rows,
 *     Q8_0) are the same bytes, and the next token's logits are the same bits;
 *   - through the engine: a chat saved after two turns, reopened with its state file, restores
 *     every token, evaluates only the new message, and continues token for token as the session
 *     that never stopped and as the one reopened without the file (which reads everything);
 *   - refusals, each with its exact note: another model, another cache type, a flipped byte
 *     (checksum), a truncated file, another format version, tokens that differ (partly reused);
 *     a missing file says nothing; a save that cannot be written is one error;
 *   - a hostile file: every truncation and every single flipped byte of a small state file is
 *     refused, and the context is left empty (under ASan in CI).
 */
#include <poll.h>
#include <stdlib.h>
#include <stdint.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "chat.h"
#include "engine.h"
#include "llm/context.h"
#include "llm/arch/kernels.h"
#include "llm/kvstate.h"
#include "llm/model.h"
#include "llm/sampler.h"
#include "llm/tokenizer.h"
#include "testutil.h"

struct reply {
    char text[8192];
    size_t len;
    int reason, n_gen, n_eval;
    int notes;
    char note[1024];
    int errors;
    char error[1024];
};

/* Events until DONE; 60 s timeout.  Notes and errors are kept whole (the last of each). */
static bool collect(struct lc_engine *e, struct reply *r, bool want_loaded)
{
    memset(r, 0, sizeof(*r));
    r->reason = -1;
    bool note_more = false, err_more = false;
    for (int spins = 0; spins < 600;) {
        struct lc_event ev;
        if (!lc_engine_poll(e, &ev)) {
            struct pollfd p = { lc_engine_fd(e), POLLIN, 0 };
            if (poll(&p, 1, 100) == 0)
                spins++;
            continue;
        }
        switch (ev.type) {
        case LC_EV_LOADED:
            if (want_loaded && !ev.more)
                return true;
            break;
        case LC_EV_TEXT:
            if (r->len + ev.len < sizeof(r->text)) {
                memcpy(r->text + r->len, ev.text, ev.len);
                r->len += ev.len;
                r->text[r->len] = '\0';
            }
            break;
        case LC_EV_NOTE:
            if (!note_more) {
                r->notes++;
                r->note[0] = '\0';
            }
            snprintf(r->note + strlen(r->note), sizeof(r->note) - strlen(r->note), "%.*s",
                     (int)ev.len, ev.text);
            note_more = ev.more;
            break;
        case LC_EV_ERROR:
            if (!err_more) {
                r->errors++;
                r->error[0] = '\0';
            }
            snprintf(r->error + strlen(r->error), sizeof(r->error) - strlen(r->error), "%.*s",
                     (int)ev.len, ev.text);
            err_more = ev.more;
            if (want_loaded)
                return false;
            break;
        case LC_EV_DONE:
            r->reason = ev.a;
            r->n_gen = ev.b;
            r->n_eval = (int)ev.x;
            return true;
        default:
            break;
        }
    }
    return false;
}

static const char *tmpdir(void)
{
    const char *t = getenv("TMPDIR");
    return t && *t ? t : "/tmp";
}

static long file_size(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 ? (long)st.st_size : -1;
}

static unsigned char *read_all(const char *path, long *n)
{
    *n = file_size(path);
    FILE *f = fopen(path, "rb");
    unsigned char *b = *n >= 0 ? malloc((size_t)*n + 1) : NULL;
    if (!f || !b || fread(b, 1, (size_t)*n, f) != (size_t)*n) {
        free(b);
        b = NULL;
    }
    if (f)
        fclose(f);
    return b;
}

static bool write_all(const char *path, const unsigned char *b, long n)
{
    FILE *f = fopen(path, "wb");
    bool ok = f && fwrite(b, 1, (size_t)n, f) == (size_t)n;
    if (f)
        ok &= fclose(f) == 0;
    return ok;
}

static void test_crc(void)
{
    CHECK(lc_crc32(0, "123456789", 9) == 0xCBF43926u, "crc32 check value %08x",
          lc_crc32(0, "123456789", 9));
    CHECK(lc_crc32(0, "", 0) == 0, "crc32 of nothing");
    unsigned char buf[1000];
    for (size_t i = 0; i < sizeof(buf); i++)
        buf[i] = (unsigned char)(i * 131 + 7);
    /* the 8-byte steps and the byte tail agree with feeding the bytes one at a time */
    uint32_t whole = lc_crc32(0, buf, sizeof(buf)), bytewise = 0;
    for (size_t i = 0; i < sizeof(buf); i++)
        bytewise = lc_crc32(bytewise, buf + i, 1);
    CHECK(whole == bytewise, "crc32 whole %08x, byte by byte %08x", whole, bytewise);
    uint32_t parts = lc_crc32(lc_crc32(0, buf, 13), buf + 13, sizeof(buf) - 13);
    CHECK(whole == parts, "crc32 in two parts");
}

/* Cells saved from one context and loaded into another with the other V layout are the same
 * bytes, and the next token gives the same logits. */
static void test_cells(const struct lc_model *m, enum lc_type kv, bool fa_save, bool fa_load)
{
    char path[512];
    snprintf(path, sizeof(path), "%s/test-kvstate-cells.%d.kv", tmpdir(), (int)getpid());
    struct lc_context_params cp = lc_context_default_params();
    cp.n_ctx = 128;
    cp.n_threads = 1;
    cp.kv_type = kv;
    cp.flash_attn = fa_save;
    char *err = NULL;
    struct lc_context *a = lc_context_new(m, &cp, &err);
    cp.flash_attn = fa_load;
    struct lc_context *b = lc_context_new(m, &cp, &err);
    CHECK(a && b, "contexts: %s", err ? err : "?");
    if (!a || !b)
        goto out;
    int32_t toks[64];
    const char *text = "Once upon a time, there was a little girl named Lily.";
    int32_t n = lc_tokenize(m->vocab, text, strlen(text), true, false, toks, 64);
    CHECK(n > 8, "tokens %d", n);
    CHECK(lc_context_decode(a, toks, n - 1, 0, false, &err) == 0, "decode: %s", err ? err : "?");
    CHECK(lc_kvstate_save(path, a, toks, n - 1, NULL, 0, &err) == 0, "save: %s", err ? err : "?");
    int why = -1;
    struct lc_kvstate *s = lc_kvstate_open(path, b, &why, &err);
    if (fa_save == fa_load)
        CHECK(s != NULL, "open: %d %s", why, err ? err : "?");
    if (fa_save != fa_load) {
        /* cells computed with flash attention differ in their last bits from those computed
         * without: the file is refused; the other V layout is then tested by copying the
         * rows through the context's own calls, as lc_kvstate_load does */
        const char *want = fa_save ? "made with flash attention (-fa); this run computes "
                                     "attention without it"
                                   : "made without flash attention; this run uses it (-fa)";
        CHECK(!s && why == LC_KVSTATE_MATH && err && !strcmp(err, want), "fa %d -> %d: '%s'",
              fa_save, fa_load, err ? err : "(accepted)");
        lc_kvstate_close(s);
        s = NULL;
        free(err);
        err = NULL;
        size_t rb = lc_context_kv_row_bytes(a);
        unsigned char *t = malloc(rb * 64);
        for (int il = 0; t && il < m->hp.n_layer; il++)
            for (int v = 0; v < 2; v++) {
                lc_context_kv_read(a, il, v, 0, n - 1, t);
                CHECK(lc_context_kv_write(b, il, v, 0, n - 1, t) == 0, "kv_write");
            }
        free(t);
        CHECK(lc_context_kv_commit(b, n - 1) == 0, "kv_commit");
    }
    if (fa_save != fa_load || s) {
        if (s) {
            CHECK(lc_kvstate_n_tokens(s) == n - 1 && !memcmp(lc_kvstate_tokens(s), toks, (size_t)(n - 1) * 4),
                  "tokens read back");
            CHECK(lc_kvstate_load(s, b, n - 1, NULL, NULL, &why, &err) == 0, "load: %s", err ? err : "?");
        }
        CHECK(lc_context_n_past(b) == n - 1, "n_past %d", lc_context_n_past(b));
        size_t row = lc_context_kv_row_bytes(a);
        unsigned char *x = malloc(row * 64), *y = malloc(row * 64);
        bool same = true;
        for (int il = 0; il < m->hp.n_layer; il++)
            for (int v = 0; v < 2; v++) {
                lc_context_kv_read(a, il, v, 0, n - 1, x);
                lc_context_kv_read(b, il, v, 0, n - 1, y);
                same &= !memcmp(x, y, row * (size_t)(n - 1));
            }
        CHECK(same, "cells differ (%s, fa %d -> %d)", lc_type_name(kv), fa_save, fa_load);
        free(x);
        free(y);
        lc_kvstate_close(s);
        s = NULL;
        /* the next token: same bits when the layouts are the same (the V order of the
         * attention differs between fa and not, not the cells) */
        CHECK(lc_context_decode(a, toks + n - 1, 1, n - 1, false, &err) == 0, "decode a");
        CHECK(lc_context_decode(b, toks + n - 1, 1, n - 1, false, &err) == 0, "decode b");
        if (fa_save == fa_load)
            CHECK(!memcmp(lc_context_logits(a, -1), lc_context_logits(b, -1),
                          (size_t)m->hp.n_vocab * sizeof(float)),
                  "logits after a restored cache differ (%s, fa %d)", lc_type_name(kv), fa_save);
    }
out:
    free(err);
    lc_context_free(a);
    lc_context_free(b);
    unlink(path);
}

/*
 * A small state file (a few tokens) cut at every length and with every single byte flipped:
 * each is refused (never loaded, never a crash), and the context stays empty.
 */
static void test_hostile(const struct lc_model *m)
{
    char path[512], bad[512];
    snprintf(path, sizeof(path), "%s/test-kvstate-h.%d.kv", tmpdir(), (int)getpid());
    snprintf(bad, sizeof(bad), "%s/test-kvstate-bad.%d.kv", tmpdir(), (int)getpid());
    struct lc_context_params cp = lc_context_default_params();
    cp.n_ctx = 64;
    cp.n_threads = 1;
    char *err = NULL;
    struct lc_context *c = lc_context_new(m, &cp, &err);
    CHECK(c != NULL, "context");
    if (!c)
        return;
    int32_t toks[8] = { 1, 400, 300, 200, 100 };
    int32_t reply[2] = { 300, 200 };
    struct lc_kvstate_kept kept = { 42, 7, 2, reply };
    CHECK(lc_context_decode(c, toks, 5, 0, false, &err) == 0, "decode");
    CHECK(lc_kvstate_save(path, c, toks, 5, &kept, 1, &err) == 0, "save: %s", err ? err : "?");
    lc_context_truncate(c, 0);   /* a refused file must leave it empty */
    long n;
    unsigned char *b = read_all(path, &n);
    CHECK(b && n > 100, "state file of %ld bytes", n);
    int refused = 0, tries = 0, loaded_anyway = 0;
    for (long len = 0; b && len < n; len++) {   /* every truncation */
        write_all(bad, b, len);
        int why = 0;
        struct lc_kvstate *s = lc_kvstate_open(bad, c, &why, &err);
        free(err);
        err = NULL;
        tries++;
        if (s && lc_kvstate_load(s, c, lc_kvstate_n_tokens(s), NULL, NULL, &why, &err) == 0)
            loaded_anyway++;
        else
            refused++;
        free(err);
        err = NULL;
        lc_kvstate_close(s);
        CHECK(lc_context_n_past(c) == 0, "cut at %ld: n_past %d", len, lc_context_n_past(c));
    }
    for (long i = 0; b && i < n; i++) {   /* every byte flipped */
        b[i] ^= 0x5A;
        write_all(bad, b, n);
        b[i] ^= 0x5A;
        int why = 0;
        struct lc_kvstate *s = lc_kvstate_open(bad, c, &why, &err);
        free(err);
        err = NULL;
        tries++;
        if (s && lc_kvstate_load(s, c, lc_kvstate_n_tokens(s), NULL, NULL, &why, &err) == 0)
            loaded_anyway++;
        else
            refused++;
        free(err);
        err = NULL;
        lc_kvstate_close(s);
        if (lc_context_n_past(c) != 0)
            CHECK(false, "byte %ld flipped: n_past %d", i, lc_context_n_past(c));
    }
    CHECK(loaded_anyway == 0 && refused == tries, "%d of %d damaged files loaded", loaded_anyway, tries);
    /* and the file itself loads, with its reply list */
    int why = 0;
    struct lc_kvstate *s = lc_kvstate_open(path, c, &why, &err);
    CHECK(s && lc_kvstate_n_kept(s) == 1 && lc_kvstate_kept(s, 0)->hash == 42 &&
          lc_kvstate_kept(s, 0)->bytes == 7 && lc_kvstate_kept(s, 0)->n == 2 &&
          lc_kvstate_kept(s, 0)->ids[1] == 200, "the whole file: %s", err ? err : "?");
    CHECK(s && lc_kvstate_load(s, c, 3, NULL, NULL, &why, &err) == 0 && lc_context_n_past(c) == 3,
          "a prefix of 3 loaded");
    lc_kvstate_close(s);
    free(err);
    free(b);
    unlink(bad);
    unlink(path);
    lc_context_free(c);
}

static const char *g_template;   /* --chat-template for the engines started, or NULL */

/* the engines start() makes compute with --fast-math / -fa (the refusals of those) */
static bool g_fast_math, g_flash_attn;

static struct lc_engine *start(const char *model, bool f32, char **err)
{
    struct lc_engine_config cfg = { .model_path = model, .n_ctx = 512, .n_threads = 1,
                                    .n_batch = 512, .n_predict = 24, .kv_f32 = f32,
                                    .fast_math = g_fast_math, .flash_attn = g_flash_attn };
    cfg.sampling = lc_sampler_default_params();
    cfg.sampling.temp = 0;
    cfg.chat_template = g_template;
    struct lc_engine *e = lc_engine_start(&cfg, err);
    struct reply r;
    if (e && !collect(e, &r, true)) {
        lc_engine_free(e);
        return NULL;
    }
    return e;
}

/* set the conversation and load path into a new engine on model; the DONE in *r */
static struct lc_engine *resume(const char *model, bool f32, const struct lc_chat *conv,
                                const char *path, struct reply *r)
{
    char *err = NULL;
    struct lc_engine *e = start(model, f32, &err);
    CHECK(e != NULL, "start %s: %s", model, err ? err : "?");
    free(err);
    if (!e)
        return NULL;
    lc_engine_set_conversation(e, conv);
    if (path) {
        lc_engine_load_state(e, path);
        CHECK(collect(e, r, false), "load_state timed out");
        CHECK(r->reason == LC_DONE_STATE, "load_state ends with %d", r->reason);
    }
    return e;
}

/* A refusal: a new engine given the conversation and the file at path says exactly want
 * (the note after "KV state PATH not used: ") and restores nothing. */
static void refused(const char *model, bool f32, const struct lc_chat *conv, const char *path,
                    const char *want)
{
    struct reply r;
    struct lc_engine *e = resume(model, f32, conv, path, &r);
    if (!e)
        return;
    char full[1024];
    snprintf(full, sizeof(full), "KV state %s not used: %s; the conversation is read again with "
             "the next message", path, want);
    CHECK(r.n_gen == 0, "%s: %d tokens restored", want, r.n_gen);
    CHECK(r.notes == 1 && !strcmp(r.note, full), "note:\n got '%s'\nwant '%s'", r.note, full);
    lc_engine_free(e);
}

/*
 * A random-weight model (stories260K's vocabulary) writes replies as ids the tokenizer would
 * spell otherwise (read as plain text: no template, no stop strings).  Reopened with the
 * state file, a reply is read as the ids it was written as: every saved token is restored, and
 * the next reply is the one of the session that never stopped, evaluating the same tokens.
 */
static void test_reply_ids(void)
{
    char synth[512], cmd[1024], path[512];
    const char *bd = getenv("LC_BUILDDIR");
    snprintf(synth, sizeof(synth), "%s/test-kvstate-synth.%d.gguf", tmpdir(), (int)getpid());
    snprintf(path, sizeof(path), "%s/test-kvstate-synth.%d.json.kv", tmpdir(), (int)getpid());
    snprintf(cmd, sizeof(cmd), "%s/llamachat-synth -q -o %s --n-embd 64 --n-layer 2 --n-head 4 "
             "--n-ff 128 --n-vocab 512 --type f16 --scale 0.5", bd ? bd : ".", synth);
    char *err = NULL;
    struct lc_model *m = system(cmd) == 0 ? lc_model_load(synth, false, &err) : NULL;
    CHECK(m != NULL, "synthetic model: %s", err ? err : cmd);
    if (!m)
        return;
    const char *p1 = "Once upon a time", *p3 = " The end.";
    struct reply r1, ra, rb, r;
    g_template = "plain";
    struct lc_engine *a = start(synth, false, &err);
    CHECK(a != NULL, "start");
    if (!a)
        goto out;
    lc_engine_submit(a, p1);
    CHECK(collect(a, &r1, false), "turn 1");
    lc_engine_save_state(a, path);
    lc_engine_submit(a, p3);
    CHECK(collect(a, &ra, false), "turn 2");
    lc_engine_free(a);
    struct lc_context_params cp = lc_context_default_params();
    cp.n_ctx = 512;
    cp.n_threads = 1;
    struct lc_context *ctx = lc_context_new(m, &cp, &err);
    int why = 0, n_saved = -1;
    struct lc_kvstate *s = ctx ? lc_kvstate_open(path, ctx, &why, &err) : NULL;
    CHECK(s != NULL, "open: %s", err ? err : "?");
    if (s) {
        n_saved = lc_kvstate_n_tokens(s);
        CHECK(lc_kvstate_n_kept(s) == 1 && lc_kvstate_kept(s, 0)->bytes == r1.len,
              "%zu reply lists", lc_kvstate_n_kept(s));
        /* the ids are not what the text tokenizes to (else this would test nothing) */
        char all[8192 + 64];
        snprintf(all, sizeof(all), "%s%s", p1, r1.text);
        int32_t t[1024];
        int32_t n = lc_tokenize(m->vocab, all, strlen(all), true, false, t, 1024);
        CHECK(n < n_saved || memcmp(t, lc_kvstate_tokens(s), (size_t)n_saved * 4) != 0,
              "the reply '%s' is spelt as the tokenizer would", r1.text);
        lc_kvstate_close(s);
    }
    lc_context_free(ctx);
    struct lc_chat *conv = lc_chat_new();
    lc_chat_add(conv, LC_ROLE_USER, p1, strlen(p1));
    lc_chat_add(conv, LC_ROLE_ASSISTANT, r1.text, r1.len);
    struct lc_engine *b = resume(synth, false, conv, path, &r);
    if (b) {
        /* the reply's ids restored past the prompt (BOS and 4 tokens); where the text no
         * longer reads as them (a NUL written as U+2400) the session that went on, too, read
         * the rest again: the same count of tokens evaluated below says it */
        CHECK(r.n_gen > 6 && r.n_gen <= n_saved, "restored %d of %d tokens: %s", r.n_gen, n_saved, r.note);
        lc_engine_submit(b, p3);
        CHECK(collect(b, &rb, false), "resumed turn");
        CHECK(!strcmp(rb.text, ra.text), "resumed:\n got '%s'\nwant '%s'", rb.text, ra.text);
        CHECK(rb.n_eval == ra.n_eval, "resumed: %d evaluated, %d in the session that went on",
              rb.n_eval, ra.n_eval);
        lc_engine_free(b);
    }
    lc_chat_free(conv);
    g_template = NULL;
out:
    free(err);
    lc_model_free(m);
    unlink(synth);
    unlink(path);
}

/*
 * lc_context_compute_flags' LC_COMPUTE_FAST_MATH is what keeps a state computed with
 * --fast-math from a run without it: whenever --fast-math changes the bits of a prompt batch,
 * the flag must say so (Q5_0 and IQ4_NL prompt batches take Q8_0's x16 GEMM, whose fast order
 * AVX-512 has, although those weights are not repacked).
 */
static void test_fast_math_flag(void)
{
    static const char *const models[] = {
        "models/synth-small-q5_0.gguf", "models/tinystories-656k/TinyStories-656K-IQ4_NL.gguf",
        "models/tinystories-656k/TinyStories-656K-Q5_0.gguf", "models/stories260K-ff192-q4_1.gguf",
        "models/synth-small-q8_0.gguf", "models/synth-small-q6_k.gguf",
    };
    for (size_t k = 0; k < sizeof(models) / sizeof(models[0]); k++) {
        char path[512];
        tu_shared(models[k], path, sizeof(path));
        char *err = NULL;
        struct lc_model *m = access(path, R_OK) == 0 ? lc_model_load(path, false, &err) : NULL;
        if (!m) {
            printf("# skip %s: %s\n", models[k], err ? err : "missing");
            free(err);
            continue;
        }
        const int32_t n_vocab = m->hp.n_vocab, n_tok = 40;
        int32_t toks[40];
        for (int i = 0; i < n_tok; i++)
            toks[i] = 1 + (i * 37) % (n_vocab - 1);
        float *logits[2] = {NULL, NULL};
        unsigned flags = 0;
        for (int f = 0; f < 2; f++) {
            struct lc_context_params p = lc_context_default_params();
            p.n_ctx = 64;
            p.n_threads = 1;
            p.fast_math = f;
            struct lc_context *c = lc_context_new(m, &p, &err);
            CHECK(c != NULL, "%s: context: %s", models[k], err ? err : "?");
            if (!c)
                break;
            CHECK(lc_context_decode(c, toks, n_tok, 0, false, &err) == 0, "%s: decode: %s",
                  models[k], err ? err : "?");
            logits[f] = malloc((size_t)n_vocab * sizeof(float));
            if (logits[f])
                memcpy(logits[f], lc_context_logits(c, -1), (size_t)n_vocab * sizeof(float));
            if (f)
                flags = lc_context_compute_flags(c);
            lc_context_free(c);
        }
        if (logits[0] && logits[1]) {
            const bool differ = memcmp(logits[0], logits[1], (size_t)n_vocab * sizeof(float)) != 0;
            printf("# %s on %s: --fast-math %s the bits, flag %s\n", models[k], lc_kernels()->isa,
                   differ ? "changes" : "keeps", flags & LC_COMPUTE_FAST_MATH ? "set" : "clear");
            CHECK(!differ || (flags & LC_COMPUTE_FAST_MATH),
                  "%s: --fast-math changed the logits but lc_context_compute_flags says it "
                  "changes nothing (a state saved with it would be used without it)", models[k]);
        }
        free(logits[0]);
        free(logits[1]);
        free(err);
        lc_model_free(m);
    }
}

int main(void)
{
    char model[512], other[512];
    tu_shared("models/stories260K-ff192-q4_1.gguf", model, sizeof(model));
    tu_shared("models/stories260K-ff192-q8_0.gguf", other, sizeof(other));
    if (access(model, R_OK) != 0 || access(other, R_OK) != 0) {
        fprintf(stderr, "SKIP: %s or %s missing\n", model, other);
        return 77;
    }
    test_crc();
    char *err = NULL;
    struct lc_model *m = lc_model_load(model, false, &err);
    struct lc_model *mo = lc_model_load(other, false, &err);
    CHECK(m && mo, "load: %s", err ? err : "?");
    if (!m || !mo)
        return tu_finish("test-kvstate");
    CHECK(lc_kvstate_model_hash(m) != lc_kvstate_model_hash(mo), "the two models hash alike");
    test_cells(m, LC_TYPE_F16, false, false);
    test_cells(m, LC_TYPE_F16, false, true);
    test_cells(m, LC_TYPE_F16, true, false);
    test_cells(m, LC_TYPE_F32, false, false);
    test_cells(m, LC_TYPE_F32, true, true);
    if (m->hp.head_dim % 32 == 0)   /* a Q8_0 cache needs whole blocks per head */
        test_cells(m, LC_TYPE_Q8_0, true, true);
    test_hostile(m);
    test_reply_ids();
    test_fast_math_flag();

    char path[512];
    snprintf(path, sizeof(path), "%s/test-kvstate.%d.json.kv", tmpdir(), (int)getpid());
    unlink(path);
    const char *p1 = "Once upon a time", *p2 = " Then a big dog came.", *p3 = " The end was near.";

    /* A: two turns, the state saved, a third turn (the session that never stopped) */
    struct lc_engine *a = start(model, false, &err);
    CHECK(a != NULL, "start: %s", err ? err : "?");
    if (!a)
        return tu_finish("test-kvstate");
    struct reply r1, r2, ra, rb, rc, r;
    lc_engine_submit(a, p1);
    CHECK(collect(a, &r1, false), "turn 1");
    lc_engine_submit(a, p2);
    CHECK(collect(a, &r2, false), "turn 2");
    lc_engine_save_state(a, path);
    lc_engine_submit(a, p3);
    CHECK(collect(a, &ra, false), "turn 3");
    CHECK(ra.errors == 0, "save: %s", ra.error);
    /* a save that cannot be written: one error, which says the transcript is kept */
    lc_engine_save_state(a, "/nonexistent-dir/x.json.kv");
    lc_engine_save_state(a, "/nonexistent-dir/y.json.kv");
    lc_engine_submit(a, " Again.");
    CHECK(collect(a, &r, false), "turn 4");
    CHECK(r.errors == 1 && !strcmp(r.error, "the KV state /nonexistent-dir/x.json.kv was not saved: "
                                   "the directory /nonexistent-dir does not exist; the transcript is kept (resuming it reads "
                                   "the conversation again)"),
          "save failure: %d errors, '%s'", r.errors, r.error);
    lc_engine_free(a);
    CHECK(file_size(path) > 0, "no state file at %s", path);

    struct lc_chat *conv = lc_chat_new();
    lc_chat_add(conv, LC_ROLE_USER, p1, strlen(p1));
    lc_chat_add(conv, LC_ROLE_ASSISTANT, r1.text, r1.len);
    lc_chat_add(conv, LC_ROLE_USER, p2, strlen(p2));
    lc_chat_add(conv, LC_ROLE_ASSISTANT, r2.text, r2.len);

    /* B: reopened with the state: everything restored, only the new message evaluated, the
     * same reply as A's third */
    int32_t toks[512];
    const int32_t n_p3 = lc_tokenize(m->vocab, p3, strlen(p3), false, false, toks, 512);
    struct lc_engine *b = resume(model, false, conv, path, &r);
    int n_saved = 0;
    if (b) {
        n_saved = r.n_gen;
        char want[1024];
        snprintf(want, sizeof(want), "KV state %s: %d tokens restored in ", path, n_saved);
        CHECK(n_saved > 40, "restored %d tokens", n_saved);
        CHECK(r.notes == 1 && !strncmp(r.note, want, strlen(want)) &&
              !strcmp(r.note + strlen(r.note) - 2, " s"), "note '%s'", r.note);
        lc_engine_submit(b, p3);
        CHECK(collect(b, &rb, false), "resumed turn");
        CHECK(!strcmp(rb.text, ra.text), "resumed with the state:\n got '%s'\nwant '%s'", rb.text, ra.text);
        CHECK(rb.n_eval >= n_p3 && rb.n_eval <= n_p3 + 3, "resumed with the state: %d tokens "
              "evaluated (message %d, conversation %d)", rb.n_eval, n_p3, n_saved);
        lc_engine_free(b);
    }
    /* C: reopened without it (as --no-kv-file): the whole conversation read, the same reply */
    struct lc_engine *c = resume(model, false, conv, NULL, &r);
    if (c) {
        lc_engine_submit(c, p3);
        CHECK(collect(c, &rc, false), "turn without the state");
        CHECK(!strcmp(rc.text, rb.text), "without the state:\n got '%s'\nwant '%s'", rc.text, rb.text);
        /* a base model reads the text as one: BOS and the tokens of all of it */
        char all[8192 * 3];
        snprintf(all, sizeof(all), "%s%s%s%s%s", p1, r1.text, p2, r2.text, p3);
        int32_t big[4096];
        int32_t n_all = lc_tokenize(m->vocab, all, strlen(all), true, false, big, 4096);
        CHECK(rc.n_eval == n_all, "without the state: %d tokens evaluated, the text has %d",
              rc.n_eval, n_all);
        lc_engine_free(c);
    }

    /* refusals */
    {
        char want[256];
        snprintf(want, sizeof(want), "made with another model (%s)", m->name);
        refused(other, false, conv, path, want);
    }
    refused(model, true, conv, path, "made with --cache-type f16; this run uses f32");
    /* the cells' bits depend on --fast-math and -fa: a file made otherwise is read again */
    /* --fast-math counts where the kernels in use have a faster order for this model's weights
     * (AVX-512 and repacked Q4_1); elsewhere it computes as without it and the file is used */
    bool fast_applies = false;
    {
        struct lc_context_params fp = lc_context_default_params();
        fp.n_ctx = 64;
        fp.n_threads = 1;
        fp.fast_math = true;
        struct lc_context *fc = lc_context_new(m, &fp, &err);
        CHECK(fc != NULL, "fast-math context: %s", err ? err : "?");
        fast_applies = fc && (lc_context_compute_flags(fc) & LC_COMPUTE_FAST_MATH);
        lc_context_free(fc);
    }
    printf("# --fast-math %s on %s with %s\n", fast_applies ? "applies" : "changes nothing",
           m->name, lc_kernels()->isa);
    g_fast_math = true;
    if (fast_applies) {
        refused(model, false, conv, path, "made in llama.cpp's order; this run uses --fast-math");
        char fpath[600];
        snprintf(fpath, sizeof(fpath), "%s.fast", path);
        struct reply rf;
        struct lc_engine *fe = resume(model, false, conv, NULL, &rf);
        if (fe) {   /* a file made with --fast-math: refused without it */
            lc_engine_submit(fe, p3);
            CHECK(collect(fe, &rf, false), "--fast-math: a turn");
            lc_engine_save_state(fe, fpath);
            lc_engine_submit(fe, " Again.");
            CHECK(collect(fe, &rf, false) && rf.errors == 0, "--fast-math: saved: %s", rf.error);
            lc_engine_free(fe);
            g_fast_math = false;
            refused(model, false, conv, fpath, "made with --fast-math; this run computes in "
                    "llama.cpp's order");
        }
        unlink(fpath);
    } else {
        struct reply rf;
        struct lc_engine *fe = resume(model, false, conv, path, &rf);
        if (fe) {
            CHECK(rf.n_gen > 10 && rf.notes == 1, "--fast-math without effect: %d restored, '%s'",
                  rf.n_gen, rf.note);
            lc_engine_free(fe);
        }
    }
    g_fast_math = false;
    g_flash_attn = true;
    refused(model, false, conv, path, "made without flash attention; this run uses it (-fa)");
    {
        char fpath[600];
        snprintf(fpath, sizeof(fpath), "%s.fa", path);
        struct reply rf;
        struct lc_engine *fe = resume(model, false, conv, NULL, &rf);
        if (fe) {   /* a file made with -fa: refused without it, used with it */
            lc_engine_submit(fe, p3);
            CHECK(collect(fe, &rf, false), "-fa: a turn");
            lc_engine_save_state(fe, fpath);
            lc_engine_submit(fe, " Again.");   /* after the save, in the engine's order */
            CHECK(collect(fe, &rf, false) && rf.errors == 0, "-fa: saved: %s", rf.error);
            lc_engine_free(fe);
            struct lc_engine *ue = resume(model, false, conv, fpath, &rf);
            if (ue) {   /* the same flags: restored */
                CHECK(rf.n_gen > 10 && rf.notes == 1, "-fa: %d tokens restored with -fa, '%s'",
                      rf.n_gen, rf.note);
                lc_engine_free(ue);
            }
            g_flash_attn = false;
            refused(model, false, conv, fpath, "made with flash attention (-fa); this run "
                    "computes attention without it");
            g_flash_attn = true;
        }
        unlink(fpath);
    }
    g_flash_attn = false;
    long n;
    unsigned char *bytes = read_all(path, &n);
    char bad[600];
    snprintf(bad, sizeof(bad), "%s.bad", path);
    if (bytes) {
        bytes[n - 100] ^= 0x01;   /* in the cells */
        write_all(bad, bytes, n);
        refused(model, false, conv, bad, "bad checksum (the file is damaged)");
        bytes[n - 100] ^= 0x01;
        bytes[80] ^= 0x10;        /* in the token ids */
        write_all(bad, bytes, n);
        refused(model, false, conv, bad, "bad checksum (the file is damaged)");
        bytes[80] ^= 0x10;
        write_all(bad, bytes, n - 10);
        char want[128];
        snprintf(want, sizeof(want), "truncated (%ld of %ld bytes)", n - 10, n);
        refused(model, false, conv, bad, want);
        bytes[8] = 1;   /* version 1 had no compute flags */
        write_all(bad, bytes, n);
        refused(model, false, conv, bad, "format version 1; this llamachat reads version 2");
        bytes[8] = 2;
        bytes[0] = 'X';
        write_all(bad, bytes, n);
        refused(model, false, conv, bad, "not a llamachat KV state file");
        free(bytes);
    }
    unlink(bad);
    /* stopped while reading (Esc, quit): nothing restored, the next reply reads it all */
    {
        char *e2 = NULL;
        /* a slow disk (the engine waits before reading), so that the stop below is seen
         * however busy the machine: without it the load can end before the stop is sent */
        setenv("LLAMACHAT_TEST_SLOW_MS", "200", 1);
        struct lc_engine *st = start(model, false, &e2);
        unsetenv("LLAMACHAT_TEST_SLOW_MS");
        free(e2);
        if (st) {
            lc_engine_set_conversation(st, conv);
            lc_engine_load_state(st, path);
            lc_engine_stop(st);   /* seen at the first layer */
            CHECK(collect(st, &r, false) && r.reason == LC_DONE_STATE, "stopped load");
            char want[1024];
            snprintf(want, sizeof(want), "KV state %s: reading it was stopped; the conversation "
                     "is read again with the next message", path);
            CHECK(r.n_gen == 0 && r.notes == 1 && !strcmp(r.note, want), "stopped: %d restored, '%s'",
                  r.n_gen, r.note);
            lc_engine_submit(st, p3);
            CHECK(collect(st, &rc, false), "after the stopped load");
            CHECK(!strcmp(rc.text, rb.text) && rc.n_eval > n_saved, "after the stopped load: %d "
                  "evaluated, '%s'", rc.n_eval, rc.text);
            lc_engine_free(st);
        }
    }
    /* a missing file: no note, nothing restored */
    struct lc_engine *d = resume(model, false, conv, bad, &r);
    if (d) {
        CHECK(r.notes == 0 && r.errors == 0 && r.n_gen == 0, "missing file: %d notes '%s'", r.notes, r.note);
        lc_engine_free(d);
    }
    /* the second message edited: the tokens before it are reused, and said so */
    {
        struct lc_chat *edited = lc_chat_new();
        const char *p2e = " Then a big cat came.";
        lc_chat_add(edited, LC_ROLE_USER, p1, strlen(p1));
        lc_chat_add(edited, LC_ROLE_ASSISTANT, r1.text, r1.len);
        lc_chat_add(edited, LC_ROLE_USER, p2e, strlen(p2e));
        struct lc_engine *f = resume(model, false, edited, path, &r);
        if (f) {
            char want[1024], tail[256];
            CHECK(r.n_gen > 10 && r.n_gen < n_saved - 10, "edited: %d of %d restored", r.n_gen, n_saved);
            snprintf(want, sizeof(want), "KV state %s: %d of its %d tokens restored in ", path,
                     r.n_gen, n_saved);
            snprintf(tail, sizeof(tail), " s; the saved tokens differ from the conversation's from "
                     "token %d", r.n_gen);
            CHECK(r.notes == 1 && !strncmp(r.note, want, strlen(want)) &&
                  strstr(r.note, tail) && !strcmp(strstr(r.note, tail), tail), "edited: '%s'", r.note);
            /* and the reply is the one of reading it all */
            struct lc_engine *g = resume(model, false, edited, NULL, &rc);
            lc_engine_regen(f);
            CHECK(collect(f, &rb, false), "edited: reply");
            if (g) {
                lc_engine_regen(g);
                CHECK(collect(g, &rc, false), "edited: reply without the state");
                CHECK(!strcmp(rb.text, rc.text), "edited:\n got '%s'\nwant '%s'", rb.text, rc.text);
                CHECK(rb.n_eval + 10 < rc.n_eval, "edited: %d evaluated with, %d without",
                      rb.n_eval, rc.n_eval);
                lc_engine_free(g);
            }
            lc_engine_free(f);
        }
        lc_chat_free(edited);
    }
    /* a /delete while the state is written (a slow save): the file the UI removes before the
     * engine renames it into place is removed again by lc_engine_delete_state, after the save */
    {
        char *e2 = NULL;
        setenv("LLAMACHAT_TEST_SLOW_SAVE_MS", "400", 1);
        struct lc_engine *dl = start(model, false, &e2);
        unsetenv("LLAMACHAT_TEST_SLOW_SAVE_MS");
        free(e2);
        unlink(path);
        if (dl) {
            lc_engine_submit(dl, p1);
            CHECK(collect(dl, &r, false), "delete race: turn");
            lc_engine_save_state(dl, path);
            struct timespec ts = { 0, 100 * 1000000L };
            nanosleep(&ts, NULL);        /* the engine is inside the save's wait */
            unlink(path);                /* what the UI's /delete does at once */
            lc_engine_delete_state(dl, path);
            lc_engine_submit(dl, p2);     /* runs after both: then they are done */
            CHECK(collect(dl, &r, false), "delete race: second turn");
            CHECK(r.errors == 0, "delete race: %s", r.error);
            CHECK(access(path, F_OK) != 0, "%s outlived its /delete", path);
            /* forgotten as the last file saved: the same cache is written there again */
            lc_engine_save_state(dl, path);
            lc_engine_delete_state(dl, path);
            lc_engine_save_state(dl, path);
            lc_engine_delete_state(dl, "/nonexistent-dir/z.json.kv");   /* no such file: silent */
            lc_engine_submit(dl, p3);
            CHECK(collect(dl, &r, false), "delete race: third turn");
            CHECK(r.errors == 0, "delete of a missing file: %s", r.error);
            CHECK(file_size(path) > 0, "no state file at %s after a new save", path);
            /* a delete queued at quit still happens, after the save queued before it */
            lc_engine_save_state(dl, path);
            lc_engine_delete_state(dl, path);
            lc_engine_free(dl);
            CHECK(access(path, F_OK) != 0, "%s: the delete queued at quit did not happen", path);
        }
    }
    unlink(path);
    lc_chat_free(conv);
    lc_model_free(m);
    lc_model_free(mo);
    return tu_finish("test-kvstate");
}
