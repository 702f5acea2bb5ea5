/*
 * library.c - the chat's models and saved conversations: /model, /models, /show, /chats,
 * /rename and /delete (llamachat(1)).
 *
 * What reads many files (the GGUF headers of /models, the transcripts of /chats, the one
 * /chats N and /load open) runs as a job on a thread of its own, so that a slow disk never stops the
 * screen; the job writes a byte to a pipe when it is done, the main loop polls that pipe and
 * takes the result here.  One job at a time.  Loading a model is the engine's work
 * (lc_engine_load_model): the UI shows "loading" and stays live; Esc cancels.
 */
#include "internal.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "../models.h"
#include "../state.h"

struct tui_job {
    pthread_t thread;
    int fd[2];                      /* the thread writes one byte to fd[1] when it is done */
    void *(*run)(struct tui_job *j);
    void (*done)(struct tui *t, struct tui_job *j);
    char *arg, *arg2;               /* the job's input (owned) */
    void *result;
    char *err;
    atomic_int stop;                /* set at exit: the job ends early */
    /* /chats N of the chat just left, whose lock this llamachat's writer still holds until its
     * last saves are written: the job waits for them (wait_writer, up to wait_mark), then
     * takes the lock (lock, lock_err) before it reads the file */
    struct lc_state_writer *wait_writer;
    uint64_t wait_mark;
    int lock;
    char *lock_err;
};

static void *job_main(void *p)
{
    struct tui_job *j = p;
    j->result = j->run(j);
    char c = 1;
    ssize_t r = write(j->fd[1], &c, 1);
    (void)r;
    return NULL;
}

static void job_free(struct tui_job *j)
{
    if (!j)
        return;
    close(j->fd[0]);
    close(j->fd[1]);
    free(j->arg);
    free(j->arg2);
    free(j->err);
    free(j->lock_err);
    free(j);
}

/* Start run(job) on a thread (with the signals the loop handles blocked, as the engine);
 * done(t, job) is called on the UI thread with job->result.  arg and arg2 are copied. */
static bool job_start_waiting(struct tui *t, void *(*run)(struct tui_job *),
                              void (*done)(struct tui *, struct tui_job *), const char *arg,
                              const char *arg2, struct lc_state_writer *wait_writer);

static bool job_start(struct tui *t, void *(*run)(struct tui_job *), void (*done)(struct tui *, struct tui_job *),
                      const char *arg, const char *arg2)
{
    return job_start_waiting(t, run, done, arg, arg2, NULL);
}

/* job_start, the job first waiting for what wait_writer (if not NULL) has queued now. */
static bool job_start_waiting(struct tui *t, void *(*run)(struct tui_job *),
                              void (*done)(struct tui *, struct tui_job *), const char *arg,
                              const char *arg2, struct lc_state_writer *wait_writer)
{
    if (t->job) {
        tui_message(t, true, "still busy with the last listing; try again in a moment");
        return false;
    }
    struct tui_job *j = calloc(1, sizeof(*j));
    if (!j || pipe(j->fd) != 0) {
        tui_message(t, true, "cannot start: %s", j ? strerror(errno) : "out of memory");
        free(j);
        return false;
    }
    for (int i = 0; i < 2; i++)
        fcntl(j->fd[i], F_SETFD, FD_CLOEXEC);
    j->run = run;
    j->done = done;
    j->arg = arg ? strdup(arg) : NULL;
    j->arg2 = arg2 ? strdup(arg2) : NULL;
    atomic_init(&j->stop, 0);
    j->lock = -1;
    j->wait_writer = wait_writer;
    if (wait_writer)
        j->wait_mark = lc_state_writer_mark(wait_writer);
    sigset_t block, old;
    sigemptyset(&block);
    const int sigs[] = { SIGINT, SIGTERM, SIGHUP, SIGWINCH, SIGTSTP, SIGCONT };
    for (size_t i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++)
        sigaddset(&block, sigs[i]);
    pthread_sigmask(SIG_BLOCK, &block, &old);
    int rc = (arg && !j->arg) || (arg2 && !j->arg2) ? ENOMEM : pthread_create(&j->thread, NULL, job_main, j);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (rc != 0) {
        tui_message(t, true, "cannot start: %s", strerror(rc));
        job_free(j);
        return false;
    }
    t->job = j;
    return true;
}

static void *open_run(struct tui_job *j);
static void *load_run(struct tui_job *j);

bool library_opening(const struct tui *t)
{
    return t->job && (t->job->run == open_run || t->job->run == load_run);
}

int library_job_fd(const struct tui *t)
{
    return t->job ? t->job->fd[0] : -1;
}

void library_job_finish(struct tui *t)
{
    struct tui_job *j = t->job;
    if (!j)
        return;
    pthread_join(j->thread, NULL);
    t->job = NULL;
    j->done(t, j);
    job_free(j);
    t->dirty = true;
}

/* A listing was read: shown as a note, kept for "/cmd N". */
static void show_listing(struct tui *t, struct lc_listing **keep, struct lc_listing *l, const char *err)
{
    if (!l) {
        tui_add_entry(t, E_ERROR, err ? err : "out of memory", strlen(err ? err : "out of memory"));
        tui_message(t, true, "%s", err ? err : "out of memory");
        return;
    }
    lc_listing_free(*keep);
    *keep = l;
    tui_add_entry(t, E_NOTE, l->text, strlen(l->text));
    t->scroll = 0;
    tui_message(t, false, "%zu found", l->n);
}

/* "N" (1 .. n) -> N - 1; -1 when s is not such a number. */
static long pick(const char *s, size_t n)
{
    char *end = NULL;
    if (!*s || *s < '0' || *s > '9')
        return -1;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || *end || v < 1 || (size_t)v > n)
        return -1;
    return v - 1;
}

static bool all_digits(const char *s)
{
    if (!*s)
        return false;
    for (; *s; s++)
        if (*s < '0' || *s > '9')
            return false;
    return true;
}

/* ---------------------------------------------------------------- models */

static void *models_run(struct tui_job *j)
{
    return lc_models_list(j->arg, j->arg2, &j->stop);
}

static void models_done(struct tui *t, struct tui_job *j)
{
    show_listing(t, &t->model_list, j->result, NULL);
}

/* /models: the GGUF files under the model directories (remote: the server's models). */
static void cmd_models(struct tui *t)
{
    if (t->o->remote_url) {
        lc_engine_models(t->engine);
        return;
    }
    char *dirs = lc_models_dirs(t->o->model_dirs);
    if (!dirs) {
        tui_message(t, true, "out of memory");
        return;
    }
    if (job_start(t, models_run, models_done, dirs, t->model_path))
        tui_message(t, false, "looking for models ...");
    free(dirs);
}

/* /model [PATH | N]: switch to another model (N: from the last /models). */
static void cmd_model(struct tui *t, const char *arg)
{
    if (!*arg) {
        tui_message(t, false, "model: %s (%s); /model PATH or /model N (see /models) switches",
                    t->model_name[0] ? t->model_name : "none", t->model_desc);
        return;
    }
    if (t->o->remote_url) {   /* a model of the server (engine.c switch_remote checks it) */
        if (refuse_if_busy(t, "/model"))
            return;
        if (lc_engine_load_model(t->engine, arg) != 0) {
            tui_message(t, true, "out of memory");
            return;
        }
        t->switching = true;
        t->state = ST_LOADING;
        free(t->switch_path);
        t->switch_path = NULL;   /* no file: the chat keeps no model_path */
        tui_transient_message(t, false, "asking %s for %s ...", t->o->remote_url, arg);
        return;
    }
    char *path = NULL, *err = NULL;
    if (all_digits(arg)) {
        long i = pick(arg, t->model_list ? t->model_list->n : 0);
        if (i < 0) {
            if (t->model_list)
                tui_message(t, true, "/model %s: no such entry in the last /models (1 to %zu)", arg,
                            t->model_list->n);
            else
                tui_message(t, true, "/model %s: run /models first to number the models", arg);
            return;
        }
        path = strdup(t->model_list->paths[i]);
    } else {
        path = lc_path_expand(arg, &err);
    }
    if (!path) {
        tui_message(t, true, "/model: %s", err ? err : "out of memory");
        free(err);
        return;
    }
    struct stat st;
    int st_rc = stat(path, &st);
    if (st_rc != 0 || !S_ISREG(st.st_mode)) {   /* a FIFO would hang the engine */
        tui_message(t, true, "/model: %s: %s", path, st_rc != 0 ? strerror(errno) : "not a regular file");
        free(path);
        return;
    }
    if (refuse_if_busy(t, "/model")) {
        free(path);
        return;
    }
    if (lc_engine_load_model(t->engine, path) != 0) {
        tui_message(t, true, "out of memory");
        free(path);
        return;
    }
    t->switching = true;
    t->state = ST_LOADING;
    free(t->switch_path);
    t->switch_path = realpath(path, NULL);
    if (!t->switch_path)
        t->switch_path = strdup(path);
    char *line = NULL;
    if (asprintf(&line, "loading %s (the conversation is kept) ...", path) >= 0)
        tui_add_entry(t, E_NOTE, line, strlen(line));
    free(line);
    tui_transient_message(t, false, "loading %s ... (Esc cancels)", path);
    free(path);
}

void library_switch_done(struct tui *t, int reason)
{
    t->switching = false;
    t->state = ST_IDLE;
    if (reason == LC_DONE_EOG && t->switch_path) {   /* saved with the chat from now on */
        free(t->model_path);
        t->model_path = t->switch_path;
        t->switch_path = NULL;
    }
    free(t->switch_path);
    t->switch_path = NULL;
    if (reason != LC_DONE_EOG) {
        if (reason == LC_DONE_STOPPED)
            tui_turn_message(t, false, "model switch cancelled: still %s", t->model_name);
        /* an error stays on the message line (LC_EV_ERROR) */
        return;
    }
    t->n_past = -1;   /* the new model reads the conversation with the next message */
    t->pp_tps = t->gen_tps = -1;
    lc_chat_set_model(t->chat, t->model_name);
    chat_touched(t, true);
    view_invalidate(t);
    char *line = NULL;
    if (asprintf(&line, "now using %s (%s, %s chat template); the conversation is read again with "
                 "the next message", t->model_name, t->model_desc, t->template_name) >= 0)
        tui_add_entry(t, E_NOTE, line, strlen(line));
    free(line);
    tui_turn_message(t, false, "now using %s (%s chat template)", t->model_name, t->template_name);
}

/* ---------------------------------------------------------------- saved chats */

static bool saved_chats_on(struct tui *t)
{
    if (t->o->autosave && t->o->history)
        return true;
    tui_message(t, true, "saved chats are off ([chat] autosave or [ui] history is off)");
    return false;
}

static void *chats_run(struct tui_job *j)
{
    return lc_state_list_chats(j->arg, j->arg2, &j->err);
}

static void chats_done(struct tui *t, struct tui_job *j)
{
    show_listing(t, &t->chat_list, j->result, j->err);
}

static void test_sleep(const char *var)
{
    const char *slow = getenv(var);
    int ms = slow && *slow ? atoi(slow) : 0;
    if (ms > 0) {
        struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };
        nanosleep(&ts, NULL);
    }
}

static void *open_run(struct tui_job *j)
{
    /* LLAMACHAT_TEST_SLOW_MS (tests): a slow disk, as the engine's (engine.c);
     * LLAMACHAT_TEST_SLOW_OPEN_MS: a wait after the file is read, in which another llamachat
     * may write it */
    test_sleep("LLAMACHAT_TEST_SLOW_MS");
    if (j->wait_writer) {   /* its last saves on disk and its lock let go, then ours */
        lc_state_writer_wait(j->wait_writer, j->wait_mark);
        j->lock = lc_state_lock_chat(j->arg, &j->lock_err);
    }
    if (atomic_load(&j->stop))   /* quit while the writer finished: no parse to wait for */
        return NULL;
    struct lc_chat *c = lc_chat_load(j->arg, &j->err);
    test_sleep("LLAMACHAT_TEST_SLOW_OPEN_MS");
    return c;
}

/* A saved chat was read (/chats N): it becomes the conversation, kept on in its own file
 * under the lock cmd_chats took before the file was read (t->open_lock). */
static void open_done(struct tui *t, struct tui_job *j)
{
    struct lc_chat *c = j->result;
    int lock = t->open_lock;   /* ours from here: kept as chat_lock, or released */
    t->open_lock = -1;
    if (j->wait_writer) {   /* taken by the job, after this llamachat's writer let it go */
        lock = j->lock;
        if (lock == -1)
            chat_lock_failed(t, j->lock_err);
    }
    if (!c) {
        lc_state_unlock_chat(lock);
        tui_add_entry(t, E_ERROR, j->err ? j->err : "?", strlen(j->err ? j->err : "?"));
        tui_message(t, true, "could not open the chat: %s", j->err ? j->err : "?");
        return;
    }
    /* never two chats in one: refuse_if_busy held messages and commands back while the file
     * was read, and the engine must have nothing of this chat's left to do */
    if (t->state != ST_IDLE || lc_engine_busy(t->engine)) {
        lc_state_unlock_chat(lock);
        tui_message(t, true, "the chat was not opened: the model is busy");
        lc_chat_free(c);
        return;
    }
    autosave(t, true);   /* anything typed meanwhile is kept in the current file first */
    regen_forget(t);
    t->edit_msg = -1;
    lc_chat_free(t->chat);
    t->chat = c;
    if (c->has_params) {
        t->o->sampling = c->params;
        t->o->n_predict = c->max_tokens;
    }
    params_changed(t);
    chat_restart(t);
    char *own = strdup(j->arg);   /* its next saves go to the same file, unless another
                                     llamachat kept it when it was read: then to a new one */
    if (!own)
        lc_state_unlock_chat(lock);
    bool shared = own && !chat_take_locked(t, own, lock);
    lc_engine_set_conversation(t->engine, c);
    tui_kv_load(t, j->arg);
    t->n_past = -1;
    t->pp_tps = t->gen_tps = -1;
    rebuild_entries(t);
    if (shared) {
        char *line = NULL;
        if (asprintf(&line, "%s is open in another llamachat: this copy goes on in a new file",
                     j->arg) >= 0)
            tui_add_entry(t, E_NOTE, line, strlen(line));
        free(line);
        tui_message(t, false, "opened %zu message%s from %s (open elsewhere: kept in a new file)",
                    c->n, c->n == 1 ? "" : "s", j->arg);
    } else {
        tui_message(t, false, "opened %zu message%s from %s", c->n, c->n == 1 ? "" : "s", j->arg);
    }
}

/* /chats [N]: list the saved chats, or open entry N of the last listing. */
static void cmd_chats(struct tui *t, const char *arg)
{
    if (!saved_chats_on(t))
        return;
    if (!*arg) {
        char *err = NULL, *dir = lc_state_dir("chats", &err);
        if (!dir) {
            tui_message(t, true, "/chats: %s", err ? err : "out of memory");
            free(err);
            return;
        }
        if (job_start(t, chats_run, chats_done, dir, t->chat_path))
            tui_message(t, false, "reading the saved chats ...");
        free(dir);
        return;
    }
    long i = pick(arg, t->chat_list ? t->chat_list->n : 0);
    if (i < 0) {
        if (t->chat_list)
            tui_message(t, true, "/chats %s: no such entry in the last /chats (1 to %zu)", arg, t->chat_list->n);
        else
            tui_message(t, true, "/chats %s: run /chats first to number the chats", arg);
        return;
    }
    const char *path = t->chat_list->paths[i];
    if (t->chat_path && !strcmp(path, t->chat_path)) {
        tui_message(t, false, "chat %s is this one", arg);
        return;
    }
    if (refuse_if_busy(t, "/chats"))
        return;
    if (t->job) {
        tui_message(t, true, "still busy with the last listing; try again in a moment");
        return;
    }
    autosave(t, true);   /* the current one is saved first */
    /* locked before it is read, beside the current chat's lock: a copy read first could be
     * older than the file by the time another llamachat writing it let the lock go */
    char *lerr = NULL;
    int lock = lc_state_lock_chat(path, &lerr);
    if (lock == -1)
        chat_lock_failed(t, lerr);
    free(lerr);
    /* held, and this llamachat's writer has saves or a lock to let go queued: it may be the
     * chat just left, whose lock goes once its last saves are written (chat_take_locked); the
     * job waits for them, then takes the lock itself (another llamachat's lock: refused then,
     * and the chat goes on in a new file as below) */
    bool wait = lock == -2 && t->writer && lc_state_writer_busy(t->writer);
    if (!job_start_waiting(t, open_run, open_done, path, NULL, wait ? t->writer : NULL)) {
        lc_state_unlock_chat(lock);
        return;
    }
    t->open_lock = wait ? -1 : lock;
    tui_message(t, false, "opening %s ...", path);
}

static void *load_run(struct tui_job *j)
{
    test_sleep("LLAMACHAT_TEST_SLOW_MS");   /* (tests) a slow disk, as open_run's */
    if (atomic_load(&j->stop))
        return NULL;
    return lc_chat_load(j->arg, &j->err);
}

/* A /load that failed: "/load PATH" (as the user wrote it) back in the input line, to correct,
 * as a failed /save does; not over a line typed since. */
static void load_line_back(struct tui *t, const char *path)
{
    char *again = NULL;
    if (input_is_empty() && asprintf(&again, "/load %s", path) >= 0)
        input_set_line(t, again);
    free(again);
}

/* /load's file was read (j->arg the path, j->arg2 as the user wrote it): it becomes the
 * conversation, kept in a new file from its next change on. */
static void load_done(struct tui *t, struct tui_job *j)
{
    struct lc_chat *c = j->result;
    if (!c) {
        char *line = NULL;
        const char *err = j->err ? j->err : "?";
        if (asprintf(&line, "load failed: %s", err) >= 0)
            tui_add_entry(t, E_ERROR, line, strlen(line));
        free(line);
        tui_message(t, true, "load failed: %s", err);
        load_line_back(t, j->arg2);
        return;
    }
    /* as open_done: never two chats in one */
    if (t->state != ST_IDLE || lc_engine_busy(t->engine)) {
        tui_message(t, true, "not loaded: the model is busy");
        lc_chat_free(c);
        load_line_back(t, j->arg2);
        return;
    }
    autosave(t, true);   /* the current chat's last changes are kept in its file first */
    regen_forget(t);
    t->edit_msg = -1;
    lc_chat_free(t->chat);
    t->chat = c;
    if (c->has_params) {   /* the parameters in force when it was saved */
        t->o->sampling = c->params;
        t->o->n_predict = c->max_tokens;
    }
    params_changed(t);
    chat_restart(t);   /* kept in a new file from its next change on */
    lc_engine_set_conversation(t->engine, c);
    tui_kv_load(t, j->arg);
    t->n_past = -1;   /* known when the model has read it */
    t->pp_tps = t->gen_tps = -1;
    rebuild_entries(t);
    tui_message(t, false, "loaded %zu message%s from %s", c->n, c->n == 1 ? "" : "s", j->arg2);
}

void library_load(struct tui *t, const char *full, const char *path)
{
    if (t->job) {
        tui_message(t, true, "/load: still busy with the last listing; try again in a moment");
        if (t->cur_line)   /* the line back, for Enter to try again */
            input_restore(t->cur_line);
        return;
    }
    autosave(t, true);   /* the current one is saved first, as /chats N does */
    if (job_start(t, load_run, load_done, full, path))
        tui_message(t, false, "loading %s ...", path);
}

/* /rename TITLE: the title /chats shows, kept in the transcript ("" removes it). */
static void cmd_rename(struct tui *t, const char *arg)
{
    lc_chat_set_title(t->chat, arg);
    chat_touched(t, true);
    if (!*arg)
        tui_message(t, false, "title removed");
    else if (!t->chat_path)
        tui_message(t, false, "title set: %s (saved with the first message)", arg);
    else
        tui_message(t, false, "renamed: %s", arg);
}

/* Delete the saved file at path, and its KV state (path.kv).  Returns true when it is gone. */
static bool delete_file(struct tui *t, const char *path)
{
    /* another chat's file: not while another llamachat keeps it (its next save would bring it
     * back); the lock is held while it goes */
    int lock = -1;
    if (!t->chat_path || strcmp(path, t->chat_path) != 0) {
        char *err = NULL;
        lock = lc_state_lock_chat(path, &err);
        free(err);
        if (lock == -2) {
            tui_message(t, true, "not deleted: another llamachat has it open: %s", path);
            return false;
        }
    }
    if (unlink(path) != 0 && errno != ENOENT) {
        tui_message(t, true, "could not delete %s: %s", path, strerror(errno));
        lc_state_unlock_chat(lock);
        return false;
    }
    lc_state_unlock_chat(lock);
    char *kv = NULL;
    if (asprintf(&kv, "%s.kv", path) >= 0) {
        unlink(kv);
        /* and again after any save of it the engine is still writing */
        if (t->engine)
            lc_engine_delete_state(t->engine, kv);
    }
    free(kv);
    return true;
}

/* /delete, /delete! (the current chat: its file, and a new empty conversation), /delete N,
 * /delete! N (entry N of the last /chats).  Without '!' the line comes back with it, for Enter
 * to confirm. */
static void cmd_delete(struct tui *t, const char *arg, bool force)
{
    if (!saved_chats_on(t))
        return;
    const char *path = NULL;
    if (*arg) {
        long i = pick(arg, t->chat_list ? t->chat_list->n : 0);
        if (i < 0) {
            tui_message(t, true, "/delete %s: %s", arg, t->chat_list ? "no such entry in the last /chats"
                                                                    : "run /chats first to number the chats");
            return;
        }
        path = t->chat_list->paths[i];
    }
    bool current = !path || (t->chat_path && !strcmp(path, t->chat_path));
    if (current && refuse_if_busy(t, "/delete"))
        return;
    if (current && t->writer && lc_state_writer_busy(t->writer)) {
        tui_message(t, true, "the chat is being saved: try again in a moment");
        return;
    }
    if (!force) {
        char *again = NULL;
        if (asprintf(&again, "/delete!%s%s", *arg ? " " : "", arg) >= 0)
            input_restore(again);
        free(again);
        if (current)
            tui_message(t, true, "delete this chat? Enter confirms (/delete!): %s",
                        t->chat_path ? t->chat_path : "not saved yet");
        else
            tui_message(t, true, "delete chat %s? Enter confirms (/delete! %s): %s", arg, arg, path);
        return;
    }
    if (!current) {
        if (delete_file(t, path))
            tui_message(t, false, "deleted %s", path);
        return;
    }
    if (t->chat_path && !delete_file(t, t->chat_path))
        return;
    char *gone = t->chat_path ? strdup(t->chat_path) : NULL;
    regen_forget(t);
    t->edit_msg = -1;
    lc_chat_truncate(t->chat, t->chat->n && t->chat->msgs[0].role == LC_ROLE_SYSTEM ? 1 : 0);
    lc_chat_set_title(t->chat, NULL);
    lc_engine_clear(t->engine);
    t->n_past = -1;
    t->pp_tps = t->gen_tps = -1;
    chat_restart(t);
    rebuild_entries(t);
    tui_message(t, false, "this is a new conversation; deleted %s", gone ? gone : "nothing (not saved yet)");
    free(gone);
}

/* ---------------------------------------------------------------- commands */

bool library_command(struct tui *t, const char *cmd, const char *arg)
{
    if (!strcmp(cmd, "models"))
        cmd_models(t);
    else if (!strcmp(cmd, "model"))
        cmd_model(t, arg);
    else if (!strcmp(cmd, "show")) {
        if (!refuse_if_busy(t, "/show"))
            lc_engine_show(t->engine);
    } else if (!strcmp(cmd, "chats"))
        cmd_chats(t, arg);
    else if (!strcmp(cmd, "rename"))
        cmd_rename(t, arg);
    else if (!strcmp(cmd, "delete") || !strcmp(cmd, "delete!"))
        cmd_delete(t, arg, cmd[6] == '!');
    else
        return false;
    return true;
}

void library_shutdown(struct tui *t)
{
    if (t->job) {
        atomic_store(&t->job->stop, 1);
        pthread_join(t->job->thread, NULL);
        struct tui_job *j = t->job;
        t->job = NULL;
        if (j->run == open_run) {
            lc_chat_free(j->result);
            lc_state_unlock_chat(j->wait_writer ? j->lock : t->open_lock);
            t->open_lock = -1;
        } else if (j->run == load_run) {
            lc_chat_free(j->result);
        } else {
            lc_listing_free(j->result);
        }
        job_free(j);
    }
    lc_listing_free(t->model_list);
    lc_listing_free(t->chat_list);
    t->model_list = t->chat_list = NULL;
}
