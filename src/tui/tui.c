/*
 * tui.c - the chat's main loop: terminal set-up and restore, signals, keys, commands, and the
 * engine's events.
 *
 * One thread (this one) does all terminal work.  It sleeps in poll() on three descriptors: the
 * terminal, the engine's wake-up descriptor and a self-pipe written by signal handlers, so it
 * reacts at once to a key, a token or a signal, and never waits for the engine.  The inference
 * thread and its workers are started with the handled signals blocked, so handlers always run
 * here.  The terminal is restored by endwin() on normal exits and SIGTERM/SIGHUP (which end
 * the loop), and by a raw, async-signal-safe write of the saved terminfo strings plus
 * tcsetattr() in the fatal-signal handler.
 */
#include "internal.h"

#include <errno.h>
#include <fcntl.h>
#include <langinfo.h>
#include <locale.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <term.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#include <readline/history.h>

#include "../cli.h"
#include "../config.h"
#include "../fileutil.h"
#include "../state.h"
#include "../textsafe.h"
#include "keydec.h"
#include "markdown.h"
#include "tui.h"

/* ---------------------------------------------------------------- terminal restore */

static struct termios saved_tio;
static bool have_tio;
static volatile sig_atomic_t curses_on;
static char restore_seq[256];   /* rmcup, cnorm, sgr0, mouse and paste modes off */
static size_t restore_len;
static int sig_pipe[2] = { -1, -1 };

static void add_restore(const char *s)
{
    if (!s || s == (char *)-1)
        return;
    size_t n = strlen(s);
    if (restore_len + n < sizeof(restore_seq)) {
        memcpy(restore_seq + restore_len, s, n);
        restore_len += n;
    }
}

/* Async-signal-safe: only write() and tcsetattr(). */
static void restore_terminal_raw(void)
{
    if (!curses_on)
        return;
    curses_on = 0;
    ssize_t r = write(STDOUT_FILENO, restore_seq, restore_len);
    (void)r;
    if (have_tio)
        tcsetattr(STDIN_FILENO, TCSAFLUSH, &saved_tio);
}

static void on_fatal(int sig)
{
    restore_terminal_raw();
    static const char msg[] = "llamachat: fatal signal; terminal restored\n";
    ssize_t r = write(STDERR_FILENO, msg, sizeof(msg) - 1);
    (void)r;
    signal(sig, SIG_DFL);
    raise(sig);
}

static void on_signal(int sig)
{
    int saved = errno;
    unsigned char c = (unsigned char)sig;
    ssize_t r = write(sig_pipe[1], &c, 1);
    (void)r;
    errno = saved;
}

static void at_exit_restore(void)
{
    if (curses_on) {
        endwin();
        restore_terminal_raw();
    }
}

static const int handled_signals[] = { SIGINT, SIGTERM, SIGHUP, SIGWINCH, SIGTSTP, SIGCONT };
static const int fatal_signals[] = { SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT, SIGQUIT };

static void install_signals(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sigemptyset(&sa.sa_mask);
    sa.sa_handler = on_signal;
    sa.sa_flags = SA_RESTART;
    for (size_t i = 0; i < sizeof(handled_signals) / sizeof(handled_signals[0]); i++)
        sigaction(handled_signals[i], &sa, NULL);
    sa.sa_handler = on_fatal;
    sa.sa_flags = SA_RESETHAND;
    for (size_t i = 0; i < sizeof(fatal_signals) / sizeof(fatal_signals[0]); i++)
        sigaction(fatal_signals[i], &sa, NULL);
    signal(SIGPIPE, SIG_IGN);
}

static void reset_signals(void)
{
    for (size_t i = 0; i < sizeof(handled_signals) / sizeof(handled_signals[0]); i++)
        signal(handled_signals[i], SIG_DFL);
    for (size_t i = 0; i < sizeof(fatal_signals) / sizeof(fatal_signals[0]); i++)
        signal(fatal_signals[i], SIG_DFL);
}

/* ---------------------------------------------------------------- entries */

/* Fill *e (free or zeroed) with a copy of text; false on allocation failure. */
static bool entry_init(struct entry *e, enum entry_kind k, int msg, const char *text, size_t len)
{
    memset(e, 0, sizeof(*e));
    e->kind = k;
    e->msg = msg;
    e->text = malloc(len + 1);
    if (!e->text)
        return false;
    memcpy(e->text, text, len);
    e->text[len] = '\0';
    e->len = len;
    e->cap = len + 1;
    return true;
}

static int add_entry_msg(struct tui *t, enum entry_kind k, int msg, const char *text, size_t len)
{
    if (t->n_entries == t->cap_entries) {
        size_t cap = t->cap_entries ? t->cap_entries * 2 : 32;
        struct entry *e = realloc(t->entries, cap * sizeof(*e));
        if (!e)
            return -1;
        t->entries = e;
        t->cap_entries = cap;
    }
    if (!entry_init(&t->entries[t->n_entries], k, msg, text, len))
        return -1;
    t->dirty = true;
    return (int)t->n_entries++;
}

/* The entry of chat message msg shows its text again (a version chosen). */
static void entry_retext(struct tui *t, int msg)
{
    const struct lc_message *m = &t->chat->msgs[msg];
    for (size_t i = t->n_entries; i-- > 0;)
        if (t->entries[i].msg == msg) {
            enum entry_kind k = t->entries[i].kind;
            entry_free(&t->entries[i]);
            if (!entry_init(&t->entries[i], k, msg, m->text, m->len))
                entry_init(&t->entries[i], k, msg, "", 0);
            break;
        }
    t->dirty = true;
}

/* Remove the entries from the first one of a message >= msg to the end (notes after it too). */
static void drop_entries_from(struct tui *t, int msg)
{
    for (size_t i = 0; i < t->n_entries; i++)
        if (t->entries[i].msg >= msg) {
            for (size_t k = i; k < t->n_entries; k++)
                entry_free(&t->entries[k]);
            t->n_entries = i;
            break;
        }
    t->dirty = true;
}

int tui_add_entry(struct tui *t, enum entry_kind k, const char *text, size_t len)
{
    return add_entry_msg(t, k, -1, text, len);
}

void tui_append_entry(struct tui *t, int i, const char *text, size_t len)
{
    if (i < 0 || (size_t)i >= t->n_entries)
        return;
    struct entry *e = &t->entries[i];
    if (e->len + len + 1 > e->cap) {
        size_t cap = (e->len + len + 1) * 2;
        char *s = realloc(e->text, cap);
        if (!s)
            return;
        e->text = s;
        e->cap = cap;
    }
    memcpy(e->text + e->len, text, len);
    e->len += len;
    e->text[e->len] = '\0';
    t->dirty = true;
}

static void note(struct tui *t, enum entry_kind k, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void note(struct tui *t, enum entry_kind k, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char *s = NULL;
    int n = vasprintf(&s, fmt, ap);
    va_end(ap);
    if (n >= 0)
        tui_add_entry(t, k, s, (size_t)n);
    free(s);
}

enum msg_kind { MSG_NORMAL, MSG_TURN_END, MSG_TRANSIENT };

/* The message line: kind MSG_NORMAL set while a reply or a model load runs is kept for the
 * end of it (message_keep); MSG_TURN_END follows such a message, else replaces the one there;
 * MSG_TRANSIENT (the turn's own: "stopping") is never kept. */
static void message_v(struct tui *t, enum msg_kind kind, bool error, const char *fmt, va_list ap)
{
    char buf[sizeof(t->message)];
    vsnprintf(buf, sizeof(buf), fmt, ap);
    /* one line only */
    for (char *c = buf; *c; c++)
        if (*c == '\n' || *c == '\r' || *c == '\t' || (unsigned char)*c < 0x20)
            *c = ' ';
    if (kind == MSG_TURN_END && t->message_keep && t->message[0]) {
        size_t n = strlen(t->message);
        snprintf(t->message + n, sizeof(t->message) - n, "%s%s", t->ascii_text ? " - " : " \xc2\xb7 ", buf);
        t->message_is_error |= error;
    } else {
        memcpy(t->message, buf, sizeof(buf));
        t->message_is_error = error;
    }
    t->message_keep = kind == MSG_NORMAL && (t->state == ST_READING || t->state == ST_WRITING ||
                                             (t->state == ST_LOADING && t->switching));
    t->dirty = true;
}

void tui_message(struct tui *t, bool error, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    message_v(t, MSG_NORMAL, error, fmt, ap);
    va_end(ap);
}

void tui_turn_message(struct tui *t, bool error, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    message_v(t, MSG_TURN_END, error, fmt, ap);
    va_end(ap);
}

void tui_transient_message(struct tui *t, bool error, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    message_v(t, MSG_TRANSIENT, error, fmt, ap);
    va_end(ap);
}

static void clear_entries(struct tui *t)
{
    for (size_t i = 0; i < t->n_entries; i++)
        entry_free(&t->entries[i]);
    t->n_entries = 0;
    t->reply_entry = -1;
    t->reply_msg = -1;
    t->scroll = 0;
    t->last_total_lines = 0;
}

/* Entries from the conversation (after /load, /clear, /system). */
void rebuild_entries(struct tui *t)
{
    clear_entries(t);
    t->find_entry = -1;   /* the entries of the match are gone */
    for (size_t i = 0; i < t->chat->n; i++) {
        const struct lc_message *m = &t->chat->msgs[i];
        enum entry_kind k = m->role == LC_ROLE_SYSTEM ? E_SYSTEM
                            : m->role == LC_ROLE_USER ? E_USER : E_ASSISTANT;
        add_entry_msg(t, k, (int)i, m->text, m->len);
    }
    t->dirty = true;
}

/* ---------------------------------------------------------------- kept state */

void tui_state_error(struct tui *t, const char *what, const char *err)
{
    note(t, E_ERROR, "%s: %s", what, err);
    tui_message(t, true, "%s: %s", what, err);
    char *all = NULL;
    if (asprintf(&all, "%sllamachat: %s: %s\n", t->state_errors ? t->state_errors : "", what, err) >= 0) {
        free(t->state_errors);
        t->state_errors = all;
    }
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* The clock speeds are measured on: CLOCK_MONOTONIC less the time spent suspended (Ctrl-Z),
 * so that a reply suspended half-way does not show a slow model. */
static double active_s(const struct tui *t)
{
    return now_s() - t->suspended_s;
}

/* A turn starts (a message sent, /regen): its speeds are not known yet. */
static void turn_start(struct tui *t)
{
    t->turn_phase = 1;
    t->ctx_unread = false;
    t->turn_t0 = active_s(t);
    t->turn_susp0 = t->suspended_s;
    t->turn_pp_tokens = 0;
    t->pp_tps = t->gen_tps = -1;
    t->message[0] = '\0';   /* "stopped after ..." of the turn before */
    t->message_keep = false;
}

static bool autosave_on(const struct tui *t)
{
    return t->o->autosave && t->o->history;
}

static bool kv_files_on(const struct tui *t)
{
    return t->o->kv_file && !t->o->remote_url;
}

void tui_kv_save(struct tui *t, const char *transcript)
{
    char *p = NULL;
    if (!kv_files_on(t) || !transcript || t->state != ST_IDLE ||
        asprintf(&p, "%s.kv", transcript) < 0)
        return;
    lc_engine_save_state(t->engine, p);
    free(p);
}

void tui_kv_load(struct tui *t, const char *transcript)
{
    char *p = NULL;
    if (!kv_files_on(t) || !transcript || asprintf(&p, "%s.kv", transcript) < 0)
        return;
    if (lc_engine_load_state(t->engine, p) == 0)
        t->kv_loading = true;   /* until LC_DONE_STATE */
    free(p);
}

/* The conversation changed; urgent (a turn ended, a command): save at the next pass of the
 * loop, else (reply text streaming) at most once a second (less often for a conversation that
 * takes long to make: save_every). */
void chat_touched(struct tui *t, bool urgent)
{
    t->chat_changed = true;
    if (urgent)
        t->save_soon = true;
}

bool chat_take_path(struct tui *t, char *path)
{
    int fd = -1;
    if (path) {
        char *err = NULL;
        fd = lc_state_lock_chat(path, &err);
        if (fd == -1)   /* the chat goes on without it; the saves say why they fail, if they do */
            chat_lock_failed(t, err);
        free(err);
    }
    return chat_take_locked(t, path, fd);
}

static void show_lock_note(struct tui *t)
{
    if (!t->lock_note || !t->ui_ready)
        return;
    tui_add_entry(t, E_ERROR, t->lock_note, strlen(t->lock_note));
    tui_message(t, true, "%s", t->lock_note);
    free(t->lock_note);
    t->lock_note = NULL;
}

void chat_lock_failed(struct tui *t, const char *err)
{
    if (t->lock_warned)
        return;
    t->lock_warned = true;
    if (asprintf(&t->lock_note, "no lock can be made on this chat's file (%s): if another "
                 "llamachat opens it too (--continue, /chats N), each may overwrite the other's "
                 "turns", err ? err : "out of memory") < 0)
        t->lock_note = NULL;
    show_lock_note(t);
}

bool chat_take_locked(struct tui *t, char *path, int fd)
{
    /* the old file's lock goes once its queued saves are written (state.h) */
    lc_state_writer_unlock_after(t->writer, t->chat_lock);
    t->chat_lock = -1;
    free(t->chat_path);
    t->chat_path = NULL;
    if (!path) {
        lc_state_unlock_chat(fd);
        return true;
    }
    if (fd == -2) {
        free(path);
        return false;
    }
    t->chat_lock = fd;
    t->chat_path = path;
    return true;
}

static bool has_user_message(const struct lc_chat *c);

/* A new conversation (/clear, /load): the next save starts a new file. */
void chat_restart(struct tui *t)
{
    t->save_too_big = false;   /* another conversation (or none): measured again */
    t->too_big.chat = NULL;
    /* no reply of this conversation has drawn a seed here yet: the last one drawn was another
     * conversation's (chat_fill_meta would record it as this one's "seed_used", and a greedy
     * reply never replaces it); a chat read from a file keeps the one it recorded, a cleared
     * one (the same lc_chat) has none */
    t->last_seed = LC_SEED_RANDOM;
    if (!has_user_message(t->chat))
        t->chat->seed_used = LC_SEED_RANDOM;
    chat_take_path(t, NULL);
    t->chat_start = time(NULL);
    t->chat_changed = false;
    t->save_soon = false;
}

/* The fields of the transcript that are not messages, as /save writes them. */
static void chat_fill_meta(struct tui *t)
{
    t->chat->params = t->o->sampling;
    t->chat->max_tokens = t->o->n_predict;
    if (t->last_seed != LC_SEED_RANDOM)   /* with seed "random": the one the replies used */
        t->chat->seed_used = t->last_seed;   /* (else the one a reopened file recorded) */
    if (t->model_name[0])
        lc_chat_set_model(t->chat, t->model_name);
    if (t->model_path)
        lc_chat_set_model_path(t->chat, t->model_path);
}

static bool has_user_message(const struct lc_chat *c)
{
    for (size_t i = 0; i < c->n; i++)
        if (c->msgs[i].role == LC_ROLE_USER)
            return true;
    return false;
}

static double save_interval(const struct tui *t)
{
    return t->save_every > 1.0 ? t->save_every : 1.0;
}

/* Milliseconds until a throttled save is due: -1 (none pending) or 0 .. 1000. */
static int autosave_due_ms(const struct tui *t)
{
    if (t->writer && lc_state_writer_busy(t->writer))
        return 50;   /* look again soon for the outcome of the write */
    if (!autosave_on(t) || !t->chat_changed)
        return -1;
    if (t->save_soon)
        return 0;
    double left = t->last_save + save_interval(t) - now_s();
    return left <= 0 ? 0 : (int)(left * 1000.0) + 1;
}

/* A failed write of the writer thread: reported once; the next change tries again. */
static void autosave_check(struct tui *t)
{
    char *err = t->writer ? lc_state_writer_error(t->writer) : NULL;
    if (!err)
        return;
    if (!t->save_failed)
        tui_state_error(t, "could not keep the conversation", err);
    t->save_failed = true;
    t->chat_changed = true;
    free(err);
}

/* LLAMACHAT_TEST_SAVE_LOG=FILE (tests): a line for each autosave that made the transcript's
 * JSON and each one that found it still too large without making it. */
static void save_log(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void save_log(const char *fmt, ...)
{
    const char *p = getenv("LLAMACHAT_TEST_SAVE_LOG");
    FILE *f = p && *p ? fopen(p, "ae") : NULL;
    if (!f)
        return;
    va_list ap;
    va_start(ap, fmt);
    vfprintf(f, fmt, ap);
    va_end(ap);
    fputc('\n', f);
    fclose(f);
}

/* The bytes of every version of m. */
static size_t chat_bytes_of(const struct lc_message *m)
{
    size_t k = m->len;
    for (size_t j = 0; j < m->n_alts; j++)
        k += m->alts[j].len;
    return k;
}

/* The bytes of every version of every message of c (and of /regen's pending one). */
static size_t chat_bytes(const struct lc_chat *c)
{
    size_t k = 0;
    for (size_t i = 0; i < c->n; i++)
        k += chat_bytes_of(&c->msgs[i]);
    return k;
}

/*
 * A conversation found too large to keep (save_too_big) still is, known without making its
 * JSON again.  Either nothing was taken out of it since (lc_chat.cuts) and its messages only
 * grew: each byte added adds at least one to the JSON, and what may have become shorter is a
 * few fields' values and the reply then streaming (its "end"; its U+FFFDs and content_base64,
 * less than 3.4 bytes a byte, once its last character is whole), four bytes a byte; or the least its JSON can take
 * (lc_chat_json_min_len, a pass over the text) is over the limit.
 */
static bool still_too_big(struct tui *t)
{
    if (!t->save_too_big)
        return false;
    const struct lc_chat *c = t->chat;
    size_t max = lc_chat_max_file(), n = c->n + t->regen_pending;
    size_t bytes = chat_bytes(c) + (t->regen_pending ? chat_bytes_of(&t->regen_old) : 0);
    if (c == t->too_big.chat && c->cuts == t->too_big.cuts && n >= t->too_big.n &&
        bytes >= t->too_big.bytes) {
        size_t slack = 4096 + 4 * t->too_big.tail;
        if (t->too_big.len + (bytes - t->too_big.bytes) > max + slack) {
            save_log("still too large: %zu bytes more than %zu", bytes - t->too_big.bytes,
                     t->too_big.len);
            return true;
        }
    }
    if (n > LC_CHAT_MAX_MESSAGES)
        return true;
    size_t least = lc_chat_json_min_len(c);
    if (least > max) {
        save_log("still too large: at least %zu bytes", least);
        return true;
    }
    return false;
}

/*
 * Keep the conversation in chats/START.json when it changed: at once when save_soon or force,
 * else when a second has passed since the last save.  A conversation with no message of the
 * user is not written.  The transcript's JSON is made here and written by the writer thread
 * (state.h: temp file, fsync, rename: the file on disk is always a whole transcript), or here
 * through lc_chat_save when there is no thread; a failure is reported once.
 */
void autosave(struct tui *t, bool force)
{
    autosave_check(t);
    if (!autosave_on(t) || !t->chat_changed)
        return;
    double now = now_s();
    if (!force && !t->save_soon && now - t->last_save < save_interval(t))
        return;
    t->save_soon = false;
    if (!has_user_message(t->chat) && !t->chat_path)
        return;   /* (one kept already is updated: /undo of its only exchange) */
    t->last_save = now;
    char *err = NULL;
    if (t->chat_path && still_too_big(t)) {
        /* known without making its JSON again (0.6 s of this thread at 64 MiB, at each save):
         * nothing is written until something makes it smaller (it was said once, below) */
        t->chat_changed = false;
        return;
    }
    if (!t->chat_path) {
        char *dir = lc_state_dir("chats", &err);
        char *path = dir ? lc_state_new_chat(dir, t->chat_start, &err) : NULL;
        if (path)
            chat_take_path(t, path);   /* a new file: no other llamachat has it */
        free(dir);
    }
    /* a /regen that has written nothing yet: the reply it replaces is kept in the file until
     * the new one has text (it comes back if the new one never does) */
    uint64_t cuts = t->chat->cuts;   /* (the push and pop here change nothing) */
    bool regen_in = t->regen_pending && lc_chat_push(t->chat, &t->regen_old) >= 0;
    size_t bytes = chat_bytes(t->chat);
    size_t tail = t->reply_msg >= 0 && (size_t)t->reply_msg < t->chat->n   /* a reply streaming */
                  ? chat_bytes_of(&t->chat->msgs[t->reply_msg]) : 0;
    if (t->chat_path && t->writer) {
        chat_fill_meta(t);
        char *json = lc_chat_to_json(t->chat);
        if (regen_in)
            lc_chat_pop(t->chat, &t->regen_old);
        t->chat->cuts = cuts;
        save_log("made %zu bytes", json ? strlen(json) : 0);
        t->save_every = 4.0 * (now_s() - now);   /* the UI's time it took, at most a quarter */
        if (json && lc_chat_json_fits(t->chat, strlen(json), t->chat_path, &err) != 0) {
            /* what could not be opened again is not written: the file keeps the last save
             * that fits (chat.h: one limit for the writer and the reader) */
            size_t json_len = strlen(json);
            free(json);
            t->chat_changed = false;   /* the next change tries again (/undo may shrink it) */
            if (!t->save_too_big) {   /* said once, until it fits again */
                tui_state_error(t, "the conversation is no longer kept", err);
                note(t, E_NOTE, "%s keeps it as it was at its last save; /save FILE.md writes all "
                     "of it", t->chat_path);
            }
            t->save_too_big = true;
            t->too_big.chat = t->chat;
            t->too_big.cuts = cuts;
            t->too_big.len = json_len;
            t->too_big.n = t->chat->n + regen_in;
            t->too_big.bytes = bytes;
            t->too_big.tail = tail;
            free(err);
            return;
        }
        if (json && lc_state_writer_put(t->writer, t->chat_path, json, strlen(json)) == 0) {
            t->chat_changed = false;
            t->save_too_big = false;
            tui_kv_save(t, t->chat_path);
            return;
        }
        err = strdup("out of memory");
    } else if (t->chat_path) {
        chat_fill_meta(t);
        int rc = lc_chat_save(t->chat, t->chat_path, LC_CHAT_JSON, &err);
        if (regen_in)
            lc_chat_pop(t->chat, &t->regen_old);
        t->chat->cuts = cuts;
        if (rc == 0) {
            t->chat_changed = false;
            free(err);
            tui_kv_save(t, t->chat_path);
            return;
        }
    } else if (regen_in) {
        lc_chat_pop(t->chat, &t->regen_old);
        t->chat->cuts = cuts;
    }
    if (!t->save_failed)
        tui_state_error(t, "could not keep the conversation", err ? err : "out of memory");
    t->save_failed = true;
    free(err);
}

/* ---------------------------------------------------------------- parameters */

void tui_param_text(const struct tui *t, int idx, char *buf, size_t len)
{
    const struct lc_sampler_params *p = &t->o->sampling;
    switch (idx) {
    case 0: snprintf(buf, len, "%.2f", (double)p->temp); break;
    case 1: if (p->top_k > 0) snprintf(buf, len, "%d", p->top_k); else snprintf(buf, len, "off"); break;
    case 2: snprintf(buf, len, "%.2f", (double)p->top_p); break;
    case 3: snprintf(buf, len, "%.2f", (double)p->min_p); break;
    case 4: snprintf(buf, len, "%.2f", (double)p->repeat_penalty); break;
    case 5: if (p->repeat_last_n >= 0) snprintf(buf, len, "%d", p->repeat_last_n); else snprintf(buf, len, "all"); break;
    case 6: if (t->o->n_predict >= 0) snprintf(buf, len, "%d", t->o->n_predict); else snprintf(buf, len, "none"); break;
    case 7:
        if (p->seed == LC_SEED_RANDOM && t->last_seed != LC_SEED_RANDOM)
            snprintf(buf, len, "%llu", (unsigned long long)t->last_seed);
        else if (p->seed == LC_SEED_RANDOM) snprintf(buf, len, "random");
        else snprintf(buf, len, "%llu", (unsigned long long)p->seed);
        break;
    default: snprintf(buf, len, "?");
    }
}

void params_changed(struct tui *t)
{
    t->chat->params = t->o->sampling;
    t->chat->max_tokens = t->o->n_predict;
    if (t->engine)
        lc_engine_set_params(t->engine, &t->o->sampling, t->o->n_predict);
    chat_touched(t, false);
    t->dirty = true;
}

/* v moved dir steps of hundredths/100, on the grid of that step, within [lo, hi].  Counted in
 * hundredths and divided once, so that 1.00 + 0.05 is the float nearest 1.05 (saved as 1.05),
 * not 1.0500001. */
static float step_float(float v, int dir, int hundredths, float lo, float hi)
{
    long k = lround((double)v * 100.0 / hundredths) + dir;
    float r = (float)((double)(k * hundredths) / 100.0);
    return r < lo ? lo : r > hi ? hi : r;
}

/* top-k: the next value in a scale that grows with it (off, 1, 2, 3, 5, 10, 20, 40 ...). */
static int32_t step_top_k(int32_t k, int dir)
{
    static const int32_t scale[] = { 0, 1, 2, 3, 4, 5, 8, 10, 15, 20, 30, 40, 50, 60, 80, 100,
                                     150, 200, 300, 400, 500, 1000 };
    const int n = (int)(sizeof(scale) / sizeof(scale[0]));
    if (dir > 0) {
        for (int i = 0; i < n; i++)
            if (scale[i] > k)
                return scale[i];
        return k + 1000;
    }
    for (int i = n - 1; i >= 0; i--)
        if (scale[i] < k)
            return scale[i];
    return 0;
}

void tui_param_change(struct tui *t, int idx, int dir)
{
    struct lc_sampler_params *p = &t->o->sampling;
    switch (idx) {
    case 0: p->temp = step_float(p->temp, dir, 5, 0.0f, 5.0f); break;
    case 1: p->top_k = step_top_k(p->top_k, dir); break;
    case 2: p->top_p = step_float(p->top_p, dir, 1, 0.0f, 1.0f); break;
    case 3: p->min_p = step_float(p->min_p, dir, 1, 0.0f, 1.0f); break;
    case 4: p->repeat_penalty = step_float(p->repeat_penalty, dir, 5, 0.05f, 5.0f); break;
    case 5: p->repeat_last_n = p->repeat_last_n + dir * 8 < -1 ? -1 : p->repeat_last_n < 0 && dir > 0 ? 0 : p->repeat_last_n + dir * 8; break;
    case 6: t->o->n_predict = t->o->n_predict < 0 ? (dir > 0 ? 16 : -1)
                              : t->o->n_predict + dir * 16 < 0 ? -1 : t->o->n_predict + dir * 16; break;
    case 7:   /* from random, Right keeps the seed the last reply used (to get it again) */
        if (p->seed == LC_SEED_RANDOM) p->seed = dir < 0 ? LC_SEED_RANDOM
                                                 : t->last_seed != LC_SEED_RANDOM ? t->last_seed : 0;
        else if (p->seed == 0 && dir < 0) p->seed = LC_SEED_RANDOM;
        else p->seed += (uint64_t)(int64_t)dir;
        break;
    default: return;
    }
    params_changed(t);
}

/* /set NAME VALUE: only what the parameter pane shows can change at run time. */
static void cmd_set(struct tui *t, const char *args)
{
    static const struct { const char *alias, *key; } names[] = {
        { "temp", "temp" }, { "temperature", "temp" }, { "top_k", "top_k" }, { "top-k", "top_k" },
        { "top_p", "top_p" }, { "top-p", "top_p" }, { "min_p", "min_p" }, { "min-p", "min_p" },
        { "repeat_penalty", "repeat_penalty" }, { "repeat-penalty", "repeat_penalty" },
        { "repeat_last_n", "repeat_last_n" }, { "repeat-last-n", "repeat_last_n" },
        { "max_tokens", "max_tokens" }, { "max-tokens", "max_tokens" }, { "n_predict", "max_tokens" },
        { "seed", "seed" },
    };
    char name[64] = "", value[128] = "";
    if (sscanf(args, "%63s %127s", name, value) != 2) {
        tui_message(t, true, "usage: /set NAME VALUE (temp, top-k, top-p, min-p, repeat-penalty, repeat-last-n, max-tokens, seed)");
        return;
    }
    const char *key = NULL;
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
        if (strcasecmp(name, names[i].alias) == 0)
            key = names[i].key;
    if (!key) {
        tui_message(t, true, "unknown parameter '%s' (temp, top-k, top-p, min-p, repeat-penalty, repeat-last-n, max-tokens, seed)", name);
        return;
    }
    /* the pane shows "none" for no limit */
    if (strcmp(key, "max_tokens") == 0 && strcasecmp(value, "none") == 0)
        snprintf(value, sizeof value, "-1");
    char *err = NULL;
    if (lc_config_set(t->o, "sampling", key, value, &err) != 0) {
        /* the message the command line and the file give (config.h) */
        tui_message(t, true, "%s", err ? err : "bad value");
        free(err);
        return;
    }
    params_changed(t);
    tui_message(t, false, "%s = %s", name, value);
}

/* ---------------------------------------------------------------- commands */

/* A reply, a model load, or (should the UI's state ever lag the engine's) any command the
 * engine has not finished. */
static bool busy(struct tui *t)
{
    return t->state == ST_READING || t->state == ST_WRITING || t->state == ST_LOADING ||
           lc_engine_busy(t->engine);
}

/* A command or message that cannot run now: say why, and put the line back in the input
 * (nothing typed is lost). */
bool refuse_if_busy(struct tui *t, const char *what)
{
    if (busy(t) || t->state == ST_FAILED || library_opening(t)) {
        if (t->cur_line)
            input_restore(t->cur_line);
    }
    if (library_opening(t)) {   /* meant for the chat being opened, or for this one? */
        tui_message(t, true, "%s: a saved chat is being opened", what);
        return true;
    }
    if (t->state == ST_LOADING) {
        tui_message(t, true, "the model is still loading");
        return true;
    }
    if (t->kv_loading) {
        tui_message(t, true, "%s: the saved context is being read (Esc stops it)", what);
        return true;
    }
    if (busy(t)) {
        tui_message(t, true, "%s: the model is writing (Esc stops it)", what);
        return true;
    }
    if (t->state == ST_FAILED) {
        tui_message(t, true, "no model is loaded");
        return true;
    }
    return false;
}

/* True when the existing file at path is a kept conversation (a .lock beside it: chats/) that
 * another llamachat holds (state.h), so that replacing it would be undone by its next save.
 * This chat's own file is not. */
static bool chat_kept_elsewhere(struct tui *t, const char *path)
{
    char *real = realpath(path, NULL);
    if (!real)
        return false;
    bool held = false;
    char *own = t->chat_path ? realpath(t->chat_path, NULL) : NULL;
    const char *slash = strrchr(real, '/');
    char *lockfile = NULL;
    struct stat st;
    if ((!own || strcmp(own, real) != 0) && slash &&
        asprintf(&lockfile, "%.*s.lock", (int)(slash + 1 - real), real) >= 0 &&
        lstat(lockfile, &st) == 0 && S_ISREG(st.st_mode)) {
        char *err = NULL;
        int fd = lc_state_lock_chat(real, &err);
        held = fd == -2;
        lc_state_unlock_chat(fd);
        free(err);
    }
    free(lockfile);
    free(own);
    free(real);
    return held;
}

/* /save [FILE], /save! FILE (overwrite), Ctrl-S (name NULL).  Without a name the transcript
 * goes to the transcripts directory (state.h: [ui] transcripts, or
 * ~/.local/share/llamachat/transcripts), named by the time; ~ and ~user are expanded; an
 * existing file is not replaced without /save!: the line comes back as "/save! FILE" for Enter
 * to confirm. */
static void do_save(struct tui *t, const char *name, bool force)
{
    bool json_default = t->o->save_format && strcmp(t->o->save_format, "json") == 0;
    char *err = NULL, *path = NULL;
    if (!name || !*name) {
        char *dir = lc_state_data_dir(t->o->transcripts_dir, &err);
        char def[64];
        time_t now = time(NULL);
        struct tm tm;
        localtime_r(&now, &tm);
        strftime(def, sizeof(def), "llamachat-%Y%m%d-%H%M%S", &tm);
        if (dir && asprintf(&path, "%s/%s%s", dir, def, json_default ? ".json" : ".md") < 0)
            path = NULL;
        free(dir);
    } else {
        path = lc_path_expand(name, &err);
        struct stat st;
        /* what cannot be replaced is said at once, not offered to /save! to fail then */
        if (path && stat(path, &st) == 0 && !S_ISREG(st.st_mode)) {
            const char *what = S_ISDIR(st.st_mode) ? "a directory" : S_ISFIFO(st.st_mode) ? "a FIFO"
                               : S_ISCHR(st.st_mode) ? "a character device"
                               : S_ISBLK(st.st_mode) ? "a block device"
                               : S_ISSOCK(st.st_mode) ? "a socket" : "not a regular file";
            tui_message(t, true, "save failed: %s is %s; not saved (give a file name)", path, what);
            char *again = NULL;   /* the line back, to correct the name */
            if (asprintf(&again, "/save%s %s", force ? "!" : "", name) >= 0)
                input_restore(again);
            free(again);
            free(path);
            return;
        }
        if (path && stat(path, &st) == 0 && chat_kept_elsewhere(t, path)) {
            tui_message(t, true, "save refused: another llamachat has this chat open (its next "
                        "save would replace yours); give another name: %s", path);
            char *again = NULL;   /* the line back, to correct the name */
            if (asprintf(&again, "/save%s %s", force ? "!" : "", name) >= 0)
                input_restore(again);
            free(again);
            free(path);
            return;
        }
        if (path && !force && stat(path, &st) == 0) {
            tui_message(t, true, "%s exists: Enter replaces it (/save! %s)", path, name);
            char *again = NULL;
            if (asprintf(&again, "/save! %s", name) >= 0)
                input_restore(again);
            free(again);
            free(path);
            return;
        }
    }
    if (!path) {
        tui_message(t, true, "save failed: %s", err ? err : "out of memory");
        free(err);
        return;
    }
    size_t n = strlen(path);
    enum lc_chat_format fmt = LC_CHAT_AUTO;
    if (!(n > 5 && strcasecmp(path + n - 5, ".json") == 0) && !(n > 3 && strcasecmp(path + n - 3, ".md") == 0))
        fmt = json_default ? LC_CHAT_JSON : LC_CHAT_MARKDOWN;
    chat_fill_meta(t);
    if (lc_chat_save(t->chat, path, fmt, &err) != 0) {
        note(t, E_ERROR, "save failed: %s (the conversation is still here)", err ? err : "?");
        tui_message(t, true, "save failed: %s", err ? err : "?");
        if (name && *name && t->cur_line)   /* the line back, to correct the name */
            input_restore(t->cur_line);
        free(err);
        free(path);
        return;
    }
    tui_message(t, false, "saved %s", path);
    if (fmt == LC_CHAT_JSON || (fmt == LC_CHAT_AUTO && n > 5 && !strcasecmp(path + n - 5, ".json")))
        tui_kv_save(t, path);   /* --resume PATH reads it back */
    free(path);
}

void regen_forget(struct tui *t);

/* /load FILE: the file is read and parsed off the UI thread (library_load), so that a long
 * transcript never stops the screen; commands that would change the conversation wait. */
static void do_load(struct tui *t, const char *path)
{
    if (!path || !*path) {
        tui_message(t, true, "usage: /load FILE.json");
        return;
    }
    if (refuse_if_busy(t, "/load"))
        return;
    char *err = NULL;
    char *full = lc_path_expand(path, &err);
    if (!full) {
        note(t, E_ERROR, "load failed: %s", err ? err : "?");
        tui_message(t, true, "load failed: %s", err ? err : "?");
        if (t->cur_line)   /* the line back to correct, as a failed /save's */
            input_restore(t->cur_line);
        free(err);
        return;
    }
    library_load(t, full, path);
    free(full);
}

static size_t undo_exchange(struct tui *t);
static bool edit_active(const struct tui *t);
static void do_regen(struct tui *t);

static void submit(struct tui *t, const char *text)
{
    if (refuse_if_busy(t, "not sent"))
        return;
    if (edit_active(t) && !strcmp(t->chat->msgs[t->edit_msg].text, text)) {
        /* sent unchanged (Up, Enter): a new reply, the old one kept as a version */
        t->edit_msg = -1;
        t->last_line_sent = true;
        do_regen(t);
        if (t->state == ST_READING)
            tui_transient_message(t, false, "the same message: a new reply (/regen; Alt-Left shows the one before)");
        return;
    }
    if (edit_active(t))   /* /edit: the message replaces its exchange */
        undo_exchange(t);
    t->edit_msg = -1;
    regen_forget(t);
    t->last_line_sent = true;
    int m = lc_chat_add(t->chat, LC_ROLE_USER, text, strlen(text));
    add_entry_msg(t, E_USER, m, text, strlen(text));
    chat_touched(t, true);
    if (lc_engine_submit(t->engine, text) != 0) {
        tui_message(t, true, "out of memory");
        return;
    }
    t->state = ST_READING;
    t->prog_done = t->prog_total = 0;
    t->reply_entry = -1;
    t->reply_msg = -1;
    t->scroll = 0;
    turn_start(t);
}

/* /regen's reply being replaced is not needed any more. */
void regen_forget(struct tui *t)
{
    if (t->regen_pending)
        lc_message_free(&t->regen_old);
    t->regen_pending = false;
}

/* A /regen wrote nothing (stopped at once, an error): the reply it replaced comes back, for the
 * engine too (with its token ids: lc_engine_set_reply). */
static void regen_restore(struct tui *t)
{
    if (!t->regen_pending)
        return;
    t->regen_pending = false;
    int m = lc_chat_push(t->chat, &t->regen_old);
    if (m < 0) {
        lc_message_free(&t->regen_old);
        return;
    }
    const struct lc_message *msg = &t->chat->msgs[m];
    int e = add_entry_msg(t, E_ASSISTANT, m, msg->text, msg->len);
    /* back where it was, right after the message it answers (the turn's notes after it) */
    size_t at = 0;
    for (size_t i = 0; e > 0 && i < (size_t)e; i++)
        if (t->entries[i].msg >= 0 && t->entries[i].msg < m)
            at = i + 1;
    if (e > 0 && at < (size_t)e) {
        struct entry moved = t->entries[e];
        memmove(t->entries + at + 1, t->entries + at, ((size_t)e - at) * sizeof(*t->entries));
        t->entries[at] = moved;
    }
    lc_engine_set_reply(t->engine, msg->text);
    chat_touched(t, true);
}

/* /regen: a new reply to the last message; the one there (and its earlier versions) is kept as
 * versions of the new one (lc_chat_add_versions when its first text arrives). */
static void do_regen(struct tui *t)
{
    if (refuse_if_busy(t, "/regen"))
        return;
    struct lc_chat *c = t->chat;
    t->edit_msg = -1;
    if (c->n && c->msgs[c->n - 1].role == LC_ROLE_ASSISTANT) {
        drop_entries_from(t, (int)c->n - 1);
        regen_forget(t);
        t->regen_pending = lc_chat_pop(c, &t->regen_old) == 0;
        chat_touched(t, true);
    }
    if (!c->n || c->msgs[c->n - 1].role != LC_ROLE_USER) {
        regen_restore(t);
        tui_message(t, true, "nothing to regenerate");
        return;
    }
    if (lc_engine_regen(t->engine) != 0) {
        regen_restore(t);
        tui_message(t, true, "out of memory: the reply before is kept");
        return;
    }
    t->state = ST_READING;
    t->prog_done = t->prog_total = 0;
    turn_start(t);
    t->reply_entry = -1;
    t->reply_msg = -1;
    t->scroll = 0;
    t->dirty = true;
}

/* Index of the last message of the user, or -1. */
static int last_user_msg(const struct lc_chat *c)
{
    for (size_t i = c->n; i-- > 0;)
        if (c->msgs[i].role == LC_ROLE_USER)
            return (int)i;
    return -1;
}

/* Take the last exchange (the last user message and what follows it) out of the conversation,
 * the screen and the engine (whose KV cache is rolled back: lc_engine_undo).  Returns the
 * number of messages removed (0: no message of the user). */
static size_t undo_exchange(struct tui *t)
{
    int lu = last_user_msg(t->chat);
    if (lu < 0)
        return 0;
    size_t n = t->chat->n - (size_t)lu;
    drop_entries_from(t, lu);
    lc_chat_truncate(t->chat, (size_t)lu);
    lc_engine_undo(t->engine);
    regen_forget(t);
    t->edit_msg = -1;
    chat_touched(t, true);
    t->scroll = 0;
    return n;
}

static void do_undo(struct tui *t)
{
    if (refuse_if_busy(t, "/undo"))
        return;
    size_t n = undo_exchange(t);
    if (n == 0)
        tui_message(t, true, "nothing to undo");
    else
        tui_message(t, false, "removed the last exchange (%zu message%s)", n, n == 1 ? "" : "s");
}

/* An /edit (or Up) in progress whose exchange is still the last one. */
static bool edit_active(const struct tui *t)
{
    return t->edit_msg >= 0 && t->edit_n == t->chat->n && (size_t)t->edit_msg < t->chat->n &&
           t->chat->msgs[t->edit_msg].role == LC_ROLE_USER;
}

/* /edit, or Up on an empty line after a reply (now: in a key handler): the last message of the
 * user goes back to the input; sending replaces its exchange (undo_exchange, then the send). */
static void do_edit(struct tui *t, bool now)
{
    if (refuse_if_busy(t, "/edit"))
        return;
    int lu = last_user_msg(t->chat);
    if (lu < 0) {
        tui_message(t, true, "nothing to edit: no message yet");
        return;
    }
    if (now)
        input_set_line(t, t->chat->msgs[lu].text);
    else
        input_restore(t->chat->msgs[lu].text);
    t->edit_msg = lu;
    t->edit_n = t->chat->n;
    tui_message(t, false, "editing your last message: Enter replaces that exchange (Esc: send as a new one)");
}

/* Alt-Left / Alt-Right: show the previous or next version of the last reply (/regen keeps
 * them); the model reads the one shown. */
static void flip_reply(struct tui *t, int dir)
{
    struct lc_chat *c = t->chat;
    if (busy(t)) {
        tui_message(t, true, "the model is writing (Esc stops it)");
        return;
    }
    if (!c->n || c->msgs[c->n - 1].role != LC_ROLE_ASSISTANT || !c->msgs[c->n - 1].n_alts) {
        tui_message(t, true, "the last reply has no other version (/regen writes one)");
        return;
    }
    struct lc_message *m = &c->msgs[c->n - 1];
    size_t n = m->n_alts + 1;
    if ((dir < 0 && m->chosen == 0) || (dir > 0 && m->chosen + 1 == n)) {
        tui_message(t, false, "reply %zu/%zu is the %s", m->chosen + 1, n, dir < 0 ? "first" : "last");
        return;
    }
    lc_chat_choose(c, c->n - 1, dir < 0 ? m->chosen - 1 : m->chosen + 1);
    entry_retext(t, (int)c->n - 1);
    lc_engine_set_reply(t->engine, m->text);
    t->edit_msg = -1;
    t->n_past = -1;   /* the version shown is read with the next message */
    chat_touched(t, true);
    tui_message(t, false, "reply %zu/%zu (Alt-Left, Alt-Right: the others)", m->chosen + 1, n);
}

/* The last fenced code block of text (lines between ``` or ~~~ fences, CommonMark's rules: up
 * to 3 spaces before a fence, a closing fence of the same character at least as long with only
 * spaces after it; a block left open runs to the end): its content at *off, *n bytes, without
 * the newline before the closing fence.  false when there is none. */
static bool last_code_block(const char *text, size_t len, size_t *off, size_t *n)
{
    bool found = false, open = false;
    char fc = 0;
    size_t flen = 0, start = 0;
    for (size_t p = 0; p < len;) {
        size_t e = p, q = p, run = 0;
        while (e < len && text[e] != '\n')
            e++;
        while (q < e && q - p < 3 && text[q] == ' ')
            q++;
        char ch = q < e ? text[q] : 0;
        if (ch == '`' || ch == '~')
            while (q + run < e && text[q + run] == ch)
                run++;
        size_t rest = q + run;
        while (rest < e && (text[rest] == ' ' || text[rest] == '\t'))
            rest++;
        if (!open && run >= 3) {
            open = true;
            fc = ch;
            flen = run;
            start = e < len ? e + 1 : e;
        } else if (open && ch == fc && run >= flen && rest == e) {
            open = false;
            found = true;
            *off = start;
            *n = p > start ? p - 1 - start : 0;
        }
        p = e < len ? e + 1 : e;
    }
    if (open) {
        found = true;
        *off = start;
        *n = len - start;
    }
    return found;
}

/* Put text on the terminal's clipboard with OSC 52 (xterm's "Manipulate Selection Data":
 * ESC ] 52 ; c ; BASE64 BEL), written through curses' own output (putp: in order with the
 * screen's updates, which are flushed by then) and flushed at once.  tmux takes it with `set-clipboard
 * on` (a paste buffer, and the outer terminal's clipboard); over ssh it reaches the local
 * terminal.  false on allocation failure. */
static bool clipboard_copy(const char *text, size_t len)
{
    char *b64 = lc_base64_encode(text, len);
    if (!b64)
        return false;
    putp("\033]52;c;");
    putp(b64);
    putp("\a");
    fflush(stdout);   /* putp writes to stdout's buffer, which refresh() does not flush */
    free(b64);
    return true;
}

/* What /copy puts on the clipboard: text[0..len) without white space at both ends (with trim)
 * and without control characters other than newline and tab (C0, DEL, C1) and bytes that are
 * not valid UTF-8, which could drive the terminal it is pasted into; *dropped counts them.
 * NULL on allocation failure. */
static char *copy_clean(const char *text, size_t len, bool trim, size_t *dropped)
{
    *dropped = 0;
    if (trim) {
        while (len && (*text == ' ' || *text == '\t' || *text == '\n' || *text == '\r')) {
            text++;
            len--;
        }
        while (len && (text[len - 1] == ' ' || text[len - 1] == '\t' || text[len - 1] == '\n' ||
                       text[len - 1] == '\r'))
            len--;
    }
    char *out = malloc(len + 1);
    if (!out)
        return NULL;
    size_t o = 0;
    for (size_t i = 0; i < len;) {
        uint32_t cp = 0;
        size_t k = lc_utf8_decode((const unsigned char *)text + i, len - i, &cp);
        if (k == LC_UTF8_INVALID || k == LC_UTF8_INCOMPLETE) {
            (*dropped)++;
            i++;
            continue;
        }
        if ((cp < 0x20 && cp != '\n' && cp != '\t') || (cp >= 0x7F && cp <= 0x9F))
            (*dropped)++;
        else {
            memcpy(out + o, text + i, k);
            o += k;
        }
        i += k;
    }
    out[o] = '\0';
    return out;
}

/* A reply as /copy takes it: without a complete thinking part while it is folded (/think). */
static void copy_visible_reply(const struct tui *t, const char **text, size_t *len)
{
    size_t body, body_len, rest;
    bool closed;
    if (!t->show_think && md_think_split(*text, *len, &body, &body_len, &rest, &closed) && closed) {
        *text += rest;
        *len -= rest;
    }
}

/* /copy (the last reply), /copy N (the Nth message from the end: 1 = the last, any role),
 * /copy code (the last fenced code block of the last reply): the text as shown (copy_clean). */
static void do_copy(struct tui *t, const char *arg)
{
    const struct lc_chat *c = t->chat;
    const char *text = NULL;
    size_t len = 0;
    char what[96];
    if (!*arg || !strcmp(arg, "code")) {
        int r = -1;
        for (size_t i = c->n; i-- > 0 && r < 0;)
            if (c->msgs[i].role == LC_ROLE_ASSISTANT)
                r = (int)i;
        if (r < 0) {
            tui_message(t, true, "nothing to copy: no reply yet");
            return;
        }
        text = c->msgs[r].text;
        len = c->msgs[r].len;
        copy_visible_reply(t, &text, &len);
        snprintf(what, sizeof(what), "the last reply");
        if (*arg) {
            size_t off = 0;
            if (!last_code_block(text, len, &off, &len)) {
                tui_message(t, true, "no code block (``` fences) in the last reply");
                return;
            }
            text += off;
            snprintf(what, sizeof(what), "the last code block of the last reply");
        }
    } else {
        char *end = NULL;
        long n = strtol(arg, &end, 10);
        if (*end || n < 1) {
            tui_message(t, true, "usage: /copy (last reply), /copy N (Nth message from the end, 1 = last), /copy code");
            return;
        }
        if ((size_t)n > c->n) {
            /* N as typed (strtol says LONG_MAX for 99999999999999999999) */
            tui_message(t, true, "/copy %s: the conversation has %zu message%s", arg, c->n, c->n == 1 ? "" : "s");
            return;
        }
        const struct lc_message *m = &c->msgs[c->n - (size_t)n];
        text = m->text;
        len = m->len;
        if (m->role == LC_ROLE_ASSISTANT)
            copy_visible_reply(t, &text, &len);
        snprintf(what, sizeof(what), "message %ld from the end, %s", n,
                 m->role == LC_ROLE_USER ? "yours" : m->role == LC_ROLE_SYSTEM ? "the system prompt" : "a reply");
    }
    size_t dropped = 0;
    /* a code block keeps its indentation; a message loses the white space around it */
    char *clean = copy_clean(text, len, strcmp(arg, "code") != 0, &dropped);
    if (!clean || !clipboard_copy(clean, strlen(clean))) {
        free(clean);
        tui_message(t, true, "out of memory");
        return;
    }
    size_t chars = 0;
    for (const char *p = clean; *p; p++)
        chars += ((unsigned char)*p & 0xC0) != 0x80;
    free(clean);
    if (dropped)
        tui_message(t, false, "copied %zu character%s (%s; %zu control character%s left out) to the clipboard (OSC 52)",
                    chars, chars == 1 ? "" : "s", what, dropped, dropped == 1 ? "" : "s");
    else
        tui_message(t, false, "copied %zu character%s (%s) to the clipboard (OSC 52)", chars,
                    chars == 1 ? "" : "s", what);
}

static const char *skip_ws(const char *s)
{
    while (*s == ' ' || *s == '\t')
        s++;
    return s;
}

/* Every command, for Tab completion (input.c): a new command goes here too. */
const char *const tui_command_names[] = {
    "help", "quit", "exit", "save", "save!", "load", "clear", "regen", "system", "set", "models",
    "params", "read", "undo", "edit", "copy", "model", "show", "chats", "rename", "delete",
    "delete!", "raw", "think", "find", NULL,
};

static void command(struct tui *t, const char *line)
{
    char cmd[32];
    size_t n = strcspn(line + 1, " \t\n");
    if (n >= sizeof(cmd))
        n = sizeof(cmd) - 1;
    memcpy(cmd, line + 1, n);
    cmd[n] = '\0';
    const char *args = skip_ws(line + 1 + n);
    /* trailing white space of arguments is not part of a file name */
    char arg[4096];
    snprintf(arg, sizeof(arg), "%s", args);
    for (size_t k = strlen(arg); k > 0 && (arg[k - 1] == ' ' || arg[k - 1] == '\n'); k--)
        arg[k - 1] = '\0';
    /* A command without arguments given one ("/undo 3", "/clear history") did its one thing
     * and dropped the rest: /undo 3 took back one exchange, /clear x cleared.  Refused, with
     * the line back to correct. */
    static const char *const no_args[] = { "quit", "exit", "q", "clear", "regen", "undo", "edit",
                                           "raw", "think", "params", "show", "models" };
    for (size_t i = 0; *arg && i < sizeof(no_args) / sizeof(no_args[0]); i++)
        if (!strcmp(cmd, no_args[i])) {
            if (t->cur_line)
                input_restore(t->cur_line);
            tui_message(t, true, "/%s takes no argument (not done): /%s alone", cmd, cmd);
            t->dirty = true;
            return;
        }
    if (!strcmp(cmd, "help") || !strcmp(cmd, "?")) {
        t->show_help = true;
        t->help_scroll = 0;
    } else if (!strcmp(cmd, "quit") || !strcmp(cmd, "exit") || !strcmp(cmd, "q")) {
        t->quit = true;
        t->quit_asked = true;
    } else if (!strcmp(cmd, "save") || !strcmp(cmd, "save!")) {
        do_save(t, arg, cmd[4] == '!');
    } else if (!strcmp(cmd, "load")) {
        do_load(t, arg);
    } else if (!strcmp(cmd, "clear")) {
        if (refuse_if_busy(t, "/clear"))
            return;
        regen_forget(t);
        t->edit_msg = -1;
        lc_chat_truncate(t->chat, t->chat->n && t->chat->msgs[0].role == LC_ROLE_SYSTEM ? 1 : 0);
        lc_chat_set_title(t->chat, NULL);   /* a new conversation: /rename named the old one */
        lc_engine_clear(t->engine);
        t->n_past = -1;   /* known when the model has read the next turn */
        t->pp_tps = t->gen_tps = -1;
        chat_restart(t);   /* the next message starts a new file */
        rebuild_entries(t);
        tui_message(t, false, "conversation cleared");
    } else if (!strcmp(cmd, "regen")) {
        do_regen(t);
    } else if (!strcmp(cmd, "undo")) {
        do_undo(t);
    } else if (!strcmp(cmd, "edit")) {
        do_edit(t, false);
    } else if (!strcmp(cmd, "copy")) {
        do_copy(t, arg);
    } else if (!strcmp(cmd, "system")) {
        if (refuse_if_busy(t, "/system"))
            return;
        t->edit_msg = -1;
        lc_chat_set_system(t->chat, *arg ? arg : NULL);
        lc_engine_set_system(t->engine, arg);
        chat_touched(t, true);
        rebuild_entries(t);
        tui_message(t, false, *arg ? "system prompt set" : "system prompt removed");
    } else if (!strcmp(cmd, "set")) {
        cmd_set(t, arg);
    } else if (!strcmp(cmd, "read")) {
        input_read_file(t, arg);
    } else if (library_command(t, cmd, arg)) {
        /* /model, /models, /show, /chats, /rename, /delete (library.c) */
    } else if (!strcmp(cmd, "raw")) {   /* replies as written, or as Markdown (view.c) */
        t->markdown = !t->markdown;
        tui_message(t, false, t->markdown ? "replies shown as Markdown (/raw: as written)"
                                          : "replies shown as written (/raw: as Markdown)");
    } else if (!strcmp(cmd, "think")) {   /* <think> parts folded or whole (markdown.h) */
        t->show_think = !t->show_think;
        tui_message(t, false, t->show_think ? "thinking shown (/think folds it)"
                                            : "thinking folded (/think shows it)");
    } else if (!strcmp(cmd, "find")) {   /* search the transcript (view.c) */
        view_find(t, arg);
    } else if (!strcmp(cmd, "params")) {
        t->show_params = true;
        char b[8][32];
        for (int i = 0; i < 8; i++)
            tui_param_text(t, i, b[i], sizeof(b[i]));
        tui_message(t, false, "temp %s, top-k %s, top-p %s, min-p %s, repeat-penalty %s, repeat-last-n %s, max-tokens %s, seed %s",
                    b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]);
    } else {
        /* a typo must not cost the typed text: the line comes back for correction */
        if (t->cur_line)
            input_restore(t->cur_line);
        tui_message(t, true, "unknown command /%s (F1 for help; // sends a line starting with /)", cmd);
    }
    t->dirty = true;
}

void tui_line(struct tui *t, char *line)
{
    if (*line) {
        add_history(line);
        input_history_added(t, line);
    }
    t->cur_line = line;
    if (*line)
        t->last_line_sent = false;   /* submit() sets it when the line is sent */
    if (line[0] == '/' && line[1] != '/')
        command(t, line);
    else if (*line)
        submit(t, line[0] == '/' ? line + 1 : line);   /* "//x" sends "/x" */
    t->cur_line = NULL;
    free(line);
}

/* ---------------------------------------------------------------- engine events */

static void give_back_message(struct tui *t);

/* Esc while the model read the message, before any reply: the turn is taken back (from the
 * engine's conversation too) and the message goes back to the input, unless something was
 * typed there meanwhile: then the turn stays (/regen answers it).  Returns true when handled. */
static bool stopped_before_reply(struct tui *t)
{
    struct lc_chat *c = t->chat;
    if (!c->n || c->msgs[c->n - 1].role != LC_ROLE_USER)
        return false;
    if (!input_is_empty()) {
        tui_turn_message(t, false, "stopped before the reply: /regen answers the message");
        return true;
    }
    give_back_message(t);
    lc_engine_set_conversation(t->engine, c);   /* the cache is kept by token prefix */
    chat_touched(t, true);
    tui_turn_message(t, false, "stopped before the reply: the message is back in the input");
    return true;
}

static void dispatch_event(struct tui *t, const struct lc_event *ev, const char *text, size_t len)
{
    switch (ev->type) {
    case LC_EV_INFO:
        if (!strncmp(text, "isa=", 4))
            snprintf(t->isa, sizeof(t->isa), "%s", text + 4);
        else if (!strncmp(text, "template=", 9)) {
            snprintf(t->template_name, sizeof(t->template_name), "%s", text + 9);
            t->plain = !strcmp(t->template_name, "plain");
            view_invalidate(t);
        }
        else if (!strncmp(text, "name=", 5))
            snprintf(t->model_name, sizeof(t->model_name), "%s", text + 5);
        else if (!strcmp(text, "seed=none"))   /* greedy: the reply uses no seed */
            t->last_seed = LC_SEED_RANDOM;
        else if (!strncmp(text, "seed=", 5))
            t->last_seed = strtoull(text + 5, NULL, 10);
        else if (!strncmp(text, "threads=", 8))
            t->n_threads = atoi(text + 8);
        break;
    case LC_EV_LOADED:
        snprintf(t->model_desc, sizeof(t->model_desc), "%.*s", (int)len, text);
        lc_chat_set_model(t->chat, t->model_name);
        if (t->switching)   /* loading until the switch's DONE (library_switch_done says so) */
            break;
        t->state = ST_IDLE;
        if (t->state_errors && t->message_is_error)
            break;   /* a failure to keep state stays on the message line */
        if (!strcmp(t->template_name, "plain"))
            tui_message(t, false, "%s: a base model; it continues your text. F1: help", t->model_name);
        else
            tui_message(t, false, "%s (%s chat template). F1: help", t->model_name, t->template_name);
        break;
    case LC_EV_TEXT:
        if (t->reply_entry < 0) {
            t->reply_msg = lc_chat_add(t->chat, LC_ROLE_ASSISTANT, "", 0);
            if (t->reply_msg >= 0)   /* saved so while it streams (chat.h "end") */
                t->chat->msgs[t->reply_msg].end = LC_END_PARTIAL;
            t->reply_entry = add_entry_msg(t, E_ASSISTANT, t->reply_msg, "", 0);
            if (t->reply_entry >= 0)
                t->entries[t->reply_entry].open = true;
            if (t->regen_pending && t->reply_msg >= 0 &&   /* /regen: the replies before */
                lc_chat_add_versions(t->chat, (size_t)t->reply_msg, &t->regen_old) == 0)
                t->regen_pending = false;
            regen_forget(t);
        }
        tui_append_entry(t, t->reply_entry, text, len);
        if (t->reply_msg >= 0)
            lc_chat_append(t->chat, (size_t)t->reply_msg, text, len);
        chat_touched(t, false);   /* kept about once a second while it streams */
        t->state = ST_WRITING;
        break;
    case LC_EV_PROGRESS:
        if (t->state != ST_WRITING)
            t->state = ST_READING;
        t->prog_done = ev->a;
        t->prog_total = ev->b;
        if (t->turn_phase == 1)
            t->turn_pp_tokens = ev->b;
        break;
    case LC_EV_STATS: {
        /* the engine's figures are averages over the session, on a clock that runs while the
         * process is stopped: the speeds of the turn are measured here instead */
        t->n_ctx = ev->b;
        if (t->ctx_unread && t->turn_phase == 0)   /* the model has not read the chat yet */
            break;
        t->n_past = ev->a;
        double now = active_s(t);
        if (t->turn_phase == 1) {   /* the first figures of a turn: the prompt is read */
            t->turn_phase = 2;
            t->turn_pp_end = now;
            t->turn_n_past_pp = ev->a;
            if (t->turn_pp_tokens > 0 && now > t->turn_t0)
                t->pp_tps = t->turn_pp_tokens / (now - t->turn_t0);
        } else if (t->turn_phase == 2 && ev->a > t->turn_n_past_pp && now > t->turn_pp_end + 0.25) {
            /* a running figure once a quarter of a second has passed: events can reach us
             * in one batch, and over a few milliseconds their arrival times say nothing (a
             * tiny model's 8 tokens showed as 2.7 million t/s and pushed the model's name off
             * an 80-column status bar) */
            t->gen_tps = (ev->a - t->turn_n_past_pp) / (now - t->turn_pp_end);
        }
        break;
    }
    case LC_EV_DONE:
        if (t->switching) {
            library_switch_done(t, ev->a);
            break;
        }
        if (t->state != ST_FAILED)
            t->state = ST_IDLE;
        if (ev->a == LC_DONE_STATE) {   /* the KV state of a reopened chat was read */
            t->kv_loading = false;
            if (ev->b > 0) {
                t->ctx_unread = false;
                t->n_past = ev->b;
            }
            break;
        }
        /* the generation speed of the turn: the engine's time in decode calls (events may reach
         * us in one batch, so their arrival times say nothing), less any time suspended */
        if (t->turn_phase == 2 && ev->b > 0) {
            double secs = ev->y - (t->suspended_s - t->turn_susp0);
            /* a remote reply under a millisecond (it came in one piece) says nothing: the
             * speed shown keeps what it had; the local engine's clock is good to microseconds
             * (a tiny model decodes 8 tokens in well under a millisecond) */
            if (secs >= (t->o->remote_url ? 1e-3 : 1e-6))   /* the last token sampled is not decoded */
                t->gen_tps = (ev->b > 1 ? ev->b - 1 : 1) / secs;
        }
        t->turn_phase = 0;
        if (t->reply_entry < 0 && t->regen_pending && ev->a != LC_DONE_TOO_LONG) {
            regen_restore(t);   /* /regen wrote nothing: the reply before stays */
            tui_turn_message(t, false, "no new reply: the one before is kept");
            break;
        }
        regen_forget(t);
        if (ev->a == LC_DONE_STOPPED && t->reply_entry < 0 && stopped_before_reply(t))
            break;
        if (ev->a == LC_DONE_STOPPED)
            tui_turn_message(t, false, "stopped after %d tokens", ev->b);
        if (ev->a == LC_DONE_LIMIT && t->o->n_predict >= 0 && ev->b >= t->o->n_predict)
            tui_turn_message(t, false, "max tokens reached (%d): /set max-tokens N for longer replies",
                             ev->b);
        if (t->reply_msg >= 0)   /* how the reply ended, kept with it (chat.h "end") */
            t->chat->msgs[t->reply_msg].end = ev->a == LC_DONE_STOPPED ? LC_END_STOPPED
                                              : ev->a == LC_DONE_LIMIT ? LC_END_LENGTH
                                              : ev->a == LC_DONE_CONTEXT ? LC_END_CONTEXT
                                              : ev->a == LC_DONE_ERROR ? LC_END_ERROR
                                              : LC_END_COMPLETE;
        if (t->reply_entry >= 0) {   /* a trailing incomplete character is shown now */
            t->entries[t->reply_entry].open = false;
            t->entries[t->reply_entry].wrap_width = 0;
        }
        if (ev->a == LC_DONE_TOO_LONG)
            give_back_message(t);
        chat_touched(t, true);   /* a turn ended: kept now */
        if (t->reply_msg >= 0 && t->chat->msgs[t->reply_msg].n_alts && !t->message[0])
            tui_turn_message(t, false, "reply %zu/%zu: Alt-Left, Alt-Right show the others",
                             t->chat->msgs[t->reply_msg].chosen + 1, t->chat->msgs[t->reply_msg].n_alts + 1);
        t->reply_entry = -1;
        t->reply_msg = -1;
        break;
    case LC_EV_NOTE:
        tui_add_entry(t, E_NOTE, text, len);
        break;
    case LC_EV_ERROR:
        tui_add_entry(t, E_ERROR, text, len);
        tui_message(t, true, "%.*s", (int)len, text);
        if (t->state == ST_LOADING && !t->switching) {
            /* nothing to chat with: close the screen and say why (exit status 1, as -p does) */
            t->state = ST_FAILED;
            free(t->fatal);
            t->fatal = strndup(text, len);
            t->quit = true;
            t->exit_status = 1;
        }
        break;
    default:
        break;
    }
    t->dirty = true;
}

/* The engine refused the last user message (too long for the context): take it out of the
 * transcript and put it back in the input line, so that nothing typed is lost. */
static void give_back_message(struct tui *t)
{
    struct lc_chat *c = t->chat;
    if (!c->n || c->msgs[c->n - 1].role != LC_ROLE_USER)
        return;
    int m = (int)c->n - 1;
    for (size_t i = t->n_entries; i-- > 0;)
        if (t->entries[i].msg == m) {
            entry_free(&t->entries[i]);
            memmove(t->entries + i, t->entries + i + 1, (t->n_entries - i - 1) * sizeof(*t->entries));
            t->n_entries--;
            break;
        }
    input_set_line(t, c->msgs[m].text);
    lc_chat_truncate(c, (size_t)m);
}

static void drain_events(struct tui *t)
{
    struct lc_event ev;
    while (lc_engine_poll(t->engine, &ev)) {
        if (ev.type == LC_EV_TEXT) {   /* reply text streams straight through */
            dispatch_event(t, &ev, ev.text, ev.len);
            continue;
        }
        if (t->ev_len + ev.len + 1 > t->ev_cap) {
            size_t cap = (t->ev_len + ev.len + 1) * 2;
            char *s = realloc(t->ev_text, cap);
            if (!s)
                continue;
            t->ev_text = s;
            t->ev_cap = cap;
        }
        memcpy(t->ev_text + t->ev_len, ev.text, ev.len);
        t->ev_len += ev.len;
        t->ev_text[t->ev_len] = '\0';
        if (ev.more)
            continue;
        dispatch_event(t, &ev, t->ev_text, t->ev_len);
        t->ev_len = 0;
    }
}

/* ---------------------------------------------------------------- keys */

static void stop_reply(struct tui *t)
{
    if (busy(t) && (t->state != ST_LOADING || t->switching)) {   /* a switch can be cancelled */
        lc_engine_stop(t->engine);
        tui_transient_message(t, false, "stopping");
    }
}

static void scroll_by(struct tui *t, int n)
{
    t->scroll += n;
    if (t->scroll < 0)
        t->scroll = 0;
    t->dirty = true;
}

/* Back to a size that shows the chat after Enter was held (too_small_key): say so. */
static void note_held_enter(struct tui *t)
{
    if (!t->enter_held_note || view_too_small())
        return;
    t->enter_held = false;
    t->enter_held_note = false;
    tui_message(t, false, "Enter while the terminal was too small: the message was kept, not sent; "
                "Enter sends it");
}

static void handle_resize(struct tui *t)
{
    struct winsize ws;
    if (ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_row > 0 && ws.ws_col > 0)
        resizeterm(ws.ws_row, ws.ws_col);
    view_invalidate(t);
    clearok(curscr, TRUE);
    t->dirty = true;
    note_held_enter(t);
}

void tui_release_terminal(struct tui *t)
{
    (void)t;
    endwin();
    restore_terminal_raw();
}

void tui_reclaim_terminal(struct tui *t)
{
    curses_on = 1;
    fputs("\033[?2004h", stdout);
    fflush(stdout);
    reset_prog_mode();
    handle_resize(t);
}

/* Ctrl-Z / SIGTSTP: give the terminal back, stop, and redraw everything when continued. */
static void suspend(struct tui *t)
{
    tui_release_terminal(t);
    double t0 = now_s();
    kill(0, SIGSTOP);   /* the whole job, as a shell's Ctrl-Z, so the shell sees it stopped */
    /* continued */
    t->suspended_s += now_s() - t0;
    tui_reclaim_terminal(t);
}

/* Enter (or a digit) on the parameter pane: the input gets "/set NAME VALUE" with the current
 * value, or with the digit typed, for the user to edit and send. */
static void edit_param(struct tui *t, const char *typed)
{
    char val[32], *line = NULL;
    if (!typed)
        tui_param_text(t, t->param_sel, val, sizeof(val));
    if (t->param_sel == 7 && !typed && t->o->sampling.seed == LC_SEED_RANDOM)
        snprintf(val, sizeof(val), "random");
    if (asprintf(&line, "/set %s %s", view_param_name(t->param_sel), typed ? typed : val) >= 0)
        input_set_line(t, line);
    free(line);
    t->focus = FOCUS_INPUT;
    t->dirty = true;
}

/* Tab, Shift-Tab: the focus to the parameter pane (shown) or back to the input.  A pane the
 * terminal has no room for (below VIEW_PANE_MIN_COLS columns) is hidden: it takes no focus,
 * so that the arrows never change values nobody sees; the message line says so. */
static void toggle_pane_focus(struct tui *t)
{
    t->dirty = true;
    if (t->focus == FOCUS_INPUT && !view_pane_fits(t)) {
        tui_message(t, true, "pane needs %d columns; try /params, /set", VIEW_PANE_MIN_COLS);
        return;
    }
    t->focus = t->focus == FOCUS_INPUT ? FOCUS_PARAMS : FOCUS_INPUT;
    t->show_params = true;
}

static void handle_key(struct tui *t, int r, wint_t ch)
{
    bool code = r == KEY_CODE_YES;
    int page = view_transcript_height() - 1;
    if (page < 1)
        page = 1;
    if (code && ch == KEY_RESIZE) {   /* queued by resizeterm(): the size is already set */
        view_invalidate(t);
        t->dirty = true;
        note_held_enter(t);
        return;
    }
    if (t->show_help) {   /* the arrows and pages scroll it; any other key closes the help */
        int page_h = LINES - 2 > 1 ? LINES - 2 : 1;
        if (code && (ch == KEY_UP || ch == KEY_DOWN || ch == KEY_PPAGE || ch == KEY_NPAGE)) {
            t->help_scroll += ch == KEY_UP ? -1 : ch == KEY_DOWN ? 1 : ch == KEY_PPAGE ? -page_h : page_h;
            if (t->help_scroll < 0)
                t->help_scroll = 0;   /* the end is clamped when drawn */
        } else {
            t->show_help = false;
        }
        t->dirty = true;
        return;
    }
    if (code) {
        const char *name = keyname((int)ch);
        switch (ch) {
        case KEY_F(1): t->show_help = true; t->help_scroll = 0; t->dirty = true; return;
        case KEY_F(2):
            t->show_params = !t->show_params;
            if (!t->show_params)
                t->focus = FOCUS_INPUT;
            else if (COLS < VIEW_PANE_MIN_COLS)
                tui_message(t, true, "pane needs %d columns; try /params", VIEW_PANE_MIN_COLS);
            t->dirty = true;
            return;
        case KEY_PPAGE: scroll_by(t, page); return;
        case KEY_NPAGE: scroll_by(t, -page); return;
        case KEY_BTAB:
            toggle_pane_focus(t);
            return;
        case KEY_MOUSE: {
            MEVENT me;
            if (getmouse(&me) == OK) {
                if (me.bstate & BUTTON4_PRESSED)
                    scroll_by(t, 3);
#ifdef BUTTON5_PRESSED
                else if (me.bstate & BUTTON5_PRESSED)
                    scroll_by(t, -3);
#endif
            }
            return;
        }
        default: break;
        }
        if (name && (!strcmp(name, "kHOM5") || !strcmp(name, "kHOM3"))) {
            scroll_by(t, 1 << 28);
            return;
        }
        if (name && (!strcmp(name, "kEND5") || !strcmp(name, "kEND3"))) {
            t->scroll = 0;
            t->dirty = true;
            return;
        }
        if (t->focus == FOCUS_PARAMS) {
            int n = view_param_count();
            switch (ch) {
            case KEY_UP: t->param_sel = (t->param_sel + n - 1) % n; break;
            case KEY_DOWN: t->param_sel = (t->param_sel + 1) % n; break;
            case KEY_LEFT: tui_param_change(t, t->param_sel, -1); break;
            case KEY_RIGHT: tui_param_change(t, t->param_sel, +1); break;
            case KEY_ENTER: edit_param(t, NULL); break;
            case KEY_BACKSPACE: case KEY_DC: case KEY_HOME: case KEY_END:
                /* editing keys: back to the input line, with the key (as a typed character) */
                t->focus = FOCUS_INPUT;
                t->dirty = true;
                input_key(t, 1, ch);
                return;
            default: break;
            }
            t->dirty = true;
            return;
        }
        if (name && (!strcmp(name, "kLFT3") || !strcmp(name, "kRIT3"))) {   /* Alt-Left/Right */
            flip_reply(t, !strcmp(name, "kLFT3") ? -1 : 1);
            return;
        }
        if (ch == KEY_UP && input_is_empty() && !busy(t) && t->chat->n && t->last_line_sent &&
            t->chat->msgs[t->chat->n - 1].role == LC_ROLE_ASSISTANT) {
            /* Up right after a reply to the line just sent: that message, to change (after a
             * command, or in a chat just opened, Up is readline's history) */
            do_edit(t, true);
            return;
        }
        if ((ch == KEY_UP || ch == KEY_DOWN) && t->edit_msg >= 0 &&
            !input_line_moves(ch == KEY_UP ? -1 : 1)) {
            t->edit_msg = -1;   /* readline's history from here: what is sent is a new message */
            tui_message(t, false, "edit cancelled: history");
        }
        if ((ch == KEY_HOME || ch == KEY_END) && input_is_empty()) {
            if (ch == KEY_HOME)
                scroll_by(t, 1 << 28);
            else
                t->scroll = 0;
            t->dirty = true;
            return;
        }
        input_key(t, 1, ch);
        return;
    }
    switch (ch) {
    case 3:   /* Ctrl-C */
        if (busy(t))
            stop_reply(t);
        else
            tui_message(t, false, "Ctrl-D on an empty line or /quit exits");
        return;
    case 7:   /* Ctrl-G: the message in $EDITOR (readline's abort in Ctrl-R search) */
        if (t->focus == FOCUS_INPUT && input_ctrl_g(t))
            return;
        break;
    case '\t':   /* completes a command line; else the parameter pane */
        if (t->focus == FOCUS_INPUT && input_completes())
            break;
        toggle_pane_focus(t);
        return;
    case 26:  /* Ctrl-Z */
        suspend(t);
        return;
    case 19:  /* Ctrl-S */
        do_save(t, NULL, false);
        return;
    case 12:  /* Ctrl-L */
        clearok(curscr, TRUE);
        view_invalidate(t);
        t->dirty = true;
        return;
    default:
        break;
    }
    if (t->focus == FOCUS_PARAMS) {
        /* + and - change the selected value (as the arrows do); letters are not keys here */
        if (ch == '+' || ch == '=')
            tui_param_change(t, t->param_sel, +1);
        else if (ch == '-')
            tui_param_change(t, t->param_sel, -1);
        else if (ch == '\r' || ch == '\n')
            edit_param(t, NULL);
        else if ((ch >= '0' && ch <= '9') || ch == '.') {
            char c[2] = { (char)ch, 0 };
            edit_param(t, c);
        } else {
            /* any other character or control key (Ctrl-D, Ctrl-W, Backspace, Ctrl-R...): the
             * user is at the message; it goes to the input, which does what it does there */
            t->focus = FOCUS_INPUT;
            t->dirty = true;
            input_key(t, 0, ch);
            return;
        }
        t->dirty = true;
        return;
    }
    input_key(t, 0, ch);
}

/* Esc alone: leaves the parameter pane, stops a reply, closes the help; in vi editing (from
 * ~/.inputrc) and otherwise idle it is vi's command mode.  It never edits the message. */
static void handle_esc(struct tui *t)
{
    if (t->show_help) {
        t->show_help = false;
        t->dirty = true;
    } else if (t->focus == FOCUS_PARAMS) {
        t->focus = FOCUS_INPUT;
        t->dirty = true;
    } else if (busy(t)) {
        stop_reply(t);
    } else if (t->edit_msg >= 0 && !input_vi_mode()) {
        t->edit_msg = -1;   /* the line stays, as a new message */
        tui_message(t, false, "edit cancelled: Enter sends the line as a new message");
    } else if (input_vi_mode()) {
        input_key(t, 0, 27);
    }
}

/* A key from the decoder (keydec.h). */
/*
 * A key while the terminal is too small to show anything (view_too_small): what is typed still
 * goes to the input line (readline), unseen, so that nothing typed is lost; it is there after
 * the resize.  Enter does not send a line nobody could read: it is held, and the next key typed
 * starts a new line of the message (Enter, more text, Enter: a two-line message); after the
 * resize the message line says so.  Esc stops the model (or leaves the pane), Ctrl-C stops it,
 * Ctrl-Z suspends, Ctrl-D on an empty line quits; the other keys act as usual with the input
 * line having the focus, except those that only act on what is shown (F1, F2, the pages, Tab
 * to the pane, the mouse): they do nothing.
 */
static void too_small_key(struct tui *t, const struct lc_key *k)
{
    bool enter = (k->type == LC_KEY_CHAR && (k->ch == '\r' || k->ch == '\n')) ||
                 (k->type == LC_KEY_CODE && k->ch == KEY_ENTER);
    if (k->type == LC_KEY_ESC) {
        handle_esc(t);
        return;
    }
    if (k->type == LC_KEY_CODE && k->ch == KEY_RESIZE) {
        handle_key(t, KEY_CODE_YES, (wint_t)k->ch);
        return;
    }
    if (k->type == LC_KEY_CHAR && (k->ch == 3 || k->ch == 26 || k->ch == 19 || k->ch == 12)) {
        handle_key(t, OK, (wint_t)k->ch);   /* Ctrl-C, Ctrl-Z, Ctrl-S, Ctrl-L: not text */
        return;
    }
    if (k->type == LC_KEY_CHAR && k->ch == '\t' && !input_completes())
        return;   /* the pane's key: nothing to complete */
    if (k->type == LC_KEY_CODE &&
        (k->ch == KEY_F(1) || k->ch == KEY_F(2) || k->ch == KEY_PPAGE || k->ch == KEY_NPAGE ||
         k->ch == KEY_BTAB || k->ch == KEY_MOUSE))
        return;
    if (enter) {
        if (!input_is_empty() || t->enter_held)
            t->enter_held = t->enter_held_note = true;
        return;
    }
    t->show_help = false;
    t->focus = FOCUS_INPUT;
    t->dirty = true;
    if (t->enter_held) {   /* the Enter held before this key: a new line of the message */
        t->enter_held = false;
        input_alt(t, '\r');   /* Alt-Enter */
    }
    switch (k->type) {   /* as usual, the input line having the focus */
    case LC_KEY_CHAR: handle_key(t, OK, (wint_t)k->ch); break;
    case LC_KEY_CODE: handle_key(t, KEY_CODE_YES, (wint_t)k->ch); break;
    case LC_KEY_ALT: input_alt(t, (wint_t)k->ch); break;
    case LC_KEY_SEQ: input_seq(t, k->text, k->len); break;
    case LC_KEY_PASTE:
        input_paste(t, k->text, k->len);
        if (k->dropped)
            tui_message(t, true, "paste too long: the last %zu bytes were left out (limit %zu)",
                        k->dropped, LC_KEYDEC_PASTE_MAX);
        break;
    case LC_KEY_ESC: break;
    }
}

/* A key from the decoder (keydec.h). */
static void on_key(void *ud, const struct lc_key *k)
{
    struct tui *t = ud;
    if (t->quit)
        return;
    if (t->focus == FOCUS_PARAMS && !view_pane_fits(t)) {
        t->focus = FOCUS_INPUT;   /* the pane was hidden (a narrower terminal): keys go to the input */
        t->dirty = true;
    }
    if (view_too_small()) {
        too_small_key(t, k);
        return;
    }
    t->enter_held = false;
    note_held_enter(t);
    switch (k->type) {
    case LC_KEY_CHAR:
        handle_key(t, OK, (wint_t)k->ch);
        break;
    case LC_KEY_CODE:
        handle_key(t, KEY_CODE_YES, (wint_t)k->ch);
        break;
    case LC_KEY_ESC:
        handle_esc(t);
        break;
    case LC_KEY_ALT:
        if (t->show_help) {
            t->show_help = false;
            t->dirty = true;
        } else if (t->focus == FOCUS_INPUT) {
            input_alt(t, (wint_t)k->ch);
        }
        break;
    case LC_KEY_SEQ:
        if (t->show_help) {
            t->show_help = false;
            t->dirty = true;
        } else if (k->len == 6 && (!memcmp(k->text, "\033[1;3D", 6) || !memcmp(k->text, "\033[1;3C", 6))) {
            flip_reply(t, k->text[5] == 'D' ? -1 : 1);   /* Alt-Left/Right (xterm) not in terminfo */
        } else if (t->focus == FOCUS_INPUT) {
            input_seq(t, k->text, k->len);
        }
        break;
    case LC_KEY_PASTE:
        t->show_help = false;
        t->focus = FOCUS_INPUT;
        input_paste(t, k->text, k->len);
        if (k->dropped)
            tui_message(t, true, "paste too long: the last %zu bytes were left out (limit %zu)",
                        k->dropped, LC_KEYDEC_PASTE_MAX);
        break;
    }
}

static struct lc_keydec keydec;

/* Every byte the terminal has now, through the decoder; never waits (nodelay: wgetch only
 * waits ESCDELAY after an Esc for the rest of a sequence).  utf8_timeout: input has paused
 * with a character incomplete: it is invalid. */
static void read_keys(struct tui *t, bool utf8_timeout)
{
    int c;
    size_t invalid = keydec.n_invalid;
    while (!t->quit && (c = wgetch(stdscr)) != ERR)
        lc_keydec_feed(&keydec, c);
    lc_keydec_flush(&keydec, utf8_timeout);
    if (keydec.n_invalid > invalid)
        tui_message(t, true, "%zu invalid UTF-8 byte sequence%s replaced with U+FFFD",
                    keydec.n_invalid - invalid, keydec.n_invalid - invalid == 1 ? "" : "s");
}

/*
 * On the way out, a conversation with at least one message of the user is kept in
 * ~/.local/state/llamachat/last-chat.json (overwritten each time), so that quitting by mistake
 * loses nothing; one line on stderr says where and how to continue it.
 */
/* "STATE/last-chat.json[.kv]" (malloc'd), or NULL with *err */
static char *last_chat_path(bool kv, char **err)
{
    char *dir = lc_state_dir(NULL, err), *path = NULL;
    if (dir && asprintf(&path, "%s/last-chat.json%s", dir, kv ? ".kv" : "") < 0)
        path = NULL;
    free(dir);
    return path;
}

/* True when the KV state of last-chat.json is its chats/ file's (kept current after each turn),
 * linked by keep_conversation; else the engine writes it as it quits (keep_kv_state). */
static bool last_kv_linked(const struct tui *t)
{
    return t->chat_path && autosave_on(t);
}

/*
 * Before the engine quits: a conversation that last-chat.json will keep and whose state is not
 * kept current in chats/ (no file there, or [chat] autosave = off) gets its KV state written as
 * last-chat.json.kv (the engine writes queued saves as it quits: through a temporary file and a
 * rename, so a link to an older one is not touched), so that --resume of it is instant too.
 * Nothing is removed first: when the engine has nothing new to write (the same cache it read
 * from that file, a quit while reading it) the file there is still the conversation's.
 */
static void keep_kv_state(struct tui *t)
{
    if (t->fatal || !t->engine || !t->o->history || !kv_files_on(t) ||
        !has_user_message(t->chat) || last_kv_linked(t))
        return;
    char *err = NULL, *kv = last_chat_path(true, &err);
    if (kv)
        lc_engine_save_state(t->engine, kv);
    free(kv);
    free(err);
}

/* The conversation as it is kept at exit, with the truth about a turn still running: a /regen
 * that has written nothing yet gives the reply it was replacing back (never lost at exit); a
 * reply still being written when the user quit (/quit, Ctrl-D) ends "stopped", as Esc would
 * have (a signal or a lost terminal leaves it "partial": llamachat ended under it). */
static void chat_at_exit(struct tui *t)
{
    if (t->regen_pending) {
        t->regen_pending = false;
        if (lc_chat_push(t->chat, &t->regen_old) >= 0)
            chat_touched(t, true);
        else
            lc_message_free(&t->regen_old);
    }
    if (t->quit_asked && t->reply_msg >= 0 && (size_t)t->reply_msg < t->chat->n &&
        t->chat->msgs[t->reply_msg].end == LC_END_PARTIAL) {
        t->chat->msgs[t->reply_msg].end = LC_END_STOPPED;
        chat_touched(t, true);
    }
}

/* Move path to the first of last-chat-earlier.json, last-chat-earlier-2.json, ... -99 that does
 * not exist (a hard link, then the old name removed: never over another file, which may be the
 * only copy of a chat when autosave is off; rename where the file system has no hard links).
 * Returns the new name (malloc'd), or NULL with errno (ENOENT: no file at path). */
static char *move_aside(const char *path)
{
    const size_t n = strlen(path);
    for (int k = 1; k <= 99; k++) {
        char *to = NULL;
        if ((k == 1 ? asprintf(&to, "%.*s-earlier.json", (int)(n - 5), path)
                    : asprintf(&to, "%.*s-earlier-%d.json", (int)(n - 5), path, k)) < 0)
            return NULL;
        if (link(path, to) == 0) {
            unlink(path);
            return to;
        }
        int e = errno;
        struct stat st;
        if (e != EEXIST && e != ENOENT) { /* no hard links here */
            if (stat(to, &st) == 0)
                e = EEXIST;
            else if (rename(path, to) == 0)   /* the name is free */
                return to;
            else
                e = errno;
        }
        free(to);
        if (e != EEXIST) {
            errno = e;
            return NULL;
        }
    }
    errno = EEXIST;
    return NULL;
}

/* last-chat.json (path) holds an earlier chat than the one ending: moved, with its KV state, to
 * the first free last-chat-earlier[-N].json[.kv] (move_aside: an earlier one is never replaced),
 * so that it is not resumed as the last chat and nothing in it is lost.  Returns the new name
 * (malloc'd), or NULL when there was no such file or it could not be moved (said on stderr; it
 * stays, without its KV state). */
static char *earlier_last_chat(const char *path)
{
    char *to = NULL, *kv = NULL, *kv_to = NULL;
    if (strlen(path) < 5)
        return NULL;
    to = move_aside(path);
    if (!to && errno != ENOENT)
        lc_text_fprintf(stderr, "llamachat: %s (an earlier chat) could not be moved aside: %s\n", path,
                        strerror(errno));
    if (asprintf(&kv, "%s.kv", path) >= 0) {
        if (to && asprintf(&kv_to, "%s.kv", to) >= 0) {
            if (rename(kv, kv_to) != 0 && errno == ENOENT)
                unlink(kv_to);   /* none: an older one would not be its state */
        } else {
            unlink(kv);   /* its state without its transcript: of no use */
        }
    }
    free(kv);
    free(kv_to);
    return to;
}

static void keep_conversation(struct tui *t)
{
    if (!has_user_message(t->chat) || !t->o->history)   /* [ui] history = off: nothing on disk */
        return;
    char *err = NULL;
    char *path = last_chat_path(false, &err);
    if (!path) {
        lc_text_fprintf(stderr, "llamachat: could not keep the conversation: %s\n", err ? err : "out of memory");
        free(err);
        return;
    }
    chat_fill_meta(t);
    /* when --continue reopens this very chat (its autosaved file is the newest), say that */
    bool newest = false;
    if (t->chat_path && !t->chat_changed) {
        char *lerr = NULL, *cdir = lc_state_dir("chats", &lerr), *latest = NULL;
        newest = cdir && lc_state_latest_chat(cdir, &latest, &lerr) == 1 && latest &&
                 !strcmp(latest, t->chat_path);
        free(lerr);
        free(latest);
        free(cdir);
    }
    char *json = lc_chat_to_json(t->chat);
    if (json && lc_chat_json_fits(t->chat, strlen(json), path, &err) != 0) {
        /* too large to be read back: kept as Markdown instead, for people (chat.h) */
        char *md = NULL, *merr = NULL;
        if (asprintf(&md, "%.*s.md", (int)(strlen(path) - 5), path) < 0)
            md = NULL;
        /* a last-chat.json there is an earlier exit's (another chat, or this one as it was
         * then: --continue, --resume): it would be resumed as the last chat; it goes aside with
         * its KV state, kept (it may be its only copy) */
        char *aside = earlier_last_chat(path);
        if (md && lc_state_private_file(md, &merr) == 0 && lc_chat_save(t->chat, md, LC_CHAT_MARKDOWN, &merr) == 0)
            lc_text_fprintf(stderr, "llamachat: %s; the whole conversation is kept as Markdown in %s "
                            "(it cannot be resumed)%s%s%s%s%s%s\n", err, md, t->chat_path ? "; " : "",
                            t->chat_path ? t->chat_path : "",
                            t->chat_path ? " holds it as it was at its last save" : "",
                            aside ? "; what last-chat.json held (an earlier exit's: another chat, "
                                    "or this one as it was then) is now " : "",
                            aside ? aside : "", aside ? " (not this conversation as it ends)" : "");
        else
            lc_text_fprintf(stderr, "llamachat: could not keep the conversation: %s; %s%s%s\n", err,
                            merr ? merr : "out of memory",
                            aside ? "; what last-chat.json held (an earlier exit's: another chat, "
                                    "or this one as it was then) is now " : "",
                            aside ? aside : "");
        free(aside);
        free(merr);
        free(md);
        free(json);
        free(err);
        free(path);
        return;
    }
    if (json && lc_state_private_file(path, &err) == 0 &&
        lc_file_replace(path, json, strlen(json), &err) == 0) {
        /* its KV state: none without KV files (an older one would not match), or the state of
         * its file in chats/, linked (the engine has written its last save), or what the engine
         * wrote as it quit (keep_kv_state) */
        char *from = NULL, *to = NULL;
        if (asprintf(&to, "%s.kv", path) >= 0 && (!kv_files_on(t) || last_kv_linked(t))) {
            unlink(to);
            if (kv_files_on(t) && asprintf(&from, "%s.kv", t->chat_path) >= 0 &&
                link(from, to) != 0 && errno != ENOENT)
                lc_text_fprintf(stderr, "llamachat: %s not linked to %s: %s (--resume %s reads it "
                                "all again)\n", to, from, strerror(errno), path);
        }
        free(from);
        free(to);
        if (newest)
            lc_text_fprintf(stderr, "llamachat: conversation kept in %s (llamachat --continue continues it)\n",
                            t->chat_path);
        else
            lc_text_fprintf(stderr, "llamachat: conversation kept in %s (llamachat --resume %s continues it)\n",
                            path, path);
    }
    else {
        lc_text_fprintf(stderr, "llamachat: could not keep the conversation: %s\n",
                        err ? err : json ? "?" : "out of memory");
        char *kv = NULL;   /* no state without its transcript */
        if (asprintf(&kv, "%s.kv", path) >= 0)
            unlink(kv);
        free(kv);
    }
    free(json);
    free(err);
    free(path);
}

/* ---------------------------------------------------------------- set-up */

/*
 * The text of the chat is UTF-8 (what models read and write).  When the user's locale is
 * UTF-8, so is the terminal.  When it is not (LANG=C, a Latin-1 locale) the terminal may not
 * show UTF-8: the chat still works in UTF-8 inside (LC_CTYPE C.UTF-8, for curses' and
 * readline's wide characters), but draws only ASCII: lines with - and |, every other character
 * as '?'; typed bytes are kept as they come (valid UTF-8 stays, invalid bytes become U+FFFD, as
 * in any locale).  Returns true when the user's locale is UTF-8.
 */
static char user_codeset[64];

static bool ensure_utf8_locale(void)
{
    setlocale(LC_ALL, "");
    /* numbers are written and read in C's form whatever the user's locale: transcripts (JSON),
     * KV state and log files, the rc file's values.  A comma-decimal locale (de_DE) made every
     * saved "temp": 0,8 -- invalid JSON, a conversation that would not open again */
    setlocale(LC_NUMERIC, "C");
    const char *cs = nl_langinfo(CODESET);
    snprintf(user_codeset, sizeof(user_codeset), "%s", cs ? cs : "?");
    if (cs && (!strcasecmp(cs, "UTF-8") || !strcasecmp(cs, "utf8")))
        return true;
    const char *ctype = setlocale(LC_CTYPE, "C.UTF-8");
    if (!ctype)
        ctype = setlocale(LC_CTYPE, "en_US.UTF-8");
    /* readline sets LC_CTYPE again from LC_ALL, LC_CTYPE or LANG at every new line: LANG=C
     * would undo ours (and readline would take é for Meta-C and drop what follows) */
    if (ctype)
        setenv(getenv("LC_ALL") && *getenv("LC_ALL") ? "LC_ALL" : "LC_CTYPE", ctype, 1);
    return false;
}

/* vt100-class terminals draw lines with an alternate character set that terminals emulating
 * them often get wrong: ASCII lines there. */
static bool vt_terminal(void)
{
    const char *term = getenv("TERM");
    return !term || !strncmp(term, "vt", 2) || !strcmp(term, "dumb") || !strcmp(term, "ansi");
}

static void save_restore_strings(void)
{
    restore_len = 0;
    add_restore("\033[?1000l\033[?1002l\033[?1006l\033[?2004l");
    add_restore(tigetstr("sgr0"));
    add_restore(tigetstr("cnorm"));
    add_restore(tigetstr("rmcup"));
    add_restore(tigetstr("rmkx"));
}

static struct lc_engine *start_engine(struct tui *t, const char *model, char **err)
{
    struct lc_engine_config cfg = {
        .model_path = model,
        .n_ctx = t->o->n_ctx,
        .n_threads = t->o->n_threads,
        .n_batch = t->o->n_batch,
        .kv_f32 = t->o->kv_f32,
        .spec_draft = t->o->spec || t->o->draft_path ? t->o->draft_max : 0,
        .draft_path = t->o->draft_path,
        .kv_q8_0 = t->o->kv_q8_0,
        .flash_attn = t->o->flash_attn,
        .fast_math = t->o->fast_math,
        .sampling = t->o->sampling,
        .n_predict = t->o->n_predict,
        .system_prompt = t->o->system_prompt,
        .chat_template = t->o->chat_template,
        .log_path = t->o->log_path,
        .chat_template_text = t->o->chat_template_text,
        .verbose_prompt = t->o->verbose_prompt,
        .remote_url = t->o->remote_url,
        .remote_model = t->o->remote_model,
        .remote_api_key_env = t->o->remote_api_key_env,
    };
    /* The engine and its workers must not take our signals: start them with those blocked. */
    sigset_t block, old;
    sigemptyset(&block);
    for (size_t i = 0; i < sizeof(handled_signals) / sizeof(handled_signals[0]); i++)
        sigaddset(&block, handled_signals[i]);
    pthread_sigmask(SIG_BLOCK, &block, &old);
    struct lc_engine *e = lc_engine_start(&cfg, err);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    return e;
}

int lc_tui_run(struct lc_options *o)
{
    if (!isatty(STDIN_FILENO) || !isatty(STDOUT_FILENO)) {
        fprintf(stderr, "llamachat: the chat needs a terminal; use -p PROMPT in scripts\n");
        return 1;
    }
    bool utf8 = ensure_utf8_locale();
    struct tui tt;
    struct tui *t = &tt;
    memset(t, 0, sizeof(*t));
    t->chat_lock = t->open_lock = -1;
    t->ascii_text = !utf8;
    t->ascii_lines = !utf8 || vt_terminal();
    t->o = o;
    t->reply_entry = t->reply_msg = -1;
    t->find_entry = -1;
    t->edit_msg = -1;
    t->last_seed = LC_SEED_RANDOM;
    t->pp_tps = t->gen_tps = -1;
    t->show_params = o->show_params;
    t->markdown = o->markdown;
    t->show_think = o->show_thinking;
    t->state = ST_LOADING;
    t->chat = lc_chat_new();
    if (!t->chat) {
        fprintf(stderr, "llamachat: out of memory\n");
        return 1;
    }
    t->chat->params = o->sampling;
    t->chat->max_tokens = o->n_predict;
    t->chat_start = time(NULL);
    /* --resume FILE, or --continue: the most recent conversation in chats/, kept on in its file */
    const char *opened = o->resume_path;
    char *continue_path = NULL, *continue_note = NULL;
    const char *system_note = NULL;   /* --system changed the resumed chat's system prompt */
    if (o->continue_last) {
        char *err = NULL;
        char *dir = lc_state_dir("chats", &err);
        int found = dir ? lc_state_latest_chat(dir, &continue_path, &err) : -1;
        if (found < 0) {
            lc_text_fprintf(stderr, "llamachat: --continue: %s\n", err ? err : "out of memory");
            free(err);
            free(dir);
            lc_chat_free(t->chat);
            return 1;
        }
        if (found == 0 && asprintf(&continue_note, "--continue: no saved conversation in %s; this is a new one", dir) < 0)
            continue_note = NULL;
        free(dir);
        opened = continue_path;
    }
    char *continue_shared = NULL;   /* the chat --continue found is kept by another llamachat */
    if (continue_path) {   /* its next saves go to the same file; locked before it is read (a
                              copy read first could be older than the file by the time the
                              lock is free to take) */
        char *name = strdup(continue_path);
        if (!chat_take_path(t, continue_path)) {   /* continue_path is chat_path, or freed */
            continue_shared = name;
            name = NULL;
        }
        free(name);
        continue_path = NULL;
        opened = t->chat_path ? t->chat_path : continue_shared;   /* read below; its KV state */
    }
    if (opened) {
        char *err = NULL;
        char *full = lc_path_expand(opened, &err);
        struct lc_chat *c = full ? lc_chat_load(full, &err) : NULL;
        free(full);
        if (!c) {
            lc_text_fprintf(stderr, "llamachat: %s: %s\n", o->resume_path ? "--resume" : "--continue",
                            err ? err : "cannot load");
            free(err);
            chat_take_path(t, NULL);
            free(continue_shared);
            lc_chat_free(t->chat);
            return 1;
        }
        lc_chat_free(t->chat);
        t->chat = c;
        if (c->has_params) {   /* the saved parameters, under those of the command line */
            struct lc_options given = *o;   /* a shallow copy: only its numbers are read */
            o->sampling = c->params;
            o->n_predict = c->max_tokens;
            lc_config_keep_cli(o, &given, "sampling");
            c->params = o->sampling;
            c->max_tokens = o->n_predict;
        }
        /* --system on the command line replaces the saved system prompt (as /system would);
         * the rc file's does not */
        const struct lc_option_def *sys_def = lc_config_option("system", 0);
        const char *sys_old = c->n && c->msgs[0].role == LC_ROLE_SYSTEM ? c->msgs[0].text : "";
        const char *sys_new = o->system_prompt ? o->system_prompt : "";
        if ((o->cli_set & lc_config_option_bit(sys_def)) && strcmp(sys_old, sys_new) != 0) {
            const bool had_old = *sys_old != '\0';   /* sys_old is freed by the replacement */
            if (lc_chat_set_system(c, *sys_new ? sys_new : NULL) != 0) {
                fprintf(stderr, "llamachat: out of memory\n");
                chat_take_path(t, NULL);
                free(continue_shared);
                lc_chat_free(t->chat);
                return 1;
            }
            system_note = !*sys_new ? "--system \"\": the saved system prompt is removed"
                          : had_old  ? "--system: its system prompt replaces the saved one"
                                     : "--system: its system prompt is added to the saved chat";
        }
    } else if (o->system_prompt && *o->system_prompt) {
        lc_chat_set_system(t->chat, o->system_prompt);
    }

    if (pipe(sig_pipe) != 0) {
        fprintf(stderr, "llamachat: pipe: %s\n", strerror(errno));
        lc_chat_free(t->chat);
        chat_take_path(t, NULL);
        free(continue_note);
        free(continue_shared);
        return 1;
    }
    for (int i = 0; i < 2; i++) {
        fcntl(sig_pipe[i], F_SETFL, fcntl(sig_pipe[i], F_GETFL) | O_NONBLOCK);
        fcntl(sig_pipe[i], F_SETFD, FD_CLOEXEC);
    }
    have_tio = tcgetattr(STDIN_FILENO, &saved_tio) == 0;
    install_signals();

    const char *model = o->model_path ? o->model_path : lc_default_model_path();
    /* --continue, --resume: the chat's own model, when none is configured (-m, [model] path) */
    char *model_note = NULL;
    if (opened && !o->model_path && t->chat->model_path && !o->remote_url) {
        struct stat mst;
        if (stat(t->chat->model_path, &mst) == 0 && S_ISREG(mst.st_mode))
            model = t->chat->model_path;
        else if (asprintf(&model_note, "the chat's model %s is not there (%s): using %s",
                          t->chat->model_path, strerror(errno == 0 ? ENOENT : errno), model) < 0)
            model_note = NULL;
    }
    if (!o->remote_url) {
        char *abs = realpath(model, NULL);
        t->model_path = abs ? abs : strdup(model);
    }
    char *err = NULL;
    /* With --resume the engine starts without the system prompt: the transcript has its own. */
    char *sys = o->system_prompt;
    if (opened)
        o->system_prompt = NULL;
    t->engine = start_engine(t, model, &err);
    o->system_prompt = sys;
    if (!t->engine) {
        lc_text_fprintf(stderr, "llamachat: %s\n", err ? err : "cannot start the engine");
        free(err);
        reset_signals();
        lc_chat_free(t->chat);
        chat_take_path(t, NULL);
        free(t->model_path);
        free(continue_note);
        free(continue_shared);
        free(model_note);
        return 1;
    }
    if (opened) {
        lc_engine_set_conversation(t->engine, t->chat);
        t->n_past = -1;
        t->ctx_unread = t->chat->n > 0;
        char *kerr = NULL, *full = lc_path_expand(opened, &kerr);
        tui_kv_load(t, full);   /* its KV cache, when saved beside it */
        free(full);
        free(kerr);
    }
    if (autosave_on(t)) {   /* with our signals blocked, as the engine */
        sigset_t block, old;
        sigemptyset(&block);
        for (size_t i = 0; i < sizeof(handled_signals) / sizeof(handled_signals[0]); i++)
            sigaddset(&block, handled_signals[i]);
        pthread_sigmask(SIG_BLOCK, &block, &old);
        t->writer = lc_state_writer_start();   /* NULL: the writes are done here */
        pthread_sigmask(SIG_SETMASK, &old, NULL);
    }

    if (!initscr()) {
        lc_state_writer_free(t->writer, NULL);
        lc_engine_free(t->engine);
        reset_signals();
        lc_chat_free(t->chat);
        chat_take_path(t, NULL);
        free(t->model_path);
        free(continue_note);
        free(continue_shared);
        free(model_note);
        return 1;
    }
    save_restore_strings();
    curses_on = 1;
    atexit(at_exit_restore);
    raw();
    noecho();
    nonl();
    keypad(stdscr, TRUE);
    nodelay(stdscr, TRUE);
    set_escdelay(25);
    mousemask(BUTTON4_PRESSED
#ifdef BUTTON5_PRESSED
              | BUTTON5_PRESSED
#endif
              , NULL);
    mouseinterval(0);
    /* bracketed paste: pasted newlines stay in the message */
    fputs("\033[?2004h", stdout);
    fflush(stdout);
    view_init_colors(t);
    rebuild_entries(t);   /* before input_init, which may add a note */
    input_init(t);
    lc_keydec_init(&keydec, on_key, t);

    if (o->resume_path)
        tui_message(t, false, "resumed %zu message%s from %s", t->chat->n, t->chat->n == 1 ? "" : "s", o->resume_path);
    if (t->chat_path) {
        note(t, E_NOTE, "--continue: %zu message%s from %s", t->chat->n, t->chat->n == 1 ? "" : "s", t->chat_path);
        tui_message(t, false, "continued %zu message%s from %s", t->chat->n, t->chat->n == 1 ? "" : "s", t->chat_path);
    }
    if (continue_shared) {
        note(t, E_NOTE, "--continue: %zu message%s from %s, which another llamachat has open: "
             "this copy goes on in a new file", t->chat->n, t->chat->n == 1 ? "" : "s", continue_shared);
        tui_message(t, false, "continued %zu message%s from %s (open elsewhere: kept in a new file)",
                    t->chat->n, t->chat->n == 1 ? "" : "s", continue_shared);
    }
    if (system_note)
        tui_add_entry(t, E_NOTE, system_note, strlen(system_note));
    if (model_note) {
        tui_add_entry(t, E_NOTE, model_note, strlen(model_note));
        tui_message(t, true, "%s", model_note);
        free(model_note);
        model_note = NULL;
    }
    if (continue_note) {
        tui_add_entry(t, E_NOTE, continue_note, strlen(continue_note));
        tui_message(t, false, "%s", continue_note);
        free(continue_note);
        continue_note = NULL;
    }
    if (autosave_on(t)) {   /* say at once when the conversation cannot be kept */
        char *serr = NULL;
        char *dir = lc_state_dir("chats", &serr);
        if (!dir) {
            tui_state_error(t, "could not keep the conversation", serr ? serr : "out of memory");
            t->save_failed = true;
        }
        free(dir);
        free(serr);
    }
    if (t->ascii_text)
        note(t, E_NOTE, "the locale (%s) is not UTF-8: characters outside ASCII are shown as ?, "
             "and kept as typed; LANG=C.UTF-8 shows them", user_codeset);
    const char *warn = lc_config_last_warnings();
    for (const char *p = warn; p && *p;) {
        size_t n = strcspn(p, "\n");
        tui_add_entry(t, E_NOTE, p, n);
        p += n + (p[n] == '\n');
    }
    if (!opened && !t->state_errors)
        tui_message(t, false, "loading %s ...", model);
    free(continue_shared);   /* (opened pointed to it) */
    opened = NULL;
    t->ui_ready = true;
    show_lock_note(t);   /* --continue's */
    t->dirty = true;

    struct pollfd fds[4] = {
        { STDIN_FILENO, POLLIN, 0 },
        { lc_engine_fd(t->engine), POLLIN, 0 },
        { sig_pipe[0], POLLIN, 0 },
        { -1, POLLIN, 0 },   /* a listing or chat being read (library.c); -1: none */
    };
    while (!t->quit) {
        autosave(t, false);
        if (t->dirty) {
            t->dirty = false;
            view_draw(t);
        }
        /* a character cut short: wait 50 ms for its next byte, then call it invalid; a paste
         * whose end marker has not come after 2 s of silence is closed (it was lost); a
         * conversation changed while a reply streams: wake up when its save is due */
        bool in_paste = lc_keydec_in_paste(&keydec);
        bool utf8_wait = !in_paste && lc_keydec_utf8_pending(&keydec);
        int timeout = in_paste ? 2000 : utf8_wait ? 50 : -1;
        bool key_timer = timeout >= 0;
        int due = autosave_due_ms(t);
        if (due >= 0 && (timeout < 0 || due < timeout)) {
            timeout = due;
            key_timer = false;
        }
        fds[3].fd = library_job_fd(t);
        int r = poll(fds, 4, timeout);
        if (r < 0) {
            if (errno == EINTR)
                continue;
            break;
        }
        if (r == 0) {
            if (key_timer) {
                if (in_paste)
                    lc_keydec_end_paste(&keydec);
                read_keys(t, true);
            }
            continue;
        }
        if (fds[2].revents & POLLIN) {
            unsigned char sigs[32];
            ssize_t n = read(sig_pipe[0], sigs, sizeof(sigs));
            for (ssize_t i = 0; i < n; i++) {
                if (sigs[i] == SIGINT && busy(t) && t->state != ST_LOADING) {
                    stop_reply(t);   /* like Ctrl-C: stop the reply */
                } else if (sigs[i] == SIGWINCH || sigs[i] == SIGCONT) {
                    handle_resize(t);
                } else if (sigs[i] == SIGTSTP) {
                    suspend(t);
                } else {   /* SIGTERM, SIGHUP, SIGINT while idle: quit */
                    t->quit = true;
                    t->exit_status = 128 + sigs[i];
                }
            }
        }
        if (fds[1].revents & POLLIN)
            drain_events(t);
        if (fds[3].fd >= 0 && (fds[3].revents & POLLIN))
            library_job_finish(t);
        if (fds[0].revents & (POLLIN | POLLHUP | POLLERR)) {
            read_keys(t, false);
            if ((fds[0].revents & (POLLHUP | POLLERR)) && !(fds[0].revents & POLLIN))
                t->quit = true;   /* the terminal went away */
        }
    }

    library_shutdown(t);
    chat_at_exit(t);
    autosave(t, true);
    char *werr = NULL;
    lc_state_writer_free(t->writer, &werr);   /* waits for the last write */
    t->writer = NULL;
    if (werr && !t->save_failed)
        tui_state_error(t, "could not keep the conversation", werr);
    free(werr);
    input_shutdown(t);
    lc_keydec_free(&keydec);
    fputs("\033[?2004l", stdout);
    fflush(stdout);
    endwin();
    curses_on = 0;
    if (have_tio)
        tcsetattr(STDIN_FILENO, TCSAFLUSH, &saved_tio);
    keep_kv_state(t);
    lc_engine_free(t->engine);
    reset_signals();
    if (t->fatal)
        lc_text_fprintf(stderr, "llamachat: %s\n", t->fatal);
    else
        keep_conversation(t);
    if (t->state_errors)   /* every failure to keep state, once more where it stays */
        lc_text_fprintf(stderr, "%s", t->state_errors);
    free(t->state_errors);
    free(t->lock_note);
    t->state_errors = NULL;
    chat_take_path(t, NULL);   /* the writer is done: the lock goes */
    free(t->model_path);
    free(t->switch_path);
    t->model_path = t->switch_path = NULL;
    free(t->fatal);
    t->fatal = NULL;
    clear_entries(t);
    regen_forget(t);
    free(t->find_q);
    free(t->find_text);
    t->find_q = NULL;
    t->find_text = NULL;
    free(t->entries);
    free(t->ev_text);
    lc_chat_free(t->chat);
    close(sig_pipe[0]);
    close(sig_pipe[1]);
    sig_pipe[0] = sig_pipe[1] = -1;
    return t->exit_status;
}
