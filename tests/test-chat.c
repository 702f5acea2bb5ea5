/* test-chat.c - conversation editing and transcripts: JSON round trip (exact), Markdown text,
 * malformed transcripts rejected with the field named, failed saves leave the target alone. */
#include <dirent.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "chat.h"
#include "testutil.h"

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
    CHECK(text && strncmp(text, want_head, strlen(want_head)) == 0, "md head:\n%s", text);
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
    expect_load_error("{\"format\": \"llamachat-transcript\", \"version\": 1, \"messages\": "
                      "[{\"role\": \"user\", \"content\": \"a\", \"time\": \"yesterday\"}]}",
                      "x.json: messages[0].time: 'yesterday' is not YYYY-MM-DDTHH:MM:SSZ");
    expect_load_error("{\"format\": \"llamachat-transcript\", \"version\": 1, \"messages\": "
                      "[{\"role\": \"user\", \"content\": \"a\"}, {\"role\": \"system\", \"content\": \"s\"}]}",
                      "x.json: messages[1].role: a system message must come first");
    char *err = NULL;
    const char *trunc = "{\"format\": \"llamachat-tra";
    struct lc_chat *c = lc_chat_from_json(trunc, strlen(trunc), "x.json", &err);
    CHECK(c == NULL && err && strncmp(err, "x.json: not valid JSON", 22) == 0, "truncated: %s", err);
    free(err);
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
    CHECK(err && strcmp(err, "/nonexistent-lc-dir/x.md: cannot create a temporary file: No such file or directory") == 0,
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

int main(void)
{
    if (!mkdtemp(dir))
        return 99;
    test_edit();
    test_json_round_trip();
    test_markdown();
    test_bad_transcripts();
    test_failed_save();
    char cmd[600];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", dir);
    return tu_finish("test-chat");
}
