/*
 * fileutil.c - replacing files safely (fileutil.h).
 */
#include "fileutil.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char *fmt_err(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static char *fmt_err(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char *s = NULL;
    if (vasprintf(&s, fmt, ap) < 0)
        s = NULL;
    va_end(ap);
    return s;
}

static const char *kind_name(mode_t m)
{
    return S_ISFIFO(m) ? "a FIFO" : S_ISCHR(m) ? "a character device" : S_ISBLK(m) ? "a block device"
           : S_ISDIR(m) ? "a directory" : S_ISSOCK(m) ? "a socket" : "not a regular file";
}

/* The directory part of p (malloc'd): "." for a bare name. */
static char *dir_of(const char *p)
{
    char *c = strdup(p);
    if (!c)
        return NULL;
    char *d = strdup(dirname(c));
    free(c);
    return d;
}

/* The process umask without changing it (umask(2) sets it: another thread creating a file
 * meanwhile would get mode 0666); from /proc/self/status, 022 when that cannot be read. */
static mode_t current_umask(void)
{
    mode_t um = 022;
    FILE *f = fopen("/proc/self/status", "re");
    if (!f)
        return um;
    char line[128];
    while (fgets(line, sizeof(line), f))
        if (strncmp(line, "Umask:", 6) == 0) {
            um = (mode_t)strtoul(line + 6, NULL, 8);
            break;
        }
    fclose(f);
    return um;
}

int lc_file_target(const char *path, struct lc_file_target *t, char **err)
{
    memset(t, 0, sizeof(*t));
    *err = NULL;
    char *cur = strdup(path);
    if (!cur) {
        *err = fmt_err("%s: out of memory", path);
        return -1;
    }
    /* follow links one by one (realpath would fail on a dangling one, which we write through) */
    struct stat st;
    int hops = 0;
    while (lstat(cur, &st) == 0 && S_ISLNK(st.st_mode)) {
        if (++hops > 40) {
            *err = fmt_err("%s: too many levels of symbolic links", path);
            free(cur);
            return -1;
        }
        char buf[PATH_MAX];
        ssize_t n = readlink(cur, buf, sizeof(buf) - 1);
        if (n < 0) {
            *err = fmt_err("%s: cannot read the link: %s", path, strerror(errno));
            free(cur);
            return -1;
        }
        buf[n] = '\0';
        char *next;
        if (buf[0] == '/') {
            next = strdup(buf);
        } else {   /* relative to the link's directory */
            char *d = dir_of(cur);
            next = d && asprintf(&next, "%s/%s", d, buf) >= 0 ? next : NULL;
            free(d);
        }
        free(cur);
        cur = next;
        if (!cur) {
            *err = fmt_err("%s: out of memory", path);
            return -1;
        }
    }
    t->path = cur;
    if (lstat(cur, &st) == 0) {
        /* a directory is left to rename(), which fails with EISDIR and changes nothing */
        if (!S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode)) {
            *err = fmt_err("%s: %s, not a regular file; not replaced", path, kind_name(st.st_mode));
            lc_file_target_free(t);
            return -1;
        }
        t->exists = S_ISREG(st.st_mode);
        t->mode = st.st_mode & 07777;
        t->uid = st.st_uid;
        t->gid = st.st_gid;
    } else {
        t->mode = 0666 & ~current_umask();
    }
    return 0;
}

void lc_file_target_free(struct lc_file_target *t)
{
    free(t->path);
    t->path = NULL;
}

static int fsync_dir(const char *file)
{
    char *d = dir_of(file);
    if (!d)
        return -1;
    int fd = open(d, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    free(d);
    if (fd < 0)
        return -1;
    int rc = fsync(fd);
    if (rc != 0 && (errno == EINVAL || errno == EROFS))
        rc = 0;   /* file systems that cannot sync a directory */
    close(fd);
    return rc;
}

int lc_file_finish(const struct lc_file_target *t, char **err)
{
    *err = NULL;
    if (chmod(t->path, t->mode) != 0) {
        *err = fmt_err("%s: cannot set the mode: %s", t->path, strerror(errno));
        return -1;
    }
    if (t->exists && geteuid() == 0 && chown(t->path, t->uid, t->gid) != 0) {
        *err = fmt_err("%s: cannot keep the owner: %s", t->path, strerror(errno));
        return -1;
    }
    if (fsync_dir(t->path) != 0) {
        *err = fmt_err("%s: cannot sync the directory: %s", t->path, strerror(errno));
        return -1;
    }
    return 0;
}

/* Why no file can be created at target, whose directory is missing (errno e: ENOENT, ENOTDIR):
 * "the directory DIR does not exist", or "P is not a directory" naming the part of the path
 * that is a file; NULL for other errors (or out of memory). */
static char *dir_missing(const char *target, int e)
{
    if (e != ENOENT && e != ENOTDIR)
        return NULL;
    const char *slash = strrchr(target, '/');
    char *dir = slash == target ? strdup("/") : slash ? strndup(target, (size_t)(slash - target))
                                                      : strdup(".");
    if (!dir)
        return NULL;
    char *why = NULL;
    if (e == ENOTDIR) {   /* the first part of the way that is there but not a directory */
        for (size_t k = 1, n = strlen(dir); !why && k <= n; k++) {
            struct stat st;
            if (k < n && dir[k] != '/')
                continue;
            char c = dir[k];
            dir[k] = '\0';
            if (stat(dir, &st) == 0 && !S_ISDIR(st.st_mode))
                why = fmt_err("%s is not a directory", dir);
            dir[k] = c;
        }
    }
    if (!why)
        why = fmt_err("the directory %s does not exist", dir);
    free(dir);
    return why;
}

int lc_file_temp(const struct lc_file_target *t, const char *path, char **tmp, char **err)
{
    *err = NULL;
    *tmp = NULL;
    /* beside the real target, so that rename() is atomic */
    if (asprintf(tmp, "%s.tmp.XXXXXX", t->path) < 0) {
        *tmp = NULL;
        *err = fmt_err("%s: out of memory", path);
        return -1;
    }
    int fd = mkostemp(*tmp, O_CLOEXEC);
    if (fd < 0) {
        int e = errno;
        char *why = dir_missing(t->path, e);
        if (why)
            *err = fmt_err("%s: %s", path, why);
        else
            *err = fmt_err("%s: cannot create a temporary file: %s", path, strerror(e));
        free(why);
        free(*tmp);
        *tmp = NULL;
        return -1;
    }
    if (fchmod(fd, t->mode) != 0 || (t->exists && geteuid() == 0 && fchown(fd, t->uid, t->gid) != 0)) {
        *err = fmt_err("%s: cannot set the mode: %s", path, strerror(errno));
        close(fd);
        unlink(*tmp);
        free(*tmp);
        *tmp = NULL;
        return -1;
    }
    return fd;
}

int lc_file_commit(const struct lc_file_target *t, const char *path, const char *tmp, char **err)
{
    *err = NULL;
    if (rename(tmp, t->path) != 0) {
        *err = fmt_err("%s: cannot rename the temporary file over it: %s", path, strerror(errno));
        unlink(tmp);
        return -1;
    }
    if (fsync_dir(t->path) != 0) {
        *err = fmt_err("%s: saved, but the directory could not be synced: %s", path, strerror(errno));
        return -1;
    }
    return 0;
}

int lc_file_replace(const char *path, const void *data, size_t len, char **err)
{
    struct lc_file_target t;
    if (lc_file_target(path, &t, err) != 0)
        return -1;
    char *tmp = NULL;
    int fd = lc_file_temp(&t, path, &tmp, err);
    if (fd < 0) {
        lc_file_target_free(&t);
        return -1;
    }
    int rc = 0;
    const char *p = data;
    size_t off = 0;
    while (rc == 0 && off < len) {
        ssize_t w = write(fd, p + off, len - off);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            *err = fmt_err("%s: write failed: %s", path, strerror(errno));
            rc = -1;
            break;
        }
        off += (size_t)w;
    }
    if (rc == 0 && fsync(fd) != 0 && errno != EINVAL) {
        *err = fmt_err("%s: write failed: %s", path, strerror(errno));
        rc = -1;
    }
    if (close(fd) != 0 && rc == 0) {
        *err = fmt_err("%s: write failed: %s", path, strerror(errno));
        rc = -1;
    }
    if (rc == 0)
        rc = lc_file_commit(&t, path, tmp, err);
    else
        unlink(tmp);
    free(tmp);
    lc_file_target_free(&t);
    return rc;
}

char *lc_file_read_small(const char *path, size_t max, size_t *len, char **why)
{
    *why = NULL;
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) {
        *why = fmt_err("cannot open: %s", strerror(errno));
        return NULL;
    }
    struct stat st;
    char *text = NULL;
    if (fstat(fd, &st) != 0) {
        *why = fmt_err("cannot open: %s", strerror(errno));
    } else if (S_ISCHR(st.st_mode) && strcmp(path, "/dev/null") == 0) {
        text = strdup("");   /* e.g. LLAMACHATRC=/dev/null: nothing, the usual idiom */
        *len = 0;
        if (!text)
            *why = fmt_err("out of memory");
    } else if (!S_ISREG(st.st_mode)) {
        *why = fmt_err("not a regular file; not read");
    } else if ((size_t)st.st_size > max) {
        *why = fmt_err("larger than %zu KiB; not read", max >> 10);
    } else {
        text = malloc((size_t)st.st_size + 1);
        size_t n = 0;
        while (text && n < (size_t)st.st_size) {
            ssize_t r = read(fd, text + n, (size_t)st.st_size - n);
            if (r < 0 && errno == EINTR)
                continue;
            if (r <= 0)
                break;
            n += (size_t)r;
        }
        if (!text)
            *why = fmt_err("out of memory");
        else {
            text[n] = '\0';
            *len = n;
        }
    }
    close(fd);
    return text;
}
