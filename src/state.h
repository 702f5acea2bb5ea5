/*
 * state.h - where the chat keeps its state between runs, and how it writes it so that a crash
 * (kill -9, SIGSEGV, power loss) loses at most the last second of a reply.
 *
 * Layout, under $XDG_STATE_HOME/llamachat (default ~/.local/state/llamachat), directories 0700
 * (also when they existed with another mode), files 0600; nothing at all with [ui] history = off:
 *   history                  readline input history, one entry per line (a message's newlines
 *                            stored as CR); a line is appended and fsynced as it is entered
 *   last-chat.json           the conversation at the last normal exit
 *   chats/START.json         one JSON transcript (chat.h) per conversation, files 0600, named
 *                            by the local time it started: 2026-12-01T03-11-45.json (-2, -3 ...
 *                            before .json when two start in the same second); replaced
 *                            atomically (fileutil.h) after each turn and about once a second
 *                            while a reply streams
 *
 * Every function returns its failure with a malloc'd message that names the path and the cause
 * (strerror), for the caller to show: nothing here prints.
 */
#ifndef LC_STATE_H
#define LC_STATE_H

#include <stdint.h>
#include <time.h>

/*
 * The state directory "$XDG_STATE_HOME/llamachat" (or "$HOME/.local/state/llamachat"), with
 * "/sub" appended when sub is not NULL, created with its parents (mode 0700) if missing.
 * Returns the path (malloc'd, caller frees), or NULL with a malloc'd *err when neither variable
 * is set, or the path cannot be created or is not a directory
 * ("/tmp/f/llamachat: cannot create the directory: Not a directory").
 */
char *lc_state_dir(const char *sub, char **err);

/*
 * Where /save and Ctrl-S put a transcript saved without a name: `configured` ([ui]
 * transcripts, ~ expanded) when not NULL or empty, else "$XDG_DATA_HOME/llamachat/transcripts"
 * (default ~/.local/share/llamachat/transcripts), created with its parents (0700 for what is
 * created).  Returns the path (malloc'd), or NULL with a malloc'd *err.
 */
char *lc_state_data_dir(const char *configured, char **err);

/*
 * path with a leading "~" (HOME, else the password file) or "~user" (the password file)
 * replaced by that home directory; other paths are copied.  Returns a malloc'd path, or NULL
 * with a malloc'd *err ("~nobody2: no such user").
 */
char *lc_path_expand(const char *path, char **err);

/*
 * Make the file at path exist with mode 0600 (created empty if missing; an existing file's
 * mode set to 0600), so that replacing it (fileutil.h keeps the mode) keeps it private.
 * Returns 0, or -1 with a malloc'd *err.
 */
int lc_state_private_file(const char *path, char **err);

/*
 * The most recently modified non-empty "*.json" file directly in dir (mtime in ns, then the
 * name decides).  Returns 1 and a malloc'd *path; 0 when there is none (or dir does not
 * exist); -1 with a malloc'd *err when dir cannot be read.
 */
int lc_state_latest_chat(const char *dir, char **path, char **err);

/*
 * A new, empty file dir/START.json for a conversation that started at `start` (seconds since
 * the epoch; local time in the name), created with O_EXCL and mode 0600 (so that replacing it
 * later keeps 0600), a "-N" suffix added while the name is taken.  Returns the path
 * (malloc'd), or NULL with a malloc'd *err.
 */
char *lc_state_new_chat(const char *dir, time_t start, char **err);

/*
 * Mark the conversation file path (chats/START.json) as kept by this process, so that a second
 * llamachat (--continue, /chats N) does not take it over and the two overwrite each other's
 * turns: a write lock (an OFD lock, fcntl) on one byte of the hidden file .lock beside it
 * (created 0600; one for the directory, never removed), chosen by a hash of path's name; held
 * until lc_state_unlock_chat or the process ends (kill -9 included: nothing is left behind).
 * Returns the lock's fd (>= 0); -2 when another process holds it (or another lock of this
 * one); -1 with a malloc'd *err when it cannot be taken: .lock cannot be opened, or the system
 * has no OFD locks (F_OFD_SETLK; a process's own locks would all go with the first fd closed)
 * -- the caller goes on without it, and should say that two llamachats could then overwrite
 * each other.
 */
int lc_state_lock_chat(const char *path, char **err);

/* Release a lock of lc_state_lock_chat (fd < 0: nothing). */
void lc_state_unlock_chat(int fd);

/*
 * A numbered listing for the chat (/chats, /models): the text to show, one line per entry
 * after a heading, and the path of entry i + 1 in paths[i] (what "/chats N" or "/model N"
 * opens).  Everything is malloc'd; free with lc_listing_free (NULL is fine).
 */
struct lc_listing {
    char *text;
    char **paths;
    size_t n;
};
void lc_listing_free(struct lc_listing *l);

/*
 * The saved conversations in dir (the chats directory), newest first (mtime, then name): for
 * each, "N. DATE MODEL: TITLE" where DATE is the local time of its last change
 * ("2026-12-01 06:11"), TITLE the transcript's "title" (/rename) or the first line of its first
 * message of the user (at most 60 characters, control characters shown visibly); a file that
 * cannot be read shows its error instead.  current (a path, may be NULL) is marked " (this
 * one)".  Empty files (names reserved by a run that never saved) are left out.  Reads every
 * file: call it off the UI thread.  Returns the listing (no entries and a text saying so when
 * there are none), or NULL with a malloc'd *err when dir cannot be read.
 */
struct lc_listing *lc_state_list_chats(const char *dir, const char *current, char **err);

/*
 * Append one history entry to the file at path (created 0600 if missing): line with each '\n'
 * stored as '\r', then '\n', in one write, then fsync.  Returns 0, or -1 with a malloc'd *err
 * ("PATH: cannot append: No space left on device").
 */
int lc_state_append_history(const char *path, const char *line, char **err);

/*
 * A writer thread for the conversation file, so that the chat's UI thread never waits on
 * fsync (median 7 ms, worst seen 69 ms on ext4): lc_state_writer_put hands it a whole
 * transcript; it replaces the file with lc_file_replace (temp file, fsync, rename, fsync of
 * the directory).  A transcript not yet started is replaced by a newer one for the same file
 * (the latest wins) when nothing was queued after it; one being written finishes first, so the
 * file only ever holds whole transcripts, in order.  Jobs for other files queue behind it (a
 * new chat's first save never drops the last save of the one before).
 * Start it with the signals the caller handles blocked (it inherits the mask).
 * LLAMACHAT_TEST_SLOW_WRITE_MS (tests): it waits that long before each transcript it writes.
 */
struct lc_state_writer;

/* Start the thread.  NULL (errno set) when it cannot be started. */
struct lc_state_writer *lc_state_writer_start(void);
/* Queue len bytes of data (malloc'd; ownership passes to the writer) for path (copied).
 * Returns 0, or -1 on allocation failure (data is freed). */
int lc_state_writer_put(struct lc_state_writer *w, const char *path, char *data, size_t len);
/* Release the chat lock fd (lc_state_lock_chat) once every job queued before this call is
 * done -- the chat's last saves are on disk before another llamachat may take its file -- or at
 * once when nothing is queued (or w is NULL, or no memory is left).  fd < 0: nothing. */
void lc_state_writer_unlock_after(struct lc_state_writer *w, int fd);
/* The place of the last job queued so far (0: none yet), for lc_state_writer_wait. */
uint64_t lc_state_writer_mark(struct lc_state_writer *w);
/* Wait (on a thread that may wait: not the UI's) until every job queued up to mark
 * (lc_state_writer_mark) is done: its transcript written, or its lock released.  The writer
 * does its queue in order whatever is queued after, so the wait ends. */
void lc_state_writer_wait(struct lc_state_writer *w, uint64_t mark);
/* True while a transcript or a lock release is queued or being done. */
int lc_state_writer_busy(struct lc_state_writer *w);
/* The message of the last failed write since the last call (malloc'd, "PATH: write failed:
 * CAUSE"), or NULL. */
char *lc_state_writer_error(struct lc_state_writer *w);
/* Wait until everything queued is written, stop the thread, free w (NULL is allowed).  When
 * err is not NULL it receives the message of a failure not yet taken (malloc'd), or NULL. */
void lc_state_writer_free(struct lc_state_writer *w, char **err);

#endif
