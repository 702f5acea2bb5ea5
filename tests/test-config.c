/* test-config.c - ~/.llamachatrc parsing: every key, bad values, unknown keys, missing file,
 * $LLAMACHATRC, and /set through lc_config_set. */
#include <math.h>
#include <stdbool.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "../src/config.h" /* not autoconf's config.h */
#include "testutil.h"

static char dir[] = "/tmp/lc-config-XXXXXX";

static const char *write_file(const char *name, const char *text)
{
    static char path[512];
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    FILE *f = fopen(path, "w");
    if (!f)
        return NULL;
    fputs(text, f);
    fclose(f);
    return path;
}

static bool feq(float a, float b)
{
    return fabsf(a - b) < 1e-6f;
}

static void test_every_key(void)
{
    const char *p = write_file("all.rc",
        "; every key\n"
        "[model]\n"
        "path = /models/x.gguf\n"
        "threads = 3\n"
        "context_size = 1024\n"
        "batch = 64\n"
        "isa = scalar\n"
        "\n"
        "[sampling]\n"
        "temp = 0.25\n"
        "top_k = 7\n"
        "top_p = 0.5\n"
        "min_p = 0.1\n"
        "repeat_penalty = 1.3\n"
        "repeat_last_n = -1\n"
        "max_tokens = 99\n"
        "seed = 1234\n"
        "[ui]\n"
        "theme = mono\n"
        "history = off\n"
        "show_params = no\n"
        "read_limit = 128\n"
        "[chat]\n"
        "system_prompt = \"You are terse; very terse.\"\n"
        "template = chatml\n"
        "autosave = off\n");
    struct lc_options o;
    lc_config_defaults(&o);
    CHECK(o.autosave, "autosave on by default");
    CHECK(o.read_limit_kib == 64, "read_limit 64 KiB by default: %d", o.read_limit_kib);
    char *w = (char *)1;
    int n = lc_config_load(&o, p, &w);
    CHECK(n == 0, "problems %d: %s", n, w ? w : "");
    CHECK(w == NULL, "warnings not NULL");
    CHECK(o.model_path && strcmp(o.model_path, "/models/x.gguf") == 0, "path %s", o.model_path);
    CHECK(o.n_threads == 3, "threads %d", o.n_threads);
    CHECK(o.n_ctx == 1024, "n_ctx %d", o.n_ctx);
    CHECK(o.n_batch == 64, "n_batch %d", o.n_batch);
    CHECK(o.isa && strcmp(o.isa, "scalar") == 0, "isa");
    CHECK(feq(o.sampling.temp, 0.25f), "temp %g", (double)o.sampling.temp);
    CHECK(o.sampling.top_k == 7, "top_k %d", o.sampling.top_k);
    CHECK(feq(o.sampling.top_p, 0.5f), "top_p");
    CHECK(feq(o.sampling.min_p, 0.1f), "min_p");
    CHECK(feq(o.sampling.repeat_penalty, 1.3f), "repeat_penalty");
    CHECK(o.sampling.repeat_last_n == -1, "repeat_last_n %d", o.sampling.repeat_last_n);
    CHECK(o.n_predict == 99, "max_tokens %d", o.n_predict);
    CHECK(o.sampling.seed == 1234, "seed");
    CHECK(o.theme && strcmp(o.theme, "mono") == 0, "theme");
    CHECK(!o.history, "history");
    CHECK(!o.show_params, "show_params");
    CHECK(o.read_limit_kib == 128, "read_limit %d", o.read_limit_kib);
    CHECK(!o.autosave, "autosave");
    CHECK(o.system_prompt && strcmp(o.system_prompt, "You are terse; very terse.") == 0,
          "system_prompt '%s'", o.system_prompt);
    CHECK(o.chat_template && strcmp(o.chat_template, "chatml") == 0, "template");
    lc_config_free(&o);
    CHECK(o.model_path == NULL && o.theme == NULL, "free resets");
}

static void test_bad_values(void)
{
    const char *p = write_file("bad.rc",
        "[sampling]\n"              /* 1 */
        "temp = hot\n"              /* 2 */
        "top_k = -3\n"              /* 3 */
        "top_p = 1.5\n"             /* 4 */
        "seed = random\n"           /* 5 */
        "bogus = 1\n"               /* 6 */
        "[ui]\n"                    /* 7 */
        "history = maybe\n"         /* 8 */
        "theme = neon\n"            /* 9 */
        "[colours]\n"               /* 10 */
        "x = 1\n"                   /* 11 */
        "[model]\n"                 /* 12 */
        "threads = 4x\n"            /* 13 */
        "isa = sse9\n");            /* 14 */
    struct lc_options o;
    lc_config_defaults(&o);
    struct lc_sampler_params def = lc_sampler_default_params();
    char *w = NULL;
    int n = lc_config_load(&o, p, &w);
    CHECK(n == 9, "problems %d", n);
    CHECK(w != NULL, "no warnings");
    if (w) {
        char want[4096];
        snprintf(want, sizeof(want),
                 "%1$s:2: bad value 'hot' for temp: expected a number from 0 to 100; default kept\n"
                 "%1$s:3: bad value '-3' for top_k: expected an integer >= 0 (0 = off); default kept\n"
                 "%1$s:4: bad value '1.5' for top_p: expected a number from 0 to 1; default kept\n"
                 "%1$s:6: unknown key 'bogus' in [sampling]\n"
                 "%1$s:8: bad value 'maybe' for history: expected on or off; default kept\n"
                 "%1$s:9: bad value 'neon' for theme: expected default, mono or light; default kept\n"
                 "%1$s:10: unknown section [colours]\n"
                 "%1$s:13: bad value '4x' for threads: expected an integer from 0 (all cores) to 1024; default kept\n"
                 "%1$s:14: bad value 'sse9' for isa: expected auto, scalar, avx2, avx512 or neon; default kept\n",
                 p);
        CHECK(strcmp(w, want) == 0, "warnings:\n%s\nwant:\n%s", w, want);
        CHECK(lc_config_last_warnings() && strcmp(lc_config_last_warnings(), w) == 0,
              "last warnings");
    }
    CHECK(o.sampling.temp == def.temp, "temp changed");
    CHECK(o.sampling.top_k == def.top_k, "top_k changed");
    CHECK(o.sampling.top_p == def.top_p, "top_p changed");
    CHECK(o.sampling.seed == LC_SEED_RANDOM, "seed random");
    CHECK(o.history, "history changed");
    CHECK(o.theme == NULL, "theme set");
    CHECK(o.n_threads == 0, "threads changed");
    CHECK(o.isa == NULL, "isa set");
    free(w);
    lc_config_free(&o);
}

static void test_missing_and_env(void)
{
    struct lc_options o;
    lc_config_defaults(&o);
    char path[512];
    snprintf(path, sizeof(path), "%s/nope.rc", dir);
    char *w = NULL;
    int n = lc_config_load(&o, path, &w);
    CHECK(n == 1, "explicit missing file: %d problems", n);
    char want[1024];
    snprintf(want, sizeof(want), "%s: cannot open: No such file or directory\n", path);
    CHECK(w && strcmp(w, want) == 0, "warning '%s'", w ? w : "(null)");
    free(w);

    /* The default location is optional: HOME without .llamachatrc is silent. */
    unsetenv("LLAMACHATRC");
    setenv("HOME", dir, 1);
    w = (char *)1;
    n = lc_config_load(&o, NULL, &w);
    CHECK(n == 0 && w == NULL, "missing ~/.llamachatrc reported");
    /* $HOME/.llamachatrc is read when present */
    write_file(".llamachatrc", "[sampling]\ntop_k = 11\n");
    n = lc_config_load(&o, NULL, NULL);
    CHECK(n == 0 && o.sampling.top_k == 11, "HOME rc: %d top_k %d", n, o.sampling.top_k);
    /* $LLAMACHATRC overrides it, and must exist */
    const char *p = write_file("env.rc", "[sampling]\ntop_k = 22\n");
    setenv("LLAMACHATRC", p, 1);
    char *cp = lc_config_path();
    CHECK(cp && strcmp(cp, p) == 0, "lc_config_path %s", cp);
    free(cp);
    n = lc_config_load(&o, NULL, NULL);
    CHECK(n == 0 && o.sampling.top_k == 22, "env rc: top_k %d", o.sampling.top_k);
    setenv("LLAMACHATRC", path, 1);
    n = lc_config_load(&o, NULL, &w);
    CHECK(n == 1 && w && strstr(w, "cannot open"), "missing $LLAMACHATRC not reported");
    free(w);
    unsetenv("LLAMACHATRC");
    lc_config_free(&o);
}

/* $XDG_CONFIG_HOME/llamachat/llamachatrc (default ~/.config/...): read when present, over
 * ~/.llamachatrc, which is then named in a warning; $LLAMACHATRC still wins. */
static void test_xdg(void)
{
    struct lc_options o;
    lc_config_defaults(&o);
    char xdg[512], home[512], want[1200];
    snprintf(home, sizeof(home), "%s/xh", dir);
    snprintf(xdg, sizeof(xdg), "%s/xh/.config/llamachat", dir);
    unsetenv("LLAMACHATRC");
    unsetenv("XDG_CONFIG_HOME");
    setenv("HOME", home, 1);
    CHECK(mkdir(home, 0700) == 0 && mkdir(strcat(strcpy(want, home), "/.config"), 0700) == 0 &&
          mkdir(xdg, 0700) == 0, "mkdir %s", xdg);
    write_file("xh/.config/llamachat/llamachatrc", "[sampling]\ntop_k = 33\n");
    char *cp = lc_config_path();
    snprintf(want, sizeof(want), "%s/llamachatrc", xdg);
    CHECK(cp && strcmp(cp, want) == 0, "default XDG path %s", cp ? cp : "(null)");
    free(cp);
    char *w = (char *)1;
    int n = lc_config_load(&o, NULL, &w);
    CHECK(n == 0 && w == NULL && o.sampling.top_k == 33, "XDG rc: %d top_k %d", n, o.sampling.top_k);
    /* both: the XDG one is read, the other named */
    write_file("xh/.llamachatrc", "[sampling]\ntop_k = 44\n");
    n = lc_config_load(&o, NULL, &w);
    snprintf(want, sizeof(want), "%s/.llamachatrc is not read: %s/llamachatrc is (the XDG one wins; "
             "move the settings there)\n", home, xdg);
    CHECK(n == 1 && o.sampling.top_k == 33 && w && strcmp(w, want) == 0, "both: %d top_k %d '%s'",
          n, o.sampling.top_k, w ? w : "(null)");
    free(w);
    /* $XDG_CONFIG_HOME elsewhere without the file: ~/.llamachatrc */
    setenv("XDG_CONFIG_HOME", dir, 1);
    n = lc_config_load(&o, NULL, NULL);
    CHECK(n == 0 && o.sampling.top_k == 44, "XDG elsewhere: top_k %d", o.sampling.top_k);
    snprintf(want, sizeof(want), "%s/xh/.config", dir);
    setenv("XDG_CONFIG_HOME", want, 1);
    n = lc_config_load(&o, NULL, NULL);
    CHECK(o.sampling.top_k == 33, "XDG_CONFIG_HOME: top_k %d", o.sampling.top_k);
    unsetenv("XDG_CONFIG_HOME");
    lc_config_free(&o);
}

static void test_syntax_and_outside(void)
{
    const char *p = write_file("syn.rc", "stray = 1\n[ui]\nhistory = on\n");
    struct lc_options o;
    lc_config_defaults(&o);
    char *w = NULL;
    int n = lc_config_load(&o, p, &w);
    char want[1024];
    snprintf(want, sizeof(want), "%s:1: key 'stray' outside any [section] ignored\n", p);
    CHECK(n == 1 && w && strcmp(w, want) == 0, "outside: %s", w ? w : "(null)");
    free(w);
    p = write_file("syn2.rc", "[ui]\nhistory = on\nthis line is not ini\n");
    n = lc_config_load(&o, p, &w);
    CHECK(n >= 1 && w && strstr(w, "syntax error") && strstr(w, "(3)"), "syntax: %s",
          w ? w : "(null)");
    free(w);
    lc_config_free(&o);
}

/* A line continued with '\\' longer than iniparser's buffer: that setting goes with a warning,
 * the rest of the file stays (iniparser alone would refuse the whole file). */
static void test_continued(void)
{
    char text[4096], a[601], b[601];
    memset(a, 'a', 600);
    a[600] = '\0';
    memset(b, 'b', 600);
    b[600] = '\0';
    snprintf(text, sizeof(text), "[sampling]\ntemp = 0.3\n[chat]\nsystem_prompt = %s\\\n%s\n"
             "[model]\nthreads = 3\n", a, b);
    const char *p = write_file("cont.rc", text);
    struct lc_options o;
    lc_config_defaults(&o);
    char *w = NULL;
    int n = lc_config_load(&o, p, &w);
    char want[1024];
    snprintf(want, sizeof(want), "%s:4: continued line longer than 1000 bytes; ignored\n", p);
    CHECK(n == 1 && w && strcmp(w, want) == 0, "continued: %d '%s'", n, w ? w : "(null)");
    CHECK(o.sampling.temp == 0.3f && o.n_threads == 3 && !o.system_prompt,
          "continued: temp %g threads %d system %s", (double)o.sampling.temp, o.n_threads,
          o.system_prompt ? "set" : "unset");
    free(w);
    /* a short continued line is joined, as iniparser does */
    p = write_file("cont2.rc", "[chat]\nsystem_prompt = You are \\\n  a pirate.\n");
    lc_config_defaults(&o);
    n = lc_config_load(&o, p, &w);
    CHECK(n == 0 && o.system_prompt && strstr(o.system_prompt, "pirate"), "joined: %d %s %s", n, w ? w : "",
          o.system_prompt ? o.system_prompt : "(null)");
    free(w);
    lc_config_free(&o);
}

static void test_set(void)
{
    struct lc_options o;
    lc_config_defaults(&o);
    char *err = NULL;
    CHECK(lc_config_set(&o, NULL, "temp", "0.5", &err) == 0 && feq(o.sampling.temp, 0.5f), "temp");
    CHECK(lc_config_set(&o, NULL, "top-k", "5", &err) == 0 && o.sampling.top_k == 5, "top-k");
    CHECK(lc_config_set(&o, NULL, "temperature", "0", &err) == 0 && o.sampling.temp == 0.0f, "alias");
    CHECK(lc_config_set(&o, NULL, "seed", "-1", &err) == 0 && o.sampling.seed == LC_SEED_RANDOM, "seed");
    CHECK(lc_config_set(&o, NULL, "seed", "42", &err) == 0 && o.sampling.seed == 42, "seed 42");
    CHECK(lc_config_set(&o, NULL, "min_p", "2", &err) == -1 && err &&
          strcmp(err, "bad value '2' for min_p: expected a number from 0 to 1") == 0, "min_p: %s", err);
    free(err);
    CHECK(lc_config_set(&o, NULL, "warmth", "2", &err) == -1 && err &&
          strcmp(err, "unknown setting 'warmth'") == 0, "unknown: %s", err);
    free(err);
    setenv("HOME", "/home/someone", 1);
    CHECK(lc_config_set(&o, "model", "path", "~/m.gguf", &err) == 0 && o.model_path &&
          strcmp(o.model_path, "/home/someone/m.gguf") == 0, "~ expansion: %s", o.model_path);
    /* [model] draft (--draft): a file, ~ expanded; off or empty: none */
    CHECK(lc_config_set(&o, "model", "draft", "~/d.gguf", &err) == 0 && o.draft_path &&
          strcmp(o.draft_path, "/home/someone/d.gguf") == 0, "draft: %s", o.draft_path);
    CHECK(lc_config_set(&o, NULL, "draft", "off", &err) == 0 && o.draft_path == NULL,
          "draft off: %s", o.draft_path);
    CHECK(lc_config_set(&o, NULL, "draft", "/m/d.gguf", &err) == 0 && o.draft_path &&
          strcmp(o.draft_path, "/m/d.gguf") == 0, "draft: %s", o.draft_path);
    CHECK(lc_config_set(&o, NULL, "draft", "", &err) == 0 && o.draft_path == NULL,
          "draft empty: %s", o.draft_path);
    CHECK(lc_config_set(&o, NULL, "temp", "nan", &err) == -1, "nan accepted");
    free(err);
    CHECK(lc_config_set(&o, NULL, "seed", "18446744073709551616", &err) == -1, "seed overflow");
    free(err);
    bool b;
    CHECK(lc_config_parse_bool(" TRUE ", &b) == 0 && b, "bool");
    CHECK(lc_config_parse_bool("Off", &b) == 0 && !b, "bool off");
    lc_config_free(&o);
}

/* Issue 10 item 7: the command line, the file and /set share one definition per option: the
 * same values accepted, the same ranges, the same message text. */
static void test_one_definition(void)
{
    static const struct { const char *cli; int shrt; const char *key, *value; int ok; const char *msg; } cases[] = {
        { "temp", 0, "temp", "1e-40", 0, NULL },            /* subnormal: in range */
        { "temp", 0, "temp", "1e-400", 0, NULL },           /* underflow: 0 */
        { "temp", 0, "temp", "1e400", -1, "bad value '1e400' for temp: expected a number from 0 to 100" },
        { "temp", 0, "temp", "abc", -1, "bad value 'abc' for temp: expected a number from 0 to 100" },
        { "seed", 0, "seed", "-1", 0, NULL },
        { "seed", 0, "seed", "random", 0, NULL },
        { "seed", 0, "seed", "-2", -1, "bad value '-2' for seed: expected an integer from 0 to 18446744073709551614 or \"random\"" },
        { "seed", 0, "seed", "18446744073709551614", 0, NULL },
        /* 2^64 - 1 is "random" inside: the message gives the range that is accepted */
        { "seed", 0, "seed", "18446744073709551615", -1, "bad value '18446744073709551615' for seed: expected an integer from 0 to 18446744073709551614 or \"random\"" },
        { "threads", 't', "threads", "0", 0, NULL },
        { "threads", 't', "threads", "1025", -1, "bad value '1025' for threads: expected an integer from 0 (all cores) to 1024" },
        { "ctx-size", 'c', "context_size", "100000", 0, NULL },
        { "n-predict", 'n', "max_tokens", "-2", -1, "bad value '-2' for max_tokens: expected an integer >= -1 (-1 = no limit)" },
        { "chat-template", 0, "template", "chatml", 0, NULL },
        { "chat-template", 0, "template", "nope", -1, "bad value 'nope' for template: expected one of plain, chatml, llama2, " },
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        const struct lc_option_def *d = lc_config_option(cases[i].cli, 0);
        CHECK(d && strcmp(d->key, cases[i].key) == 0, "--%s: definition", cases[i].cli);
        if (cases[i].shrt)
            CHECK(lc_config_option(NULL, cases[i].shrt) == d, "-%c", cases[i].shrt);
        if (!d)
            continue;
        /* the command line (section from the definition) and /set (section NULL) */
        struct lc_options a, b;
        lc_config_defaults(&a);
        lc_config_defaults(&b);
        char *ea = NULL, *eb = NULL;
        int ra = lc_config_set(&a, d->section, d->key, cases[i].value, &ea);
        int rb = lc_config_set(&b, NULL, cases[i].key, cases[i].value, &eb);
        CHECK(ra == cases[i].ok && rb == cases[i].ok, "%s %s: %d %d", cases[i].key, cases[i].value, ra, rb);
        if (cases[i].msg) {
            CHECK(ea && strncmp(ea, cases[i].msg, strlen(cases[i].msg)) == 0, "message '%s'", ea ? ea : "");
            CHECK(ea && eb && strcmp(ea, eb) == 0, "same message: '%s' / '%s'", ea ? ea : "", eb ? eb : "");
            /* the file: "FILE:LINE: message; default kept" */
            char text[256], want[1536];
            snprintf(text, sizeof(text), "[%s]\n%s = %s\n", d->section, d->key, cases[i].value);
            const char *p = write_file("one.rc", text);
            struct lc_options c;
            lc_config_defaults(&c);
            char *w = NULL;
            lc_config_load(&c, p, &w);
            snprintf(want, sizeof(want), "%s:2: %s; default kept\n", p, ea ? ea : "");
            CHECK(w && strcmp(w, want) == 0, "file: '%s', want '%s'", w ? w : "", want);
            free(w);
            lc_config_free(&c);
        }
        free(ea);
        free(eb);
        lc_config_free(&a);
        lc_config_free(&b);
    }
    struct lc_options o;
    lc_config_defaults(&o);
    CHECK(lc_config_set(&o, "sampling", "temp", "1e-40", NULL) == 0 && o.sampling.temp > 0.0f &&
          o.sampling.temp < 1e-39f, "1e-40 kept as a subnormal: %g", (double)o.sampling.temp);
    CHECK(lc_config_option("prompt", 'p') == NULL, "-p is not a setting");
}

/* Issue 11: one bad line costs only itself; 20,000 unknown keys are quick; no raw control
 * byte reaches a message. */
static void test_robust(void)
{
    char path[512];
    snprintf(path, sizeof(path), "%s/robust.rc", dir);
    FILE *f = fopen(path, "w");
    fputs("[sampling]\n", f);                                  /* 1 */
    fputs("temp = 0.5\n", f);                                  /* 2 */
    fputs("top_k = ", f);                                       /* 3: 1,100 bytes */
    for (int i = 0; i < 1092; i++)
        fputc('1', f);
    fputc('\n', f);
    fwrite("top_p = 0.3\0junk\n", 1, 17, f);                  /* 4: a NUL byte */
    fputs("min_p = \033[31mred\n", f);                         /* 5: control bytes */
    fputs("bad\007line\n", f);                                 /* 6 */
    fputs("[ui]\nhistory = off\n", f);                          /* 7, 8 */
    fclose(f);
    struct lc_options o;
    lc_config_defaults(&o);
    char *w = NULL;
    int n = lc_config_load(&o, path, &w);
    char want[4096];
    snprintf(want, sizeof(want),
             "%1$s:3: line longer than 1000 bytes; line ignored\n"
             "%1$s:4: NUL byte in the line; line ignored\n"
             "%1$s:5: bad value '\\x1B[31mred' for min_p: expected a number from 0 to 1; default kept\n"
             "%1$s:6: syntax error (6): bad\\x07line; line ignored\n", path);
    CHECK(n == 4 && w && strcmp(w, want) == 0, "robust: %d\n%s\nwant:\n%s", n, w ? w : "", want);
    CHECK(feq(o.sampling.temp, 0.5f), "the rest applies: temp %g", (double)o.sampling.temp);
    CHECK(!o.history, "the rest applies: history");
    free(w);
    lc_config_free(&o);

    /* 20,000 unknown keys: every one reported with its line, in well under a second */
    f = fopen(path, "w");
    fputs("[sampling]\n", f);
    for (int i = 0; i < 20000; i++)
        fprintf(f, "unknown_%d = %d\n", i, i);
    fputs("temp = 0.25\n", f);
    fclose(f);
    lc_config_defaults(&o);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    n = lc_config_load(&o, path, &w);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double secs = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) * 1e-9;
    CHECK(n == 20000, "unknown keys: %d", n);
    CHECK(secs < 2.0, "20,000 unknown keys took %.2f s", secs);
    CHECK(feq(o.sampling.temp, 0.25f), "temp after them");
    char line[1024];
    snprintf(line, sizeof(line), "%s:20001: unknown key 'unknown_19999' in [sampling]\n", path);
    CHECK(w && strstr(w, line), "last unknown key with its line");
    free(w);
    lc_config_free(&o);

    /* a FIFO as the file: refused at once, not waited on */
    snprintf(path, sizeof(path), "%s/fifo.rc", dir);
    CHECK(mkfifo(path, 0600) == 0, "mkfifo");
    lc_config_defaults(&o);
    n = lc_config_load(&o, path, &w);
    snprintf(want, sizeof(want), "%s: not a regular file; not read\n", path);
    CHECK(n == 1 && w && strcmp(w, want) == 0, "fifo: %s", w ? w : "");
    free(w);
    unlink(path);
}

/* /read's limit and the table as listed for Tab completion (lc_config_option_at). */
static void test_read_limit_and_listing(void)
{
    struct lc_options o;
    lc_config_defaults(&o);
    char *err = NULL;
    CHECK(lc_config_set(&o, "ui", "read_limit", "2048", &err) == -1, "read_limit 2048 accepted");
    CHECK(err && strcmp(err, "bad value '2048' for read_limit: expected an integer from 1 to 1024 (KiB)") == 0,
          "message '%s'", err ? err : "(null)");
    free(err);
    CHECK(o.read_limit_kib == 64, "read_limit changed: %d", o.read_limit_kib);
    CHECK(lc_config_set(&o, "ui", "read_limit", "1024", &err) == 0 && o.read_limit_kib == 1024,
          "read_limit 1024");
    /* every setting once, in the table's order, then NULL; the /set names among them */
    size_t n = 0, sampling = 0;
    const struct lc_option_def *d;
    while ((d = lc_config_option_at(n)) != NULL) {
        if (!strcmp(d->section, "sampling"))
            sampling++;
        n++;
    }
    CHECK(n >= 20 && lc_config_option_at(n + 1) == NULL, "listed %zu settings", n);
    CHECK(!strcmp(lc_config_option_at(0)->key, "path"), "first: %s", lc_config_option_at(0)->key);
    CHECK(sampling == 8, "sampling settings %zu (temp top_k top_p min_p repeat_penalty "
          "repeat_last_n max_tokens seed)", sampling);
    lc_config_free(&o);
}

int main(void)
{
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return 99;
    }
    test_every_key();
    test_bad_values();
    test_missing_and_env();
    test_xdg();
    test_syntax_and_outside();
    test_continued();
    test_set();
    test_one_definition();
    test_robust();
    test_read_limit_and_listing();
    char cmd[600];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", dir);
    return tu_finish("test-config");
}
