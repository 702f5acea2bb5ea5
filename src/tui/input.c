/*
 * input.c - the input line: GNU readline through its callback interface, drawn by curses.
 *
 * Readline never touches the terminal here.  Keys come from curses (wgetch bytes decoded by
 * keydec.c); keys with a curses code (arrows, Home, Delete...) are turned back into the ANSI
 * sequences readline binds by default and queued, together with typed characters as UTF-8, and
 * readline reads them through rl_getc_function, only ever when a whole key is queued: it never
 * waits for the terminal and never sees EOF.  A bracketed paste is collected by keydec.c and
 * inserted as text (readline's own paste reader, which reads until the end marker, is off).
 * A lone Esc is the chat's key and never reaches readline, unless ~/.inputrc chose vi editing:
 * then it is vi's command mode.  Its redisplay hook only marks the screen dirty; view.c draws
 * rl_display_prompt + rl_line_buffer with the cursor at rl_point.  So emacs keys, ~/.inputrc,
 * Ctrl-R search and history work as in any readline program, inside a curses layout.
 *
 * Also here: Tab completion of a command line (readline's completion API: command names,
 * /set names from config.c's option table, file names after the commands that take one),
 * the message edited in $VISUAL/$EDITOR (Ctrl-X Ctrl-E, Ctrl-G) and /read FILE.
 */
#include "internal.h"

#include <errno.h>
#include <fcntl.h>
#include <readline/history.h>
#include <unistd.h>
#include <readline/readline.h>
#include <readline/tilde.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "../config.h"
#include "../fileutil.h"
#include "../state.h"
#include "../textsafe.h"

static struct tui *T;
static unsigned char queue[4096];
static size_t q_head, q_len;
static FILE *devnull;
static char *history_path;
static int history_added;    /* lines this session appended to the file */
static bool history_failed;  /* a failure to write it was reported */
static char *restore_text;   /* put back into the line after readline has cleared it */
static bool editor_pending;  /* Ctrl-X Ctrl-E was read: run the editor once readline returns */

static void drain(struct tui *t);
static void complete_init(void);

static void q_push(const char *s, size_t n)
{
    for (size_t i = 0; i < n && q_len < sizeof(queue); i++)
        queue[(q_head + q_len++) % sizeof(queue)] = (unsigned char)s[i];
}

static void encode_utf8(wint_t c, char *out, size_t *n)
{
    if (c < 0x80) {
        out[0] = (char)c;
        *n = 1;
    } else if (c < 0x800) {
        out[0] = (char)(0xC0 | (c >> 6));
        out[1] = (char)(0x80 | (c & 0x3F));
        *n = 2;
    } else if (c < 0x10000) {
        out[0] = (char)(0xE0 | (c >> 12));
        out[1] = (char)(0x80 | ((c >> 6) & 0x3F));
        out[2] = (char)(0x80 | (c & 0x3F));
        *n = 3;
    } else {
        out[0] = (char)(0xF0 | (c >> 18));
        out[1] = (char)(0x80 | ((c >> 12) & 0x3F));
        out[2] = (char)(0x80 | ((c >> 6) & 0x3F));
        out[3] = (char)(0x80 | (c & 0x3F));
        *n = 4;
    }
}

/* Queue the bytes readline expects for one curses key. */
static void queue_key(int is_key_code, wint_t ch)
{
    if (!is_key_code) {
        char b[4];
        size_t n;
        encode_utf8(ch, b, &n);
        q_push(b, n);
        return;
    }
    static const struct { int key; const char *seq; } map[] = {
        { KEY_LEFT, "\033[D" }, { KEY_RIGHT, "\033[C" }, { KEY_UP, "\033[A" },
        { KEY_DOWN, "\033[B" }, { KEY_HOME, "\033[H" }, { KEY_END, "\033[F" },
        { KEY_DC, "\033[3~" }, { KEY_BACKSPACE, "\177" }, { KEY_ENTER, "\r" },
        { KEY_IC, "\033[2~" },
    };
    for (size_t i = 0; i < sizeof(map) / sizeof(map[0]); i++)
        if ((int)ch == map[i].key) {
            q_push(map[i].seq, strlen(map[i].seq));
            return;
        }
    const char *name = keyname((int)ch);
    if (name && strcmp(name, "kLFT5") == 0)
        q_push("\033[1;5D", 6);
    else if (name && strcmp(name, "kRIT5") == 0)
        q_push("\033[1;5C", 6);
    /* other function keys mean nothing to readline */
}

/* rl_getc_function: the queued bytes.  Readline is only called when a key is queued; should a
 * command of it still want more (one that reads synchronously), it gets Ctrl-G (abort), which
 * cancels that command without touching the line: never a wait, never EOF. */
static int tui_getc(FILE *f)
{
    (void)f;
    if (q_len == 0)
        return 7;
    int c = queue[q_head];
    q_head = (q_head + 1) % sizeof(queue);
    q_len--;
    return c;
}

static int tui_input_available(void)
{
    return q_len > 0;
}

static void tui_redisplay(void)
{
    if (T)
        T->dirty = true;
}

static void noop_prep(int meta)
{
    (void)meta;
}

static void noop_deprep(void)
{
}

static void on_line(char *line)
{
    if (!line) {   /* Ctrl-D on an empty line */
        T->quit = true;
        T->quit_asked = true;
        return;
    }
    tui_line(T, line);
}

/* Enter: a trailing backslash continues the message on a new line; else accept. */
static int accept_or_continue(int count, int key)
{
    if (rl_end > 0 && rl_point == rl_end && rl_line_buffer[rl_end - 1] == '\\') {
        rl_delete_text(rl_end - 1, rl_end);
        rl_point = rl_end;
        rl_insert_text("\n");
        return 0;
    }
    return rl_newline(count, key);
}

/* Ctrl-X Ctrl-E: the editor runs after readline has returned (drain), not inside it. */
static int editor_key(int count, int key)
{
    (void)count;
    (void)key;
    editor_pending = true;
    return 0;
}

static int insert_newline(int count, int key)
{
    (void)count;
    (void)key;
    rl_insert_text("\n");
    return 0;
}

/* ---------------------------------------------------------------- lines of a message */

/* Up, Down, Home and End in a message of several lines act on its lines, as in an editor: the
 * line above or below at the same screen column (a wide character counts 2; a column inside
 * one goes before it; a shorter line: its end), the start or end of the line.  Up on the
 * first line and Down on the last are readline's history; Home at the start of a line and End
 * at its end are readline's (the start and end of the whole message). */

/* The offset of the start of the line holding offset p, and of its end (the '\n' or rl_end). */
static int line_start(int p)
{
    while (p > 0 && rl_line_buffer[p - 1] != '\n')
        p--;
    return p;
}

static int line_end(int p)
{
    while (p < rl_end && rl_line_buffer[p] != '\n')
        p++;
    return p;
}

/* Bytes and screen columns of the character at offset p (invalid bytes: one column each). */
static int char_at(int p, int *cols)
{
    mbstate_t st;
    memset(&st, 0, sizeof(st));
    wchar_t wc;
    size_t r = mbrtowc(&wc, rl_line_buffer + p, (size_t)(rl_end - p), &st);
    if (r == (size_t)-1 || r == (size_t)-2 || r == 0) {
        *cols = 1;
        return 1;
    }
    int w = wcwidth(wc);
    *cols = w < 0 ? 1 : w;
    return (int)r;
}

/* Screen columns from offset a to offset b on one line. */
static int cols_between(int a, int b)
{
    int c = 0, w;
    while (a < b) {
        a += char_at(a, &w);
        c += w;
    }
    return c;
}

/* The offset in the line [a, e) at screen column col (not inside a character). */
static int offset_at_col(int a, int e, int col)
{
    int c = 0, w;
    while (a < e) {
        int n = char_at(a, &w);
        if (c + w > col)
            break;
        c += w;
        a += n;
    }
    return a;
}

bool input_line_moves(int dir)
{
    return dir < 0 ? line_start(rl_point) > 0 : line_end(rl_point) < rl_end;
}

static int line_up_down(int count, int key, int dir)
{
    if (!input_line_moves(dir))
        return dir < 0 ? rl_get_previous_history(count, key) : rl_get_next_history(count, key);
    int s = line_start(rl_point);
    int col = cols_between(s, rl_point);
    int a = dir < 0 ? line_start(s - 1) : line_end(rl_point) + 1;
    rl_point = offset_at_col(a, line_end(a), col);
    return 0;
}

static int line_up(int count, int key)
{
    return line_up_down(count, key, -1);
}

static int line_down(int count, int key)
{
    return line_up_down(count, key, +1);
}

static int line_home(int count, int key)
{
    int s = line_start(rl_point);
    if (s == rl_point)
        return rl_beg_of_line(count, key);
    rl_point = s;
    return 0;
}

static int line_end_key(int count, int key)
{
    int e = line_end(rl_point);
    if (e == rl_point)
        return rl_end_of_line(count, key);
    rl_point = e;
    return 0;
}

/* The history file has one entry per line: a multi-line message is stored with its newlines
 * as carriage returns, and turned back when read. */
enum { HIST_NL_TO_CR, HIST_CR_TO_NL };
static void swap_newlines(int dir)
{
    HIST_ENTRY **list = history_list();
    for (int i = 0; list && list[i]; i++)
        for (char *c = list[i]->line; c && *c; c++)
            if (*c == (dir == HIST_NL_TO_CR ? '\n' : '\r'))
                *c = dir == HIST_NL_TO_CR ? '\r' : '\n';
}

int input_init(struct tui *t)
{
    T = t;
    devnull = fopen("/dev/null", "w");
    rl_readline_name = "llamachat";
    rl_catch_signals = 0;
    rl_catch_sigwinch = 0;
    rl_change_environment = 0;
    rl_getc_function = tui_getc;
    rl_input_available_hook = tui_input_available;
    rl_redisplay_function = tui_redisplay;
    rl_prep_term_function = noop_prep;
    rl_deprep_term_function = noop_deprep;
    rl_outstream = devnull ? devnull : stderr;
    rl_instream = stdin;
    rl_initialize();   /* reads ~/.inputrc */
    /* 8-bit input is text (UTF-8), never Meta: the locale was made UTF-8 (tui.c) */
    rl_variable_bind("input-meta", "on");
    rl_variable_bind("output-meta", "on");
    rl_variable_bind("convert-meta", "off");
    rl_bind_key('\r', accept_or_continue);
    rl_bind_key('\n', accept_or_continue);
    rl_bind_keyseq("\033\r", insert_newline);
    rl_bind_keyseq("\033\n", insert_newline);
    rl_bind_keyseq("\033[A", line_up);   /* queue_key's arrows, Home and End */
    rl_bind_keyseq("\033[B", line_down);
    rl_bind_keyseq("\033[H", line_home);
    rl_bind_keyseq("\033[F", line_end_key);
    rl_bind_keyseq("\033[1;5C", rl_forward_word);
    rl_bind_keyseq("\033[1;5D", rl_backward_word);
    rl_bind_keyseq("\\C-x\\C-e", editor_key);   /* Ctrl-G: tui.c calls input_ctrl_g */
    complete_init();
    /* keydec.c collects pastes; readline's paste reader would wait for the end marker */
    rl_variable_bind("enable-bracketed-paste", "off");
    using_history();
    stifle_history(1000);
    history_failed = false;
    history_added = 0;
    if (t->o->history) {
        char *err = NULL;
        char *dir = lc_state_dir(NULL, &err);
        if (dir && asprintf(&history_path, "%s/history", dir) < 0)
            history_path = NULL;
        free(dir);
        if (!history_path) {
            tui_state_error(t, "could not keep the input history", err ? err : "out of memory");
            history_failed = true;
        } else {
            int e = read_history(history_path);
            if (e == 0) {
                swap_newlines(HIST_CR_TO_NL);
            } else if (e != ENOENT) {
                char *m = NULL;
                if (asprintf(&m, "%s: cannot read: %s", history_path, strerror(e)) >= 0)
                    tui_state_error(t, "could not read the input history", m);
                free(m);
            }
        }
        free(err);
    }
    rl_callback_handler_install("> ", on_line);
    return 0;
}

void input_shutdown(struct tui *t)
{
    rl_callback_handler_remove();
    /* the lines were appended as they came (two sessions at once both keep theirs); only trim */
    if (history_path && history_added > 0 && !history_failed) {
        int e = history_truncate_file(history_path, 1000);
        if (e != 0) {
            char *m = NULL;
            if (asprintf(&m, "%s: cannot trim to 1000 entries: %s", history_path, strerror(e)) >= 0)
                tui_state_error(t, "could not keep the input history", m);
            free(m);
        }
    }
    history_added = 0;
    free(history_path);
    history_path = NULL;
    clear_history();
    if (devnull)
        fclose(devnull);
    devnull = NULL;
    rl_outstream = NULL;
    T = NULL;
}

void input_history_added(struct tui *t, const char *line)
{
    if (!history_path || history_failed)
        return;
    char *err = NULL;
    if (lc_state_append_history(history_path, line, &err) == 0) {
        history_added++;
    } else {
        tui_state_error(t, "could not keep the input history", err ? err : "?");
        history_failed = true;
    }
    free(err);
}

void input_key(struct tui *t, int is_key_code, wint_t ch)
{
    queue_key(is_key_code, ch);
    drain(t);
}

/* Run readline on what is queued. */
static void drain(struct tui *t)
{
    while (q_len > 0 && !t->quit) {
        rl_callback_read_char();
        if (editor_pending) {
            editor_pending = false;
            input_edit_external(t);
        }
        if (restore_text) {
            rl_replace_line(restore_text, 0);
            rl_point = rl_end;
            free(restore_text);
            restore_text = NULL;
            t->dirty = true;
        }
    }
}

void input_alt(struct tui *t, wint_t ch)
{
    char b[5] = "\033";
    size_t n;
    encode_utf8(ch, b + 1, &n);
    q_push(b, n + 1);
    drain(t);
}

void input_seq(struct tui *t, const char *seq, size_t len)
{
    q_push(seq, len);
    drain(t);
}

void input_paste(struct tui *t, const char *text, size_t len)
{
    (void)len;
    if (*text)
        rl_insert_text(text);
    t->dirty = true;
}

bool input_vi_mode(void)
{
    return rl_editing_mode == 0;   /* readline's vi_mode */
}

void input_restore(const char *text)
{
    free(restore_text);
    restore_text = strdup(text);
}

bool input_is_empty(void)
{
    return rl_end == 0;
}

/* Layout of prompt + buffer: cells with their byte offsets, wrapped at width. */
struct icell {
    wchar_t ch;
    int w;
    size_t off;
};

static size_t layout(int width, struct icell **out, size_t *cursor_cell)
{
    const char *prompt = rl_display_prompt ? rl_display_prompt : "";
    size_t pl = strlen(prompt), bl = (size_t)rl_end;
    size_t total = pl + bl;
    size_t tabs = 0;   /* each takes 4 cells */
    for (size_t k = 0; k < bl; k++)
        tabs += rl_line_buffer[k] == '\t';
    struct icell *c = malloc((total + 3 * tabs + 1) * sizeof(*c));
    if (!c)
        return 0;
    size_t n = 0;
    size_t cur = (size_t)-1;
    mbstate_t st;
    memset(&st, 0, sizeof(st));
    size_t i = 0;
    while (i < total) {
        const char *p = i < pl ? prompt + i : rl_line_buffer + (i - pl);
        size_t avail = i < pl ? pl - i : total - i;
        if (i >= pl && i - pl == (size_t)rl_point && cur == (size_t)-1)
            cur = n;
        unsigned char b = (unsigned char)*p;
        if (b == '\n') {
            c[n++] = (struct icell){ L'\n', -1, i };
            i++;
            continue;
        }
        if (b == '\t' && i >= pl) {   /* four spaces, as the transcript shows it (view.c) */
            for (int k = 0; k < 4; k++)
                c[n++] = (struct icell){ L' ', 1, i };
            i++;
            continue;
        }
        if (b < 0x20 || b == 0x7F) {
            c[n++] = (struct icell){ b == 0x7F ? (wchar_t)0x2421 : (wchar_t)(0x2400 + b), 1, i };
            i++;
            continue;
        }
        wchar_t wc;
        size_t r = mbrtowc(&wc, p, avail, &st);
        if (r == (size_t)-1 || r == (size_t)-2 || r == 0) {
            memset(&st, 0, sizeof(st));
            c[n++] = (struct icell){ (wchar_t)0xFFFD, 1, i };
            i++;
            continue;
        }
        int w = wcwidth(wc);
        if (w < 0)
            wc = 0xFFFD, w = 1;
        c[n++] = (struct icell){ wc, w, i };
        i += r;
    }
    if (cur == (size_t)-1)
        cur = n;
    *cursor_cell = cur;
    *out = c;
    (void)width;
    return n;
}

/* Row and column of every cell (and of the end) when wrapped at width. */
static int place(const struct icell *c, size_t n, int width, size_t upto, int *row, int *col)
{
    int r = 0, x = 0;
    for (size_t i = 0; i < n && i < upto; i++) {
        if (c[i].w < 0) {
            r++;
            x = 0;
            continue;
        }
        if (x + c[i].w > width) {
            r++;
            x = 0;
        }
        x += c[i].w;
    }
    if (x >= width) {
        r++;
        x = 0;
    }
    *row = r;
    *col = x;
    return r + 1;
}

int input_rows(struct tui *t, int width, int max)
{
    (void)t;
    struct icell *c = NULL;
    size_t cur;
    size_t n = layout(width, &c, &cur);
    int row, col;
    int rows = place(c, n, width, n, &row, &col);
    free(c);
    return rows < 1 ? 1 : rows > max ? max : rows;
}

void input_draw(struct tui *t, int y0, int h, int width)
{
    struct icell *c = NULL;
    size_t cur;
    size_t n = layout(width, &c, &cur);
    int crow, ccol;
    place(c, n, width, cur, &crow, &ccol);
    int first = crow >= h ? crow - h + 1 : 0;   /* keep the cursor row visible */
    int r = 0, x = 0;
    size_t plen = strlen(rl_display_prompt ? rl_display_prompt : "");
    for (size_t i = 0; i < n; i++) {
        if (c[i].w < 0) {
            r++;
            x = 0;
            continue;
        }
        if (x + c[i].w > width) {
            r++;
            x = 0;
        }
        /* the character and its combining marks, drawn in one cell (view.c draw_cells) */
        wchar_t wc[CCHARW_MAX + 1] = { c[i].ch, 0 };
        int nw = 1;
        size_t last = i;
        while (c[i].w > 0 && last + 1 < n && c[last + 1].w == 0) {
            last++;
            if (nw < CCHARW_MAX)
                wc[nw++] = c[last].ch;
        }
        wc[nw] = 0;
        if (r >= first && r - first < h) {
            cchar_t cc;
            if (t->ascii_text && wc[0] >= 0x80) {   /* a locale that is not UTF-8 (tui.c) */
                for (int k = 0; k < c[i].w; k++)
                    mvaddch(y0 + r - first, x + k, '?');
                x += c[i].w;
                i = last;
                continue;
            }
            attr_t a = c[i].off < plen ? A_BOLD : A_NORMAL;
            setcchar(&cc, wc, a, 0, NULL);
            mvadd_wch(y0 + r - first, x, &cc);
        }
        x += c[i].w;
        i = last;
    }
    free(c);
    if (crow - first < h)
        move(y0 + crow - first, ccol < width ? ccol : width - 1);
}

void input_set_line(struct tui *t, const char *text)
{
    rl_replace_line(text, 0);
    rl_point = rl_end;
    t->dirty = true;
}

/* ---------------------------------------------------------------- Tab completion */

/* Commands whose argument is a file name. */
static const char *const path_commands[] = { "load", "save", "save!", "read", "model" };

enum { C_NONE, C_COMMAND, C_SET, C_PATH, C_WORD };
static int c_kind;      /* what the attempt completes */
static size_t c_off;    /* where the completed word starts in the line */

/* The "word" completed is always the whole line up to the cursor (no break characters), so
 * that a file name may hold spaces as the commands take them (the rest of the line); the
 * generators below complete its part from c_off and give back whole lines. */
static char *word_breaks(void)
{
    static char none[] = "";
    return none;
}

/* A candidate from its name: the line's text before c_off, then name, then suffix. */
static char *candidate(const char *text, const char *name, const char *suffix)
{
    char *m = NULL;
    if (asprintf(&m, "%.*s%s%s", (int)c_off, text, name, suffix) < 0)
        return NULL;
    return m;
}

static char *command_gen(const char *text, int state)
{
    static size_t i;
    if (!state)
        i = 0;
    const char *w = text + c_off;
    for (const char *name; (name = tui_command_names[i]) != NULL;) {
        i++;
        if (strncmp(name, w, strlen(w)) == 0)
            return candidate(text, name, "");
    }
    return NULL;
}

/* /set names: the settings of config.c's table that /set changes (section [sampling]), with
 * '-' for '_' as the parameter pane shows them. */
static char *set_gen(const char *text, int state)
{
    static size_t i;
    if (!state)
        i = 0;
    const char *w = text + c_off;
    for (const struct lc_option_def *d; (d = lc_config_option_at(i)) != NULL;) {
        i++;
        if (strcmp(d->section, "sampling") != 0)
            continue;
        char name[64];
        snprintf(name, sizeof(name), "%s", d->key);
        for (char *c = name; *c; c++)
            if (*c == '_')
                *c = '-';
        if (strncasecmp(name, w, strlen(w)) == 0)
            return candidate(text, name, "");
    }
    return NULL;
}

/* Commands with fixed words as their argument (completed as /set names are). */
static const struct { const char *cmd; const char *const words[4]; } word_args[] = {
    { "copy", { "code", NULL } },
};
static const char *const *c_words;   /* C_WORD: the words of the command */

static char *word_gen(const char *text, int state)
{
    static size_t i;
    if (!state)
        i = 0;
    const char *w = text + c_off;
    for (const char *name; c_words && (name = c_words[i]) != NULL;) {
        i++;
        if (strncmp(name, w, strlen(w)) == 0)
            return candidate(text, name, "");
    }
    return NULL;
}

/* File names through readline's own generator (~ and ~user understood); a directory gets '/'. */
static char *path_gen(const char *text, int state)
{
    char *name = rl_filename_completion_function(text + c_off, state);
    if (!name)
        return NULL;
    char *full = tilde_expand(name);
    struct stat st;
    bool dir = full && stat(full, &st) == 0 && S_ISDIR(st.st_mode);
    free(full);
    char *m = candidate(text, name, dir && name[0] && name[strlen(name) - 1] != '/' ? "/" : "");
    free(name);
    return m;
}

/* rl_attempted_completion_function: text is the line up to the cursor. */
static char **attempt(const char *text, int start, int end)
{
    (void)start;
    (void)end;
    rl_attempted_completion_over = 1;   /* never readline's default (file names everywhere) */
    c_kind = C_NONE;
    if (text[0] != '/')
        return NULL;
    size_t cmd_len = strcspn(text + 1, " \t\n");
    char cmd[32];
    if (text[1 + cmd_len] == '\0') {   /* still in the command's name */
        c_kind = C_COMMAND;
        c_off = 1;
    } else if (cmd_len < sizeof(cmd)) {
        memcpy(cmd, text + 1, cmd_len);
        cmd[cmd_len] = '\0';
        size_t arg = 1 + cmd_len + strspn(text + 1 + cmd_len, " \t");
        for (size_t i = 0; i < sizeof(path_commands) / sizeof(path_commands[0]); i++)
            if (!strcmp(cmd, path_commands[i]))
                c_kind = C_PATH;
        if (!strcmp(cmd, "set") && !strpbrk(text + arg, " \t"))
            c_kind = C_SET;
        for (size_t i = 0; i < sizeof(word_args) / sizeof(word_args[0]); i++)
            if (!strcmp(cmd, word_args[i].cmd) && !strpbrk(text + arg, " \t")) {
                c_kind = C_WORD;
                c_words = word_args[i].words;
            }
        c_off = arg;
    }
    char **m = c_kind == C_COMMAND ? rl_completion_matches(text, command_gen)
               : c_kind == C_SET ? rl_completion_matches(text, set_gen)
               : c_kind == C_PATH ? rl_completion_matches(text, path_gen)
               : c_kind == C_WORD ? rl_completion_matches(text, word_gen) : NULL;
    /* a whole command or /set name is followed by a space; a file name by nothing (a
     * directory ends in '/'), and never quoted: the rest of the line is the name */
    rl_completion_append_character = c_kind == C_PATH ? '\0' : ' ';
    rl_filename_completion_desired = 0;
    rl_filename_quoting_desired = 0;
    return m;
}

/* More than one match: their names on the message line (readline would print a list to the
 * terminal, which is curses').  As many as fit the line; when some do not, the line says so
 * and the next Tab (the same matches) shows the ones after, then from the first again. */
static void show_matches(char **matches, int n, int max_len)
{
    (void)max_len;
    if (!T)
        return;
    static char *last_first;   /* the matches shown last: their first, their number */
    static int last_n, next;   /* where the next Tab goes on */
    if (!last_first || strcmp(last_first, matches[1]) != 0 || last_n != n)
        next = 1;
    free(last_first);
    last_first = strdup(matches[1]);
    last_n = n;
    int room = COLS - 4;   /* the message line's "- " before and a column after */
    if (room > 400)
        room = 400;
    char buf[512];
    int from = next;
    size_t off = (size_t)snprintf(buf, sizeof(buf), from > 1 ? "%d matches (from %d):" : "%d matches:",
                                  n, from);
    const char *more = " ... (Tab: more)";
    int i = from;
    for (; i <= n; i++) {
        const char *name = matches[i] + c_off;
        if (c_kind == C_PATH) {   /* the last component, as ls shows it */
            const char *slash = strrchr(name, '/');
            if (slash && slash[1])
                name = slash + 1;
            else if (slash && slash > name) {
                const char *p = slash;
                while (p > name && p[-1] != '/')
                    p--;
                name = p;
            }
        }
        size_t need = 1 + strlen(name) + (i < n ? strlen(more) : 0);
        if (off + need > (size_t)room && i > from)
            break;
        off += (size_t)snprintf(buf + off, sizeof(buf) - off, " %s", name);
        if (off >= sizeof(buf) - 32) {
            i++;
            break;
        }
    }
    if (i <= n) {
        snprintf(buf + off, sizeof(buf) - off, "%s", more);
        next = i;
    } else {
        next = 1;
    }
    tui_message(T, false, "%s", buf);
}

static void complete_init(void)
{
    rl_attempted_completion_function = attempt;
    rl_completion_word_break_hook = word_breaks;
    rl_completion_display_matches_hook = show_matches;
    rl_completer_quote_characters = NULL;
    rl_variable_bind("show-all-if-ambiguous", "on");   /* the first Tab lists the matches */
}

bool input_completes(void)
{
    return rl_end > 0 && rl_line_buffer[0] == '/';
}

/* ---------------------------------------------------------------- $EDITOR */

/* Most of a message the editor may give back (bytes). */
#define EDIT_MAX ((size_t)1 << 20)

/*
 * Run "$VISUAL" (else "$EDITOR", else vi) on path through /bin/sh, as git does ("$EDITOR"
 * "$@": the variable may hold arguments), with the terminal given to it.  The chat ignores
 * SIGINT and SIGQUIT while it waits (as system() does); a Ctrl-Z that stops the editor stops
 * the chat too, so that the shell gets the terminal back.  Returns the wait status, or -1
 * (errno set) when no process could be started.
 */
static int run_editor(const char *editor, const char *path)
{
    char *cmd = NULL;
    if (asprintf(&cmd, "%s \"$@\"", editor) < 0)
        return -1;
    struct sigaction ign, old_int, old_quit, old_tstp;
    memset(&ign, 0, sizeof(ign));
    sigemptyset(&ign.sa_mask);
    ign.sa_handler = SIG_IGN;
    sigaction(SIGINT, &ign, &old_int);
    sigaction(SIGQUIT, &ign, &old_quit);
    sigaction(SIGTSTP, &ign, &old_tstp);
    pid_t pid = fork();
    if (pid == 0) {
        static const int sigs[] = { SIGINT, SIGQUIT, SIGTSTP, SIGTERM, SIGHUP, SIGWINCH, SIGCONT,
                                    SIGPIPE };
        for (size_t i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++)
            signal(sigs[i], SIG_DFL);
        sigset_t none;
        sigemptyset(&none);
        sigprocmask(SIG_SETMASK, &none, NULL);
        execl("/bin/sh", "sh", "-c", cmd, "sh", path, (char *)NULL);
        _exit(127);
    }
    int status = -1, saved = errno;
    while (pid > 0) {
        pid_t r = waitpid(pid, &status, WUNTRACED);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0) {
            status = -1;
            break;
        }
        if (WIFSTOPPED(status)) {   /* Ctrl-Z in the editor: the job stops, fg continues it */
            kill(getpid(), SIGSTOP);
            kill(pid, SIGCONT);
            continue;
        }
        break;
    }
    if (pid < 0)
        saved = errno;
    sigaction(SIGINT, &old_int, NULL);
    sigaction(SIGQUIT, &old_quit, NULL);
    sigaction(SIGTSTP, &old_tstp, NULL);
    free(cmd);
    errno = saved;
    return status;
}

void input_edit_external(struct tui *t)
{
    const char *editor = getenv("VISUAL");
    if (!editor || !*editor)
        editor = getenv("EDITOR");
    if (!editor || !*editor)
        editor = "vi";
    const char *dir = getenv("TMPDIR");
    char *path = NULL;
    if (asprintf(&path, "%s/llamachat-message-XXXXXX.md", dir && *dir ? dir : "/tmp") < 0) {
        tui_message(t, true, "out of memory");
        return;
    }
    int fd = mkstemps(path, 3);   /* 0600, a new file */
    if (fd < 0) {
        tui_message(t, true, "cannot make a file for the editor: %s: %s", path, strerror(errno));
        free(path);
        return;
    }
    /* the message and one final newline (editors add one; it is taken off again) */
    size_t len = (size_t)rl_end, off = 0;
    bool ok = true;
    while (ok && off < len) {
        ssize_t w = write(fd, rl_line_buffer + off, len - off);
        if (w < 0 && errno == EINTR)
            continue;
        ok = w > 0;
        off += w > 0 ? (size_t)w : 0;
    }
    ok = ok && write(fd, "\n", 1) == 1;
    if (close(fd) != 0)
        ok = false;
    if (!ok) {
        tui_message(t, true, "cannot write %s for the editor: %s", path, strerror(errno));
        unlink(path);
        free(path);
        return;
    }
    tui_release_terminal(t);
    int st = run_editor(editor, path);
    int e = errno;
    tui_reclaim_terminal(t);
    char *safe = lc_text_safe(editor);
    const char *shown = safe ? safe : "the editor";
    if (st == -1) {
        tui_message(t, true, "cannot run %s: %s; the message is unchanged", shown, strerror(e));
    } else if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
        if (WIFEXITED(st) && WEXITSTATUS(st) == 127)
            tui_message(t, true, "%s: not found (set VISUAL or EDITOR); the message is unchanged",
                        shown);
        else if (WIFEXITED(st))
            tui_message(t, true, "%s exited with status %d; the message is unchanged", shown,
                        WEXITSTATUS(st));
        else
            tui_message(t, true, "%s ended by signal %d; the message is unchanged", shown,
                        WTERMSIG(st));
    } else {
        size_t n = 0;
        char *why = NULL;
        char *text = lc_file_read_small(path, EDIT_MAX, &n, &why);
        if (!text) {
            tui_message(t, true, "the edited message: %s; the message is unchanged", why ? why : "?");
        } else if (memchr(text, '\0', n) || !lc_utf8_valid(text, n)) {
            tui_message(t, true, "the edited message is not UTF-8 text; the message is unchanged");
        } else {
            if (n > 0 && text[n - 1] == '\n')
                text[--n] = '\0';
            if (n > 0 && text[n - 1] == '\r')
                text[--n] = '\0';
            input_set_line(t, text);
            tui_message(t, false, "message edited in %s: Enter sends it", shown);
        }
        free(text);
        free(why);
    }
    free(safe);
    unlink(path);
    free(path);
    t->dirty = true;
}

bool input_ctrl_g(struct tui *t)
{
    /* inside Ctrl-R search or a key sequence Ctrl-G is readline's abort */
    if (RL_ISSTATE(RL_STATE_ISEARCH | RL_STATE_NSEARCH | RL_STATE_MULTIKEY | RL_STATE_NUMERICARG))
        return false;
    input_edit_external(t);
    return true;
}

/* ---------------------------------------------------------------- /read FILE */

void input_read_file(struct tui *t, const char *arg)
{
    if (!arg || !*arg) {
        tui_message(t, true, "usage: /read FILE (its text goes into the input)");
        return;
    }
    char *err = NULL;
    char *path = lc_path_expand(arg, &err);
    size_t max = (size_t)(t->o->read_limit_kib > 0 ? t->o->read_limit_kib : 64) << 10;
    size_t n = 0;
    char *why = NULL;
    char *text = path ? lc_file_read_small(path, max, &n, &why) : NULL;
    const char *fail = !path ? (err ? err : "out of memory") : !text ? (why ? why : "cannot read") : NULL;
    char *msg = NULL;
    if (!fail && n == 0)
        fail = "empty; nothing read";
    if (!fail && memchr(text, '\0', n))
        fail = "a binary file (NUL bytes); not read";
    if (!fail && !lc_utf8_valid(text, n))
        fail = "not UTF-8 text; not read";
    if (fail) {
        bool big = why && strstr(why, "larger than");
        if (asprintf(&msg, "/read %s: %s%s", arg, fail,
                     big ? " ([ui] read_limit in ~/.llamachatrc raises it)" : "") >= 0) {
            tui_add_entry(t, E_ERROR, msg, strlen(msg));
            tui_message(t, true, "%s", msg);
        }
    } else {
        /* CRLF files: the message gets LF; one final newline is not part of the text */
        size_t o = 0;
        for (size_t i = 0; i < n; i++)
            if (!(text[i] == '\r' && i + 1 < n && text[i + 1] == '\n'))
                text[o++] = text[i];
        n = o;
        if (n > 0 && text[n - 1] == '\n')
            n--;
        text[n] = '\0';
        input_restore(text);
        tui_message(t, false, "read %zu bytes from %s into the input: Enter sends them", n, arg);
    }
    free(msg);
    free(text);
    free(why);
    free(err);
    free(path);
}
