/*
 * test-engine.c - the inference thread through its public protocol, on stories260K Q4_1:
 *   - a first reply equals greedy generation done directly with the library (as the CLI does);
 *   - a second turn, evaluated on top of the kept KV cache, equals greedy generation over the
 *     whole text from scratch, and evaluates only the new tokens (context stats);
 *   - /regen gives the same greedy reply again; stop ends a reply with LC_DONE_STOPPED;
 *   - a small context overflows: the oldest turns are dropped with a note, replies go on.
 */
#include <poll.h>
#include <string.h>
#include <unistd.h>

#include "engine.h"
#include "llm/context.h"
#include "llm/model.h"
#include "llm/sampler.h"
#include "llm/tokenizer.h"
#include "testutil.h"

struct reply {
    char text[8192];
    size_t len;
    int reason, n_gen;
    int notes;
    char note[512];
    int errors;
    char error[512];
    int32_t n_past;
    int n_eval;
    int seeds;       /* LC_EV_INFO "seed=..." reports, and the last one */
    char seed[64];
};

/* Wait for events until DONE (or LOADED when want_loaded); 60 s timeout. */
static bool collect(struct lc_engine *e, struct reply *r, bool want_loaded, bool stop_after_text)
{
    memset(r, 0, sizeof(*r));
    r->reason = -1;
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
            if (stop_after_text)
                lc_engine_stop(e);
            break;
        case LC_EV_NOTE: {   /* long notes come in several records, more = 1 on all but the last */
            static bool continued;
            if (!continued) {
                r->notes++;
                r->note[0] = '\0';
            }
            size_t have = strlen(r->note);
            snprintf(r->note + have, sizeof(r->note) - have, "%.*s", (int)ev.len, ev.text);
            continued = ev.more;
            break;
        }
        case LC_EV_ERROR: {   /* counted once per message, as notes */
            static bool err_continued;
            if (!err_continued) {
                r->errors++;
                r->error[0] = '\0';
            }
            size_t have = strlen(r->error);
            snprintf(r->error + have, sizeof(r->error) - have, "%.*s", (int)ev.len, ev.text);
            err_continued = ev.more;
            fprintf(stderr, "engine error: %.*s\n", (int)ev.len, ev.text);
            if (want_loaded)
                return false;
            break;
        }
        case LC_EV_STATS:
            r->n_past = ev.a;
            break;
        case LC_EV_INFO:
            if (ev.len > 5 && !memcmp(ev.text, "seed=", 5)) {
                r->seeds++;
                snprintf(r->seed, sizeof(r->seed), "%.*s", (int)ev.len, ev.text);
            }
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

/* Greedy continuation of text computed directly with the library (fresh context). */
static char *direct_greedy(const struct lc_model *m, const char *text, int n_predict, int n_ctx)
{
    struct lc_context_params cp = lc_context_default_params();
    cp.n_ctx = n_ctx;
    cp.n_threads = 1;
    char *err = NULL;
    struct lc_context *c = lc_context_new(m, &cp, &err);
    if (!c) {
        free(err);
        return NULL;
    }
    struct lc_sampler_params sp = lc_sampler_default_params();
    sp.temp = 0;
    struct lc_sampler *s = lc_sampler_new(&sp, m->hp.n_vocab);
    int32_t toks[4096];
    int32_t n = lc_tokenize(m->vocab, text, strlen(text), lc_vocab_add_bos(m->vocab), false, toks, 4096);
    char *out = calloc(1, 8192);
    size_t len = 0;
    if (n > 0 && lc_context_decode(c, toks, n, 0, false, &err) == 0) {
        for (int32_t i = 0; i < n; i++)
            lc_sampler_accept(s, toks[i]);
        int32_t pos = n;
        for (int g = 0; g < n_predict; g++) {
            int32_t t = lc_sampler_sample(s, lc_context_logits(c, -1));
            if (lc_vocab_is_eog(m->vocab, t))
                break;
            lc_sampler_accept(s, t);
            char piece[256];
            int32_t pl = lc_token_to_piece(m->vocab, t, piece, sizeof(piece), false);
            if (pl > 0 && len + (size_t)pl < 8191) {
                memcpy(out + len, piece, (size_t)pl);
                len += (size_t)pl;
            }
            if (g + 1 < n_predict && lc_context_decode(c, &t, 1, pos++, false, &err) != 0)
                break;
        }
    }
    free(err);
    lc_sampler_free(s);
    lc_context_free(c);
    return out;
}

/*
 * Context shift: in a one-layer model a token's key and value depend on the token and its
 * position only (in deeper layers they also carry what it attended to, which a shift keeps, as
 * llama.cpp's does), so a cache shifted by lc_context_shift must give the logits of evaluating
 * the kept tokens afresh.  Tokens t[0..40) are decoded, positions [4, 14) dropped; the next
 * token's logits are compared with a context that read t[0..4) + t[14..40) directly.  F16 keys
 * are rounded once more by the rotation, so equality is to a tolerance, and the argmax must agree.
 */
static void test_shift(const struct lc_model *m, enum lc_type kv)
{
    struct lc_context_params cp = lc_context_default_params();
    cp.n_ctx = 64;
    cp.n_threads = 1;
    cp.kv_type = kv;
    char *err = NULL;
    struct lc_context *a = lc_context_new(m, &cp, &err), *b = lc_context_new(m, &cp, &err);
    CHECK(a && b, "shift contexts: %s", err);
    if (!a || !b)
        return;
    const char *text = "Once upon a time, there was a little girl named Lily. She loved to play "
                       "outside in the park with her dog and her red ball.";
    int32_t t[128], kept[128];
    int32_t n = lc_tokenize(m->vocab, text, strlen(text), true, false, t, 128);
    CHECK(n >= 40, "shift text: %d tokens", n);
    n = 40;
    int32_t nk = 0;
    for (int32_t i = 0; i < n; i++)
        if (i < 4 || i >= 14)
            kept[nk++] = t[i];
    int32_t next = t[n - 1];
    CHECK(lc_context_decode(a, t, n, 0, false, &err) == 0, "decode a: %s", err);
    CHECK(lc_context_shift(a, 4, 10) == 0 && lc_context_n_past(a) == n - 10, "shift: n_past %d",
          lc_context_n_past(a));
    CHECK(lc_context_shift(a, 20, 100) == -1 && lc_context_n_past(a) == n - 10, "shift past the end");
    CHECK(lc_context_decode(a, &next, 1, nk, false, &err) == 0, "decode a next: %s", err);
    kept[nk] = next;
    CHECK(lc_context_decode(b, kept, nk + 1, 0, false, &err) == 0, "decode b: %s", err);
    const float *la = lc_context_logits(a, -1), *lb = lc_context_logits(b, -1);
    float maxd = 0;
    int32_t am = 0, bm = 0;
    for (int32_t i = 0; i < m->hp.n_vocab; i++) {
        float d = la[i] > lb[i] ? la[i] - lb[i] : lb[i] - la[i];
        if (d > maxd)
            maxd = d;
        if (la[i] > la[am])
            am = i;
        if (lb[i] > lb[bm])
            bm = i;
    }
    CHECK(maxd < (kv == LC_TYPE_F32 ? 1e-3f : 2e-2f) && am == bm,
          "shifted cache (%s): max logit difference %g, argmax %d vs %d",
          kv == LC_TYPE_F32 ? "f32" : "f16", (double)maxd, am, bm);
    lc_context_free(a);
    lc_context_free(b);
}

int main(void)
{
    char path[512];
    tu_shared("models/stories260K-ff192-q4_1.gguf", path, sizeof(path));
    if (access(path, R_OK) != 0) {
        fprintf(stderr, "SKIP: %s missing\n", path);
        return 77;
    }
    char *err = NULL;
    struct lc_model *m = lc_model_load(path, false, &err);
    CHECK(m != NULL, "load: %s", err);
    if (!m)
        return tu_finish("test-engine");

    {   /* a one-layer random-weight model with stories260K's vocabulary */
        char cmd[1024], one[256];
        const char *bd = getenv("LC_BUILDDIR");
        snprintf(one, sizeof(one), "%s/test-engine-1layer.%d.gguf", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp", (int)getpid());
        snprintf(cmd, sizeof(cmd), "%s/llamachat-synth -q -o %s --n-embd 64 --n-layer 1 --n-head 4 "
                 "--n-ff 128 --n-vocab 512 --type f16 --scale 0.5", bd ? bd : ".", one);
        struct lc_model *m1 = system(cmd) == 0 ? lc_model_load(one, false, &err) : NULL;
        CHECK(m1 != NULL, "one-layer model: %s", err ? err : cmd);
        if (m1) {
            test_shift(m1, LC_TYPE_F32);
            test_shift(m1, LC_TYPE_F16);
            lc_model_free(m1);
        }
        unlink(one);
    }

    const int N = 16;
    struct lc_engine_config cfg = { .model_path = path, .n_ctx = 256, .n_threads = 1,
                                    .n_batch = 512, .n_predict = N };
    cfg.sampling = lc_sampler_default_params();
    cfg.sampling.temp = 0;
    struct lc_engine *e = lc_engine_start(&cfg, &err);
    CHECK(e != NULL, "start: %s", err);
    if (!e)
        return tu_finish("test-engine");
    struct reply r1, r2, r;
    CHECK(collect(e, &r, true, false), "no LOADED event");

    /* turn 1 */
    const char *p1 = "Once upon a time";
    lc_engine_submit(e, p1);
    CHECK(collect(e, &r1, false, false), "turn 1 timed out");
    char *want1 = direct_greedy(m, p1, N, 256);
    CHECK(want1 && strcmp(r1.text, want1) == 0, "turn 1:\n got '%s'\nwant '%s'", r1.text, want1);
    CHECK(r1.reason == LC_DONE_LIMIT && r1.n_gen == N, "turn 1 reason %d n_gen %d", r1.reason, r1.n_gen);

    /* turn 2: the whole text from scratch must give the same continuation */
    const char *p2 = " Then a big dog came.";
    lc_engine_submit(e, p2);
    CHECK(collect(e, &r2, false, false), "turn 2 timed out");
    char all[8192 * 2 + 64];
    snprintf(all, sizeof(all), "%s%s%s", p1, r1.text, p2);
    char *want2 = direct_greedy(m, all, N, 256);
    CHECK(want2 && strcmp(r2.text, want2) == 0, "turn 2:\n got '%s'\nwant '%s'", r2.text, want2);
    /* The cache kept turn 1: n_past grew by about the new message's tokens and the reply,
     * which is far less than the whole text (checked through the tokens the text has). */
    int32_t toks[4096];
    int32_t n_all = lc_tokenize(m->vocab, all, strlen(all), true, false, toks, 4096);
    CHECK(r2.n_past >= n_all && r2.n_past <= n_all + N, "n_past %d, text %d tokens", r2.n_past, n_all);
    int32_t n_p1 = lc_tokenize(m->vocab, p1, strlen(p1), true, false, toks, 4096);
    int32_t n_p2 = lc_tokenize(m->vocab, p2, strlen(p2), false, false, toks, 4096);
    CHECK(r1.n_eval == n_p1, "turn 1 evaluated %d tokens, prompt has %d", r1.n_eval, n_p1);
    /* turn 2 evaluates the new message (its first token may merge with the reply's last) and
     * the reply's last sampled token, which was never decoded: not the whole text again */
    CHECK(r2.n_eval >= n_p2 && r2.n_eval <= n_p2 + 3, "turn 2 evaluated %d tokens; message %d, whole text %d",
          r2.n_eval, n_p2, n_all);

    /* regen: same greedy reply */
    lc_engine_regen(e);
    CHECK(collect(e, &r, false, false), "regen timed out");
    CHECK(strcmp(r.text, r2.text) == 0, "regen:\n got '%s'\nwant '%s'", r.text, r2.text);

    /* stop */
    struct lc_sampler_params sp = cfg.sampling;
    lc_engine_set_params(e, &sp, -1);
    lc_engine_submit(e, " The end.");
    CHECK(collect(e, &r, false, true), "stop timed out");
    CHECK(r.reason == LC_DONE_STOPPED, "stop: reason %d", r.reason);
    CHECK(r.n_gen >= 1 && r.n_gen < 200, "stop: %d tokens", r.n_gen);

    /* a parameter changed while the model writes applies to the running reply: a greedy reply
     * with no limit never ends on its own here, a limit set after its first text ends it */
    lc_engine_set_params(e, &sp, -1);
    lc_engine_submit(e, " Once more.");
    {
        bool limited = false, done = false;
        int reason = -1;
        for (int spins = 0; spins < 600 && !done;) {
            struct lc_event ev;
            if (!lc_engine_poll(e, &ev)) {
                struct pollfd pf = { lc_engine_fd(e), POLLIN, 0 };
                if (poll(&pf, 1, 100) == 0)
                    spins++;
                continue;
            }
            if (ev.type == LC_EV_TEXT && !limited) {
                lc_engine_set_params(e, &sp, 5);
                limited = true;
            }
            if (ev.type == LC_EV_DONE) {
                done = true;
                reason = ev.a;
            }
        }
        CHECK(done && reason == LC_DONE_LIMIT, "live max_tokens: done %d reason %d", done, reason);
    }

    /* clear: a fresh conversation gives turn 1's reply again */
    lc_engine_set_params(e, &sp, N);
    lc_engine_clear(e);
    lc_engine_submit(e, p1);
    CHECK(collect(e, &r, false, false), "after clear timed out");
    CHECK(strcmp(r.text, r1.text) == 0, "after clear:\n got '%s'\nwant '%s'", r.text, r1.text);

    /* undo: the second turn taken back; the cache is rolled back at once to the end of the
     * first reply (all its N ids were decoded by the second turn), and the same message again
     * is evaluated alone and answered as before */
    lc_engine_submit(e, p2);
    CHECK(collect(e, &r, false, false), "turn 2 again timed out");
    lc_engine_undo(e);
    int32_t undo_past = -1;
    for (int spins = 0; spins < 600 && undo_past < 0;) {
        struct lc_event ev;
        if (!lc_engine_poll(e, &ev)) {
            struct pollfd pf = { lc_engine_fd(e), POLLIN, 0 };
            if (poll(&pf, 1, 100) == 0)
                spins++;
            continue;
        }
        if (ev.type == LC_EV_STATS)
            undo_past = ev.a;
    }
    CHECK(undo_past == n_p1 + N, "undo: n_past %d, want %d (prompt %d + reply %d)", undo_past,
          n_p1 + N, n_p1, N);
    lc_engine_submit(e, p2);
    CHECK(collect(e, &r, false, false), "after undo timed out");
    CHECK(strcmp(r.text, r2.text) == 0, "after undo:\n got '%s'\nwant '%s'", r.text, r2.text);
    CHECK(r.n_eval >= n_p2 - 1 && r.n_eval <= n_p2 + 1, "after undo evaluated %d tokens; message %d",
          r.n_eval, n_p2);

    /* set_reply: the model reads the reply chosen (a text it never wrote is tokenized) */
    lc_engine_set_reply(e, " Bob ran.");
    const char *p3 = " Then they slept.";
    lc_engine_submit(e, p3);
    CHECK(collect(e, &r, false, false), "after set_reply timed out");
    snprintf(all, sizeof(all), "%s%s%s Bob ran.%s", p1, r1.text, p2, p3);
    char *want3 = direct_greedy(m, all, N, 256);
    CHECK(want3 && strcmp(r.text, want3) == 0, "after set_reply:\n got '%s'\nwant '%s'", r.text,
          want3 ? want3 : "(null)");
    free(want3);
    CHECK(r.seeds == 1 && !strcmp(r.seed, "seed=none"), "greedy: %d seed reports, last '%s'",
          r.seeds, r.seed);
    /* the temperature raised between replies, after a greedy one: one seed reported, this
     * reply's (the last reply's sampler reported its own unused seed first) */
    {
        struct lc_sampler_params hot = cfg.sampling;
        hot.temp = 0.8f;
        hot.seed = 1234;
        lc_engine_set_params(e, &hot, 3);
        lc_engine_submit(e, " Then.");
        CHECK(collect(e, &r, false, false), "sampled reply timed out");
        CHECK(r.seeds == 1 && !strcmp(r.seed, "seed=1234"), "sampled: %d seed reports, last '%s'",
              r.seeds, r.seed);
    }
    lc_engine_free(e);

    /* overflow: 64-token context, 16-token replies; the chat goes on with a note */
    cfg.n_ctx = 64;
    e = lc_engine_start(&cfg, &err);
    CHECK(e && collect(e, &r, true, false), "small engine");
    int notes = 0, done = 0;
    for (int turn = 0; e && turn < 6; turn++) {
        lc_engine_submit(e, " Lily saw a cat and a dog.");
        if (collect(e, &r, false, false) && r.errors == 0 && r.reason == LC_DONE_LIMIT)
            done++;
        notes += r.notes;
        if (r.notes)
            CHECK(strstr(r.note, "context full (64 tokens)") != NULL, "note: %s", r.note);
        CHECK(r.n_past <= 64, "n_past %d", r.n_past);
    }
    CHECK(done == 6, "%d of 6 replies completed", done);
    CHECK(notes >= 1, "no context-full note");
    /* one reply longer than the whole context: no message is cut in the middle and the reply
     * is not emptied, so it ends when the context is full of this turn, with a note */
    if (e) {
        lc_engine_clear(e);
        lc_engine_set_params(e, &sp, 150);
        lc_engine_submit(e, "Once upon a time");
        CHECK(collect(e, &r, false, false), "long reply timed out");
        CHECK(r.errors == 0 && r.reason == LC_DONE_CONTEXT && r.n_gen > 40 && r.n_gen < 64,
              "long reply: errors %d reason %d n_gen %d", r.errors, r.reason, r.n_gen);
        CHECK(r.notes >= 1 && strstr(r.note, "is full with this turn alone: the reply ends here"),
              "long reply note: %s", r.note);
        CHECK(r.n_past <= 64, "n_past %d", r.n_past);
        /* a message that cannot fit at all is refused, and the engine forgets it */
        char big[2048];
        memset(big, 0, sizeof(big));
        for (int i = 0; i < 60; i++)
            strcat(big, " Lily saw a cat.");
        lc_engine_submit(e, big);
        CHECK(collect(e, &r, false, false), "too long timed out");
        CHECK(r.reason == LC_DONE_TOO_LONG && r.n_gen == 0 && r.errors == 1 &&
              strstr(r.error, "message not sent: with it the prompt is ") &&
              strstr(r.error, "the context holds 64 (-c); it is back in the input line"),
              "too long: reason %d errors %d '%s'", r.reason, r.errors, r.error);
        lc_engine_submit(e, " Lily saw a cat.");
        CHECK(collect(e, &r, false, false) && r.errors == 0 && r.n_gen > 0,
              "after a refused message: errors %d n_gen %d", r.errors, r.n_gen);
    }
    lc_engine_free(e);

    /* a refused message costs nothing: the turns before it are still read (the prompt of the
     * next turn is evaluated from where the last reply ended, not from scratch) */
    cfg.n_ctx = 128;
    e = lc_engine_start(&cfg, &err);
    CHECK(e && collect(e, &r, true, false), "engine for the refusal test");
    if (e) {
        lc_engine_set_params(e, &sp, 4);
        lc_engine_submit(e, "Once upon a time");
        CHECK(collect(e, &r, false, false) && r.errors == 0, "refusal: turn 1");
        lc_engine_submit(e, " Lily saw a cat.");
        CHECK(collect(e, &r, false, false) && r.errors == 0, "refusal: turn 2");
        int32_t past = r.n_past;
        char big[4096] = "";
        for (int i = 0; i < 60; i++)
            strcat(big, " Lily saw a cat.");
        lc_engine_submit(e, big);
        CHECK(collect(e, &r, false, false) && r.reason == LC_DONE_TOO_LONG, "refusal: reason %d", r.reason);
        lc_engine_submit(e, " The sun.");
        CHECK(collect(e, &r, false, false) && r.errors == 0 && r.notes == 0,
              "refusal: turn 3 errors %d notes %d (%s)", r.errors, r.notes, r.note);
        /* evaluated: the last reply token never decoded, the new message, nothing older */
        CHECK(r.n_eval >= 3 && r.n_eval <= 8 && r.n_past > past,
              "refusal: turn 3 evaluated %d tokens (n_past %d, before %d): earlier turns were lost",
              r.n_eval, r.n_past, past);
    }
    lc_engine_free(e);

    /* a chat template forced on a base model: rendered, tokenized with special tokens, and
     * answered; a system prompt goes first.  (Unknown template names fall back with a note.) */
    cfg.n_ctx = 256;
    cfg.chat_template = "chatml";
    cfg.system_prompt = "Be brief.";
    e = lc_engine_start(&cfg, &err);
    CHECK(e && collect(e, &r, true, false), "chatml engine");
    if (e) {
        lc_engine_submit(e, "Hello");
        CHECK(collect(e, &r, false, false) && r.errors == 0 &&
              (r.reason == LC_DONE_LIMIT || r.reason == LC_DONE_EOG), "chatml reply: reason %d", r.reason);
        /* "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHello<|im_end|>\n<|im_start|>assistant\n" */
        int32_t n_tmpl = lc_tokenize(m->vocab,
            "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHello<|im_end|>\n<|im_start|>assistant\n",
            strlen("<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHello<|im_end|>\n<|im_start|>assistant\n"),
            true, true, toks, 4096);
        CHECK(r.n_eval == n_tmpl, "chatml prompt: %d tokens evaluated, rendering has %d", r.n_eval, n_tmpl);
    }
    lc_engine_free(e);
    cfg.chat_template = "no-such-template";
    cfg.system_prompt = NULL;
    e = lc_engine_start(&cfg, &err);
    CHECK(e != NULL, "start");
    if (e) {
        struct reply rn;
        memset(&rn, 0, sizeof(rn));
        /* the note comes before LOADED */
        struct lc_event ev;
        int seen_note = 0;
        for (int spins = 0; spins < 600;) {
            if (!lc_engine_poll(e, &ev)) {
                struct pollfd pf = { lc_engine_fd(e), POLLIN, 0 };
                if (poll(&pf, 1, 100) == 0)
                    spins++;
                continue;
            }
            if (ev.type == LC_EV_NOTE && strstr(ev.text, "unknown chat template 'no-such-template'"))
                seen_note = 1;
            if (ev.type == LC_EV_LOADED)
                break;
        }
        CHECK(seen_note, "no note for an unknown template");
    }
    lc_engine_free(e);
    cfg.chat_template = NULL;

    /* /model: a bad file keeps the model; Esc cancels; a switch keeps the conversation, which
     * the new model reads again from scratch (same text as that model fresh) */
    {
        char f32[512];
        tu_shared("models/stories260K.gguf", f32, sizeof(f32));
        struct lc_model *m32 = lc_model_load(f32, false, &err);
        CHECK(m32 != NULL, "load f32: %s", err);
        /* a slow disk (the engine waits before each switch's load and each DONE), so that the
         * switch is still busy when it is asked, however busy the machine: without it the
         * engine could fail to open the missing file before the check */
        setenv("LLAMACHAT_TEST_SLOW_MS", "200", 1);
        e = lc_engine_start(&cfg, &err);
        unsetenv("LLAMACHAT_TEST_SLOW_MS");
        CHECK(e && collect(e, &r, true, false), "switch: start");
        if (e && m32) {
            lc_engine_submit(e, p1);
            CHECK(collect(e, &r1, false, false) && !strcmp(r1.text, want1), "switch: turn 1 '%s'", r1.text);
            lc_engine_load_model(e, "/nonexistent.gguf");
            CHECK(lc_engine_busy(e), "busy while switching");
            CHECK(collect(e, &r, false, false) && r.reason == LC_DONE_ERROR && r.errors == 1 &&
                  strstr(r.error, "/nonexistent.gguf") && !strcmp(r.note, "the model was not changed: still using llama"),
                  "bad file: reason %d errors %d '%s' note '%s'", r.reason, r.errors, r.error, r.note);
            /* Esc while it loads: the engine may finish loading these small models before the
             * Esc arrives (a thread descheduled between the two calls on a loaded machine);
             * then the switch is done and the next try loads the other one.  One of a few tries
             * must be cancelled, with its note. */
            bool cancelled = false;
            const char *alt[2] = {f32, path};
            for (int a = 0; a < 8 && !cancelled; a++) {
                lc_engine_load_model(e, alt[a % 2]);
                lc_engine_stop(e);
                CHECK(collect(e, &r, false, false), "cancel: try %d ended", a);
                if (r.reason == LC_DONE_STOPPED) {
                    CHECK(!strcmp(r.note, "model switch cancelled: still using llama"),
                          "cancel: note '%s'", r.note);
                    cancelled = true;
                } else {
                    CHECK(r.reason == LC_DONE_EOG, "cancel: try %d: reason %d", a, r.reason);
                }
            }
            CHECK(cancelled, "no model load was cancelled in 8 tries");
            lc_engine_load_model(e, f32);
            CHECK(collect(e, &r, false, false) && r.reason == LC_DONE_EOG && r.errors == 0, "switch: reason %d", r.reason);
            lc_engine_submit(e, p2);
            CHECK(collect(e, &r2, false, false), "switch: turn 2");
            char both[8192 * 2 + 64];
            snprintf(both, sizeof(both), "%s%s%s", p1, r1.text, p2);
            char *want = direct_greedy(m32, both, N, 256);
            CHECK(want && !strcmp(r2.text, want), "after the switch:\n got '%s'\nwant '%s'", r2.text, want ? want : "");
            CHECK(r2.n_eval > 0 && r2.n_past == r2.n_eval + N - 1, "the whole conversation read again: n_eval %d n_past %d",
                  r2.n_eval, r2.n_past);
            free(want);
        }
        lc_engine_free(e);
        lc_model_free(m32);
    }

    /* a bad model path is an error event, not a crash */
    cfg.model_path = "/nonexistent.gguf";
    e = lc_engine_start(&cfg, &err);
    CHECK(e && !collect(e, &r, true, false), "bad model loaded?");
    if (e) {
        lc_engine_submit(e, "hi");
        CHECK(collect(e, &r, false, false) && r.reason == LC_DONE_ERROR && r.errors == 1,
              "submit without a model: reason %d errors %d", r.reason, r.errors);
    }
    lc_engine_free(e);

    free(want1);
    free(want2);
    lc_model_free(m);
    return tu_finish("test-engine");
}
