/*
 * models.c - the GGUF files under the model directories (models.h).
 */
#include "models.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#include "llm/gguf.h"
#include "llm/strbuf.h"
#include "textsafe.h"

char *lc_models_dirs(const char *configured)
{
    const char *env = getenv("LLAMACHAT_MODELS");
    char *s = NULL;
    if (asprintf(&s, "%s%s%s", configured && *configured ? configured : "~/.local/share/llamachat/models",
                 env && *env ? ":" : "", env && *env ? env : "") < 0)
        return NULL;
    return s;
}

struct found {
    char **paths;      /* full paths */
    size_t *shown;     /* offset in the path of the name shown (after its directory) */
    size_t n, cap;
    bool oom;
};

static void found_add(struct found *f, const char *path, size_t shown)
{
    if (f->n == f->cap) {
        size_t nc = f->cap ? f->cap * 2 : 32;
        char **p = realloc(f->paths, nc * sizeof(*p));
        if (p)
            f->paths = p;
        size_t *o = p ? realloc(f->shown, nc * sizeof(*o)) : NULL;
        if (!o) {
            f->oom = true;
            return;
        }
        f->shown = o;
        f->cap = nc;
    }
    if (!(f->paths[f->n] = strdup(path))) {
        f->oom = true;
        return;
    }
    f->shown[f->n++] = shown;
}

/* "x.gguf" (any case), and not a later part of a split model ("-00002-of-00003.gguf"). */
static bool wanted(const char *name)
{
    size_t n = strlen(name);
    if (n < 5 || strcasecmp(name + n - 5, ".gguf") != 0 || name[0] == '.')
        return false;
    int no = 0, count = 0;
    if (n >= 20 && sscanf(name + n - 20, "-%5d-of-%5d", &no, &count) == 2 && no > 1)
        return false;
    return true;
}

static void walk(struct found *f, const char *dir, size_t shown, int depth, const atomic_int *stop)
{
    DIR *d = opendir(dir);
    if (!d)
        return;
    struct dirent *de;
    while ((de = readdir(d)) != NULL && !f->oom && !(stop && atomic_load(stop))) {
        if (de->d_name[0] == '.')
            continue;
        char *path = NULL;
        if (asprintf(&path, "%s/%s", dir, de->d_name) < 0) {
            f->oom = true;
            break;
        }
        struct stat st;
        if (stat(path, &st) == 0) {
            if (S_ISDIR(st.st_mode) && depth < 4)
                walk(f, path, shown, depth + 1, stop);
            else if (S_ISREG(st.st_mode) && wanted(de->d_name))
                found_add(f, path, shown);
        }
        free(path);
    }
    closedir(d);
}

static int by_path(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static void size_text(double bytes, char *buf, size_t len)
{
    if (bytes >= 1024.0 * 1024 * 1024)
        snprintf(buf, len, "%.1f GiB", bytes / (1024.0 * 1024 * 1024));
    else if (bytes >= 1024.0 * 1024)
        snprintf(buf, len, "%.1f MiB", bytes / (1024.0 * 1024));
    else
        snprintf(buf, len, "%.0f KiB", bytes / 1024.0);
}

/* The most common type of the blk.* matrices, by elements (any tensor when there is none). */
static const char *main_type(const struct lc_gguf *g)
{
    int64_t count[LC_TYPE_COUNT] = { 0 }, any[LC_TYPE_COUNT] = { 0 };
    for (int64_t i = 0; i < lc_gguf_n_tensors(g); i++) {
        const struct lc_gguf_tensor *t = lc_gguf_tensor(g, i);
        int64_t n = t->ne[0] * t->ne[1] * t->ne[2] * t->ne[3];
        any[t->type] += n;
        if (t->n_dims >= 2 && !strncmp(t->name, "blk.", 4))
            count[t->type] += n;
    }
    int best = 0, best_any = 0;
    for (int t = 0; t < LC_TYPE_COUNT; t++) {
        if (count[t] > count[best])
            best = t;
        if (any[t] > any[best_any])
            best_any = t;
    }
    const char *name = lc_type_name(count[best] ? best : best_any);
    return lc_gguf_n_tensors(g) && name ? name : "no tensors";
}

/* One line of the listing; in_use: the file the chat has loaded. */
static void describe(struct lc_strbuf *b, size_t no, const char *path, size_t shown, bool in_use)
{
    char *err = NULL;
    char *name = lc_text_safe(path + shown);
    lc_strbuf_printf(b, "\n%2zu. %s%s", no, name ? name : "?", in_use ? " (in use)" : "");
    free(name);
    struct lc_gguf *g = lc_gguf_open(path, &err);
    if (!g) {
        char *why = lc_text_safe(err ? err + (strncmp(err, path, strlen(path)) ? 0 : strlen(path)) : "?");
        lc_strbuf_printf(b, "  not usable%s%s", why && why[0] == ':' ? "" : ": ", why ? why : "?");
        free(why);
        free(err);
        return;
    }
    char size[32], type[16];
    snprintf(type, sizeof(type), "%s", main_type(g));
    for (char *p = type; *p && strcmp(type, "no tensors"); p++)
        if (*p >= 'a' && *p <= 'z')
            *p = (char)(*p - 'a' + 'A');
    size_text((double)lc_gguf_file_size(g), size, sizeof(size));
    const char *arch = lc_gguf_get_str(g, "general.architecture");
    const char *gname = lc_gguf_get_str(g, "general.name");
    char *sarch = lc_text_safe(arch ? arch : "?"), *sname = gname ? lc_text_safe(gname) : NULL;
    lc_strbuf_printf(b, "  %s  %s %s%s%s", size, sarch ? sarch : "?", type, sname ? "  " : "",
                     sname ? sname : "");
    free(sarch);
    free(sname);
    lc_gguf_free(g);
}

struct lc_listing *lc_models_list(const char *dirs, const char *current, const atomic_int *stop)
{
    struct stat cur;
    const bool have_cur = current && stat(current, &cur) == 0;
    struct lc_listing *l = calloc(1, sizeof(*l));
    struct found f = { 0 };
    struct lc_strbuf head = { 0 }, missing = { 0 }, body = { 0 };
    char *copy = dirs ? strdup(dirs) : NULL;
    if (!l || !copy) {
        free(l);
        free(copy);
        return NULL;
    }
    char *save = NULL;
    for (char *d = strtok_r(copy, ":", &save); d; d = strtok_r(NULL, ":", &save)) {
        char *err = NULL, *full = lc_path_expand(d, &err);
        struct stat st;
        char *safe = lc_text_safe(full ? full : d);
        if (!full || stat(full, &st) != 0 || !S_ISDIR(st.st_mode)) {
            lc_strbuf_printf(&missing, "%s%s", missing.len ? ", " : "", safe ? safe : "?");
        } else {
            lc_strbuf_printf(&head, "%s%s", head.len ? ", " : "", safe ? safe : "?");
            size_t n = strlen(full);
            while (n > 1 && full[n - 1] == '/')
                full[--n] = '\0';
            walk(&f, full, n + 1, 0, stop);
        }
        free(safe);
        free(full);
        free(err);
    }
    free(copy);
    if (f.n) {
        /* sort paths and their offsets together */
        struct pair { char *p; size_t o; } *v = malloc(f.n * sizeof(*v));
        if (v) {
            for (size_t i = 0; i < f.n; i++)
                v[i] = (struct pair){ f.paths[i], f.shown[i] };
            qsort(v, f.n, sizeof(*v), by_path);
            for (size_t i = 0; i < f.n; i++) {
                f.paths[i] = v[i].p;
                f.shown[i] = v[i].o;
            }
            free(v);
        } else {
            f.oom = true;
        }
    }
    for (size_t i = 0; i < f.n && !(stop && atomic_load(stop)); i++) {
        struct stat st;
        const bool in_use = have_cur && stat(f.paths[i], &st) == 0 && st.st_dev == cur.st_dev &&
                            st.st_ino == cur.st_ino;
        describe(&body, i + 1, f.paths[i], f.shown[i], in_use);
        l->n = i + 1;
    }
    struct lc_strbuf b = { 0 };
    if (l->n)
        lc_strbuf_printf(&b, "models in %s (/model N opens one):", head.p);
    else
        lc_strbuf_printf(&b, "no GGUF files in %s ([model] dirs in ~/.llamachatrc, or LLAMACHAT_MODELS)",
                         head.p ? head.p : "the model directories");
    if (missing.p)
        lc_strbuf_printf(&b, " (not found: %s)", missing.p);
    if (body.p)
        lc_strbuf_put(&b, body.p);
    if (stop && atomic_load(stop))
        lc_strbuf_put(&b, "\n(stopped)");
    bool oom = f.oom || head.oom || missing.oom || body.oom || b.oom;
    free(head.p);
    free(missing.p);
    free(body.p);
    l->text = b.p;
    l->paths = f.paths;
    for (size_t i = l->n; i < f.n; i++)
        free(f.paths[i]);
    free(f.shown);
    if (oom || !l->text) {
        if (!l->paths)
            l->n = 0;
        lc_listing_free(l);
        return NULL;
    }
    return l;
}
