/*
 * test-remote.c - the engine's remote mode against tests/fake-openai.py (URL in argv[1]):
 * every failure is one clear line and never a hang, the API key never appears in a message,
 * Esc (lc_engine_stop) cancels a stalled request at once, a cut stream keeps its partial reply,
 * recorded streams come through HTTP intact, and parameters set between replies go into the
 * next request's fields.  argv[2]: the fake's log of request bodies.
 */
#include <poll.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "engine.h"
#include "testutil.h"

#define KEY "sk-test-5ecret-Key-0123456789"

struct got {
    char text[4096], error[1024], name[128];
    size_t len;
    int reason, loaded, errors;
    int32_t n_ctx;   /* the last LC_EV_STATS's context size (0: the server did not say) */
};

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Events until DONE (or LOADED/ERROR when loading); stop after stop_after s if > 0. */
static bool collect(struct lc_engine *e, struct got *g, bool loading, double stop_after)
{
    memset(g, 0, sizeof(*g));
    g->reason = -1;
    double t0 = now_s();
    bool stopped = false;
    while (now_s() - t0 < 30) {
        if (stop_after > 0 && !stopped && now_s() - t0 > stop_after) {
            lc_engine_stop(e);
            stopped = true;
        }
        struct lc_event ev;
        if (!lc_engine_poll(e, &ev)) {
            struct pollfd p = { lc_engine_fd(e), POLLIN, 0 };
            poll(&p, 1, 20);
            continue;
        }
        switch (ev.type) {
        case LC_EV_INFO:
            if (!strncmp(ev.text, "name=", 5))
                snprintf(g->name, sizeof(g->name), "%.*s", ev.len - 5, ev.text + 5);
            break;
        case LC_EV_LOADED:
            g->loaded = 1;
            if (loading && !ev.more)
                return true;
            break;
        case LC_EV_TEXT:
            memcpy(g->text + g->len, ev.text, ev.len);
            g->len += ev.len;
            g->text[g->len] = '\0';
            break;
        case LC_EV_ERROR: {
            size_t h = strlen(g->error);
            snprintf(g->error + h, sizeof(g->error) - h, "%.*s", (int)ev.len, ev.text);
            g->errors++;
            if (loading && !ev.more)
                return true;
            break;
        }
        case LC_EV_STATS:
            g->n_ctx = ev.b;
            break;
        case LC_EV_DONE:
            g->reason = ev.a;
            return true;
        default:
            break;
        }
    }
    return false;
}

static struct lc_engine *start(const char *url)
{
    struct lc_engine_config cfg = {
        .sampling = lc_sampler_default_params(), .n_predict = -1,
        .remote_url = url, .remote_api_key_env = "LC_TEST_REMOTE_KEY",
    };
    char *err = NULL;
    struct lc_engine *e = lc_engine_start(&cfg, &err);
    CHECK(e, "start: %s", err ? err : "?");
    free(err);
    return e;
}

/* A reply from base/mode; returns the engine (caller frees) with g filled. */
static struct lc_engine *ask(const char *base, const char *mode, struct got *g, double stop_after,
                             double *elapsed)
{
    char url[512];
    snprintf(url, sizeof(url), "%s/%s", base, mode);
    struct lc_engine *e = start(url);
    if (!e)
        return NULL;
    CHECK(collect(e, g, true, 0), "%s: no LOADED/ERROR", mode);
    if (!g->loaded) {
        fprintf(stderr, "%-8s load error='%s'\n", mode, g->error);
        return e;
    }
    double t0 = now_s();
    lc_engine_submit(e, "hi");
    CHECK(collect(e, g, false, stop_after), "%s: no DONE within 30 s", mode);
    if (elapsed)
        *elapsed = now_s() - t0;
    CHECK(!strstr(g->error, KEY) && !strstr(g->error, "5ecret"), "%s: key in message: %s", mode, g->error);
    fprintf(stderr, "%-8s reason=%d text='%s' error='%s'\n", mode, g->reason, g->text, g->error);
    return e;
}

static void expect_error(const char *base, const char *mode, const char *want1, const char *want2)
{
    struct got g;
    lc_engine_free(ask(base, mode, &g, 0, NULL));
    CHECK(strstr(g.error, want1) && (!want2 || strstr(g.error, want2)),
          "%s: error '%s' lacks '%s' / '%s'", mode, g.error, want1, want2 ? want2 : "");
    CHECK(!strchr(g.error, '\n'), "%s: error of several lines", mode);
    CHECK(!strstr(g.error, KEY) && !strstr(g.error, "5ecret"), "%s: key in message: %s", mode, g.error);
}

/* the last line of the fake server's request log at path into last (size bytes; "" if none) */
static void last_request(const char *path, char *last, size_t size)
{
    FILE *f = fopen(path, "r");
    char line[8192];
    last[0] = '\0';
    while (f && fgets(line, sizeof(line), f))
        snprintf(last, size, "%s", line);
    if (f)
        fclose(f);
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: test-remote BASE_URL REQUEST_LOG\n");
        return 2;
    }
    const char *base = argv[1];
    setenv("LC_TEST_REMOTE_KEY", KEY, 1);
    setenv("LLAMACHAT_REMOTE_IDLE_TIMEOUT", "2", 1);
    struct got g;
    struct lc_engine *e = ask(base, "ok", &g, 0, NULL);
    CHECK(!strcmp(g.text, "Hello there") && g.reason == LC_DONE_EOG, "ok: '%s' %d", g.text, g.reason);
    /* parameters set between replies are the next request's fields */
    struct lc_sampler_params p = lc_sampler_default_params();
    p.temp = 0.25f;
    p.top_k = 7;
    p.top_p = 0.95f;           /* floats: the request says the value set, not the float's */
    p.min_p = 0.05f;           /* double (it sent "top_p":0.94999998807907104) */
    p.repeat_penalty = 1.1f;
    p.seed = 1234;
    lc_engine_set_params(e, &p, 5);
    lc_engine_submit(e, "again");
    CHECK(collect(e, &g, false, 0) && g.reason == LC_DONE_EOG, "ok 2: %d", g.reason);
    lc_engine_free(e);
    {
        char last[8192];
        last_request(argv[2], last, sizeof(last));
        CHECK(strstr(last, "\"temperature\":0.25") && strstr(last, "\"top_k\":7") &&
              strstr(last, "\"seed\":1234") && strstr(last, "\"max_tokens\":5") &&
              strstr(last, "\"model\":\"fake-model\"") && strstr(last, "\"stream\":true"),
              "request fields: %s", last);
        CHECK(strstr(last, "\"temperature\":0.25,") && strstr(last, "\"top_p\":0.95,") &&
              strstr(last, "\"min_p\":0.05,") && strstr(last, "\"repeat_penalty\":1.1,"),
              "the values set, without float noise: %s", last);
        /* the conversation so far goes as messages: hi, the reply, again */
        CHECK(strstr(last, "{\"role\":\"user\",\"content\":\"hi\"},{\"role\":\"assistant\",\"content\":\"Hello there\"},{\"role\":\"user\",\"content\":\"again\"}"),
              "messages: %s", last);
        CHECK(!strstr(last, KEY), "key in the request body");
    }
    /* /model NAME in remote mode: the model the next requests ask for, one of the server's
     * (it was refused: "the server chooses its models"); N: the Nth of /models' list; a name
     * the server does not list is refused with the list, the model kept */
    e = ask(base, "ok", &g, 0, NULL);
    CHECK(lc_engine_load_model(e, "other-model") == 0 && collect(e, &g, false, 0) &&
          g.reason == LC_DONE_EOG && !strcmp(g.name, "other-model") && !g.errors,
          "/model other-model: reason %d name '%s' error '%s'", g.reason, g.name, g.error);
    lc_engine_submit(e, "now");
    CHECK(collect(e, &g, false, 0) && g.reason == LC_DONE_EOG, "after /model: %d", g.reason);
    CHECK(lc_engine_load_model(e, "no-such-model") == 0 && collect(e, &g, false, 0) &&
          g.reason == LC_DONE_ERROR && strstr(g.error, "no-such-model") &&
          strstr(g.error, "fake-model other-model"), "/model no-such-model: %d '%s'", g.reason, g.error);
    lc_engine_submit(e, "still");
    CHECK(collect(e, &g, false, 0) && g.reason == LC_DONE_EOG, "after a refused /model: %d", g.reason);
    CHECK(lc_engine_load_model(e, "1") == 0 && collect(e, &g, false, 0) &&
          g.reason == LC_DONE_EOG && !strcmp(g.name, "fake-model"), "/model 1: %d '%s' '%s'",
          g.reason, g.name, g.error);
    lc_engine_submit(e, "back");
    CHECK(collect(e, &g, false, 0) && g.reason == LC_DONE_EOG, "after /model 1: %d", g.reason);
    lc_engine_free(e);
    {
        /* the last three requests: "now" to other-model, "still" to it too, "back" to fake-model */
        FILE *f = fopen(argv[2], "r");
        char line[8192], req[3][8192] = { "", "", "" };
        while (f && fgets(line, sizeof(line), f)) {
            memmove(req[0], req[1], sizeof(req[0]) * 2);
            snprintf(req[2], sizeof(req[2]), "%s", line);
        }
        if (f)
            fclose(f);
        CHECK(strstr(req[0], "\"model\":\"other-model\"") && strstr(req[0], "\"content\":\"now\""),
              "/model: the next request: %s", req[0]);
        CHECK(strstr(req[1], "\"model\":\"other-model\"") && strstr(req[1], "\"content\":\"still\""),
              "/model refused: the model kept: %s", req[1]);
        CHECK(strstr(req[2], "\"model\":\"fake-model\"") && strstr(req[2], "\"content\":\"back\""),
              "/model 1: %s", req[2]);
    }
    expect_error(base, "401", "HTTP 401", "API key");
    expect_error(base, "429", "HTTP 429", "retry after 7 s");
    expect_error(base, "500", "HTTP 500", "the model crashed");
    expect_error(base, "404", "HTTP 404", "fake-model");
    /* a stall: the idle timeout (2 s here) ends it with a message */
    double t;
    e = ask(base, "stall", &g, 0, &t);
    CHECK(g.reason == LC_DONE_ERROR && strstr(g.error, "idle") && t < 6, "stall: %d '%s' %.1f s",
          g.reason, g.error, t);
    lc_engine_free(e);
    /* Esc during a stall: stopped at once */
    e = ask(base, "stall", &g, 0.3, &t);
    CHECK(g.reason == LC_DONE_STOPPED && t < 0.8, "stop: reason %d after %.2f s", g.reason, t);
    fprintf(stderr, "stop: DONE %.0f ms after the request (stop at 300 ms)\n", t * 1000);
    lc_engine_free(e);
    /* a cut stream: partial reply kept, one line saying so */
    e = ask(base, "cut", &g, 0, NULL);
    CHECK(!strcmp(g.text, "Hello there") && g.reason == LC_DONE_ERROR &&
          strstr(g.error, "partial reply is kept"), "cut: '%s' %d '%s'", g.text, g.reason, g.error);
    lc_engine_free(e);
    /* recorded streams through HTTP */
    /* llama-server-ctx: a server whose GET /props gives its context (64), which the reply
     * fills: its "length" is the context's, not max_tokens' (there is none); the others have
     * no /props: no context size, and "length" stays the token limit (vLLM's) */
    const char *fx[] = { "llama-server", "vllm", "ollama", "keepalive-crlf", "llama-server-ctx" };
    const char *src = getenv("LC_SRCDIR");
    for (size_t i = 0; i < 5; i++) {
        char mode[64], path[1100], want[4096] = "";
        snprintf(mode, sizeof(mode), "fix-%s", fx[i]);
        snprintf(path, sizeof(path), "%s/tests/data/sse/%s.content", src ? src : ".", fx[i]);
        FILE *f = fopen(path, "rb");
        size_t n = f ? fread(want, 1, sizeof(want) - 1, f) : 0;
        want[n] = '\0';
        if (f)
            fclose(f);
        lc_engine_free(ask(base, mode, &g, 0, NULL));
        CHECK(n > 0 && !strcmp(g.text, want), "%s: '%s' want '%s'", mode, g.text, want);
        CHECK(g.reason == (i == 1 ? LC_DONE_LIMIT : i == 4 ? LC_DONE_CONTEXT : LC_DONE_EOG),
              "%s: reason %d", mode, g.reason);
        CHECK(g.n_ctx == (i == 4 ? 64 : 0), "%s: context size %d", mode, (int)g.n_ctx);
    }
    /* a reasoning model behind llama-server: its thinking comes in reasoning_content; it is
     * shown as the reply's <think> part (folded by the chat) instead of being dropped, and is
     * not sent back with the next request (as the templates of such models drop it) */
    {
        char want[4096] = "";
        e = ask(base, "fix-llama-server-reasoning", &g, 0, NULL);
        snprintf(want, sizeof(want), "<think>\nOkay, the user says hi.\nA short answer.\n</think>\n\n"
                 "Hello! How can I help?");
        CHECK(!strcmp(g.text, want) && g.reason == LC_DONE_EOG, "reasoning: '%s' %d", g.text, g.reason);
        lc_engine_submit(e, "and then?");
        CHECK(collect(e, &g, false, 0) && g.reason == LC_DONE_EOG, "reasoning 2: %d", g.reason);
        lc_engine_free(e);
        char last[8192];
        last_request(argv[2], last, sizeof(last));
        CHECK(strstr(last, "{\"role\":\"assistant\",\"content\":\"Hello! How can I help?\"},"
                           "{\"role\":\"user\",\"content\":\"and then?\"}"),
              "reasoning: the thinking sent back: %s", last);
    }
    /* nobody listening: refused at once */
    {
        char url[64];
        snprintf(url, sizeof(url), "http://127.0.0.1:%s", argc > 3 ? argv[3] : "9");
        e = start(url);
        double t0 = now_s();
        collect(e, &g, true, 0);
        CHECK(!g.loaded && strstr(g.error, "cannot connect") && now_s() - t0 < 5,
              "refused: '%s'", g.error);
        fprintf(stderr, "refused: '%s'\n", g.error);
        lc_engine_free(e);
    }
    return tu_finish("test-remote");
}
