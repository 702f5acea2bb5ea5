/*
 * internal.h - shared state of the chat's modules (tui.c: the loop, commands and engine events;
 * view.c: layout and drawing; input.c: readline through its callback interface).
 *
 * Model, htop-style: the state below is the single source of truth; input handlers change it
 * and set `dirty`; one draw pass (view_draw) rebuilds the screen from it.  Nothing here touches
 * the model: the engine thread does (engine.h).
 */
#ifndef LC_TUI_INTERNAL_H
#define LC_TUI_INTERNAL_H

#define NCURSES_WIDECHAR 1
#include <curses.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>
#include <wchar.h>

#include "chat.h"
#include "engine.h"
#include "options.h"
#include "state.h"

enum entry_kind { E_SYSTEM, E_USER, E_ASSISTANT, E_NOTE, E_ERROR };

/* A transcript entry: a message of the conversation or a note shown only on screen.  The text
 * is decoded once into cells (a character and its display width), and wrapped into lines for
 * the current width; both caches are rebuilt when the text or the width changes. */
struct cell {
    wchar_t ch;
    int8_t w;           /* display columns: 0 (combining), 1 or 2; newline: -1 */
    uint16_t style;     /* MD_* bits of a reply shown as Markdown (markdown.h); 0: plain */
};

struct entry {
    enum entry_kind kind;
    int msg;             /* index in the chat for messages, -1 for notes */
    char *text;
    size_t len, cap;
    /* caches */
    struct cell *cells;
    size_t n_cells, cells_cap;
    size_t decoded_len;  /* bytes of text decoded into cells */
    int *line_start;     /* cell index where each wrapped line starts */
    int *line_margin;    /* per wrapped line: -1, or (a continuation row of a Markdown line
                            with a margin) the cell index where that line and its margin start */
    int n_lines;
    int wrap_width;      /* width the lines were computed for; 0 = stale */
    int wrap_col0;       /* column the first line started at (a continuation shown inline) */
    int end_col;         /* column after the last cell of the last line */
    int prefix_col;      /* column of the label / "< 2/3 >" before the text (view.c) */
    int mark_col;        /* a reply joined to the text before (base model): column of its
                            "< 2/3 >" after its text, on its last row or (mark_row) a row of
                            its own; next_col: where the text joined after it starts */
    bool mark_row;
    int next_col;
    bool open;           /* a reply still streaming: an incomplete UTF-8 tail may complete */
    bool md;             /* the cells are the Markdown rendering of the text (view.c) */
    unsigned md_opts;    /* ... made with these options (markdown.h MD_OPT_*) */
    size_t md_len;       /* ... of this many bytes of text */
};

enum focus { FOCUS_INPUT, FOCUS_PARAMS };
enum state { ST_LOADING, ST_IDLE, ST_READING, ST_WRITING, ST_FAILED };

struct tui {
    struct lc_options *o;
    struct lc_engine *engine;
    struct lc_chat *chat;          /* the conversation as saved by /save */
    struct entry *entries;
    size_t n_entries, cap_entries;
    int reply_entry;               /* entry receiving the reply, -1 */
    int reply_msg;                 /* chat message receiving the reply, -1 */
    /* view */
    int scroll;                    /* lines above the bottom; 0 = following the end */
    int last_total_lines;
    bool show_params;
    bool show_help;
    int help_scroll;               /* first help line shown */
    enum focus focus;
    int param_sel;
    bool dirty;
    bool mono;
    bool ascii_text;               /* the locale is not UTF-8: non-ASCII is drawn as '?' */
    bool ascii_lines;              /* lines drawn with - and | (vt100, or not UTF-8) */
    bool plain;                    /* a base model (no chat template): messages run on */
    bool markdown;                 /* replies shown as Markdown ([ui] markdown; /raw toggles) */
    bool show_think;               /* thinking parts (<think>) unfolded ([ui] thinking; /think) */
    /* /find (view.c view_find): the text sought (lower case), the match shown (entry and
     * first cell; entry -1: none yet, the next search starts at the end), a search to run
     * at the next draw (it needs the wrapped lines) */
    wchar_t *find_q;
    char *find_text;               /* ... as typed, for messages */
    size_t find_qn;
    int find_entry, find_cell;
    bool find_pending;
    /* status */
    enum state state;
    char model_desc[192];
    char model_name[128];
    char *model_path;              /* the model's file (absolute when known), saved with the
                                      chat as "model_path"; NULL for a remote model */
    char *switch_path;             /* /model: the file being loaded, until it is done */
    char isa[32];
    char template_name[48];
    int n_threads;
    uint64_t last_seed;            /* seed of the last reply (LC_SEED_RANDOM: none yet) */
    int32_t n_past, n_ctx;         /* n_past -1: not known (the conversation changed) */
    int32_t prog_done, prog_total;
    /* speeds of the last turn (tokens per second, -1: none), timed on the active clock
     * (tui.c: time the process was suspended does not count) */
    double pp_tps, gen_tps;
    int turn_phase;                /* 0 idle, 1 reading the prompt, 2 writing */
    bool ctx_unread;               /* a reopened chat (--continue, --resume) the model has not
                                      read yet: its context figure is "-" until a turn */
    double turn_t0, turn_pp_end;   /* active-clock times of the turn's start, end of prompt */
    double turn_susp0;             /* suspended_s when the turn started */
    int32_t turn_pp_tokens;        /* prompt tokens read this turn (last PROGRESS total) */
    int32_t turn_n_past_pp;        /* n_past when the reply began */
    double suspended_s;            /* seconds spent stopped by Ctrl-Z */
    char message[1024];            /* one-line message in the status area (errors, "saved") */
    bool message_is_error;
    bool message_keep;             /* set while a turn ran (a command's answer, an error): the
                                      turn's end is said after it, not instead (turn_message) */
    /* event text being assembled (records with more = 1) */
    char *ev_text;
    size_t ev_len, ev_cap;
    const char *cur_line;          /* the line being handled (tui_line), for refusals */
    bool quit;
    bool quit_asked;               /* the user quit (/quit, Ctrl-D): a reply still being written
                                      is kept as stopped by them, not as cut off */
    int exit_status;
    char *fatal;                   /* the model could not be loaded: printed after the screen closes */
    /* the conversation kept on disk as it goes (state.h) */
    char *chat_path;               /* chats/START.json of this conversation; NULL until its first
                                      save (a new one after /clear and /load) */
    int chat_lock;                 /* lc_state_lock_chat's fd on chat_path (another llamachat
                                      does not take it over); -1: none */
    bool lock_warned;              /* the note that no chat lock could be made was given */
    char *lock_note;               /* that note, until the screen is up to show it */
    bool ui_ready;                 /* the screen shows notes (set before the main loop) */
    int open_lock;                 /* /chats N: the lock on the file being opened, taken before
                                      it is read and held beside chat_lock until the open ends
                                      (library.c); -1: none, -2: another llamachat has it */
    time_t chat_start;             /* when this conversation started: the file's name */
    bool chat_changed;             /* changed since the last save */
    bool save_soon;                /* a turn ended or a command changed it: save without waiting */
    double last_save;              /* CLOCK_MONOTONIC seconds of the last save attempt */
    double save_every;             /* seconds between saves while a reply streams: 1, or 4 times
                                      what making the last transcript took on this thread (a
                                      long conversation: 0.6 s at 64 MiB) */
    bool save_failed;              /* a failure to keep the conversation was reported (once) */
    bool save_too_big;             /* it is over what a saved chat can hold (chat.h): said once,
                                      not written until it fits again */
    struct {                       /* the save that found it too large (still_too_big) */
        const struct lc_chat *chat;
        uint64_t cuts;             /* chat->cuts then */
        size_t len, n, bytes, tail;/* its JSON's length, messages, their bytes, the last one's */
    } too_big;
    char *state_errors;            /* every failure to keep state, printed on stderr at exit */
    struct lc_state_writer *writer;/* writes the conversation file off this thread, or NULL */
    /* editing the conversation (tui.c: /undo, /edit, /regen's versions) */
    int edit_msg;                  /* /edit or Up: the user message whose exchange a send
                                      replaces, -1 = none */
    size_t edit_n;                 /* chat->n when the edit began (any change ends it) */
    bool last_line_sent;           /* the last line entered was sent as a message (not a
                                      command): only then does Up on an empty line edit it */
    bool enter_held;               /* Enter typed while the screen was too small: not sent;
                                      the next key typed then starts a new line of the message */
    bool enter_held_note;          /* ... say so once the screen is big enough again */
    struct lc_message regen_old;   /* /regen: the reply being replaced, until the new one
                                      arrives (then its versions) or none does (then back) */
    bool regen_pending;
    /* models and saved chats (library.c) */
    bool switching;                /* /model: the engine is loading another model */
    bool kv_loading;               /* the engine reads a reopened chat's KV state file */
    struct tui_job *job;           /* a listing or a chat being read off this thread, or NULL */
    struct lc_listing *model_list; /* the last /models listing (for /model N), or NULL */
    struct lc_listing *chat_list;  /* the last /chats listing (for /chats N, /delete N), or NULL */
};

/* view.c */
#define VIEW_PANE_MIN_COLS 60   /* the parameter pane is shown from this width */
void view_init_colors(struct tui *t);
void view_draw(struct tui *t);
/* The terminal is below the chat's minimum size (20x5): only "too small" is drawn. */
bool view_too_small(void);
/* The terminal has room for the parameter pane now (wide and tall enough): when it has not,
 * the pane is hidden, and it takes neither the focus nor edits. */
bool view_pane_fits(struct tui *t);
int view_transcript_height(void);
int view_help_count(void);
void entry_free(struct entry *e);
/* Invalidate the wrap cache of every entry (resize). */
void view_invalidate(struct tui *t);
/* Parameter pane: n rows; name, value text. */
int view_param_count(void);
const char *view_param_name(int i);

/* input.c */
int input_init(struct tui *t);      /* readline callback handler; history */
void input_shutdown(struct tui *t); /* save history, remove the handler */
/* A line was added to readline's history: append it to the history file now (fsynced), so that
 * a crash does not lose it; a failure is reported once (tui_state_error). */
void input_history_added(struct tui *t, const char *line);
/* Feed one key from curses (get_wch result) to readline. */
void input_key(struct tui *t, int is_key_code, wint_t ch);
/* Alt + ch (Esc then the character) to readline. */
void input_alt(struct tui *t, wint_t ch);
/* An escape sequence curses did not decode, as it came (starts with ESC), to readline. */
void input_seq(struct tui *t, const char *seq, size_t len);
/* Insert pasted text (valid UTF-8, NUL-terminated, newlines as LF) at the cursor. */
void input_paste(struct tui *t, const char *text, size_t len);
/* True when ~/.inputrc chose vi editing (a lone Esc then goes to readline). */
bool input_vi_mode(void);
/* Draw the input area (rows y0 .. y0+h-1 of stdscr, full width) and place the cursor. */
void input_draw(struct tui *t, int y0, int h, int width);
/* Rows the input wants for the width (1 .. max). */
int input_rows(struct tui *t, int width, int max);
bool input_is_empty(void);
/* Up (dir -1) or Down (+1) moves to another line of the message (else it is the history). */
bool input_line_moves(int dir);
/* Put text back into the input line (a message refused while the model is busy). */
void input_restore(const char *text);
/* Replace the input line with text now (outside a key handler: a message given back). */
void input_set_line(struct tui *t, const char *text);
/* True when Tab completes (the line is a command: it starts with '/'); else Tab is the
 * parameter pane's key. */
bool input_completes(void);
/*
 * The message in $VISUAL / $EDITOR (default vi): written to a new 0600 file under $TMPDIR
 * (default /tmp), the screen given to the editor, and the file's text (one final newline
 * taken off) put back in the input, not sent.  An editor that fails, or text that is not
 * UTF-8, leaves the message as it was, with a message saying why.  The file is removed.
 */
void input_edit_external(struct tui *t);
/* Ctrl-G: the editor, unless readline is inside Ctrl-R search or a key sequence (then it is
 * readline's abort: returns false and the key goes to readline). */
bool input_ctrl_g(struct tui *t);
/*
 * /read FILE: FILE (~ expanded) read without blocking on a FIFO (lc_file_read_small) into the
 * input line, for the user to edit and send: at most [ui] read_limit KiB (default 64); an
 * empty, binary (NUL bytes) or non-UTF-8 file is refused with a note; CRLF becomes LF and one
 * final newline is dropped.
 */
void input_read_file(struct tui *t, const char *arg);

/* tui.c */
void tui_line(struct tui *t, char *line);   /* a line accepted by readline (owned) */
/* Every command's name without the '/', NULL-terminated (Tab completion in input.c). */
extern const char *const tui_command_names[];
/* Give the terminal to another program (endwin, modes restored), and take it back (curses
 * modes, bracketed paste, everything redrawn), as Ctrl-Z does. */
void tui_release_terminal(struct tui *t);
void tui_reclaim_terminal(struct tui *t);
/* The message line says fmt (one line; errors in their colour).  Set while a reply or a model
 * load runs, it is kept when that ends: the end's message follows it (tui_turn_message). */
void tui_message(struct tui *t, bool error, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* What the end of a turn or a model load says: after a message kept from the turn
 * ("saved ... · max tokens reached"), else instead of the one there. */
void tui_turn_message(struct tui *t, bool error, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* A message of the turn itself ("stopping", "loading ..."): replaced when the turn ends. */
void tui_transient_message(struct tui *t, bool error, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
int tui_add_entry(struct tui *t, enum entry_kind k, const char *text, size_t len);
void tui_append_entry(struct tui *t, int i, const char *text, size_t len);
void tui_param_change(struct tui *t, int idx, int dir);
void tui_param_text(const struct tui *t, int idx, char *buf, size_t len);
/* For library.c: entries from the conversation; a new conversation file from the next save;
 * refuse a command while busy (the line goes back to the input); parameters changed; save
 * the conversation now if it changed (force) or when due. */
void rebuild_entries(struct tui *t);
/* /find TEXT: search the transcript for TEXT from its end; text NULL or "": the match before
 * the last one found (view.c). */
void view_find(struct tui *t, const char *text);
void chat_restart(struct tui *t);
/* chat_path becomes path (malloc'd, or NULL), locked (state.h: lc_state_lock_chat), the lock
 * of the one before let go.  false when another llamachat keeps path: it is freed and
 * chat_path is NULL (the next save starts a new file, so neither overwrites the other). */
bool chat_take_path(struct tui *t, char *path);
/* The same with the lock already taken: fd is lc_state_lock_chat's result for path (>= 0: the
 * lock, kept by chat_lock; -1: none could be made; -2: another llamachat keeps path). */
bool chat_take_locked(struct tui *t, char *path, int fd);
/* No chat lock could be made (lc_state_lock_chat returned -1 with err): the user is told, once
 * a run, that two llamachats could overwrite each other's turns. */
void chat_lock_failed(struct tui *t, const char *err);
bool refuse_if_busy(struct tui *t, const char *what);
void params_changed(struct tui *t);
void autosave(struct tui *t, bool force);
void chat_touched(struct tui *t, bool urgent);   /* urgent: saved at the next pass */
void regen_forget(struct tui *t);   /* drop /regen's pending old reply (a new conversation) */
/* The KV cache beside a JSON transcript (engine.h, "instant resume"): tui_kv_save asks the
 * engine to write it to TRANSCRIPT.kv when the chat is idle; tui_kv_load to read it back after
 * the transcript became the conversation.  Neither with --no-kv-file, [chat] kv_file = off or
 * a remote model. */
void tui_kv_save(struct tui *t, const char *transcript);
void tui_kv_load(struct tui *t, const char *transcript);
/* A failure to keep state (history, conversation): err ("PATH: cause") is shown as an error
 * note and on the message line, prefixed with what ("could not keep the input history"), and
 * printed again on stderr at exit.  Callers report each kind of failure once. */
void tui_state_error(struct tui *t, const char *what, const char *err);

/* library.c: /model, /models, /show, /chats, /rename, /delete (each returns true when line's
 * command was one of them), and the work they do off the UI thread. */
bool library_command(struct tui *t, const char *cmd, const char *arg);
/* The engine ended a model switch (LC_EV_DONE while t->switching). */
void library_switch_done(struct tui *t, int reason);
/* /load: read the transcript at full (expanded; shown as path) on the job's thread; when it is
 * read it becomes the conversation (kept in a new file from its next change on), or the
 * error is shown ("load failed: ..."). */
void library_load(struct tui *t, const char *full, const char *path);
/* A saved chat is being read (/chats N, /load): what would change the conversation waits. */
bool library_opening(const struct tui *t);
/* The descriptor to poll for the end of the current job, or -1. */
int library_job_fd(const struct tui *t);
/* The job's descriptor was readable: take its result. */
void library_job_finish(struct tui *t);
/* At exit: stop and wait for the job, free the listings. */
void library_shutdown(struct tui *t);

#endif
