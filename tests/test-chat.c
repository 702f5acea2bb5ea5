/* test-chat.c - conversation editing and transcripts: JSON round trip (exact), Markdown text,
 * malformed transcripts rejected with the field named, failed saves leave the target alone. */
#include <dirent.h>
#include <fcntl.h>
#include <time.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <json-c/json.h>

#include "chat.h"
#include "state.h"
#include "testutil.h"
#include "textsafe.h"

static char dir[] = "/tmp/lc-chat-XXXXXX";

static char *path_in(const char *name)
{
    static char p[512];
    snprintf(p, sizeof(p), "%s/%s", dir, name);
    return p;
}

static char *slurp(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    char *s = calloc(1, 1 << 20);
    size_t n = s ? fread(s, 1, (1 << 20) - 1, f) : 0;
    (void)n;
    fclose(f);
    return s;
}

static struct lc_chat *sample_chat(void)
{
    struct lc_chat *c = lc_chat_new();
    lc_chat_set_model(c, "stories260K");
    lc_chat_set_model_path(c, "/m/stories260K.gguf");
    c->params.temp = 0.5f;
    c->params.top_k = 12;
    c->params.seed = 77;
    c->max_tokens = 100;
    const char *u = "Once upon a time, \"quotes\" \\ and\nnewlines\tand UTF-8: été 日本 🙂";
    lc_chat_add(c, LC_ROLE_USER, u, strlen(u));
    int a = lc_chat_add(c, LC_ROLE_ASSISTANT, "", 0);
    lc_chat_append(c, (size_t)a, " there was", 10);
    lc_chat_append(c, (size_t)a, " a cat.", 7);
    lc_chat_set_system(c, "Be brief.");
    for (size_t i = 0; i < c->n; i++)
        c->msgs[i].time = 1764450000 + (time_t)i;   /* 2025-11-29T21:00:00Z + i */
    return c;
}

static void test_edit(void)
{
    struct lc_chat *c = sample_chat();
    CHECK(c->n == 3, "n %zu", c->n);
    CHECK(c->msgs[0].role == LC_ROLE_SYSTEM && strcmp(c->msgs[0].text, "Be brief.") == 0, "system first");
    CHECK(c->msgs[2].role == LC_ROLE_ASSISTANT && strcmp(c->msgs[2].text, " there was a cat.") == 0 &&
          c->msgs[2].len == 17, "append: '%s'", c->msgs[2].text);
    lc_chat_set_system(c, "Be verbose.");
    CHECK(c->n == 3 && strcmp(c->msgs[0].text, "Be verbose.") == 0, "replace system");
    lc_chat_set_system(c, NULL);
    CHECK(c->n == 2 && c->msgs[0].role == LC_ROLE_USER, "remove system");
    lc_chat_truncate(c, 1);
    CHECK(c->n == 1, "truncate");
    CHECK(lc_chat_append(c, 5, "x", 1) == -1, "append out of range");
    CHECK(lc_role_from_name("assistant") == LC_ROLE_ASSISTANT && lc_role_from_name("bot") == -1, "roles");
    lc_chat_free(c);
}

static void test_json_round_trip(void)
{
    struct lc_chat *c = sample_chat();
    char *err = NULL;
    const char *p = path_in("t.json");
    CHECK(lc_chat_save(c, p, LC_CHAT_AUTO, &err) == 0, "save: %s", err);
    char *text = slurp(p);
    CHECK(text && strstr(text, "\"format\": \"llamachat-transcript\""), "format field");
    CHECK(text && strstr(text, "\"temp\": 0.5,"), "temp written as 0.5");
    CHECK(text && strstr(text, "\"top_p\": 0.95,"), "top_p written as 0.95");
    CHECK(text && strstr(text, "\"time\": \"2025-11-29T21:00:01Z\""), "time");
    struct lc_chat *d = lc_chat_load(p, &err);
    CHECK(d != NULL, "load: %s", err);
    if (d) {
        CHECK(d->n == c->n, "n %zu vs %zu", d->n, c->n);
        for (size_t i = 0; i < d->n && i < c->n; i++) {
            CHECK(d->msgs[i].role == c->msgs[i].role, "role %zu", i);
            CHECK(d->msgs[i].len == c->msgs[i].len &&
                  memcmp(d->msgs[i].text, c->msgs[i].text, c->msgs[i].len) == 0, "text %zu: '%s'", i, d->msgs[i].text);
            CHECK(d->msgs[i].time == c->msgs[i].time, "time %zu", i);
        }
        CHECK(memcmp(&d->params, &c->params, sizeof(c->params)) == 0, "params differ");
        CHECK(d->max_tokens == 100, "max_tokens");
        CHECK(d->model && strcmp(d->model, "stories260K") == 0, "model");
        CHECK(d->model_path && strcmp(d->model_path, "/m/stories260K.gguf") == 0, "model_path");
        /* saving the loaded conversation gives the same file (apart from "saved") */
        const char *p2 = path_in("t2.json");
        CHECK(lc_chat_save(d, p2, LC_CHAT_JSON, &err) == 0, "save 2");
        char *t2 = slurp(p2);
        char *s1 = text ? strstr(text, "\"parameters\"") : NULL, *s2 = t2 ? strstr(t2, "\"parameters\"") : NULL;
        CHECK(s1 && s2 && strcmp(s1, s2) == 0, "second save differs");
        free(t2);
        lc_chat_free(d);
    }
    free(text);
    /* random seed */
    c->params.seed = LC_SEED_RANDOM;
    char *js = lc_chat_to_json(c);
    CHECK(js && strstr(js, "\"seed\": \"random\""), "random seed");
    d = js ? lc_chat_from_json(js, strlen(js), "mem", &err) : NULL;
    CHECK(d && d->params.seed == LC_SEED_RANDOM, "random seed read back");
    lc_chat_free(d);
    free(js);
    lc_chat_free(c);
}

/* Every value /set and the command line accept (config.c's table: top-k, repeat-last-n and
 * max-tokens up to INT32_MAX) opens again: a chat saved with max-tokens 2000000 was refused by
 * /load and --continue ("out of range [-1, 1.04858e+06]"). */
static void test_json_largest_params(void)
{
    struct lc_chat *c = sample_chat();
    c->params.top_k = INT32_MAX;
    c->params.repeat_last_n = INT32_MAX;
    c->max_tokens = INT32_MAX;
    c->params.seed = UINT64_MAX - 1;
    char *err = NULL;
    const char *p = path_in("big.json");
    CHECK(lc_chat_save(c, p, LC_CHAT_JSON, &err) == 0, "save: %s", err);
    free(err);
    err = NULL;
    struct lc_chat *d = lc_chat_load(p, &err);
    CHECK(d != NULL, "load: %s", err ? err : "?");
    free(err);
    if (d) {
        CHECK(d->params.top_k == INT32_MAX, "top_k %d", d->params.top_k);
        CHECK(d->params.repeat_last_n == INT32_MAX, "repeat_last_n %d", d->params.repeat_last_n);
        CHECK(d->max_tokens == INT32_MAX, "max_tokens %d", d->max_tokens);
        CHECK(d->params.seed == UINT64_MAX - 1, "seed %llu", (unsigned long long)d->params.seed);
        lc_chat_free(d);
    }
    lc_chat_free(c);
}

static void test_markdown(void)
{
    struct lc_chat *c = sample_chat();
    char *err = NULL;
    const char *p = path_in("t.md");
    CHECK(lc_chat_save(c, p, LC_CHAT_AUTO, &err) == 0, "save md: %s", err);
    char *text = slurp(p);
    const char *want_head = "# llamachat transcript\n\n- model: stories260K\n- saved: ";
    const char *want_tail =
        "- parameters: temp 0.5, top_k 12, top_p 0.95, min_p 0.05, repeat_penalty 1, "
        "repeat_last_n 64, max_tokens 100, seed 77\n"
        "\n## System (2025-11-29T21:00:00Z)\n\nBe brief.\n"
        "\n## User (2025-11-29T21:00:01Z)\n\nOnce upon a time, \"quotes\" \\ and\nnewlines\tand UTF-8: été 日本 🙂\n"
        "\n## Assistant (2025-11-29T21:00:02Z)\n\n there was a cat.\n";
    CHECK(text && strncmp(text, want_head, strlen(want_head)) == 0, "md head:\n%s", text ? text : "(null)");
    const char *t = text ? strstr(text, "- parameters:") : NULL;
    CHECK(t && strcmp(t, want_tail) == 0, "md body:\n%s", t ? t : "(none)");
    free(text);
    lc_chat_free(c);
}

static void expect_load_error(const char *json, const char *want)
{
    char *err = NULL;
    struct lc_chat *c = lc_chat_from_json(json, strlen(json), "x.json", &err);
    CHECK(c == NULL, "accepted: %s", json);
    CHECK(err && strcmp(err, want) == 0, "error '%s', want '%s'", err ? err : "(null)", want);
    lc_chat_free(c);
    free(err);
}

static void test_bad_transcripts(void)
{
    expect_load_error("{\"format\": \"llamachat-transcript\", \"version\": 1, \"messages\": "
                      "[{\"role\": \"user\", \"content\": \"hi\"}, {\"role\": \"bot\", \"content\": \"x\"}]}",
                      "x.json: messages[1].role: unknown role 'bot'");
    expect_load_error("{\"format\": \"llamachat-transcript\", \"version\": 1, \"messages\": "
                      "[{\"role\": \"user\", \"content\": 5}]}",
                      "x.json: messages[0].content: expected a string");
    expect_load_error("{\"format\": \"llamachat-transcript\", \"version\": 1}",
                      "x.json: messages: missing");
    expect_load_error("{\"format\": \"llamachat-transcript\", \"version\": 2, \"messages\": []}",
                      "x.json: version 2 not supported (this llamachat reads version 1)");
    expect_load_error("{\"format\": \"other\", \"version\": 1, \"messages\": []}",
                      "x.json: format: 'other' is not llamachat-transcript");
    expect_load_error("[1, 2]", "x.json: not a llamachat transcript (top level is not an object)");
    expect_load_error("{\"format\": \"llamachat-transcript\", \"version\": 1, \"parameters\": "
                      "{\"temp\": -1}, \"messages\": []}",
                      "x.json: parameters.temp: -1 out of range [0, 100]");
    /* integers are said as integers (it was "2.14748e+09 out of range [-1, 1.04858e+06]") */
    expect_load_error("{\"format\": \"llamachat-transcript\", \"version\": 1, \"parameters\": "
                      "{\"max_tokens\": 2147483648}, \"messages\": []}",
                      "x.json: parameters.max_tokens: 2147483648 out of range [-1, 2147483647]");
    expect_load_error("{\"format\": \"llamachat-transcript\", \"version\": 1, \"messages\": "
                      "[{\"role\": \"user\", \"content\": \"a\", \"time\": \"yesterday\"}]}",
                      "x.json: messages[0].time: 'yesterday' is not YYYY-MM-DDTHH:MM:SSZ");
    expect_load_error("{\"format\": \"llamachat-transcript\", \"version\": 1, \"messages\": "
                      "[{\"role\": \"user\", \"content\": \"a\"}, {\"role\": \"system\", \"content\": \"s\"}]}",
                      "x.json: messages[1].role: a system message must come first");
    /* a file cut short (a copy interrupted, a full disk) or empty says so: the message was
     * "not valid JSON at byte 25: continue" (json-c's name for "more input expected") */
    expect_load_error("{\"format\": \"llamachat-tra",
                      "x.json: the JSON ends early, at byte 25 (the file is cut short)");
    expect_load_error("{\"format\": \"llamachat-transcript\", \"version\": 1, \"messages\": [",
                      "x.json: the JSON ends early, at byte 62 (the file is cut short)");
    expect_load_error("", "x.json: empty file, not a transcript");
    expect_load_error(" \n", "x.json: empty file, not a transcript");
    /* a syntax error keeps json-c's words; text after the transcript is not ignored */
    expect_load_error("{\"format\" \"x\"}", "x.json: not valid JSON at byte 10: object property name separator ':' expected");
    expect_load_error("{\"format\": \"llamachat-transcript\", \"version\": 1, \"messages\": []}\n"
                      "{\"format\": \"llamachat-transcript\", \"version\": 1, \"messages\": []}\n",
                      "x.json: text after the end of the JSON, at byte 65");
    char *err = NULL;
    struct lc_chat *c;
    /* a Markdown transcript given to /load: said plainly */
    const char *md = "# Conversation\n\n**user**: hello\n";
    c = lc_chat_from_json(md, strlen(md), "x.md", &err);
    CHECK(c == NULL && err && strcmp(err, "x.md: not a JSON transcript (Markdown transcripts are for "
                                          "reading; save with a .json name to load the conversation "
                                          "again)") == 0, "markdown: %s", err);
    free(err);
    c = lc_chat_load(path_in("missing.json"), &err);
    char want[600];
    snprintf(want, sizeof(want), "%s: cannot open: No such file or directory", path_in("missing.json"));
    CHECK(c == NULL && err && strcmp(err, want) == 0, "missing: %s", err);
    free(err);
}

/* The JSON text must parse under json-c's strict UTF-8 validation (RFC 8259 + RFC 3629) and
 * hold no raw control byte other than the newlines of the layout. */
static void check_json_text(const char *label, const char *js)
{
    CHECK(js != NULL, "%s: no JSON", label);
    if (!js)
        return;
    CHECK(lc_utf8_valid(js, strlen(js)), "%s: JSON is not valid UTF-8", label);
    json_tokener *tok = json_tokener_new();
    json_tokener_set_flags(tok, JSON_TOKENER_STRICT | JSON_TOKENER_VALIDATE_UTF8);
    json_object *o = json_tokener_parse_ex(tok, js, (int)strlen(js));
    CHECK(o && json_tokener_get_error(tok) == json_tokener_success, "%s: strict parse: %s", label,
          json_tokener_error_desc(json_tokener_get_error(tok)));
    json_object_put(o);
    json_tokener_free(tok);
    for (const unsigned char *u = (const unsigned char *)js; *u; u++) {
        CHECK((*u >= 0x20 || *u == '\n') && *u != 0x7F, "%s: raw byte 0x%02x at %zu", label, *u,
              (size_t)(u - (const unsigned char *)js));
        CHECK(!(u[0] == 0xC2 && u[1] >= 0x80 && u[1] <= 0x9F), "%s: raw C1 control", label);
    }
}

/* Replies with bytes that are not valid UTF-8 save as valid JSON ("content" with U+FFFD per
 * invalid byte, "content_base64" with the bytes) and load back byte for byte. */
static void test_json_invalid_utf8(void)
{
    static const struct {
        const char *bytes, *content, *b64;   /* b64 NULL: valid UTF-8, saved as it is */
    } cases[] = {
        { "lone \xE5", "lone \xEF\xBF\xBD", "bG9uZSDl" },
        { "\xF0\x9F", "\xEF\xBF\xBD\xEF\xBF\xBD", "8J8=" },
        { "a\x80z", "a\xEF\xBF\xBDz", "YYB6" },
        { "\xFF", "\xEF\xBF\xBD", "/w==" },
        { "\xC0\x80", "\xEF\xBF\xBD\xEF\xBF\xBD", "wIA=" },
        { "\xED\xA0\x80", "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD", "7aCA" },
        { "\xE5\xE6\x97\xA5", "\xEF\xBF\xBD\xE6\x97\xA5", "5eaXpQ==" },
        { "a \xC3\xA9 \xE6\x97\xA5 \xF0\x9F\x99\x82", NULL, NULL },
        { "esc \x1B[2J del \x7F csi \xC2\x9B", NULL, NULL },
    };
    for (size_t k = 0; k < sizeof(cases) / sizeof(cases[0]); k++) {
        struct lc_chat *c = lc_chat_new();
        lc_chat_set_model(c, "m\xE5");
        const char *b = cases[k].bytes;
        lc_chat_add(c, LC_ROLE_USER, "hi", 2);
        lc_chat_add(c, LC_ROLE_ASSISTANT, b, strlen(b));
        char label[32];
        snprintf(label, sizeof(label), "invalid utf-8 case %zu", k);
        char *js = lc_chat_to_json(c);
        check_json_text(label, js);
        /* the exact fields, parsed back with json-c */
        json_object *root = js ? json_tokener_parse(js) : NULL, *msgs = NULL, *m = NULL, *v = NULL;
        if (root && json_object_object_get_ex(root, "messages", &msgs))
            m = json_object_array_get_idx(msgs, 1);
        CHECK(m && json_object_object_get_ex(m, "content", &v) &&
                  strcmp(json_object_get_string(v), cases[k].content ? cases[k].content : b) == 0,
              "%s: content", label);
        bool has = m && json_object_object_get_ex(m, "content_base64", &v);
        if (cases[k].b64)
            CHECK(has && strcmp(json_object_get_string(v), cases[k].b64) == 0, "%s: base64 %s",
                  label, has ? json_object_get_string(v) : "(none)");
        else
            CHECK(!has, "%s: content_base64 for valid UTF-8", label);
        CHECK(root && json_object_object_get_ex(root, "model", &v) &&
                  strcmp(json_object_get_string(v), "m\xEF\xBF\xBD") == 0, "%s: model", label);
        json_object_put(root);
        char *err = NULL;
        struct lc_chat *d = js ? lc_chat_from_json(js, strlen(js), "mem", &err) : NULL;
        CHECK(d && d->n == 2 && d->msgs[1].len == strlen(b) && memcmp(d->msgs[1].text, b, strlen(b)) == 0,
              "%s: round trip: %s", label, err ? err : "");
        lc_chat_free(d);
        free(err);
        free(js);
        lc_chat_free(c);
    }
    /* DEL and C1 controls are escaped in the file text */
    struct lc_chat *c = lc_chat_new();
    lc_chat_add(c, LC_ROLE_USER, "\x1B\x7F\xC2\x9B", 4);
    char *js = lc_chat_to_json(c);
    CHECK(js && strstr(js, "\"content\": \"\\u001b\\u007f\\u009b\""), "control escapes: %s", js);
    free(js);
    lc_chat_free(c);
    /* content_base64 that is not base64, or disagrees with content, is refused */
    expect_load_error("{\"format\": \"llamachat-transcript\", \"version\": 1, \"messages\": "
                      "[{\"role\": \"user\", \"content\": \"\xEF\xBF\xBD\", \"content_base64\": \"5Q\"}]}",
                      "x.json: messages[0].content_base64: not valid base64");
    expect_load_error("{\"format\": \"llamachat-transcript\", \"version\": 1, \"messages\": "
                      "[{\"role\": \"user\", \"content\": \"x\", \"content_base64\": \"5Q==\"}]}",
                      "x.json: messages[0].content_base64: does not match content");
    expect_load_error("{\"format\": \"llamachat-transcript\", \"version\": 1, \"messages\": "
                      "[{\"role\": \"user\", \"content\": \"\", \"content_base64\": \"AA==\"}]}",
                      "x.json: messages[0].content_base64: does not match content");
}

/* Markdown: model name and messages in their visible form (textsafe.h); the seed in use. */
static void test_markdown_controls(void)
{
    struct lc_chat *c = lc_chat_new();
    lc_chat_set_model(c, "x\x1B]52;c;aGk=\x07y");
    c->params.seed = LC_SEED_RANDOM;
    c->seed_used = 1234567;
    lc_chat_add(c, LC_ROLE_USER, "esc", 3);
    const char *r = "\x1B[2J\tx\r\n\x7F \xC2\x9B \x9B \xE6\x97\xA5 \xE5";
    lc_chat_add(c, LC_ROLE_ASSISTANT, r, strlen(r));
    c->msgs[0].time = c->msgs[1].time = 1764450000;
    char *md = lc_chat_to_markdown(c);
    CHECK(md && strstr(md, "- model: x\xE2\x90\x9B]52;c;aGk=\xE2\x90\x87y\n"), "md model:\n%s", md ? md : "(null)");
    CHECK(md && strstr(md, "max_tokens -1, seed random (drawn: 1234567)\n"), "md seed:\n%s", md ? md : "(null)");
    const char *want = "\n## Assistant (2025-11-29T21:00:00Z)\n\n"
                       "\xE2\x90\x9B[2J\tx\xE2\x90\x8D\n\xE2\x90\xA1 \xEF\xBF\xBD \xEF\xBF\xBD "
                       "\xE6\x97\xA5 \xEF\xBF\xBD\n";
    const char *t = md ? strstr(md, "\n## Assistant") : NULL;
    CHECK(t && strcmp(t, want) == 0, "md reply:\n%s", t ? t : "(none)");
    for (const unsigned char *u = (const unsigned char *)md; u && *u; u++)
        CHECK(*u >= 0x20 || *u == '\n' || *u == '\t', "md raw control 0x%02x", *u);
    char *js = lc_chat_to_json(c);
    /* a random seed stays random when reopened (else /regen repeats the reply); the drawn
     * one is recorded as "seed_used" */
    CHECK(js && strstr(js, "\"seed\": \"random\"") && strstr(js, "\"seed_used\": 1234567"),
          "json seed: %s", js ? js : "(null)");
    char *err = NULL;
    struct lc_chat *d = js ? lc_chat_from_json(js, strlen(js), "mem", &err) : NULL;
    CHECK(d && d->params.seed == LC_SEED_RANDOM && d->seed_used == 1234567, "seed read back");
    /* an explicitly set seed is restored; a file of an earlier version loads with its seed */
    const char *old = "{\"format\":\"llamachat-transcript\",\"version\":1,"
                      "\"parameters\":{\"seed\":42},\"messages\":[]}";
    struct lc_chat *o = lc_chat_from_json(old, strlen(old), "old", &err);
    CHECK(o && o->params.seed == 42 && o->seed_used == LC_SEED_RANDOM, "set seed read back");
    lc_chat_free(o);
    lc_chat_free(d);
    free(err);
    free(js);
    free(md);
    lc_chat_free(c);
}

/* The sanitizer itself, and its streaming form (pieces split inside characters). */
static void test_textsafe(void)
{
    char *s = lc_text_safe("a\x1B[31m\x7F\x01\n\t\xC2\x85\xC2\xA0\xF0\x9F\x99");
    CHECK(s && strcmp(s, "a\xE2\x90\x9B[31m\xE2\x90\xA1\xE2\x90\x81\n\t\xEF\xBF\xBD\xC2\xA0"
                         "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD") == 0, "lc_text_safe: %s", s);
    free(s);
    char buf[256] = { 0 };
    FILE *f = fmemopen(buf, sizeof(buf) - 1, "w");
    struct lc_text_stream st = { 0 };
    lc_text_stream_write(&st, f, "x\xF0\x9F", 3);      /* held: F0 9F */
    lc_text_stream_write(&st, f, "\x99", 1);           /* held: F0 9F 99 */
    lc_text_stream_write(&st, f, "\x82\x1B", 2);       /* U+1F642, then ESC */
    lc_text_stream_write(&st, f, "\xE5", 1);           /* held */
    lc_text_stream_flush(&st, f);                      /* cut short: U+FFFD */
    fclose(f);
    CHECK(strcmp(buf, "x\xF0\x9F\x99\x82\xE2\x90\x9B\xEF\xBF\xBD") == 0, "stream: %s", buf);
}

static void test_failed_save(void)
{
    struct lc_chat *c = sample_chat();
    char *err = NULL;
    /* Target is a directory: rename fails, nothing is left behind, the directory stays. */
    const char *p = path_in("adir.json");
    mkdir(p, 0755);
    CHECK(lc_chat_save(c, p, LC_CHAT_AUTO, &err) == -1, "save over a directory succeeded");
    CHECK(err && strstr(err, "cannot rename the temporary file over it: Is a directory"), "err %s", err);
    free(err);
    struct stat st;
    CHECK(stat(p, &st) == 0 && S_ISDIR(st.st_mode), "directory gone");
    DIR *d = opendir(dir);
    int tmps = 0;
    for (struct dirent *e; d && (e = readdir(d));)
        tmps += strstr(e->d_name, ".tmp.") != NULL;
    if (d)
        closedir(d);
    CHECK(tmps == 0, "%d temporary files left", tmps);
    rmdir(p);
    /* Directory missing */
    CHECK(lc_chat_save(c, "/nonexistent-lc-dir/x.md", LC_CHAT_AUTO, &err) == -1, "save into missing dir");
    CHECK(err && strcmp(err, "/nonexistent-lc-dir/x.md: the directory /nonexistent-lc-dir does not exist") == 0,
          "err %s", err);
    free(err);
    /* Overwrite an existing file: the new content replaces it. */
    p = path_in("over.md");
    FILE *f = fopen(p, "w");
    fputs("old", f);
    fclose(f);
    CHECK(lc_chat_save(c, p, LC_CHAT_AUTO, &err) == 0, "overwrite");
    char *t = slurp(p);
    CHECK(t && strncmp(t, "# llamachat transcript", 22) == 0, "not replaced");
    free(t);
    lc_chat_free(c);
}

/* state.h: the state directory, the newest transcript, names by start time, history appends. */
static void test_state(void)
{
    char *err = NULL;
    char base[128], file[256];
    snprintf(base, sizeof base, "%s/xdg", dir);
    setenv("XDG_STATE_HOME", base, 1);
    char *chats = lc_state_dir("chats", &err);
    CHECK(chats && strstr(chats, "/xdg/llamachat/chats"), "state dir %s (%s)", chats ? chats : "(null)",
          err ? err : "");
    struct stat st;
    CHECK(chats && stat(chats, &st) == 0 && (st.st_mode & 0777) == 0700, "mode %o", st.st_mode & 0777);
    char *latest = NULL;
    CHECK(lc_state_latest_chat(chats, &latest, &err) == 0 && !latest, "latest in an empty dir");
    /* two conversations in the same second: the second gets -2; both 0600 */
    time_t t0 = 1796000000;
    char *a = lc_state_new_chat(chats, t0, &err);
    char *b = lc_state_new_chat(chats, t0, &err);
    CHECK(a && b && strlen(b) == strlen(a) + 2 && strcmp(b + strlen(b) - 7, "-2.json") == 0, "names %s %s", a ? a : "(null)",
          b ? b : "(null)");
    CHECK(a && stat(a, &st) == 0 && (st.st_mode & 0777) == 0600 && st.st_size == 0, "new file 0600, empty");
    /* empty files (reserved, never saved) are not offered */
    CHECK(lc_state_latest_chat(chats, &latest, &err) == 0, "empty files skipped");
    struct lc_chat *c = lc_chat_new();
    lc_chat_add(c, LC_ROLE_USER, "hi", 2);
    CHECK(lc_chat_save(c, b, LC_CHAT_JSON, &err) == 0, "save b");
    CHECK(lc_chat_save(c, a, LC_CHAT_JSON, &err) == 0, "save a");
    CHECK(a && stat(a, &st) == 0 && (st.st_mode & 0777) == 0600, "replaced file kept 0600");
    CHECK(lc_state_latest_chat(chats, &latest, &err) == 1 && latest && strcmp(latest, a) == 0,
          "latest is the last written: %s", latest);
    free(latest);
    lc_chat_free(c);
    free(a);
    free(b);
    /* history: newlines stored as CR, one entry per line, 0600 */
    snprintf(file, sizeof file, "%s/history", base);
    CHECK(lc_state_append_history(file, "one", &err) == 0, "append");
    CHECK(lc_state_append_history(file, "two\nlines", &err) == 0, "append 2");
    char *h = slurp(file);
    CHECK(h && strcmp(h, "one\ntwo\rlines\n") == 0, "history '%s'", h);
    free(h);
    CHECK(stat(file, &st) == 0 && (st.st_mode & 0777) == 0600, "history mode %o", st.st_mode & 0777);
    /* failures name the path and the cause */
    CHECK(lc_state_append_history(chats, "x", &err) == -1 && err && strstr(err, ": cannot append: Is a directory"),
          "append to a directory: %s", err);
    free(err);
    snprintf(file, sizeof file, "%s/afile", dir);
    FILE *f = fopen(file, "w");
    if (f)
        fclose(f);
    setenv("XDG_STATE_HOME", file, 1);
    char *none = lc_state_dir(NULL, &err);
    char want[512];
    snprintf(want, sizeof want, "%s/llamachat: cannot create the directory: Not a directory", file);
    CHECK(!none && err && strcmp(err, want) == 0, "XDG_STATE_HOME a file: %s", err);
    free(err);
    unsetenv("XDG_STATE_HOME");
    char *home = getenv("HOME") ? strdup(getenv("HOME")) : NULL;
    unsetenv("HOME");
    none = lc_state_dir(NULL, &err);
    CHECK(!none && err && strstr(err, "neither XDG_STATE_HOME nor HOME is set"), "no HOME: %s", err);
    free(err);
    if (home)
        setenv("HOME", home, 1);
    free(home);
    /* the writer thread: the latest transcript wins; a failure comes back with its cause */
    struct lc_state_writer *w = lc_state_writer_start();
    CHECK(w != NULL, "writer thread");
    if (w) {
        snprintf(file, sizeof file, "%s/w.json", chats);
        for (int i = 0; i < 50; i++) {
            char *data = NULL;
            CHECK(asprintf(&data, "{\"n\": %d}\n", i) > 0, "asprintf");
            CHECK(lc_state_writer_put(w, file, data, strlen(data)) == 0, "put %d", i);
        }
        CHECK(lc_state_writer_put(w, chats, strdup("x"), 1) == 0, "put over a directory");
        while (lc_state_writer_busy(w))
            usleep(1000);
        char *werr = lc_state_writer_error(w);
        CHECK(werr && strstr(werr, "cannot rename the temporary file over it: Is a directory"), "writer error %s", werr);
        free(werr);
        CHECK(lc_state_writer_error(w) == NULL, "error taken once");
        char *data = NULL;
        CHECK(asprintf(&data, "{\"n\": 99}\n") > 0, "asprintf");
        lc_state_writer_put(w, file, data, strlen(data));
        lc_state_writer_free(w, &werr);   /* writes what is queued first */
        CHECK(werr == NULL, "no error at the end: %s", werr);
        h = slurp(file);
        CHECK(h && strcmp(h, "{\"n\": 99}\n") == 0, "latest transcript written: %s", h);
        free(h);
    }
    /* two files: a save of the next chat never drops the last save of the one before (the one
     * slot once let the second put supersede the first when the thread had not started it) */
    w = lc_state_writer_start();
    CHECK(w != NULL, "writer thread");
    if (w) {
        char fa[1024], fb[1024];
        snprintf(fa, sizeof fa, "%s/a.json", chats);
        snprintf(fb, sizeof fb, "%s/b.json", chats);
        for (int i = 0; i < 200; i++) {
            char *da = NULL, *db = NULL;
            CHECK(asprintf(&da, "a%d\n", i) > 0 && asprintf(&db, "b%d\n", i) > 0, "asprintf");
            lc_state_writer_put(w, fa, da, strlen(da));
            lc_state_writer_put(w, fb, db, strlen(db));
        }
        /* the chat lock of a.json goes after its queued saves, not before */
        char *lerr = NULL;
        int fd = lc_state_lock_chat(fa, &lerr);
        CHECK(fd >= 0, "lock a.json: %s", lerr ? lerr : "");
        free(lerr);
        char *da = strdup("a-last\n");
        lc_state_writer_put(w, fa, da, strlen(da));
        lc_state_writer_unlock_after(w, fd);
        /* /chats N back to it: waiting for the mark, its last save is on disk and its lock
         * free, whatever is queued after the mark (b.json's) */
        uint64_t mark = lc_state_writer_mark(w);
        char *db = strdup("b-after\n");
        lc_state_writer_put(w, fb, db, strlen(db));
        lc_state_writer_wait(w, mark);
        char *now = slurp(fa);
        CHECK(now && strcmp(now, "a-last\n") == 0, "after the wait a.json has its last save: %s", now);
        free(now);
        int fd3 = lc_state_lock_chat(fa, &lerr);
        CHECK(fd3 >= 0, "after the wait a.json's lock is free (%d)", fd3);
        free(lerr);
        lerr = NULL;
        lc_state_unlock_chat(fd3);
        lc_state_writer_wait(w, 0);   /* nothing to wait for */
        char *werr = NULL;
        lc_state_writer_free(w, &werr);
        CHECK(werr == NULL, "two files: %s", werr);
        free(werr);
        char *ga = slurp(fa), *gb = slurp(fb);
        CHECK(ga && strcmp(ga, "a-last\n") == 0, "a.json has its last save: %s", ga);
        CHECK(gb && strcmp(gb, "b-after\n") == 0, "b.json has its last save: %s", gb);
        free(ga);
        free(gb);
        fd = lc_state_lock_chat(fa, &lerr);   /* released by the writer: free again */
        CHECK(fd >= 0, "a.json's lock released after its writes: %d %s", fd, lerr ? lerr : "");
        free(lerr);
        lc_state_unlock_chat(fd);
        /* nothing queued: at once, and no writer at all: at once */
        w = lc_state_writer_start();
        fd = lc_state_lock_chat(fa, &lerr);
        free(lerr);
        lc_state_writer_unlock_after(w, fd);
        int fd2 = lc_state_lock_chat(fa, &lerr);
        CHECK(fd2 >= 0, "idle writer: the lock goes at once (%d)", fd2);
        free(lerr);
        lc_state_writer_unlock_after(NULL, fd2);
        fd = lc_state_lock_chat(fa, &lerr);
        CHECK(fd >= 0, "no writer: the lock goes at once (%d)", fd);
        free(lerr);
        lc_state_unlock_chat(fd);
        lc_state_writer_free(w, NULL);
    }
    free(chats);
}

/* A transcript over the limit (chat.h) is refused by its size, before a byte is read (a
 * sparse file of LC_CHAT_MAX_FILE + 1 MiB: refused at once, whatever its content). */
static void test_too_large(void)
{
    char path[600];
    snprintf(path, sizeof(path), "%s/huge.json", dir);
    FILE *f = fopen(path, "wb");
    CHECK(f && fseek(f, (long)LC_CHAT_MAX_FILE + (1L << 20) - 1, SEEK_SET) == 0 && fputc('}', f) == '}',
          "sparse file");
    if (f)
        fclose(f);
    char *err = NULL;
    struct lc_chat *c = lc_chat_load(path, &err);
    char want[700];
    snprintf(want, sizeof(want), "%s: larger than 64 MiB, not a transcript", path);
    CHECK(!c && err && strcmp(err, want) == 0, "too large: %s", err ? err : "(loaded)");
    free(err);
    lc_chat_free(c);
    unlink(path);
}

/* What the writer writes, the reader opens (one limit, chat.h): a 20 MiB conversation (the
 * reader stopped at 16 MiB while autosave wrote on: --continue and /chats N refused it) and a
 * file of exactly LC_CHAT_MAX_FILE bytes load; a transcript over the limit is not written, with
 * the reason, and the file keeps its last save. */
static void test_limit_agrees(void)
{
    char *err = NULL;
    const size_t big = (size_t)20 << 20;
    char *text = malloc(big + 1);
    CHECK(text != NULL, "malloc");
    if (!text)
        return;
    for (size_t i = 0; i < big; i++)
        text[i] = (char)('a' + i % 26);
    text[big] = '\0';
    struct lc_chat *c = lc_chat_new();
    lc_chat_add(c, LC_ROLE_USER, "Tell me everything", 18);
    lc_chat_add(c, LC_ROLE_ASSISTANT, text, big);
    char *p = strdup(path_in("big.json"));
    CHECK(lc_chat_save(c, p, LC_CHAT_JSON, &err) == 0, "20 MiB saved: %s", err ? err : "");
    free(err);
    err = NULL;
    struct lc_chat *d = lc_chat_load(p, &err);
    CHECK(d && d->n == 2 && d->msgs[1].len == big && !memcmp(d->msgs[1].text, text, big),
          "20 MiB read back: %s", err ? err : "");
    lc_chat_free(d);
    free(err);
    err = NULL;

    /* exactly the limit: the JSON padded with spaces to LC_CHAT_MAX_FILE bytes */
    char *js = lc_chat_to_json(c);
    size_t jn = js ? strlen(js) : 0;
    FILE *f = fopen(p, "wb");
    CHECK(f && js && jn < LC_CHAT_MAX_FILE && fwrite(js, 1, jn, f) == jn, "write the padded file");
    for (size_t i = jn; f && i < LC_CHAT_MAX_FILE; i++)
        fputc(' ', f);
    if (f)
        fclose(f);
    struct stat st;
    CHECK(stat(p, &st) == 0 && (size_t)st.st_size == LC_CHAT_MAX_FILE, "padded to the limit");
    d = lc_chat_load(p, &err);
    CHECK(d && d->n == 2 && d->msgs[1].len == big, "a file of exactly the limit loads: %s",
          err ? err : "");
    lc_chat_free(d);
    free(err);
    err = NULL;
    f = fopen(p, "ab");   /* one byte more: refused */
    if (f) {
        fputc(' ', f);
        fclose(f);
    }
    d = lc_chat_load(p, &err);
    CHECK(!d && err && strstr(err, ": larger than 64 MiB, not a transcript"), "one byte over: %s",
          err ? err : "(loaded)");
    lc_chat_free(d);
    free(err);
    err = NULL;

    /* the writer refuses what the reader would: the real limit, then a small one (the test hook)
     * at the exact boundary */
    CHECK(lc_chat_save(c, p, LC_CHAT_JSON, &err) == 0, "saved again: %s", err ? err : "");
    free(err);
    err = NULL;
    char *before = js;
    js = NULL;
    for (int i = 0; i < 3; i++)   /* 80 MiB */
        lc_chat_append(c, 1, text, big);
    CHECK(lc_chat_save(c, p, LC_CHAT_JSON, &err) == -1 && err &&
          strstr(err, ": the transcript would be 80.0 MiB, more than the 64 MiB a saved chat can hold"),
          "80 MiB refused: %s", err ? err : "(saved)");
    free(err);
    err = NULL;
    CHECK(stat(p, &st) == 0 && (size_t)st.st_size == jn, "the file keeps its last save (%lld bytes)",
          (long long)st.st_size);
    lc_chat_truncate(c, 1);
    lc_chat_add(c, LC_ROLE_ASSISTANT, "Once upon a time", 16);
    js = lc_chat_to_json(c);
    jn = js ? strlen(js) : 0;
    char lim[32];
    snprintf(lim, sizeof(lim), "%zu", jn);
    setenv("LLAMACHAT_TEST_MAX_CHAT_FILE", lim, 1);
    CHECK(lc_chat_max_file() == jn, "the test limit");
    CHECK(lc_chat_save(c, p, LC_CHAT_JSON, &err) == 0, "exactly the small limit saved: %s", err ? err : "");
    free(err);
    err = NULL;
    d = lc_chat_load(p, &err);
    CHECK(d && d->n == 2, "and read back: %s", err ? err : "");
    lc_chat_free(d);
    free(err);
    err = NULL;
    lc_chat_append(c, 1, ".", 1);
    CHECK(lc_chat_save(c, p, LC_CHAT_JSON, &err) == -1 && err && strstr(err, "a saved chat can hold"),
          "one byte over the small limit refused: %s", err ? err : "(saved)");
    free(err);
    err = NULL;
    char *now = slurp(p);
    CHECK(now && !strcmp(now, js), "the file keeps its last save");
    free(now);
    CHECK(lc_chat_save(c, path_in("big.md"), LC_CHAT_AUTO, &err) == 0, "Markdown has no limit: %s",
          err ? err : "");
    free(err);
    unsetenv("LLAMACHAT_TEST_MAX_CHAT_FILE");
    CHECK(lc_chat_max_file() == LC_CHAT_MAX_FILE, "the real limit again");
    unlink(p);
    unlink(path_in("big.md"));
    free(p);
    free(before);
    free(js);
    free(text);
    lc_chat_free(c);
}

/* lc_chat_json_min_len is never more than the JSON's length (it decides that a conversation is
 * still too large without making it), whatever the text holds: escapes, controls, DEL, C1,
 * bytes that are not UTF-8, versions, every role; and it is close for plain text. */
static void test_json_min_len(void)
{
    struct lc_chat *c = lc_chat_new();
    static const char *const texts[] = {
        "", "Once upon a time", "\"quoted\" \\ back\\slash\n\ttab\r\b\f",
        "\x01\x02\x1f controls \x7f del \xc2\x80\xc2\x9f c1", "\xe5 cut \xe2\x82", "\xff\xfe\xfd",
        "caf\xc3\xa9 \xf0\x9f\x98\x80 / slash </script>",
    };
    const size_t nt = sizeof(texts) / sizeof(texts[0]);
    for (size_t i = 0; i < nt * 3; i++) {
        enum lc_chat_role r = i % 3 == 0 ? LC_ROLE_SYSTEM : i % 3 == 1 ? LC_ROLE_USER : LC_ROLE_ASSISTANT;
        const char *t = texts[i % nt];
        int m = lc_chat_add(c, r, t, strlen(t));
        CHECK(m >= 0, "add");
        if (m >= 0 && i % 4 == 0)   /* an end */
            c->msgs[m].end = LC_END_STOPPED;
        if (m >= 0 && r == LC_ROLE_ASSISTANT && i % 2) {   /* an older version */
            struct lc_message old = { 0 };
            int o = lc_chat_add(c, LC_ROLE_ASSISTANT, texts[(i + 2) % nt], strlen(texts[(i + 2) % nt]));
            CHECK(o >= 0 && lc_chat_pop(c, &old) == 0 && lc_chat_add_versions(c, (size_t)m, &old) == 0, "versions");
        }
        char *js = lc_chat_to_json(c);
        size_t lb = lc_chat_json_min_len(c);
        CHECK(js && lb <= strlen(js), "%zu messages: lower bound %zu, JSON %zu", c->n, lb, js ? strlen(js) : 0);
        free(js);
    }
    lc_chat_truncate(c, 0);
    lc_chat_set_title(c, "t");
    char *line = malloc(4001);
    CHECK(line != NULL, "malloc");
    for (size_t i = 0; line && i < 4000; i++)
        line[i] = (char)('a' + i % 26);
    for (int i = 0; line && i < 200; i++)
        lc_chat_add(c, i % 2 ? LC_ROLE_ASSISTANT : LC_ROLE_USER, line, 4000);
    /* what may make it smaller counts in cuts; growth does not (autosave's still_too_big) */
    uint64_t cuts = c->cuts;
    lc_chat_add(c, LC_ROLE_USER, "more", 4);
    lc_chat_append(c, c->n - 1, " and more", 9);
    lc_chat_set_title(c, "t");
    lc_chat_set_model(c, NULL);
    lc_chat_set_model_path(c, "");
    lc_chat_truncate(c, c->n);
    CHECK(c->cuts == cuts, "growth and unchanged fields are no cut (%llu)", (unsigned long long)(c->cuts - cuts));
    struct lc_message m = { 0 };
    CHECK(lc_chat_pop(c, &m) == 0 && c->cuts == cuts + 1, "pop is a cut");
    CHECK(lc_chat_push(c, &m) >= 0 && c->cuts == cuts + 1, "push is not");
    lc_chat_set_title(c, "a longer title");
    CHECK(c->cuts == cuts + 2, "a new title is a cut");
    lc_chat_set_system(c, "sys");
    CHECK(c->cuts == cuts + 3, "/system is a cut");
    lc_chat_truncate(c, c->n - 1);
    CHECK(c->cuts == cuts + 4, "truncate is a cut");
    char *js = lc_chat_to_json(c);
    size_t lb = lc_chat_json_min_len(c);
    CHECK(js && lb <= strlen(js) && lb * 100 >= strlen(js) * 98, "plain text: %zu of %zu bytes", lb,
          js ? strlen(js) : 0);
    free(js);
    free(line);
    lc_chat_free(c);
}

/* "title" round-trips; /chats lists newest first with the title or the first line, marks the
 * current one, shows an unreadable file's error and leaves out empty ones. */
static void test_chat_listing(void)
{
    char *err = NULL;
    struct lc_chat *c = lc_chat_new();
    lc_chat_add(c, LC_ROLE_USER, "Lily had a red ball\nsecond line", 31);
    lc_chat_set_title(c, "Pirate tales");
    char *js = lc_chat_to_json(c);
    CHECK(js && strstr(js, "\"title\": \"Pirate tales\""), "title in the JSON: %s", js ? js : "(null)");
    struct lc_chat *d = js ? lc_chat_from_json(js, strlen(js), "mem", &err) : NULL;
    CHECK(d && d->title && !strcmp(d->title, "Pirate tales"), "title read back");
    lc_chat_free(d);
    free(js);
    lc_chat_set_title(c, "");
    js = lc_chat_to_json(c);
    CHECK(js && !strstr(js, "\"title\""), "an empty title is not saved");
    free(js);

    char ldir[200], a[256], b[256], e[256], z[256];
    snprintf(ldir, sizeof ldir, "%s/list", dir);
    mkdir(ldir, 0700);
    snprintf(a, sizeof a, "%s/a.json", ldir);
    snprintf(b, sizeof b, "%s/b.json", ldir);
    snprintf(e, sizeof e, "%s/e.json", ldir);
    snprintf(z, sizeof z, "%s/z.json", ldir);
    lc_chat_set_model(c, "stories");
    CHECK(lc_chat_save(c, a, LC_CHAT_JSON, &err) == 0, "save a");
    lc_chat_set_title(c, "Pirate tales");
    CHECK(lc_chat_save(c, b, LC_CHAT_JSON, &err) == 0, "save b");
    FILE *f = fopen(e, "w");
    if (f) {
        fputs("{ \"format\": 1 }", f);
        fclose(f);
    }
    f = fopen(z, "w");   /* empty: a reserved name, never saved */
    if (f)
        fclose(f);
    setenv("TZ", "UTC", 1);
    tzset();
    struct timespec ts[2] = { { 1796000000, 0 }, { 1796000000, 0 } };   /* 2026-11-30 00:53:20 UTC */
    utimensat(AT_FDCWD, a, ts, 0);
    ts[0].tv_sec = ts[1].tv_sec = 1796000060;
    utimensat(AT_FDCWD, b, ts, 0);
    ts[0].tv_sec = ts[1].tv_sec = 1796000120;
    utimensat(AT_FDCWD, e, ts, 0);
    struct lc_listing *l = lc_state_list_chats(ldir, a, &err);
    char want[1024];
    snprintf(want, sizeof want,
             "saved chats in %s (/chats N opens one, /delete N deletes one):\n"
             " 1. 2026-11-30 00:55 unreadable: %s: format: expected a string\n"
             " 2. 2026-11-30 00:54 stories: Pirate tales\n"
             " 3. 2026-11-30 00:53 stories: Lily had a red ball (this one)", ldir, e);
    CHECK(l && l->n == 3 && !strcmp(l->text, want), "listing:\n%s\nwant:\n%s", l ? l->text : err, want);
    CHECK(l && l->n == 3 && !strcmp(l->paths[0], e) && !strcmp(l->paths[2], a), "paths in order");
    lc_listing_free(l);
    snprintf(want, sizeof want, "%s/none", dir);
    l = lc_state_list_chats(want, NULL, &err);
    CHECK(l && l->n == 0 && strstr(l->text, "no saved chats in "), "a missing dir: none");
    lc_listing_free(l);
    lc_chat_free(c);
}

/* /regen's versions: kept in order, chosen flips, JSON keeps them (and reads old files). */
static void test_versions(void)
{
    struct lc_chat *c = lc_chat_new();
    lc_chat_add(c, LC_ROLE_USER, "Hi", 2);
    lc_chat_add(c, LC_ROLE_ASSISTANT, "one", 3);
    c->msgs[1].time = 1000;
    for (int v = 2; v <= 3; v++) {   /* /regen twice: "two", then "three\xff" */
        struct lc_message old;
        CHECK(lc_chat_pop(c, &old) == 0 && c->n == 1, "pop");
        lc_chat_add(c, LC_ROLE_ASSISTANT, v == 2 ? "two" : "three\xff", v == 2 ? 3 : 6);
        c->msgs[1].time = 1000 + v;
        CHECK(lc_chat_add_versions(c, 1, &old) == 0 && old.text == NULL, "add versions %d", v);
    }
    struct lc_message *m = &c->msgs[1];
    CHECK(m->n_alts == 2 && m->chosen == 2 && strcmp(m->text, "three\xff") == 0, "newest shown");
    CHECK(m->n_alts == 2 && strcmp(m->alts[0].text, "one") == 0 && strcmp(m->alts[1].text, "two") == 0,
          "order one, two");
    CHECK(lc_chat_choose(c, 1, 0) == 0 && strcmp(m->text, "one") == 0 && m->time == 1000 &&
          m->chosen == 0 && strcmp(m->alts[0].text, "two") == 0 &&
          strcmp(m->alts[1].text, "three\xff") == 0, "choose 1/3");
    CHECK(lc_chat_choose(c, 1, 1) == 0 && strcmp(m->text, "two") == 0 &&
          strcmp(m->alts[0].text, "one") == 0 && strcmp(m->alts[1].text, "three\xff") == 0, "choose 2/3");
    CHECK(lc_chat_choose(c, 1, 3) == -1 && lc_chat_choose(c, 2, 0) == -1, "bad choice refused");
    char *js = lc_chat_to_json(c);
    CHECK(js && strstr(js, "\"chosen\": 2") && strstr(js, "\"alternatives\": ["), "json:\n%s", js ? js : "(null)");
    char *err = NULL;
    struct lc_chat *d = js ? lc_chat_from_json(js, strlen(js), "v.json", &err) : NULL;
    CHECK(d && d->n == 2 && d->msgs[1].n_alts == 2 && d->msgs[1].chosen == 1 &&
          strcmp(d->msgs[1].text, "two") == 0 && strcmp(d->msgs[1].alts[0].text, "one") == 0 &&
          d->msgs[1].alts[1].len == 6 && memcmp(d->msgs[1].alts[1].text, "three\xff", 6) == 0 &&
          d->msgs[1].alts[0].time == 1000 && d->msgs[1].alts[1].time == 1003,
          "read back: %s", err ? err : "");
    lc_chat_free(d);
    free(err);
    err = NULL;
    /* a file of an older version (no alternatives) and a bad "chosen" */
    const char *old = "{\"format\":\"llamachat-transcript\",\"version\":1,\"messages\":"
                      "[{\"role\":\"assistant\",\"content\":\"x\"}]}";
    d = lc_chat_from_json(old, strlen(old), "o.json", &err);
    CHECK(d && d->n == 1 && d->msgs[0].n_alts == 0 && d->msgs[0].chosen == 0, "old file: %s", err ? err : "");
    lc_chat_free(d);
    free(err);
    err = NULL;
    const char *bad = "{\"format\":\"llamachat-transcript\",\"version\":1,\"messages\":"
                      "[{\"role\":\"assistant\",\"content\":\"x\",\"alternatives\":[{\"content\":\"y\"}],\"chosen\":3}]}";
    d = lc_chat_from_json(bad, strlen(bad), "b.json", &err);
    CHECK(!d && err && strcmp(err, "b.json: messages[0].chosen: 3 is not between 1 and 2") == 0,
          "bad chosen: %s", err ? err : "(null)");
    free(err);
    err = NULL;
    bad = "{\"format\":\"llamachat-transcript\",\"version\":1,\"messages\":"
          "[{\"role\":\"assistant\",\"content\":\"x\",\"alternatives\":[{\"text\":\"y\"}]}]}";
    d = lc_chat_from_json(bad, strlen(bad), "b.json", &err);
    CHECK(!d && err && strcmp(err, "b.json: messages[0].alternatives[0].content: missing") == 0,
          "bad alternative: %s", err ? err : "(null)");
    free(err);
    err = NULL;
    /* a transcript may give the system prompt versions too: /system replaces the prompt and
     * its versions (none of them is the new one), and removes it with them (no leak) */
    const char *sys = "{\"format\":\"llamachat-transcript\",\"version\":1,\"messages\":"
                      "[{\"role\":\"system\",\"content\":\"a\",\"alternatives\":[{\"content\":\"b\"}],"
                      "\"chosen\":2},{\"role\":\"user\",\"content\":\"hi\"}]}";
    d = lc_chat_from_json(sys, strlen(sys), "s.json", &err);
    CHECK(d && d->n == 2 && d->msgs[0].n_alts == 1, "system versions read: %s", err ? err : "");
    if (d) {
        CHECK(lc_chat_set_system(d, "new") == 0 && !strcmp(d->msgs[0].text, "new") &&
              d->msgs[0].n_alts == 0 && d->msgs[0].alts == NULL && d->msgs[0].chosen == 0,
              "a new system prompt has no versions: %zu, chosen %zu", d->msgs[0].n_alts,
              d->msgs[0].chosen);
        char *sj = lc_chat_to_json(d);
        CHECK(sj && !strstr(sj, "alternatives") && !strstr(sj, "\"chosen\""),
              "saved without the old versions:\n%s", sj ? sj : "(null)");
        free(sj);
        lc_chat_free(d);
    }
    free(err);
    err = NULL;
    d = lc_chat_from_json(sys, strlen(sys), "s.json", &err);
    if (d) {   /* LeakSanitizer: the versions go with the prompt */
        CHECK(lc_chat_set_system(d, NULL) == 0 && d->n == 1 && d->msgs[0].role == LC_ROLE_USER,
              "system prompt removed");
        lc_chat_free(d);
    }
    free(err);
    free(js);
    lc_chat_free(c);
}

/* How each version of a reply ended ("end", chat.h): every kind round-trips on the message and
 * on its alternatives, /regen and Alt-Left carry it with the version, a file without it (older
 * versions) reads as complete, an unknown name reads as incomplete, a non-string is refused,
 * and the Markdown export says it in italics. */
static void test_end(void)
{
    static const enum lc_end kinds[] = { LC_END_COMPLETE, LC_END_STOPPED, LC_END_LENGTH,
                                         LC_END_ERROR, LC_END_PARTIAL, LC_END_INCOMPLETE,
                                         LC_END_CONTEXT };
    static const char *const names[] = { NULL, "stopped", "length", "error", "partial", "incomplete",
                                         "context" };
    const size_t nk = sizeof(kinds) / sizeof(kinds[0]);
    struct lc_chat *c = lc_chat_new();
    for (size_t k = 0; k < nk; k++) {
        lc_chat_add(c, LC_ROLE_USER, "Hi", 2);
        int m = lc_chat_add(c, LC_ROLE_ASSISTANT, "Once upon", 9);
        CHECK(m >= 0 && c->msgs[m].end == LC_END_COMPLETE, "a new message is complete");
        c->msgs[m].end = kinds[k];
        CHECK((lc_end_name(kinds[k]) == NULL) == (names[k] == NULL) &&
              (!names[k] || !strcmp(lc_end_name(kinds[k]), names[k])), "name of %zu", k);
        CHECK((lc_end_note(kinds[k]) == NULL) == (k == 0), "note of %zu", k);
        CHECK(!names[k] || lc_end_from_name(names[k]) == kinds[k], "%s read back", names[k]);
    }
    CHECK(!strcmp(lc_end_note(LC_END_CONTEXT), "(cut off: the context is full)"),
          "a reply the context cut says so, not the token limit");
    /* the last reply: /regen over a "partial" one, the new one stopped; then the old shown */
    struct lc_message old;
    lc_chat_add(c, LC_ROLE_USER, "Again", 5);
    lc_chat_add(c, LC_ROLE_ASSISTANT, "cut", 3);
    c->msgs[c->n - 1].end = LC_END_PARTIAL;
    lc_chat_pop(c, &old);
    int m = lc_chat_add(c, LC_ROLE_ASSISTANT, "new", 3);
    c->msgs[m].end = LC_END_STOPPED;
    CHECK(lc_chat_add_versions(c, (size_t)m, &old) == 0 && c->msgs[m].alts[0].end == LC_END_PARTIAL &&
          c->msgs[m].end == LC_END_STOPPED, "/regen keeps each version's end");
    char *js = lc_chat_to_json(c);
    CHECK(js && strstr(js, "\"end\": \"partial\"") && strstr(js, "\"end\": \"stopped\"") &&
          strstr(js, "\"end\": \"length\""), "json:\n%s", js ? js : "(null)");
    char *err = NULL;
    struct lc_chat *d = js ? lc_chat_from_json(js, strlen(js), "e.json", &err) : NULL;
    CHECK(d && d->n == c->n, "read back: %s", err ? err : "");
    for (size_t i = 0; d && i < d->n && i < c->n; i++)
        CHECK(d->msgs[i].end == c->msgs[i].end, "message %zu: end %d, wrote %d", i,
              (int)d->msgs[i].end, (int)c->msgs[i].end);
    if (d && d->n == c->n) {
        CHECK(d->msgs[m].n_alts == 1 && d->msgs[m].alts[0].end == LC_END_PARTIAL, "alternative's end");
        CHECK(lc_chat_choose(d, (size_t)m, 0) == 0 && d->msgs[m].end == LC_END_PARTIAL &&
              d->msgs[m].alts[0].end == LC_END_STOPPED, "the version shown brings its end");
    }
    /* Markdown: the note in italics after the text, none for a complete reply */
    char *md = lc_chat_to_markdown(c);
    CHECK(md && strstr(md, "\n*(stopped by you)*\n") && strstr(md, "\n*(cut at the token limit)*\n") &&
          strstr(md, "\n*(cut off: this reply was still being written when the chat was saved)*\n"),
          "markdown:\n%s", md ? md : "(null)");
    free(md);
    lc_chat_free(d);
    free(js);
    free(err);
    err = NULL;
    /* an old file (no "end"): complete; an unknown one: incomplete (kept); not a string: refused */
    const char *f = "{\"format\":\"llamachat-transcript\",\"version\":1,\"messages\":"
                    "[{\"role\":\"user\",\"content\":\"a\"},{\"role\":\"assistant\",\"content\":\"x\","
                    "\"alternatives\":[{\"content\":\"y\"},{\"content\":\"z\",\"end\":\"melted\"}]}]}";
    d = lc_chat_from_json(f, strlen(f), "o.json", &err);
    CHECK(d && d->n == 2 && d->msgs[1].end == LC_END_COMPLETE && d->msgs[1].n_alts == 2 &&
          d->msgs[1].alts[0].end == LC_END_COMPLETE && d->msgs[1].alts[1].end == LC_END_INCOMPLETE,
          "old file and unknown end: %s", err ? err : "");
    char *dj = d ? lc_chat_to_json(d) : NULL;
    CHECK(dj && strstr(dj, "\"end\": \"incomplete\"") && !strstr(dj, "melted") &&
          !strstr(strstr(dj, "\"end\"") + 1, "\"end\""),   /* none for the complete ones */
          "saved back:\n%s", dj ? dj : "(null)");
    free(dj);
    lc_chat_free(d);
    free(err);
    err = NULL;
    f = "{\"format\":\"llamachat-transcript\",\"version\":1,\"messages\":"
        "[{\"role\":\"assistant\",\"content\":\"x\",\"end\":1}]}";
    d = lc_chat_from_json(f, strlen(f), "n.json", &err);
    CHECK(!d && err && !strcmp(err, "n.json: messages[0].end: expected a string"), "non-string end: %s",
          err ? err : "(null)");
    free(err);
    lc_chat_free(c);
}

int main(void)
{
    if (!mkdtemp(dir))
        return 99;
    test_edit();
    test_versions();
    test_end();
    test_too_large();
    test_limit_agrees();
    test_json_min_len();
    test_json_round_trip();
    test_json_largest_params();
    test_markdown();
    test_bad_transcripts();
    test_json_invalid_utf8();
    test_markdown_controls();
    test_textsafe();
    test_failed_save();
    test_state();
    test_chat_listing();
    char cmd[600];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", dir);
    return tu_finish("test-chat");
}
