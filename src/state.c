/*
 * state.c - the state directory, the saved conversations in it and the appended history
 * (state.h).
 */
#include "state.h"

#include <dirent.h>
#include <errno.h>
#include <pwd.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "chat.h"
#include "fileutil.h"
#include "llm/strbuf.h"
#include "textsafe.h"

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

/* mkdir -p with mode 0700 for what is created; the last component must end up a directory. */
static int make_dirs(char *path, char **err)
{
    for (char *p = path + 1; *p; p++) {
        if (*p != '/')
            continue;
        *p = '\0';
        if (mkdir(path, 0700) != 0 && errno != EEXIST) {
            *err = fmt_err("%s: cannot create the directory: %s", path, strerror(errno));
            *p = '/';
            return -1;
        }
        *p = '/';
    }
    if (mkdir(path, 0700) != 0 && errno != EEXIST) {
        *err = fmt_err("%s: cannot create the directory: %s", path, strerror(errno));
        return -1;
    }
    struct stat st;
    if (stat(path, &st) != 0) {
        *err = fmt_err("%s: %s", path, strerror(errno));
        return -1;
    }
    if (!S_ISDIR(st.st_mode)) {
        *err = fmt_err("%s: cannot create the directory: %s", path, strerror(ENOTDIR));
        return -1;
    }
    return 0;
}

char *lc_state_dir(const char *sub, char **err)
{
    *err = NULL;
    const char *state = getenv("XDG_STATE_HOME");
    const char *home = getenv("HOME");
    char *path = NULL;
    int n;
    if (state && *state)
        n = asprintf(&path, "%s/llamachat%s%s", state, sub ? "/" : "", sub ? sub : "");
    else if (home && *home)
        n = asprintf(&path, "%s/.local/state/llamachat%s%s", home, sub ? "/" : "", sub ? sub : "");
    else {
        *err = fmt_err("nowhere to keep the history and conversations: neither XDG_STATE_HOME nor HOME is set");
        return NULL;
    }
    if (n < 0) {
        *err = fmt_err("out of memory");
        return NULL;
    }
    if (make_dirs(path, err) != 0) {
        free(path);
        return NULL;
    }
    /* private, also when an older version or the user made it with a wider mode */
    chmod(path, 0700);
    if (sub) {
        char *slash = strrchr(path, '/');
        *slash = '\0';
        chmod(path, 0700);
        *slash = '/';
    }
    return path;
}

char *lc_state_data_dir(const char *configured, char **err)
{
    *err = NULL;
    char *path = NULL;
    if (configured && *configured) {
        path = lc_path_expand(configured, err);
        if (!path)
            return NULL;
    } else {
        const char *data = getenv("XDG_DATA_HOME");
        const char *home = getenv("HOME");
        int n;
        if (data && *data)
            n = asprintf(&path, "%s/llamachat/transcripts", data);
        else if (home && *home)
            n = asprintf(&path, "%s/.local/share/llamachat/transcripts", home);
        else {
            *err = fmt_err("nowhere to save transcripts: neither XDG_DATA_HOME nor HOME is set");
            return NULL;
        }
        if (n < 0) {
            *err = fmt_err("out of memory");
            return NULL;
        }
    }
    if (make_dirs(path, err) != 0) {
        free(path);
        return NULL;
    }
    return path;
}

char *lc_path_expand(const char *path, char **err)
{
    *err = NULL;
    char *out = NULL;
    if (path[0] != '~') {
        out = strdup(path);
    } else {
        size_t n = strcspn(path + 1, "/");
        const char *home = NULL;
        if (n == 0) {
            home = getenv("HOME");
            if (!home || !*home) {
                struct passwd *pw = getpwuid(getuid());
                home = pw ? pw->pw_dir : NULL;
            }
            if (!home) {
                *err = fmt_err("%s: HOME is not set", path);
                return NULL;
            }
        } else {
            char user[256];
            if (n >= sizeof(user)) {
                *err = fmt_err("%s: no such user", path);
                return NULL;
            }
            memcpy(user, path + 1, n);
            user[n] = '\0';
            struct passwd *pw = getpwnam(user);
            if (!pw) {
                *err = fmt_err("~%s: no such user", user);
                return NULL;
            }
            home = pw->pw_dir;
        }
        if (asprintf(&out, "%s%s", home, path + 1 + n) < 0)
            out = NULL;
    }
    if (!out)
        *err = fmt_err("out of memory");
    return out;
}

int lc_state_private_file(const char *path, char **err)
{
    *err = NULL;
    int fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd < 0 || fchmod(fd, 0600) != 0) {
        *err = fmt_err("%s: cannot make it private: %s", path, strerror(errno));
        if (fd >= 0)
            close(fd);
        return -1;
    }
    close(fd);
    return 0;
}

int lc_state_latest_chat(const char *dir, char **path, char **err)
{
    *path = NULL;
    *err = NULL;
    DIR *d = opendir(dir);
    if (!d) {
        if (errno == ENOENT)
            return 0;
        *err = fmt_err("%s: cannot read the directory: %s", dir, strerror(errno));
        return -1;
    }
    char *best = NULL;
    struct timespec best_t = { 0, 0 };
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        size_t len = strlen(de->d_name);
        if (len <= 5 || strcmp(de->d_name + len - 5, ".json") != 0 || de->d_name[0] == '.')
            continue;
        struct stat st;
        if (fstatat(dirfd(d), de->d_name, &st, 0) != 0 || !S_ISREG(st.st_mode) || st.st_size == 0)
            continue;   /* an empty file: a name reserved by a run that died before its first save */
        bool newer = !best || st.st_mtim.tv_sec > best_t.tv_sec ||
                     (st.st_mtim.tv_sec == best_t.tv_sec &&
                      (st.st_mtim.tv_nsec > best_t.tv_nsec ||
                       (st.st_mtim.tv_nsec == best_t.tv_nsec && strcmp(de->d_name, best) > 0)));
        if (newer) {
            char *s = strdup(de->d_name);
            if (!s)
                continue;
            free(best);
            best = s;
            best_t = st.st_mtim;
        }
    }
    closedir(d);
    if (!best)
        return 0;
    int n = asprintf(path, "%s/%s", dir, best);
    free(best);
    if (n < 0) {
        *path = NULL;
        *err = fmt_err("out of memory");
        return -1;
    }
    return 1;
}

char *lc_state_new_chat(const char *dir, time_t start, char **err)
{
    *err = NULL;
    struct tm tm;
    char stamp[64];
    localtime_r(&start, &tm);
    strftime(stamp, sizeof(stamp), "%Y-%m-%dT%H-%M-%S", &tm);
    for (int i = 1; i < 1000; i++) {
        char *path = NULL;
        int n = i == 1 ? asprintf(&path, "%s/%s.json", dir, stamp)
                       : asprintf(&path, "%s/%s-%d.json", dir, stamp, i);
        if (n < 0) {
            *err = fmt_err("out of memory");
            return NULL;
        }
        int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
        if (fd >= 0) {
            close(fd);
            return path;
        }
        if (errno != EEXIST) {
            *err = fmt_err("%s: cannot create: %s", path, strerror(errno));
            free(path);
            return NULL;
        }
        free(path);
    }
    *err = fmt_err("%s/%s.json: cannot create: too many conversations started that second", dir, stamp);
    return NULL;
}

int lc_state_lock_chat(const char *path, char **err)
{
    *err = NULL;
    const char *slash = strrchr(path, '/');
    const char *base = slash ? slash + 1 : path;
    char *lock = NULL;
    if (asprintf(&lock, "%.*s.lock", (int)(base - path), path) < 0) {
        *err = fmt_err("out of memory");
        return -1;
    }
    int fd = open(lock, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd < 0) {
        *err = fmt_err("%s: cannot open: %s", lock, strerror(errno));
        free(lock);
        return -1;
    }
    /* one byte per conversation, at the FNV-1a hash of its name (two names sharing a byte only
     * make the second one go on in a new file) */
    uint32_t h = 2166136261u;
    for (const unsigned char *p = (const unsigned char *)base; *p; p++)
        h = (h ^ *p) * 16777619u;
    struct flock fl;
    memset(&fl, 0, sizeof(fl));
    fl.l_type = F_WRLCK;
    fl.l_whence = SEEK_SET;
    fl.l_start = (off_t)(h & 0x3fffffffu);
    fl.l_len = 1;
#ifdef F_OFD_SETLK
    int rc = fcntl(fd, F_OFD_SETLK, &fl);   /* the open file's own: closing fd lets it go */
#else
    /* a process's own locks (F_SETLK) would all go with the first fd closed on the file, and a
     * chat holds two while /chats N opens one: none rather than one that lies */
    int rc = -1;
    errno = ENOSYS;
#endif
    if (rc != 0) {
        int e = errno;
        close(fd);
        if (e == EAGAIN || e == EACCES) {
            free(lock);
            return -2;
        }
        *err = e == ENOSYS || e == EINVAL
               ? fmt_err("%s: cannot lock: this system has no open file description locks "
                         "(F_OFD_SETLK)", lock)
               : fmt_err("%s: cannot lock: %s", lock, strerror(e));
        free(lock);
        return -1;
    }
    free(lock);
    return fd;
}

void lc_state_unlock_chat(int fd)
{
    if (fd >= 0)
        close(fd);
}

int lc_state_append_history(const char *path, const char *line, char **err)
{
    *err = NULL;
    size_t n = strlen(line);
    char *buf = malloc(n + 1);
    if (!buf) {
        *err = fmt_err("%s: out of memory", path);
        return -1;
    }
    for (size_t i = 0; i < n; i++)
        buf[i] = line[i] == '\n' ? '\r' : line[i];
    buf[n] = '\n';
    int fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600);
    if (fd >= 0)
        (void)fchmod(fd, 0600);   /* a file an older version made 0644 */
    if (fd < 0) {
        *err = fmt_err("%s: cannot append: %s", path, strerror(errno));
        free(buf);
        return -1;
    }
    int rc = 0;
    size_t off = 0;
    while (off < n + 1) {
        ssize_t w = write(fd, buf + off, n + 1 - off);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            rc = -1;
            break;
        }
        off += (size_t)w;
    }
    if (rc == 0 && fsync(fd) != 0 && errno != EINVAL)
        rc = -1;
    if (rc != 0)
        *err = fmt_err("%s: cannot append: %s", path, strerror(errno));
    if (close(fd) != 0 && rc == 0) {
        *err = fmt_err("%s: cannot append: %s", path, strerror(errno));
        rc = -1;
    }
    free(buf);
    return rc;
}

/* ---------------------------------------------------------------- writer thread */

/* a queued job: a transcript for path, or (path NULL) a chat lock to release */
struct writer_job {
    struct writer_job *next;
    char *path, *data;
    size_t len;
    int fd;
    uint64_t seq;           /* its place in the order queued (1, 2, ...) */
};

struct lc_state_writer {
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv;      /* a job was queued, or stop */
    struct writer_job *head, *tail;   /* the queue, in order */
    int writing;            /* a job is being done */
    int stop;
    char *error;            /* last failure, for lc_state_writer_error */
    uint64_t queued, done;  /* seq of the last job queued, of the last one done */
    pthread_cond_t done_cv; /* done moved */
    int slow_ms;            /* LLAMACHAT_TEST_SLOW_WRITE_MS (tests): a slow disk */
};

static void job_free(struct writer_job *j)
{
    if (!j)
        return;
    free(j->path);
    free(j->data);
    free(j);
}

static void *writer_main(void *arg)
{
    struct lc_state_writer *w = arg;
    pthread_mutex_lock(&w->mu);
    for (;;) {
        while (!w->head && !w->stop)
            pthread_cond_wait(&w->cv, &w->mu);
        if (!w->head)
            break;   /* stop, nothing left */
        struct writer_job *j = w->head;
        w->head = j->next;
        if (!w->head)
            w->tail = NULL;
        w->writing = 1;
        pthread_mutex_unlock(&w->mu);
        char *err = NULL;
        int rc = 0;
        uint64_t seq = j->seq;
        if (j->path && w->slow_ms > 0)
            nanosleep(&(struct timespec){ w->slow_ms / 1000, (long)(w->slow_ms % 1000) * 1000000L },
                      NULL);
        if (j->path)
            rc = lc_file_replace(j->path, j->data, j->len, &err);
        else
            lc_state_unlock_chat(j->fd);   /* every save of that chat queued before is done */
        job_free(j);
        pthread_mutex_lock(&w->mu);
        w->writing = 0;
        w->done = seq;
        pthread_cond_broadcast(&w->done_cv);
        if (rc != 0) {
            free(w->error);
            w->error = err ? err : strdup("write failed");
        } else {
            free(err);
        }
    }
    pthread_mutex_unlock(&w->mu);
    return NULL;
}

struct lc_state_writer *lc_state_writer_start(void)
{
    struct lc_state_writer *w = calloc(1, sizeof(*w));
    if (!w)
        return NULL;
    pthread_mutex_init(&w->mu, NULL);
    pthread_cond_init(&w->cv, NULL);
    pthread_cond_init(&w->done_cv, NULL);
    const char *slow = getenv("LLAMACHAT_TEST_SLOW_WRITE_MS");
    w->slow_ms = slow && *slow ? atoi(slow) : 0;
    int e = pthread_create(&w->thread, NULL, writer_main, w);
    if (e != 0) {
        pthread_cond_destroy(&w->done_cv);
        pthread_cond_destroy(&w->cv);
        pthread_mutex_destroy(&w->mu);
        free(w);
        errno = e;
        return NULL;
    }
    return w;
}

/* append j to the queue (w->mu held) */
static void job_append(struct lc_state_writer *w, struct writer_job *j)
{
    j->seq = ++w->queued;
    if (w->tail)
        w->tail->next = j;
    else
        w->head = j;
    w->tail = j;
    pthread_cond_signal(&w->cv);
}

int lc_state_writer_put(struct lc_state_writer *w, const char *path, char *data, size_t len)
{
    struct writer_job *j = calloc(1, sizeof(*j));
    char *p = strdup(path);
    if (!j || !p) {
        free(j);
        free(p);
        free(data);
        return -1;
    }
    pthread_mutex_lock(&w->mu);
    if (w->tail && w->tail->path && strcmp(w->tail->path, path) == 0) {
        free(w->tail->data);   /* the same file's, not started yet: superseded */
        w->tail->data = data;
        w->tail->len = len;
        pthread_mutex_unlock(&w->mu);
        free(j);
        free(p);
        return 0;
    }
    j->path = p;   /* another file's job stays queued before it: both are written, in order */
    j->data = data;
    j->len = len;
    j->fd = -1;
    job_append(w, j);
    pthread_mutex_unlock(&w->mu);
    return 0;
}

void lc_state_writer_unlock_after(struct lc_state_writer *w, int fd)
{
    if (fd < 0)
        return;
    struct writer_job *j = w ? calloc(1, sizeof(*j)) : NULL;
    if (w)
        pthread_mutex_lock(&w->mu);
    if (!j || (!w->head && !w->writing)) {   /* nothing queued (or no memory): now */
        if (w)
            pthread_mutex_unlock(&w->mu);
        free(j);
        lc_state_unlock_chat(fd);
        return;
    }
    j->fd = fd;
    job_append(w, j);
    pthread_mutex_unlock(&w->mu);
}

uint64_t lc_state_writer_mark(struct lc_state_writer *w)
{
    pthread_mutex_lock(&w->mu);
    uint64_t seq = w->queued;
    pthread_mutex_unlock(&w->mu);
    return seq;
}

void lc_state_writer_wait(struct lc_state_writer *w, uint64_t mark)
{
    pthread_mutex_lock(&w->mu);
    while (w->done < mark)
        pthread_cond_wait(&w->done_cv, &w->mu);
    pthread_mutex_unlock(&w->mu);
}

int lc_state_writer_busy(struct lc_state_writer *w)
{
    pthread_mutex_lock(&w->mu);
    int busy = w->head != NULL || w->writing;
    pthread_mutex_unlock(&w->mu);
    return busy;
}

char *lc_state_writer_error(struct lc_state_writer *w)
{
    pthread_mutex_lock(&w->mu);
    char *e = w->error;
    w->error = NULL;
    pthread_mutex_unlock(&w->mu);
    return e;
}

void lc_state_writer_free(struct lc_state_writer *w, char **err)
{
    if (err)
        *err = NULL;
    if (!w)
        return;
    pthread_mutex_lock(&w->mu);
    w->stop = 1;   /* the thread writes what is queued, then ends */
    pthread_cond_signal(&w->cv);
    pthread_mutex_unlock(&w->mu);
    pthread_join(w->thread, NULL);   /* the queue is empty then */
    if (err)
        *err = w->error;
    else
        free(w->error);
    pthread_cond_destroy(&w->done_cv);
    pthread_cond_destroy(&w->cv);
    pthread_mutex_destroy(&w->mu);
    free(w);
}

/* ---------------------------------------------------------------- listings */

void lc_listing_free(struct lc_listing *l)
{
    if (!l)
        return;
    for (size_t i = 0; i < l->n; i++)
        free(l->paths[i]);
    free(l->paths);
    free(l->text);
    free(l);
}

struct chat_file {
    char *name;
    struct timespec mtime;
};

static int chat_file_newer_first(const void *a, const void *b)
{
    const struct chat_file *x = a, *y = b;
    if (x->mtime.tv_sec != y->mtime.tv_sec)
        return x->mtime.tv_sec > y->mtime.tv_sec ? -1 : 1;
    if (x->mtime.tv_nsec != y->mtime.tv_nsec)
        return x->mtime.tv_nsec > y->mtime.tv_nsec ? -1 : 1;
    return -strcmp(x->name, y->name);
}

/* The title of a saved chat for /chats: its "title", else the first line of its first user
 * message, cut at 60 characters (UTF-8 kept whole) and made visible (textsafe.h). */
static char *chat_title(const struct lc_chat *c)
{
    const char *s = c->title;
    for (size_t i = 0; !s && i < c->n; i++)
        if (c->msgs[i].role == LC_ROLE_USER)
            s = c->msgs[i].text;
    if (!s)
        return strdup("(no message)");
    size_t n = strcspn(s, "\r\n"), chars = 0, cut = 0;
    while (cut < n && chars < 60) {
        cut++;
        while (cut < n && ((unsigned char)s[cut] & 0xC0) == 0x80)
            cut++;
        chars++;
    }
    char *line = strndup(s, cut);
    char *safe = line ? lc_text_safe(line) : NULL;
    free(line);
    if (safe && cut < n) {
        char *more = NULL;
        if (asprintf(&more, "%s...", safe) >= 0) {
            free(safe);
            safe = more;
        }
    }
    return safe;
}

/* One line of /chats for the file at path. */
static char *chat_line(size_t no, const char *path, const struct timespec *mtime, bool current)
{
    char date[32];
    struct tm tm;
    time_t t = mtime->tv_sec;
    if (!localtime_r(&t, &tm) || !strftime(date, sizeof(date), "%Y-%m-%d %H:%M", &tm))
        snprintf(date, sizeof(date), "?");
    char *err = NULL, *line = NULL, *title = NULL, *model = NULL;
    struct lc_chat *c = lc_chat_load(path, &err);
    if (c) {
        title = chat_title(c);
        model = c->model ? lc_text_safe(c->model) : NULL;
    }
    char *what = c ? NULL : lc_text_safe(err ? err : "cannot read");
    if (asprintf(&line, "%2zu. %s %s: %s%s", no, date, c ? (model ? model : "(no model)") : "unreadable",
                 c ? (title ? title : "?") : (what ? what : "?"), current ? " (this one)" : "") < 0)
        line = NULL;
    free(what);
    free(model);
    free(title);
    free(err);
    lc_chat_free(c);
    return line;
}

struct lc_listing *lc_state_list_chats(const char *dir, const char *current, char **err)
{
    *err = NULL;
    struct lc_listing *l = calloc(1, sizeof(*l));
    struct chat_file *files = NULL;
    size_t n = 0, cap = 0;
    DIR *d = l ? opendir(dir) : NULL;
    if (!l) {
        *err = fmt_err("out of memory");
        return NULL;
    }
    if (!d && errno != ENOENT) {
        *err = fmt_err("%s: cannot read the directory: %s", dir, strerror(errno));
        free(l);
        return NULL;
    }
    struct dirent *de;
    while (d && (de = readdir(d)) != NULL) {
        size_t len = strlen(de->d_name);
        struct stat st;
        if (len <= 5 || strcmp(de->d_name + len - 5, ".json") != 0 || de->d_name[0] == '.' ||
            fstatat(dirfd(d), de->d_name, &st, 0) != 0 || !S_ISREG(st.st_mode) || st.st_size == 0)
            continue;
        if (n == cap) {
            size_t nc = cap ? cap * 2 : 32;
            struct chat_file *f = realloc(files, nc * sizeof(*f));
            if (!f)
                break;
            files = f;
            cap = nc;
        }
        if ((files[n].name = strdup(de->d_name)) != NULL)
            files[n++].mtime = st.st_mtim;
    }
    if (d)
        closedir(d);
    if (n)
        qsort(files, n, sizeof(*files), chat_file_newer_first);
    l->paths = calloc(n ? n : 1, sizeof(*l->paths));
    struct lc_strbuf b = { 0 };
    if (n)
        lc_strbuf_printf(&b, "saved chats in %s (/chats N opens one, /delete N deletes one):", dir);
    else
        lc_strbuf_printf(&b, "no saved chats in %s yet", dir);
    for (size_t i = 0; l->paths && i < n; i++) {
        char *path = NULL;
        if (asprintf(&path, "%s/%s", dir, files[i].name) < 0)
            break;
        char *line = chat_line(l->n + 1, path, &files[i].mtime, current && !strcmp(current, path));
        if (!line) {
            free(path);
            break;
        }
        lc_strbuf_printf(&b, "\n%s", line);
        free(line);
        l->paths[l->n++] = path;
    }
    for (size_t i = 0; i < n; i++)
        free(files[i].name);
    free(files);
    l->text = b.p;
    if (b.oom || !l->paths || !l->text) {
        lc_listing_free(l);
        *err = fmt_err("out of memory");
        return NULL;
    }
    return l;
}
