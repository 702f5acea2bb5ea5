/*
 * test-sse.c - the SSE framing and chunk decoding of the remote client (remote/sse.h):
 *   - recorded-style streams of llama-server, vLLM, Ollama and a proxy with keep-alives
 *     (tests/data/sse/NAME.sse) give exactly NAME.content, the finish reason and the usage of
 *     NAME.expect, whether fed whole, one byte at a time, or in 7-byte pieces (CRLF split);
 *   - framing corner cases: multi-line data, "data" without a colon, a line over the limit,
 *     an unfinished event at the end (a cut stream), chunks that are not JSON.
 */
#include <string.h>

#include "remote/sse.h"
#include "testutil.h"

struct got {
    char content[4096], reasoning[4096];
    size_t len, rlen;
    char finish[32];
    long long prompt, completion;
    int done, events;
};

static int on_data(void *ud, const char *data, size_t len)
{
    struct got *g = ud;
    g->events++;
    struct lc_chunk c;
    if (lc_chunk_parse(&c, data, len) != 0)
        return 0;
    if (c.done)
        g->done++;
    if (c.content && g->len + c.content_len < sizeof(g->content)) {
        memcpy(g->content + g->len, c.content, c.content_len);
        g->len += c.content_len;
        g->content[g->len] = '\0';
    }
    if (c.reasoning && g->rlen + c.reasoning_len < sizeof(g->reasoning)) {
        memcpy(g->reasoning + g->rlen, c.reasoning, c.reasoning_len);
        g->rlen += c.reasoning_len;
        g->reasoning[g->rlen] = '\0';
    }
    if (c.finish_reason)
        snprintf(g->finish, sizeof(g->finish), "%s", c.finish_reason);
    if (c.has_usage) {
        g->prompt = c.prompt_tokens;
        g->completion = c.completion_tokens;
    }
    lc_chunk_clear(&c);
    return 0;
}

static char *slurp(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    char *b = malloc(1 << 20);
    *n = fread(b, 1, (1 << 20) - 1, f);
    b[*n] = '\0';
    fclose(f);
    return b;
}

/* dir: at most 1024 bytes */
static void replay(const char *dir, const char *name)
{
    char path[1200];
    size_t n, cn, en;
    snprintf(path, sizeof(path), "%s/%s.sse", dir, name);
    char *sse = slurp(path, &n);
    snprintf(path, sizeof(path), "%s/%s.content", dir, name);
    char *want = slurp(path, &cn);
    snprintf(path, sizeof(path), "%s/%s.expect", dir, name);
    char *exp = slurp(path, &en);
    /* NAME.reasoning: the thinking a reasoning model's server sends apart (none when absent) */
    size_t rn = 0;
    snprintf(path, sizeof(path), "%s/%s.reasoning", dir, name);
    char *rwant = slurp(path, &rn);
    CHECK(sse && want && exp, "%s: fixture files missing", name);
    if (!sse || !want || !exp)
        goto out;
    char finish[32] = "";
    long long up = -1, uc = -1;
    unsigned long long comments = 0;
    const char *l = strstr(exp, "finish=");
    if (l)
        sscanf(l, "finish=%31s", finish);
    if ((l = strstr(exp, "usage=")))
        sscanf(l, "usage=%lld,%lld", &up, &uc);
    if ((l = strstr(exp, "comments=")))
        sscanf(l, "comments=%llu", &comments);
    const size_t steps[] = { 0 /* whole */, 1, 7, 64 };
    for (size_t s = 0; s < sizeof(steps) / sizeof(steps[0]); s++) {
        struct lc_sse *p = lc_sse_new(0);
        struct got g = { .prompt = -1, .completion = -1 };
        size_t step = steps[s] ? steps[s] : n;
        for (size_t i = 0; i < n; i += step)
            CHECK(lc_sse_feed(p, sse + i, i + step <= n ? step : n - i, on_data, &g) == 0,
                  "%s: feed failed", name);
        CHECK(g.len == cn && !memcmp(g.content, want, cn), "%s step %zu: content '%s', want '%s'",
              name, steps[s], g.content, want);
        CHECK(g.rlen == rn && (!rn || !memcmp(g.reasoning, rwant, rn)),
              "%s step %zu: reasoning '%s', want '%s'", name, steps[s], g.reasoning,
              rwant ? rwant : "");
        CHECK(!strcmp(g.finish, finish), "%s step %zu: finish '%s', want '%s'", name, steps[s],
              g.finish, finish);
        CHECK(g.prompt == up && g.completion == uc, "%s step %zu: usage %lld,%lld, want %lld,%lld",
              name, steps[s], g.prompt, g.completion, up, uc);
        CHECK(g.done == 1, "%s step %zu: [DONE] seen %d times", name, steps[s], g.done);
        CHECK(lc_sse_comments(p) == comments, "%s step %zu: %llu comments, want %llu", name,
              steps[s], (unsigned long long)lc_sse_comments(p), comments);
        CHECK(!lc_sse_pending(p), "%s step %zu: bytes left pending", name, steps[s]);
        lc_sse_free(p);
    }
    fprintf(stderr, "%s: %zu bytes of content, finish %s\n", name, cn, finish);
out:
    free(rwant);
    free(sse);
    free(want);
    free(exp);
}

static int collect_raw(void *ud, const char *data, size_t len)
{
    struct got *g = ud;
    g->events++;
    if (g->len + len + 1 < sizeof(g->content)) {
        memcpy(g->content + g->len, data, len);
        g->len += len;
        g->content[g->len++] = '|';
        g->content[g->len] = '\0';
    }
    return 0;
}

static void framing(void)
{
    struct got g = { 0 };
    struct lc_sse *p = lc_sse_new(32);
    /* multi-line data joins with \n; "data" alone is an empty line; no-data events are
     * not dispatched; id:/retry: ignored; CR alone ends a line */
    const char *in = "data: a\ndata:b\ndata\n\nid: 5\nretry: 10\n\n: c\r\rdata: x\r\r";
    CHECK(lc_sse_feed(p, in, strlen(in), collect_raw, &g) == 0, "framing feed");
    CHECK(!strcmp(g.content, "a\nb\n|x|"), "framing: got '%s'", g.content);
    CHECK(lc_sse_comments(p) == 1, "framing: comments %llu", (unsigned long long)lc_sse_comments(p));
    /* a cut stream: an event without its blank line stays pending, not dispatched */
    g.len = 0;
    g.content[0] = '\0';
    CHECK(lc_sse_feed(p, "data: {\"cho", 11, collect_raw, &g) == 0 && g.len == 0, "cut: dispatched");
    CHECK(lc_sse_pending(p), "cut: nothing pending");
    /* over the line limit: an error, not an allocation without bound */
    char big[64];
    memset(big, 'x', sizeof(big));
    CHECK(lc_sse_feed(p, big, sizeof(big), collect_raw, &g) == -1, "long line accepted");
    lc_sse_free(p);

    struct lc_chunk c;
    CHECK(lc_chunk_parse(&c, "not json", 8) == -1, "not JSON parsed");
    CHECK(lc_chunk_parse(&c, "[1,2]", 5) == -1, "array parsed as chunk");
    const char *err = "{\"error\":{\"message\":\"out of memory\",\"type\":\"server_error\"}}";
    CHECK(lc_chunk_parse(&c, err, strlen(err)) == 0 && c.error && !strcmp(c.error, "out of memory"),
          "error chunk: %s", c.error ? c.error : "(none)");
    lc_chunk_clear(&c);
    const char *full = "{\"choices\":[{\"message\":{\"role\":\"assistant\",\"content\":\"hi\"},"
                       "\"finish_reason\":\"stop\"}],\"usage\":{\"prompt_tokens\":3,\"completion_tokens\":1}}";
    CHECK(lc_chunk_parse(&c, full, strlen(full)) == 0 && c.content && !strcmp(c.content, "hi") &&
          c.has_usage && c.prompt_tokens == 3, "non-streamed answer");
    lc_chunk_clear(&c);
    /* the thinking of a reasoning model: llama-server's and DeepSeek's reasoning_content,
     * vLLM's and OpenRouter's reasoning */
    const char *rc = "{\"choices\":[{\"delta\":{\"reasoning_content\":\"hm\"}}]}";
    CHECK(lc_chunk_parse(&c, rc, strlen(rc)) == 0 && c.reasoning && c.reasoning_len == 2 &&
          !strcmp(c.reasoning, "hm") && !c.content, "reasoning_content");
    lc_chunk_clear(&c);
    const char *rs = "{\"choices\":[{\"delta\":{\"reasoning\":\"so\",\"content\":null}}]}";
    CHECK(lc_chunk_parse(&c, rs, strlen(rs)) == 0 && c.reasoning && !strcmp(c.reasoning, "so"),
          "reasoning");
    lc_chunk_clear(&c);
}

int main(void)
{
    const char *src = getenv("LC_SRCDIR");
    char dir[1024];
    snprintf(dir, sizeof(dir), "%s/tests/data/sse", src ? src : ".");
    const char *names[] = { "llama-server", "vllm", "ollama", "keepalive-crlf",
                            "llama-server-reasoning", "llama-server-ctx" };
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
        replay(dir, names[i]);
    framing();
    return tu_finish("test-sse");
}
