/*
 * config.c - ~/.llamachatrc through iniparser, validated key by key.
 *
 * iniparser gives us the values but not where they came from, so for messages the file is
 * scanned once more for the line of a "[section]" ... "key =" pair (the last one wins, as in
 * iniparser).  Every setting is described once in the table below: its section, key, type and
 * range; both the file and the chat's /set command go through lc_config_set.
 */
#include "config.h"
#include "fileutil.h"

#include <ctype.h>
#include <stddef.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

/* Debian puts the header in iniparser/, upstream installs it at the top (configure probes
 * both; autoconf's config.h is shadowed by this module's name, so ask the compiler). */
#if defined(__has_include)
#if __has_include(<iniparser/iniparser.h>)
#include <iniparser/iniparser.h>
#else
#include <iniparser.h>
#endif
#else
#include <iniparser/iniparser.h>
#endif

#include "llm/chat_template.h"

#define K_INT LC_OPT_INT
#define K_FLOAT LC_OPT_FLOAT
#define K_BOOL LC_OPT_BOOL
#define K_STR LC_OPT_STR
#define K_SEED LC_OPT_SEED
#define K_THEME LC_OPT_THEME
#define K_TEMPLATE LC_OPT_TEMPLATE
#define setting lc_option_def

/* The one table of settings: the file's [section] key, the command line's --name (-c), /set's
 * name (the key, '-' or '_'), the range and the words of every message.  Defaults are set in
 * lc_config_defaults (llama.cpp's sampling defaults). */
#define OFF(f) offsetof(struct lc_options, f)
static const struct setting settings[] = {
    { "model", "path", "model", 'm', K_STR, 0, 0, OFF(model_path), "a file name" },
    { "model", "threads", "threads", 't', K_INT, 0, 1024, OFF(n_threads), "an integer from 0 (all cores) to 1024" },
    { "model", "context_size", "ctx-size", 'c', K_INT, 0, 1 << 24, OFF(n_ctx), "an integer from 0 (model's) to 16777216" },
    { "model", "batch", "batch-size", 'b', K_INT, 1, 1 << 16, OFF(n_batch), "an integer from 1 to 65536" },
    { "model", "isa", "isa", 0, K_STR, 0, 0, OFF(isa), "auto, scalar, avx2, avx512 or neon" },
    { "model", "speculative", "spec", 0, K_STR, 0, 0, OFF(spec), "lookup or off" },
    { "model", "draft_max", "draft-max", 0, K_INT, 1, 64, OFF(draft_max), "an integer from 1 to 64" },
    { "model", "draft", "draft", 0, K_STR, 0, 0, OFF(draft_path), "a file name or off" },
    { "model", "dirs", NULL, 0, K_STR, 0, 0, OFF(model_dirs), "directories separated by ':'" },
    { "sampling", "temp", "temp", 0, K_FLOAT, 0, 100, OFF(sampling.temp), "a number from 0 to 100" },
    { "sampling", "top_k", "top-k", 0, K_INT, 0, INT32_MAX, OFF(sampling.top_k), "an integer >= 0 (0 = off)" },
    { "sampling", "top_p", "top-p", 0, K_FLOAT, 0, 1, OFF(sampling.top_p), "a number from 0 to 1" },
    { "sampling", "min_p", "min-p", 0, K_FLOAT, 0, 1, OFF(sampling.min_p), "a number from 0 to 1" },
    { "sampling", "repeat_penalty", "repeat-penalty", 0, K_FLOAT, 0.01, 100, OFF(sampling.repeat_penalty), "a number from 0.01 to 100" },
    { "sampling", "repeat_last_n", "repeat-last-n", 0, K_INT, -1, INT32_MAX, OFF(sampling.repeat_last_n), "an integer >= -1 (-1 = whole context)" },
    { "sampling", "max_tokens", "n-predict", 'n', K_INT, -1, INT32_MAX, OFF(n_predict), "an integer >= -1 (-1 = no limit)" },
    { "sampling", "seed", "seed", 0, K_SEED, 0, 0, OFF(sampling.seed), "an integer from 0 to 18446744073709551614 or \"random\"" },
    { "ui", "theme", NULL, 0, K_THEME, 0, 0, OFF(theme), "default, mono or light" },
    { "ui", "history", NULL, 0, K_BOOL, 0, 0, OFF(history), "on or off" },
    { "ui", "show_params", NULL, 0, K_BOOL, 0, 0, OFF(show_params), "on or off" },
    { "ui", "transcripts", NULL, 0, K_STR, 0, 0, OFF(transcripts_dir), "a directory" },
    { "ui", "markdown", NULL, 0, K_BOOL, 0, 0, OFF(markdown), "on or off" },
    { "ui", "show_thinking", NULL, 0, K_BOOL, 0, 0, OFF(show_thinking), "on or off" },
    { "ui", "labels", NULL, 0, K_BOOL, 0, 0, OFF(labels), "on or off" },
    { "ui", "label_user", NULL, 0, K_STR, 0, 0, OFF(label_user), "text" },
    { "ui", "label_model", NULL, 0, K_STR, 0, 0, OFF(label_model), "text" },
    { "ui", "label_system", NULL, 0, K_STR, 0, 0, OFF(label_system), "text" },
    { "ui", "read_limit", NULL, 0, K_INT, 1, 1024, OFF(read_limit_kib), "an integer from 1 to 1024 (KiB)" },
    { "chat", "system_prompt", "system", 0, K_STR, 0, 0, OFF(system_prompt), "text" },
    { "chat", "template", "chat-template", 0, K_TEMPLATE, 0, 0, OFF(chat_template), NULL /* the names */ },
    { "chat", "autosave", NULL, 0, K_BOOL, 0, 0, OFF(autosave), "on or off" },
    { "chat", "kv_file", NULL, 0, K_BOOL, 0, 0, OFF(kv_file), "on or off" },
    /* the API key itself is never a setting: only the name of the variable that holds it */
    { "remote", "url", "remote", 0, K_STR, 0, 0, OFF(remote_url), "an http:// or https:// URL" },
    { "remote", "model", "remote-model", 0, K_STR, 0, 0, OFF(remote_model), "a model name" },
    { "remote", "api_key_env", NULL, 0, K_STR, 0, 0, OFF(remote_api_key_env), "an environment variable name" },
};
#define N_SETTINGS (sizeof(settings) / sizeof(settings[0]))

const struct lc_option_def *lc_config_option(const char *long_name, int short_name)
{
    for (size_t i = 0; i < N_SETTINGS; i++)
        if (settings[i].cli && ((long_name && strcmp(long_name, settings[i].cli) == 0) ||
                                (short_name && short_name == settings[i].short_name)))
            return &settings[i];
    return NULL;
}

const struct lc_option_def *lc_config_option_at(size_t i)
{
    return i < N_SETTINGS ? &settings[i] : NULL;
}

_Static_assert(N_SETTINGS <= 64, "lc_options.cli_set has one bit per setting");

uint64_t lc_config_option_bit(const struct lc_option_def *def)
{
    return def >= settings && def < settings + N_SETTINGS ? UINT64_C(1) << (def - settings) : 0;
}

void lc_config_keep_cli(struct lc_options *o, const struct lc_options *given, const char *section)
{
    for (size_t i = 0; i < N_SETTINGS; i++) {
        const struct setting *st = &settings[i];
        if (!(o->cli_set & (UINT64_C(1) << i)) || (section && strcmp(section, st->section) != 0))
            continue;
        size_t size = st->type == K_INT ? sizeof(int32_t) : st->type == K_FLOAT ? sizeof(float)
                      : st->type == K_BOOL ? sizeof(bool) : st->type == K_SEED ? sizeof(uint64_t) : 0;
        if (size)
            memcpy((char *)o + st->off, (const char *)given + st->off, size);
    }
}

/* "plain, chatml, llama2, ..." (static, built once). */
static const char *template_names(void)
{
    static char buf[1024];
    if (!buf[0]) {
        size_t n = (size_t)snprintf(buf, sizeof(buf), "one of ");
        for (int i = 0; i < lc_chat_template_count() && n < sizeof(buf); i++) {
            const char *name = lc_chat_template_name(i);
            if (name)
                n += (size_t)snprintf(buf + n, sizeof(buf) - n, "%s%s", i ? ", " : "", name);
        if (n >= sizeof(buf))
            buf[sizeof(buf) - 1] = '\0';
        }
    }
    return buf;
}

static const char *const sections[] = { "model", "sampling", "ui", "chat", "remote" };

static char *last_warnings;

void lc_config_defaults(struct lc_options *o)
{
    memset(o, 0, sizeof(*o));
    o->n_threads = 0;
    o->n_ctx = 0;
    o->n_batch = 512;
    o->draft_max = 8;
    o->sampling = lc_sampler_default_params();
    o->n_predict = -1;
    o->history = true;
    o->autosave = true;
    o->kv_file = true;
    o->show_params = true;
    o->markdown = true;
    o->read_limit_kib = 64;
    o->mode = LC_MODE_TUI;
}

void lc_config_free(struct lc_options *o)
{
    char **strs[] = { &o->model_path, &o->isa, &o->system_prompt, &o->chat_template, &o->theme,
                      &o->prompt, &o->prompt_file, &o->resume_path, &o->save_format, &o->log_path,
                      &o->chat_template_text, &o->remote_url, &o->remote_model,
                      &o->remote_api_key_env, &o->transcripts_dir, &o->label_user,
                      &o->label_model, &o->label_system, &o->model_dirs, &o->spec,
                      &o->draft_path };
    for (size_t i = 0; i < sizeof(strs) / sizeof(strs[0]); i++) {
        free(*strs[i]);
        *strs[i] = NULL;
    }
}

const char *lc_config_last_warnings(void)
{
    return last_warnings;
}

/* $XDG_CONFIG_HOME/llamachat/llamachatrc ($HOME/.config when XDG_CONFIG_HOME is unset or not
 * absolute, as the XDG Base Directory spec says), malloc'd; NULL without a place. */
static char *xdg_config_path(void)
{
    const char *x = getenv("XDG_CONFIG_HOME");
    const char *home = getenv("HOME");
    char *p = NULL;
    if (x && x[0] == '/') {
        if (asprintf(&p, "%s/llamachat/llamachatrc", x) < 0)
            p = NULL;
    } else if (home && *home) {
        if (asprintf(&p, "%s/.config/llamachat/llamachatrc", home) < 0)
            p = NULL;
    }
    return p;
}

static char *home_config_path(void)
{
    const char *home = getenv("HOME");
    char *p = NULL;
    if (home && *home && asprintf(&p, "%s/.llamachatrc", home) < 0)
        p = NULL;
    return p;
}

char *lc_config_path(void)
{
    const char *e = getenv("LLAMACHATRC");
    if (e && *e)
        return strdup(e);
    /* the XDG file when it exists, else ~/.llamachatrc (read when present) */
    char *x = xdg_config_path();
    if (x && access(x, F_OK) == 0)
        return x;
    free(x);
    return home_config_path();
}

/* ---------------------------------------------------------------- value parsing */

static const char *skip_ws(const char *s)
{
    while (*s && isspace((unsigned char)*s))
        s++;
    return s;
}

/* True when only white space remains. */
static bool at_end(const char *s)
{
    return *skip_ws(s) == '\0';
}

int lc_config_parse_bool(const char *s, bool *out)
{
    static const char *const yes[] = { "yes", "on", "true", "1" };
    static const char *const no[] = { "no", "off", "false", "0" };
    s = skip_ws(s);
    size_t n = strlen(s);
    while (n > 0 && isspace((unsigned char)s[n - 1]))
        n--;
    for (size_t i = 0; i < 4; i++) {
        if (n == strlen(yes[i]) && strncasecmp(s, yes[i], n) == 0) {
            *out = true;
            return 0;
        }
        if (n == strlen(no[i]) && strncasecmp(s, no[i], n) == 0) {
            *out = false;
            return 0;
        }
    }
    return -1;
}

int lc_config_parse_int(const char *s, long lo, long hi, int32_t *out)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (end == s || errno || !at_end(end) || v < lo || v > hi)
        return -1;
    *out = (int32_t)v;
    return 0;
}

int lc_config_parse_float(const char *s, double lo, double hi, float *out)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    /* ERANGE with a tiny result is underflow (1e-400): a number, rounded to 0 or a subnormal;
     * with a huge one it is overflow, out of any range */
    if (errno == ERANGE && fabs(v) < 1.0)
        errno = 0;
    if (end == s || errno || !at_end(end) || !isfinite(v) || v < lo || v > hi)
        return -1;
    *out = (float)v;
    return 0;
}

int lc_config_parse_seed(const char *s, uint64_t *out)
{
    const char *t = skip_ws(s);
    if (strncasecmp(t, "random", 6) == 0 && at_end(t + 6)) {
        *out = LC_SEED_RANDOM;
        return 0;
    }
    if (t[0] == '-' && t[1] == '1' && at_end(t + 2)) {
        *out = LC_SEED_RANDOM;
        return 0;
    }
    if (!isdigit((unsigned char)*t))
        return -1;
    char *end;
    errno = 0;
    unsigned long long v = strtoull(t, &end, 10);
    if (errno || !at_end(end) || v == UINT64_MAX)
        return -1;
    *out = (uint64_t)v;
    return 0;
}

static char *sanitize(const char *s);
static char *xasprintf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static char *xasprintf(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char *s = NULL;
    if (vasprintf(&s, fmt, ap) < 0)
        s = NULL;
    va_end(ap);
    return s;
}

/* Same key modulo '-' / '_' and case. */
static bool key_eq(const char *a, const char *b)
{
    for (; *a && *b; a++, b++) {
        char x = (char)tolower((unsigned char)*a), y = (char)tolower((unsigned char)*b);
        if (x == '-')
            x = '_';
        if (y == '-')
            y = '_';
        if (x != y)
            return false;
    }
    return *a == *b;
}

static const struct setting *find_setting(const char *section, const char *key)
{
    static const struct { const char *alias, *key; } aliases[] = {
        { "temperature", "temp" }, { "n_predict", "max_tokens" }, { "system", "system_prompt" },
        { "ctx", "context_size" }, { "n_ctx", "context_size" }, { "model", "path" },
    };
    for (size_t i = 0; i < N_SETTINGS; i++)
        if ((!section || strcasecmp(section, settings[i].section) == 0) &&
            key_eq(key, settings[i].key))
            return &settings[i];
    if (!section)   /* /set accepts a few spellings the file does not */
        for (size_t i = 0; i < sizeof(aliases) / sizeof(aliases[0]); i++)
            if (key_eq(key, aliases[i].alias))
                return find_setting(NULL, aliases[i].key);
    return NULL;
}

int lc_config_set(struct lc_options *o, const char *section, const char *key, const char *value,
                  char **err)
{
    const struct setting *st = find_setting(section, key);
    if (err)
        *err = NULL;
    if (!st) {
        if (err)
            *err = section ? xasprintf("unknown key '%s' in [%s]", key, section)
                           : xasprintf("unknown setting '%s'", key);
        return -1;
    }
    void *field = (char *)o + st->off;
    int rc = 0;
    switch (st->type) {
    case K_INT: {
        int32_t v;
        rc = lc_config_parse_int(value, (long)st->lo, (long)st->hi, &v);
        if (rc == 0)
            *(int32_t *)field = v;
        break;
    }
    case K_FLOAT: {
        float v;
        rc = lc_config_parse_float(value, st->lo, st->hi, &v);
        if (rc == 0)
            *(float *)field = v;
        break;
    }
    case K_BOOL: {
        bool v;
        rc = lc_config_parse_bool(value, &v);
        if (rc == 0)
            *(bool *)field = v;
        break;
    }
    case K_SEED: {
        uint64_t v;
        rc = lc_config_parse_seed(value, &v);
        if (rc == 0)
            *(uint64_t *)field = v;
        break;
    }
    case K_TEMPLATE:
        if (lc_chat_template_from_name(value) < 0) {
            rc = -1;
            break;
        }
        goto str;
    case K_THEME:
        if (strcmp(value, "default") && strcmp(value, "mono") && strcmp(value, "light")) {
            rc = -1;
            break;
        }
        /* fall through */
    case K_STR:
    str: {
        if (strcmp(st->key, "isa") == 0 && strcmp(value, "auto") && strcmp(value, "scalar") &&
            strcmp(value, "avx2") && strcmp(value, "avx512") && strcmp(value, "neon")) {
            rc = -1;
            break;
        }
        if (strcmp(st->key, "speculative") == 0 && strcmp(value, "lookup") &&
            strcmp(value, "off")) {
            rc = -1;
            break;
        }
        char *v = NULL;
        const char *home = getenv("HOME");
        if ((strcmp(st->key, "path") == 0 || strcmp(st->key, "draft") == 0) &&
            strncmp(value, "~/", 2) == 0 && home && *home) {
            if (asprintf(&v, "%s%s", home, value + 1) < 0)   /* ~/x -> $HOME/x */
                v = NULL;
        } else {
            v = strdup(value);
        }
        if (!v) {
            if (err)
                *err = xasprintf("out of memory");
            return -1;
        }
        char **slot = field;
        free(*slot);
        *slot = v;
        if ((strcmp(st->key, "isa") == 0 && strcmp(v, "auto") == 0) ||
            (strcmp(st->key, "speculative") == 0 && strcmp(v, "off") == 0) ||
            (strcmp(st->key, "draft") == 0 && (strcmp(v, "off") == 0 || !*v))) {
            free(*slot);
            *slot = NULL;
        }
        break;
    }
    }
    if (rc != 0 && err) {
        char *shown = sanitize(value);   /* control bytes as \xNN: never raw to the terminal */
        *err = xasprintf("bad value '%s' for %s: expected %s", shown ? shown : "?", st->key,
                         st->expect ? st->expect : template_names());
        free(shown);
    }
    return rc;
}

/* ---------------------------------------------------------------- the file */

/*
 * The file is checked line by line before iniparser sees it, so that one bad line costs only
 * itself: a line with a NUL byte or longer than LC_CONFIG_MAX_LINE bytes (iniparser would drop
 * the whole file), a syntax error, an unknown section or key, a key outside any section, each
 * gets a warning with its line number and is replaced by an empty line (line numbers stay).
 * iniparser then reads the remaining text (from an in-memory file) for the values of the keys
 * we know, whose lines were noted on the way: no search of the file per key.
 */
#define LC_CONFIG_MAX_LINE 1000              /* bytes, newline excluded */
#define LC_CONFIG_MAX_FILE ((size_t)1 << 20) /* a larger file is not read */

struct warning {
    int line;
    size_t seq;   /* order of arrival: ties keep it */
    char *text;
};

struct wlist {
    struct warning *w;
    size_t n, cap;
};

/* Control bytes (and DEL) as visible \xNN escapes, so a message never drives the terminal. */
static char *sanitize(const char *s)
{
    size_t n = 0;
    for (const char *c = s; *c; c++)
        n += ((unsigned char)*c < 0x20 || *c == 0x7F) ? 4 : 1;
    char *out = malloc(n + 1), *o = out;
    if (!out)
        return NULL;
    for (const char *c = s; *c; c++) {
        unsigned char b = (unsigned char)*c;
        if (b < 0x20 || b == 0x7F)
            o += sprintf(o, "\\x%02X", b);
        else
            *o++ = (char)b;
    }
    *o = '\0';
    return out;
}

static void warn_at(struct wlist *l, int line, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void warn_at(struct wlist *l, int line, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char *raw = NULL;
    int r = vasprintf(&raw, fmt, ap);
    va_end(ap);
    if (r < 0)
        return;
    char *text = sanitize(raw);
    free(raw);
    if (!text)
        return;
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 16;
        struct warning *w = realloc(l->w, cap * sizeof(*w));
        if (!w) {
            free(text);
            return;
        }
        l->w = w;
        l->cap = cap;
    }
    l->w[l->n] = (struct warning){ line, l->n, text };
    l->n++;
}

static int by_line(const void *a, const void *b)
{
    const struct warning *x = a, *y = b;
    if (x->line != y->line)
        return x->line < y->line ? -1 : 1;
    return x->seq < y->seq ? -1 : x->seq > y->seq;   /* qsort is not stable */
}

/* iniparser reports syntax errors through a printf-like callback; collect them. */
static struct wlist *ini_errors;
static int ini_error_cb(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int ini_error_cb(const char *fmt, ...)
{
    if (!ini_errors)
        return 0;
    va_list ap;
    va_start(ap, fmt);
    char *msg = NULL;
    int n = vasprintf(&msg, fmt, ap);
    va_end(ap);
    if (n < 0)
        return 0;
    for (char *c = msg; *c; c++)   /* "syntax error in F (L):\n-> text\n" -> one line */
        if (*c == '\n')
            *c = ' ';
    for (size_t i = strlen(msg); i > 0 && msg[i - 1] == ' '; i--)
        msg[i - 1] = '\0';
    warn_at(ini_errors, 0, "%s", msg);
    free(msg);
    return n;
}

/* Length of a line continued with '\\' (from p to the end of its last continuation line), as
 * iniparser joins it: each part without its trailing blanks and backslash. */
static size_t joined_len(const char *p, const char *end)
{
    size_t total = 0;
    while (p < end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        const char *e = nl ? nl : end;
        size_t t = (size_t)(e - p);
        while (t > 0 && isspace((unsigned char)p[t - 1]))
            t--;
        bool more = t > 0 && p[t - 1] == '\\';
        total += more ? t - 1 : t;
        if (!more || !nl)
            break;
        p = nl + 1;
    }
    return total;
}

/* iniparser_load on text (iniparser 4.1 reads only named files): an anonymous memory file. */
static dictionary *ini_from_text(const char *text, size_t len)
{
    int fd = memfd_create("llamachatrc", MFD_CLOEXEC);
    char path[64];
    char tmpl[] = "/tmp/llamachatrc.XXXXXX";
    bool named = false;
    if (fd >= 0) {
        snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
        if (access(path, R_OK) != 0) {
            close(fd);
            fd = -1;
        }
    }
    if (fd < 0) {
        fd = mkstemp(tmpl);
        if (fd < 0)
            return NULL;
        snprintf(path, sizeof(path), "%s", tmpl);
        named = true;
    }
    size_t off = 0;
    while (off < len) {
        ssize_t w = write(fd, text + off, len - off);
        if (w <= 0)
            break;
        off += (size_t)w;
    }
    dictionary *d = off == len ? iniparser_load(path) : NULL;
    if (named)
        unlink(tmpl);
    close(fd);
    return d;
}

static void lower(char *s)
{
    for (; *s; s++)
        *s = (char)tolower((unsigned char)*s);
}

int lc_config_load(struct lc_options *o, const char *path, char **warnings)
{
    struct wlist wl = { 0 };
    char *own = NULL;
    bool optional = false;
    if (warnings)
        *warnings = NULL;
    free(last_warnings);
    last_warnings = NULL;
    if (!path) {
        const char *e = getenv("LLAMACHATRC");
        optional = !(e && *e);
        own = lc_config_path();
        path = own;
        if (!path)
            return 0;
        char *home = optional ? home_config_path() : NULL;
        if (home && strcmp(home, path) != 0 && access(home, F_OK) == 0)   /* both exist */
            warn_at(&wl, 0, "%s is not read: %s is (the XDG one wins; move the settings there)", home, path);
        free(home);
    }
    size_t len = 0;
    char *why = NULL;
    char *text = lc_file_read_small(path, LC_CONFIG_MAX_FILE, &len, &why);
    if (!text) {
        if (!(optional && access(path, F_OK) != 0 && errno == ENOENT))
            warn_at(&wl, 0, "%s: %s", path, why ? why : "cannot read");
        free(why);
        goto out;
    }

    /* 1. line by line: what iniparser may see, and where each known key is */
    int key_line[N_SETTINGS] = { 0 };
    char key_text[N_SETTINGS][64];
    char sec[64] = "";
    bool in_sec = false, sec_known = false;
    bool cont = false, cont_keep = false;   /* a line ending in '\' continues on the next */
    int line = 0;
    char *good = malloc(len + 2);   /* the lines iniparser gets */
    size_t good_len = 0;
    if (!good) {
        warn_at(&wl, 0, "%s: out of memory", path);
        goto out;
    }
    for (char *p = text; p < text + len; line++) {
        char *nl = memchr(p, '\n', (size_t)(text + len - p));
        char *end = nl ? nl : text + len;
        size_t n = (size_t)(end - p);
        bool keep = true;
        int ln = line + 1;
        size_t t = n;   /* trailing blanks and CR do not count */
        while (t > 0 && isspace((unsigned char)p[t - 1]))
            t--;
        bool ends_cont = t > 0 && p[t - 1] == '\\';
        if (memchr(p, '\0', n)) {
            warn_at(&wl, ln, "%s:%d: NUL byte in the line; line ignored", path, ln);
            keep = false;
        } else if (n > LC_CONFIG_MAX_LINE) {
            warn_at(&wl, ln, "%s:%d: line longer than %d bytes; line ignored", path, ln,
                    LC_CONFIG_MAX_LINE);
            keep = false;
        } else if (cont) {
            keep = cont_keep;   /* part of the line before */
        } else if (ends_cont && joined_len(p, text + len) > LC_CONFIG_MAX_LINE) {
            /* iniparser joins continued lines into one buffer: too long for it, the whole
             * group goes (else iniparser would refuse the whole file) */
            warn_at(&wl, ln, "%s:%d: continued line longer than %d bytes; ignored", path, ln,
                    LC_CONFIG_MAX_LINE);
            keep = false;
            cont_keep = false;
        } else {
            char buf[LC_CONFIG_MAX_LINE + 1];
            memcpy(buf, p, n);
            buf[n] = '\0';
            char *s = buf;
            while (isspace((unsigned char)*s))
                s++;
            for (size_t k = strlen(s); k > 0 && isspace((unsigned char)s[k - 1]); k--)
                s[k - 1] = '\0';
            if (*s == '\0' || *s == ';' || *s == '#') {
                /* blank or comment */
            } else if (*s == '[' && s[strlen(s) - 1] == ']') {
                s[strlen(s) - 1] = '\0';
                char *name = s + 1;
                while (isspace((unsigned char)*name))
                    name++;
                for (size_t k = strlen(name); k > 0 && isspace((unsigned char)name[k - 1]); k--)
                    name[k - 1] = '\0';
                snprintf(sec, sizeof(sec), "%s", name);
                lower(sec);
                in_sec = true;
                sec_known = false;
                for (size_t j = 0; j < sizeof(sections) / sizeof(sections[0]); j++)
                    sec_known |= strcmp(sec, sections[j]) == 0;
                if (!sec_known)
                    warn_at(&wl, ln, "%s:%d: unknown section [%s]", path, ln, name);
            } else if (strchr(s, '=')) {
                size_t kl = strcspn(s, "=");
                while (kl > 0 && isspace((unsigned char)s[kl - 1]))
                    kl--;
                char key[64];
                snprintf(key, sizeof(key), "%.*s", (int)kl, s);
                lower(key);
                const struct setting *st = in_sec && sec_known ? find_setting(sec, key) : NULL;
                if (!in_sec) {
                    warn_at(&wl, ln, "%s:%d: key '%s' outside any [section] ignored", path, ln, key);
                    keep = false;
                } else if (!sec_known) {
                    keep = false;   /* the section was reported */
                } else if (!st) {
                    warn_at(&wl, ln, "%s:%d: unknown key '%s' in [%s]", path, ln, key, sec);
                    keep = false;
                } else {
                    size_t i = (size_t)(st - settings);
                    key_line[i] = ln;
                    snprintf(key_text[i], sizeof(key_text[i]), "%s", key);
                }
            } else {
                warn_at(&wl, ln, "%s:%d: syntax error (%d): %s; line ignored", path, ln, ln, s);
                keep = false;
            }
            cont_keep = keep;
        }
        cont = ends_cont;
        if (keep) {   /* else an empty line: iniparser's line numbers stay ours */
            memcpy(good + good_len, p, n);
            good_len += n;
        }
        good[good_len++] = '\n';
        p = nl ? nl + 1 : text + len;
    }

    /* 2. the values, through iniparser */
    struct wlist inierr = { 0 };
    ini_errors = &inierr;
    iniparser_set_error_callback(ini_error_cb);
    dictionary *d = ini_from_text(good, good_len);
    free(good);
    iniparser_set_error_callback(NULL);
    ini_errors = NULL;
    for (size_t i = 0; i < inierr.n; i++) {   /* not expected after the checks above */
        warn_at(&wl, 0, "%s: %s", path, inierr.w[i].text);
        free(inierr.w[i].text);
    }
    free(inierr.w);
    if (!d) {
        warn_at(&wl, line + 1, "%s: cannot parse; not used, defaults apply", path);
        goto out;
    }
    for (size_t i = 0; i < N_SETTINGS; i++) {
        if (!key_line[i])
            continue;
        char full[160];
        snprintf(full, sizeof(full), "%.60s:%.63s", settings[i].section, key_text[i]);
        const char *val = iniparser_getstring(d, full, NULL);
        char *err = NULL;
        if (!val)
            warn_at(&wl, key_line[i], "%s:%d: %s has no value; default kept", path, key_line[i],
                    settings[i].key);
        else if (lc_config_set(o, settings[i].section, settings[i].key, val, &err) != 0)
            warn_at(&wl, key_line[i], "%s:%d: %s; default kept", path, key_line[i],
                    err ? err : "bad value");
        free(err);
    }
    iniparser_freedict(d);
out:
    free(text);
    free(own);
    /* in the file's order */
    if (wl.n > 1)
        qsort(wl.w, wl.n, sizeof(*wl.w), by_line);
    size_t total = 0;
    for (size_t i = 0; i < wl.n; i++)
        total += strlen(wl.w[i].text) + 1;
    char *all = wl.n ? malloc(total + 1) : NULL;
    size_t off = 0;
    for (size_t i = 0; i < wl.n; i++) {
        size_t n = strlen(wl.w[i].text);
        if (all) {
            memcpy(all + off, wl.w[i].text, n);
            all[off + n] = '\n';
            off += n + 1;
        }
        free(wl.w[i].text);
    }
    if (all)
        all[off] = '\0';
    int count = (int)wl.n;
    free(wl.w);
    if (all) {
        last_warnings = strdup(all);
        if (warnings)
            *warnings = all;
        else
            free(all);
    }
    return count;
}
