/*
 * config.c - ~/.llamachatrc through iniparser, validated key by key.
 *
 * iniparser gives us the values but not where they came from, so for messages the file is
 * scanned once more for the line of a "[section]" ... "key =" pair (the last one wins, as in
 * iniparser).  Every setting is described once in the table below: its section, key, type and
 * range; both the file and the chat's /set command go through lc_config_set.
 */
#include "config.h"

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
    { "sampling", "temp", "temp", 0, K_FLOAT, 0, 100, OFF(sampling.temp), "a number from 0 to 100" },
    { "sampling", "top_k", "top-k", 0, K_INT, 0, INT32_MAX, OFF(sampling.top_k), "an integer >= 0 (0 = off)" },
    { "sampling", "top_p", "top-p", 0, K_FLOAT, 0, 1, OFF(sampling.top_p), "a number from 0 to 1" },
    { "sampling", "min_p", "min-p", 0, K_FLOAT, 0, 1, OFF(sampling.min_p), "a number from 0 to 1" },
    { "sampling", "repeat_penalty", "repeat-penalty", 0, K_FLOAT, 0.01, 100, OFF(sampling.repeat_penalty), "a number from 0.01 to 100" },
    { "sampling", "repeat_last_n", "repeat-last-n", 0, K_INT, -1, INT32_MAX, OFF(sampling.repeat_last_n), "an integer >= -1 (-1 = whole context)" },
    { "sampling", "max_tokens", "n-predict", 'n', K_INT, -1, INT32_MAX, OFF(n_predict), "an integer >= -1 (-1 = no limit)" },
    { "sampling", "seed", "seed", 0, K_SEED, 0, 0, OFF(sampling.seed), "an integer >= 0 or \"random\"" },
    { "ui", "theme", NULL, 0, K_THEME, 0, 0, OFF(theme), "default, mono or light" },
    { "ui", "history", NULL, 0, K_BOOL, 0, 0, OFF(history), "on or off" },
    { "ui", "show_params", NULL, 0, K_BOOL, 0, 0, OFF(show_params), "on or off" },
    { "chat", "system_prompt", "system", 0, K_STR, 0, 0, OFF(system_prompt), "text" },
    { "chat", "template", "chat-template", 0, K_TEMPLATE, 0, 0, OFF(chat_template), NULL /* the names */ },
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

static const char *const sections[] = { "model", "sampling", "ui", "chat" };

static char *last_warnings;

void lc_config_defaults(struct lc_options *o)
{
    memset(o, 0, sizeof(*o));
    o->n_threads = 0;
    o->n_ctx = 0;
    o->n_batch = 512;
    o->sampling = lc_sampler_default_params();
    o->n_predict = -1;
    o->history = true;
    o->show_params = true;
    o->mode = LC_MODE_TUI;
}

void lc_config_free(struct lc_options *o)
{
    char **strs[] = { &o->model_path, &o->isa, &o->system_prompt, &o->chat_template, &o->theme,
                      &o->prompt, &o->resume_path, &o->save_format };
    for (size_t i = 0; i < sizeof(strs) / sizeof(strs[0]); i++) {
        free(*strs[i]);
        *strs[i] = NULL;
    }
}

const char *lc_config_last_warnings(void)
{
    return last_warnings;
}

char *lc_config_path(void)
{
    const char *e = getenv("LLAMACHATRC");
    if (e && *e)
        return strdup(e);
    const char *home = getenv("HOME");
    if (!home || !*home)
        return NULL;
    size_t n = strlen(home) + sizeof("/.llamachatrc");
    char *p = malloc(n);
    if (p)
        snprintf(p, n, "%s/.llamachatrc", home);
    return p;
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
        char *v = NULL;
        const char *home = getenv("HOME");
        if (strcmp(st->key, "path") == 0 && strncmp(value, "~/", 2) == 0 && home && *home) {
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
        if (strcmp(st->key, "isa") == 0 && strcmp(v, "auto") == 0) {
            free(*slot);
            *slot = NULL;
        }
        break;
    }
    }
    if (rc != 0 && err)
        *err = xasprintf("bad value '%s' for %s: expected %s", value, st->key,
                         st->expect ? st->expect : template_names());
    return rc;
}

/* ---------------------------------------------------------------- the file */

/* Line (1-based) of the last "key" line within [section] (section NULL: outside any section,
 * key NULL: the section header itself), or 0 if not found. */
static int find_line(const char *path, const char *section, const char *key)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return 0;
    char buf[4096];
    char cur[256] = "";
    bool in_sec = section == NULL;
    int line = 0, found = 0;
    while (fgets(buf, sizeof(buf), f)) {
        line++;
        const char *s = skip_ws(buf);
        if (*s == '[') {
            const char *e = strchr(s, ']');
            size_t n = e ? (size_t)(e - s - 1) : 0;
            if (n >= sizeof(cur))
                n = sizeof(cur) - 1;
            memcpy(cur, s + 1, n);
            cur[n] = '\0';
            /* iniparser strips blanks and lowercases section names */
            char *c = cur;
            while (isspace((unsigned char)*c))
                memmove(c, c + 1, strlen(c));
            for (size_t i = strlen(cur); i > 0 && isspace((unsigned char)cur[i - 1]); i--)
                cur[i - 1] = '\0';
            in_sec = section && strcasecmp(cur, section) == 0;
            if (in_sec && !key)
                found = line;
            continue;
        }
        if (!in_sec || !key || *s == ';' || *s == '#')
            continue;
        size_t kl = strcspn(s, "=:");
        if (s[kl] == '\0')
            continue;
        while (kl > 0 && isspace((unsigned char)s[kl - 1]))
            kl--;
        if (kl == strlen(key) && strncasecmp(s, key, kl) == 0)
            found = line;
    }
    fclose(f);
    return found;
}

struct sbuf {
    char *s;
    size_t n, cap;
    int count;
};

static void sb_add(struct sbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void sb_add(struct sbuf *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char *line = NULL;
    int n = vasprintf(&line, fmt, ap);
    va_end(ap);
    b->count++;
    if (n < 0)
        return;
    if (b->n + (size_t)n + 2 > b->cap) {
        size_t cap = (b->cap + (size_t)n + 2) * 2;
        char *s = realloc(b->s, cap);
        if (!s) {
            free(line);
            return;
        }
        b->s = s;
        b->cap = cap;
    }
    memcpy(b->s + b->n, line, (size_t)n);
    b->n += (size_t)n;
    if (n == 0 || line[n - 1] != '\n')
        b->s[b->n++] = '\n';
    b->s[b->n] = '\0';
    free(line);
}

/* iniparser reports syntax errors through a printf-like callback; collect them. */
static struct sbuf *ini_errors;
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
    /* "iniparser: syntax error in FILE (LINE):\n-> text\n" -> one line */
    for (char *c = msg; *c; c++)
        if (*c == '\n')
            *c = ' ';
    for (size_t i = strlen(msg); i > 0 && msg[i - 1] == ' '; i--)
        msg[i - 1] = '\0';
    sb_add(ini_errors, "%s", msg);
    free(msg);
    return n;
}

int lc_config_load(struct lc_options *o, const char *path, char **warnings)
{
    struct sbuf wb = { 0 };
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
    }
    FILE *f = fopen(path, "r");
    if (!f) {
        if (!(optional && errno == ENOENT))
            sb_add(&wb, "%s: cannot open: %s", path, strerror(errno));
        goto out;
    }
    fclose(f);

    ini_errors = &wb;
    iniparser_set_error_callback(ini_error_cb);
    dictionary *d = iniparser_load(path);
    iniparser_set_error_callback(NULL);
    ini_errors = NULL;
    if (!d) {
        if (wb.count == 0)
            sb_add(&wb, "%s: cannot parse", path);
        sb_add(&wb, "%s: not used; defaults apply", path);
        goto out;
    }

    int nsec = iniparser_getnsec(d);
    for (int i = 0; i < nsec; i++) {
        const char *sec = iniparser_getsecname(d, i);
        if (!sec)
            continue;
        bool known = false;
        for (size_t j = 0; j < sizeof(sections) / sizeof(sections[0]); j++)
            known |= strcmp(sec, sections[j]) == 0;
        if (!known) {
            sb_add(&wb, "%s:%d: unknown section [%s]", path, find_line(path, sec, NULL), sec);
            continue;
        }
        int nkeys = iniparser_getsecnkeys(d, sec);
        if (nkeys <= 0)
            continue;
        const char **keys = calloc((size_t)nkeys, sizeof(*keys));
        if (!keys)
            break;
        if (iniparser_getseckeys(d, sec, keys)) {
            for (int k = 0; k < nkeys; k++) {
                const char *full = keys[k];          /* "section:key" */
                const char *key = strchr(full, ':');
                key = key ? key + 1 : full;
                const char *val = iniparser_getstring(d, full, NULL);
                char *err = NULL;
                const struct setting *st = find_setting(sec, key);
                /* The file must use the documented spelling; "-" for "_" is forgiven. */
                if (!st) {
                    sb_add(&wb, "%s:%d: unknown key '%s' in [%s]", path,
                           find_line(path, sec, key), key, sec);
                } else if (!val) {
                    sb_add(&wb, "%s:%d: %s has no value; default kept", path,
                           find_line(path, sec, key), key);
                } else if (lc_config_set(o, sec, key, val, &err) != 0) {
                    sb_add(&wb, "%s:%d: %s; default kept", path, find_line(path, sec, key),
                           err ? err : "bad value");
                }
                free(err);
            }
        }
        free(keys);
    }
    /* Keys before any [section] are stored as ":key". */
    for (int i = 0; i < d->n; i++) {
        const char *k = d->key[i];
        if (k && k[0] == ':')
            sb_add(&wb, "%s:%d: key '%s' outside any [section] ignored", path,
                   find_line(path, NULL, k + 1), k + 1);
    }
    iniparser_freedict(d);
out:
    free(own);
    if (wb.s) {
        last_warnings = strdup(wb.s);
        if (warnings)
            *warnings = wb.s;
        else
            free(wb.s);
    }
    return wb.count;
}
