/*
 * view.c - layout and drawing.  Everything is drawn from the state in struct tui, on stdscr:
 *
 *   +------------------------------------------+-------------+
 *   | transcript (wrapped, scrollback)         | parameters  |  (pane hidden with F2 or when
 *   |                                          |             |   the terminal is narrow)
 *   +-- message line -------------------------------------------+
 *   | input (readline, 1..5 rows)                               |
 *   | status bar                                                |
 *
 * Text from the model is untrusted: it is decoded here into cells, and control characters,
 * invalid UTF-8 and non-printable code points become visible placeholders (U+2400 control
 * pictures, U+FFFD), so nothing the model writes reaches the terminal as an escape sequence.
 * A reply of a chat model is shown as Markdown (markdown.h: styled display text, decoded the
 * same way), unless /raw or [ui] markdown = off; a base model's text is always shown as it is.
 */
#include "internal.h"
#include "markdown.h"
#include "textsafe.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <wctype.h>

enum { PAIR_USER = 1, PAIR_ASSISTANT, PAIR_NOTE, PAIR_ERROR, PAIR_STATUS, PAIR_TITLE, PAIR_SEL,
       PAIR_SYSTEM, PAIR_CODE };

#define PARAM_PANE_W 22
#define MIN_COLS 20
#define MIN_ROWS 5
#define TEXT_MAX_W 100

static const char *const param_names[] = { "temp", "top-k", "top-p", "min-p", "repeat-penalty",
                                           "repeat-last-n", "max-tokens", "seed" };

int view_param_count(void)
{
    return (int)(sizeof(param_names) / sizeof(param_names[0]));
}

const char *view_param_name(int i)
{
    return i >= 0 && i < view_param_count() ? param_names[i] : "?";
}

void view_init_colors(struct tui *t)
{
    const char *theme = t->o->theme ? t->o->theme : "default";
    t->mono = strcmp(theme, "mono") == 0 || !has_colors();
    if (t->mono)
        return;
    start_color();
    use_default_colors();
    bool light = strcmp(theme, "light") == 0;
    init_pair(PAIR_USER, light ? COLOR_BLUE : COLOR_CYAN, -1);
    init_pair(PAIR_ASSISTANT, -1, -1);
    init_pair(PAIR_NOTE, light ? COLOR_MAGENTA : COLOR_YELLOW, -1);
    init_pair(PAIR_ERROR, COLOR_RED, -1);
    init_pair(PAIR_STATUS, COLOR_BLACK, light ? COLOR_WHITE : COLOR_CYAN);
    init_pair(PAIR_TITLE, light ? COLOR_BLUE : COLOR_GREEN, -1);
    init_pair(PAIR_SEL, COLOR_BLACK, COLOR_YELLOW);
    init_pair(PAIR_SYSTEM, COLOR_GREEN, -1);
    /* code (Markdown): on a grey background where the terminal has 256 colours, else yellow
     * (blue on a light theme) */
    if (COLORS >= 256)
        init_pair(PAIR_CODE, -1, light ? 254 : 236);
    else
        init_pair(PAIR_CODE, light ? COLOR_BLUE : COLOR_YELLOW, -1);
}

static attr_t attr_of(const struct tui *t, int pair, attr_t extra)
{
    return t->mono ? extra : (COLOR_PAIR(pair) | extra);
}

/* ---------------------------------------------------------------- cells and wrapping */

void entry_free(struct entry *e)
{
    free(e->text);
    free(e->cells);
    free(e->line_start);
    free(e->line_margin);
    memset(e, 0, sizeof(*e));
}

static bool push_cell(struct entry *e, size_t *cap, wchar_t ch, int w, uint16_t style)
{
    if (e->n_cells == *cap) {
        size_t nc = *cap ? *cap * 2 : 64;
        struct cell *c = realloc(e->cells, nc * sizeof(*c));
        if (!c)
            return false;
        e->cells = c;
        *cap = nc;
    }
    e->cells[e->n_cells++] = (struct cell){ ch, (int8_t)w, style };
    return true;
}

/* Decode s[0..n) into cells of the given style; returns the bytes used: n, or less when !final
 * and s ends inside a character (the rest waits for more bytes). */
static size_t decode_run(struct entry *e, size_t *cap, const char *text, size_t n, bool final,
                         uint16_t style)
{
    const unsigned char *s = (const unsigned char *)text;
    size_t i = 0;
    while (i < n) {
        unsigned char b = s[i];
        if (b == '\n') {
            push_cell(e, cap, L'\n', -1, 0);
            i++;
            continue;
        }
        if (b == '\t') {
            for (int k = 0; k < 4; k++)
                push_cell(e, cap, L' ', 1, style);
            i++;
            continue;
        }
        /* the one sanitizer (textsafe.h): control pictures, U+FFFD for C1 and invalid bytes */
        uint32_t cp;
        /* final: a reply that ended inside a character shows its bytes (U+FFFD each) */
        size_t r = lc_text_visible(text + i, n - i, final, &cp);
        if (r == 0)
            break;   /* incomplete: wait for more bytes */
        i += r;
        if ((cp >= 0x2400 && cp <= 0x2421) || cp == 0xFFFD) {
            push_cell(e, cap, (wchar_t)cp, 1, style);   /* placeholders are one column */
            continue;
        }
        int w = wcwidth((wchar_t)cp);
        size_t base = e->n_cells;   /* the character a combining mark goes with */
        while (w == 0 && base > 0 && e->cells[base - 1].w == 0)
            base--;                 /* past the marks before it */
        if (w < 0 || w > 2)
            push_cell(e, cap, (wchar_t)0xFFFD, 1, style);
        else if (w == 0 && (base == 0 || e->cells[base - 1].w < 0)) {
            /* a combining mark with nothing to attach to (a message's or a line's first
             * character): shown on a no-break space, as Unicode shows a mark alone (TUS 2.11) */
            push_cell(e, cap, (wchar_t)0xA0, 1, style);
            push_cell(e, cap, (wchar_t)cp, 0, style);
        } else
            push_cell(e, cap, (wchar_t)cp, w, style);
    }
    return i;
}

/* Decode the bytes not decoded yet (text only grows while a reply streams). */
static void entry_decode(struct entry *e)
{
    size_t cap = e->cells_cap;
    e->decoded_len += decode_run(e, &cap, e->text + e->decoded_len, e->len - e->decoded_len,
                                 !e->open, 0);
    e->cells_cap = cap;
}

/* Bytes of s[0..n) up to an incomplete UTF-8 character at its end (a reply still streaming). */
static size_t whole_chars(const char *s, size_t n)
{
    for (size_t k = n > 3 ? n - 3 : 0; k < n; k++) {
        uint32_t cp;
        if ((unsigned char)s[k] >= 0xC0 &&
            lc_utf8_decode((const unsigned char *)s + k, n - k, &cp) == LC_UTF8_INCOMPLETE)
            return k;
    }
    return n;
}

/* The Markdown options of the view now. */
static unsigned md_opts(const struct tui *t)
{
    return (t->ascii_text ? MD_OPT_ASCII : 0) | (t->show_think ? 0 : MD_OPT_FOLD_THINK);
}

/*
 * Make e's cells from its text: a chat model's reply as Markdown (re-rendered whole when its
 * text, or the options, changed), anything else as it is (decoded incrementally).  A change
 * makes the wrap stale.  If the Markdown cannot be made (out of memory) the text is shown as
 * it is.
 */
static void entry_cells(const struct tui *t, struct entry *e)
{
    bool md = t->markdown && !t->plain && e->kind == E_ASSISTANT;
    if (md) {
        size_t n = e->open ? whole_chars(e->text, e->len) : e->len;
        unsigned opts = md_opts(t);
        if (e->md && e->md_opts == opts && e->md_len == n)
            return;
        struct md_doc doc;
        if (md_render(e->text, n, opts, &doc) == 0) {
            size_t cap = e->cells_cap;
            e->n_cells = 0;
            for (size_t k = 0; k < doc.n_spans; k++)
                decode_run(e, &cap, doc.text + doc.spans[k].start,
                           doc.spans[k].end - doc.spans[k].start, true, (uint16_t)doc.spans[k].style);
            e->cells_cap = cap;
            md_doc_free(&doc);
            e->md = true;
            e->md_opts = opts;
            e->md_len = n;
            e->decoded_len = 0;
            e->wrap_width = 0;
            return;
        }
    }
    if (e->md) {   /* back to the text as it is */
        e->md = false;
        e->n_cells = 0;
        e->decoded_len = 0;
    }
    if (e->decoded_len < e->len)
        e->wrap_width = 0;
    entry_decode(e);
}

static bool push_line(struct entry *e, int *cap, int start, int margin)
{
    if (e->n_lines == *cap) {
        int nc = *cap ? *cap * 2 : 8;
        int *l = realloc(e->line_start, (size_t)nc * sizeof(*l));
        if (!l)
            return false;
        e->line_start = l;
        int *m = realloc(e->line_margin, (size_t)nc * sizeof(*m));
        if (!m)
            return false;
        e->line_margin = m;
        *cap = nc;
    }
    e->line_start[e->n_lines] = start;
    e->line_margin[e->n_lines] = margin;
    e->n_lines++;
    return true;
}

/* Word-wrap the cells to width columns (display width, wide characters count 2); the first
 * line starts at column col0 (a continuation shown inline after the message before it; when
 * its first word does not fit there, that line stays empty).  A line broken at a space does
 * not start with that space.  A Markdown line's margin (MD_MARGIN cells at its start, never a
 * place to break) is repeated at the start of its continuation rows (line_margin), unless it
 * would take more than half the width. */
static void entry_wrap(const struct tui *t, struct entry *e, int width, int col0)
{
    entry_cells(t, e);
    if (e->wrap_width == width && e->wrap_col0 == col0)
        return;
    e->n_lines = 0;
    int cap = 0;
    free(e->line_start);
    free(e->line_margin);
    e->line_start = NULL;
    e->line_margin = NULL;
    int start = 0, col = col0, last_space = -1;
    int lstart = 0;          /* first cell of the current line (between newlines) */
    int mw = 0;              /* columns of its margin */
    bool in_margin = true;   /* still in the margin */
    push_line(e, &cap, 0, -1);
    for (int i = 0; i < (int)e->n_cells; i++) {
        const struct cell *c = &e->cells[i];
        if (c->w < 0) {   /* newline */
            start = i + 1;
            col = 0;
            last_space = -1;
            lstart = i + 1;
            mw = 0;
            in_margin = true;
            push_line(e, &cap, start, -1);
            continue;
        }
        bool margin = in_margin && (c->style & MD_MARGIN);
        in_margin = margin;
        int cont = mw > 0 && mw * 2 <= width ? mw : 0;   /* margin of a continuation row */
        if (col + c->w > width && col > 0) {
            if (c->ch == L' ' && !margin) {   /* the space that does not fit ends the line */
                start = i + 1;
                push_line(e, &cap, start, cont ? lstart : -1);
                col = cont;
                last_space = -1;
                continue;
            }
            if (last_space >= start)
                start = last_space + 1;
            else if (e->n_lines == 1 && col0 > 0)
                start = 0;   /* the first word does not fit after col0: the next line */
            else
                start = i;   /* one word longer than the line: cut it */
            if (margin)
                cont = 0;    /* the margin alone is wider than the line */
            push_line(e, &cap, start, cont ? lstart : -1);
            col = cont;
            for (int k = start; k < i; k++)
                col += e->cells[k].w;
            last_space = -1;
        }
        col += c->w;
        if (margin)
            mw += c->w;
        else if (c->ch == L' ')
            last_space = i;
    }
    e->end_col = col;
    e->wrap_width = width;
    e->wrap_col0 = col0;
}

void view_invalidate(struct tui *t)
{
    for (size_t i = 0; i < t->n_entries; i++)
        t->entries[i].wrap_width = 0;
}

static void draw_hline(const struct tui *t, int y, int x, int n, attr_t attr);

/* The attributes of a Markdown style (markdown.h) on top of the entry's: bold, italic and
 * underline work on every theme; colours only where the theme has them (mono: none). */
static attr_t style_attr(const struct tui *t, attr_t base, unsigned st)
{
    if (!st)
        return base;
    attr_t a = base;
    if (st & (MD_CODE | MD_PRE))
        a = t->mono ? (st & MD_CODE ? A_BOLD : A_NORMAL) : COLOR_PAIR(PAIR_CODE);
    if (st & MD_STRONG)
        a |= A_BOLD;
    if (st & (MD_EMPH | MD_QUOTE))
        a |= A_ITALIC;
    if (st & MD_LINK)
        a |= A_UNDERLINE;
    if (st & MD_HEADING) {
        a = attr_of(t, PAIR_TITLE, A_BOLD);
        if ((st & MD_H1) && !(st & MD_MARK))
            a |= A_UNDERLINE;
        return a;
    }
    if (st & MD_QBAR)
        return attr_of(t, PAIR_TITLE, A_NORMAL);
    if (st & MD_RULE)
        return attr_of(t, PAIR_TITLE, A_DIM);
    if (st & MD_THINK)
        return (a & ~(attr_t)A_BOLD) | A_DIM | (st & MD_MARK ? A_ITALIC : 0);
    if ((st & MD_MARK) && (st & MD_PRE))
        return a | A_ITALIC;   /* a code block's language */
    if (st & MD_MARK)
        return a | A_DIM;
    return a;
}

/* A character (wc: a spacing character and its combining marks, 0-terminated) with attributes
 * that may include a colour pair (COLOR_PAIR bits): setcchar takes the pair apart. */
static void set_cell(cchar_t *cc, const wchar_t *wc, attr_t attr)
{
    setcchar(cc, wc, attr & ~(attr_t)A_COLOR, (short)PAIR_NUMBER(attr), NULL);
}

/* Draw cells [a, b) of e at (y, x) within width columns; ascii: a character outside ASCII
 * is drawn as '?' (one per column), for a terminal whose locale is not UTF-8.  margin: the
 * cells are a margin repeated on a continuation row: only quote bars are drawn (the rest as
 * spaces).  Returns the columns drawn. */
static int draw_cells(const struct tui *t, const struct entry *e, int a, int b, int y, int x,
                      int width, attr_t base, bool margin)
{
    int col = 0;
    for (int i = a; i < b; i++) {
        const struct cell *c = &e->cells[i];
        if (c->w < 0)
            break;
        if (margin && !(c->style & MD_MARGIN))
            break;
        if (col + c->w > width)
            break;
        attr_t attr = style_attr(t, base, c->style);
        if (t->find_entry >= 0 && (size_t)t->find_entry < t->n_entries &&
            e == &t->entries[t->find_entry] && i >= t->find_cell &&
            (size_t)(i - t->find_cell) < t->find_qn)
            attr |= A_REVERSE;   /* the match /find shows */
        cchar_t cc;
        if (margin && !(c->style & MD_QBAR) && c->w > 0) {
            for (int k = 0; k < c->w; k++)
                mvaddch(y, x + col + k, ' ' | attr);
            col += c->w;
            continue;
        }
        if (t->ascii_text && (c->ch >= 0x80 || c->ch < 0x20)) {
            for (int k = 0; k < c->w; k++)
                mvaddch(y, x + col + k, '?' | attr);
            col += c->w;
            continue;
        }
        if (c->w == 0)
            continue;   /* a combining mark: drawn with the character before it */
        /* the character and the combining marks after it, in one cell: a mark added on its
         * own goes to the cell before the cursor, which for a wide character is its second
         * column (the mark is lost) */
        wchar_t wc[CCHARW_MAX + 1];
        int n = 0;
        wc[n++] = c->ch;
        for (int j = i + 1; j < b && e->cells[j].w == 0 && n < CCHARW_MAX; j++)
            wc[n++] = e->cells[j].ch;
        wc[n] = 0;
        set_cell(&cc, wc, attr);
        mvadd_wch(y, x + col, &cc);
        col += c->w;
    }
    return col;
}

/* One wrapped row of e (line l) at (y, x), within width columns: its repeated margin, its
 * cells; a code block's row is filled to the width with its background, a thematic break
 * drawn across it. */
static void draw_row(const struct tui *t, const struct entry *e, int l, int y, int x, int width,
                     attr_t base)
{
    int a = e->line_start[l];
    int b = l + 1 < e->n_lines ? e->line_start[l + 1] : (int)e->n_cells;
    int col = 0;
    if (e->line_margin && e->line_margin[l] >= 0)
        col = draw_cells(t, e, e->line_margin[l], a, y, x, width, base, true);
    int first = e->line_margin && e->line_margin[l] >= 0 ? e->line_margin[l] : a;
    col += draw_cells(t, e, a, b, y, x + col, width - col, base, false);
    if (!e->md || first >= (int)e->n_cells)
        return;
    /* the style of the row: its first cell after the margin, else (an empty line of a code
     * block) its margin's */
    unsigned st = e->cells[first].w >= 0 ? e->cells[first].style : 0;
    for (int i = a; i < b && e->cells[i].w >= 0; i++)
        if (!(e->cells[i].style & MD_MARGIN)) {
            st = e->cells[i].style;
            break;
        }
    if ((st & MD_RULE) && col < width) {
        draw_hline(t, y, x + col, width - col, style_attr(t, base, st));
    } else if ((st & MD_PRE) && !t->mono && col < width) {
        attr_t pa = style_attr(t, base, MD_PRE);
        attron(pa);
        mvhline(y, x + col, ' ', width - col);
        attroff(pa);
    }
}

static attr_t entry_attr(const struct tui *t, const struct entry *e)
{
    switch (e->kind) {
    case E_USER: return attr_of(t, PAIR_USER, A_BOLD);
    case E_ASSISTANT: return attr_of(t, PAIR_ASSISTANT, A_NORMAL);
    case E_SYSTEM: return attr_of(t, PAIR_SYSTEM, A_DIM);
    case E_NOTE: return attr_of(t, PAIR_NOTE, t->mono ? A_DIM : A_NORMAL);
    case E_ERROR: return attr_of(t, PAIR_ERROR, A_BOLD);
    }
    return A_NORMAL;
}

static bool is_text_msg(const struct entry *e)
{
    return e->kind == E_USER || e->kind == E_ASSISTANT;
}

/* With a base model (the "plain" template) the model reads the messages as one running text
 * (chat_template.c): a message of the user or the model continues the one before it on the
 * same line, so that the screen shows what the model reads. */
static bool joins_previous(const struct tui *t, size_t i)
{
    return t->plain && i > 0 && is_text_msg(&t->entries[i]) && is_text_msg(&t->entries[i - 1]);
}

static int str_width(const char *s);
static void put_str(int y, int x, int width, const char *raw, attr_t attr);

/* What is drawn before a message's text: its role label ([ui] labels; not on a message that
 * continues the one before on its line) and, for a reply /regen wrote again, "< 2/3 >" (the
 * version shown), unless it continues the text before (join: the marker goes after the reply,
 * entry_marker, never into the running sentence).  Returns its display width (0: none). */
static int entry_prefix(const struct tui *t, size_t i, bool join, char *buf, size_t len)
{
    const struct entry *e = &t->entries[i];
    buf[0] = '\0';
    if (e->msg < 0 || (size_t)e->msg >= t->chat->n)
        return 0;
    const struct lc_message *m = &t->chat->msgs[e->msg];
    const char *label = NULL;
    if (t->o->labels && !join)
        label = e->kind == E_USER ? (t->o->label_user ? t->o->label_user : "you:")
                : e->kind == E_ASSISTANT ? (t->o->label_model ? t->o->label_model : "model:")
                : e->kind == E_SYSTEM ? (t->o->label_system ? t->o->label_system : "system:") : NULL;
    if (label && *label && m->n_alts)
        snprintf(buf, len, "%s < %zu/%zu >", label, m->chosen + 1, m->n_alts + 1);
    else if (label && *label)
        snprintf(buf, len, "%s", label);
    else if (m->n_alts && !join)
        snprintf(buf, len, "< %zu/%zu >", m->chosen + 1, m->n_alts + 1);
    return buf[0] ? str_width(buf) : 0;
}

/* The "< 2/3 >" drawn after the text of a reply that continues the text before it (join).
 * Returns its display width (0: none). */
static int entry_marker(const struct tui *t, size_t i, bool join, char *buf, size_t len)
{
    const struct entry *e = &t->entries[i];
    buf[0] = '\0';
    if (!join || e->msg < 0 || (size_t)e->msg >= t->chat->n || !t->chat->msgs[e->msg].n_alts)
        return 0;
    const struct lc_message *m = &t->chat->msgs[e->msg];
    snprintf(buf, len, "< %zu/%zu >", m->chosen + 1, m->n_alts + 1);
    return str_width(buf);
}

/* The dim note after a reply the model did not end (chat.h "end": stopped, cut at the token
 * limit, cut off by llamachat ending), lc_end_note's; NULL for none or while it streams. */
static const char *entry_end_note(const struct tui *t, const struct entry *e)
{
    if (e->kind != E_ASSISTANT || e->open || e->msg < 0 || (size_t)e->msg >= t->chat->n)
        return NULL;
    return lc_end_note(t->chat->msgs[e->msg].end);
}

/* Rows of an entry on screen: its wrapped lines and a row of its own for its marker. */
static int entry_rows(const struct entry *e)
{
    return e->n_lines + (e->mark_row ? 1 : 0);
}

/* ---------------------------------------------------------------- /find */

/* Whether the cells of e from cell c on spell q (qn lower-case characters), any case. */
static bool cells_match(const struct entry *e, size_t c, const wchar_t *q, size_t qn)
{
    if (c + qn > e->n_cells)
        return false;
    for (size_t k = 0; k < qn; k++)
        if (e->cells[c + k].w < 0 || (wchar_t)towlower((wint_t)e->cells[c + k].ch) != q[k])
            return false;
    return true;
}

void view_find(struct tui *t, const char *text)
{
    if (text && *text) {
        size_t n = mbstowcs(NULL, text, 0);
        wchar_t *q = n != (size_t)-1 ? malloc((n + 1) * sizeof(*q)) : NULL;
        if (!q) {
            tui_message(t, true, "/find: %s", n == (size_t)-1 ? "not valid text" : "out of memory");
            return;
        }
        mbstowcs(q, text, n + 1);
        for (size_t k = 0; k < n; k++) {
            if (q[k] == L'\t')
                q[k] = L' ';   /* a tab is shown as spaces */
            q[k] = (wchar_t)towlower((wint_t)q[k]);
        }
        char *copy = strdup(text);
        if (!copy) {
            free(q);
            tui_message(t, true, "/find: out of memory");
            return;
        }
        free(t->find_q);
        free(t->find_text);
        t->find_q = q;
        t->find_text = copy;
        t->find_qn = n;
        t->find_entry = -1;   /* from the end */
    } else if (!t->find_q) {
        tui_message(t, true, "/find TEXT: search the transcript for TEXT");
        return;
    }
    t->find_pending = true;   /* run by the next draw, on the wrapped lines */
    t->dirty = true;
}

/* The pending /find over the laid-out transcript (total rows, h on screen): the match before
 * the one shown (or the last one), scrolled into view a third of the way down, and said. */
static void find_run(struct tui *t, int total, int h)
{
    t->find_pending = false;
    const wchar_t *q = t->find_q;
    size_t qn = t->find_qn;
    size_t n_newer = 0, n_all = 0;   /* matches after (newer than) the one found, and in all */
    int fe = -1, fc = -1;
    bool from_match = t->find_entry >= 0 && (size_t)t->find_entry < t->n_entries;
    for (size_t i = t->n_entries; i-- > 0;) {
        const struct entry *e = &t->entries[i];
        for (size_t c = e->n_cells; c-- > 0;) {
            if (!cells_match(e, c, q, qn))
                continue;
            n_all++;
            bool after_shown = from_match && ((int)i > t->find_entry ||
                                              ((int)i == t->find_entry && (int)c >= t->find_cell));
            if (after_shown) {
                n_newer++;
            } else if (fe < 0) {
                fe = (int)i;
                fc = (int)c;
            }
        }
    }
    const char *shown = t->find_text ? t->find_text : "";
    if (n_all == 0) {
        tui_message(t, true, "\"%s\" is not in the transcript", shown);
        return;
    }
    if (fe < 0) {
        tui_message(t, false, "\"%s\": no earlier match (%zu in all); End to go back", shown, n_all);
        return;
    }
    t->find_entry = fe;
    t->find_cell = fc;
    /* the row of the match: the entry's first row, as draw_transcript counts, + its line */
    int vline = 0;
    for (int i = 1; i <= fe; i++) {
        bool join = joins_previous(t, (size_t)i);
        vline += join ? entry_rows(&t->entries[i - 1]) - 1 : entry_rows(&t->entries[i - 1]) + 1;
    }
    const struct entry *e = &t->entries[fe];
    int l = 0;
    while (l + 1 < e->n_lines && e->line_start[l + 1] <= fc)
        l++;
    int row = vline + l;
    int first = row - h / 3;
    if (first > total - h)
        first = total - h;
    if (first < 0)
        first = 0;
    t->scroll = total > h ? total - h - first : 0;
    tui_message(t, false, "\"%s\": %zu of %zu from the end (/find: older)", shown,
                n_newer + 1, n_all);
}

/* The transcript in rows [y0, y0+h), columns [0, width).  Entries are separated by a blank
 * line, except one that continues the previous (joins_previous): its first line shares the
 * previous entry's last row. */
static void draw_transcript(struct tui *t, int y0, int h, int full_width)
{
    /* the conversation's lines are at most TEXT_MAX_W columns (long lines are hard to read);
     * notes and errors (paths, messages matched whole) take the whole width */
    int text_w = full_width > TEXT_MAX_W ? TEXT_MAX_W : full_width;
    int total = 0;
    for (size_t i = 0; i < t->n_entries; i++) {
        bool join = joins_previous(t, i);
        int width = is_text_msg(&t->entries[i]) || t->entries[i].kind == E_SYSTEM ? text_w : full_width;
        int col0 = join ? t->entries[i - 1].next_col : 0;
        char pre[160];
        int pw = entry_prefix(t, i, join, pre, sizeof(pre));
        struct entry *e = &t->entries[i];
        e->prefix_col = col0;
        if (pw > 0)
            col0 += (col0 > 0) + pw + 1;   /* " you: text" after a continued line */
        if (col0 >= width)
            col0 = width;
        entry_wrap(t, e, width, col0);
        /* a joined reply's marker after its text: on its last row when it fits there */
        int mw = entry_marker(t, i, join, pre, sizeof(pre));
        /* ... and the note of a reply the model did not end, after the marker: on a row of
         * its own, or after a joined reply's text when it fits there */
        const char *note = entry_end_note(t, e);
        if (note)
            mw += (mw > 0) + str_width(note);
        e->mark_row = false;
        e->mark_col = -1;
        e->next_col = e->end_col;
        if (mw > 0 && (join || !note) && e->end_col + 1 + mw <= width) {
            e->mark_col = e->end_col + (e->end_col > 0);
            e->next_col = e->mark_col + mw + 1;
        } else if (mw > 0) {
            e->mark_row = true;
            e->mark_col = 0;
            e->next_col = mw + 1;
        }
        if (e->next_col > width)
            e->next_col = width;
        total += entry_rows(e) - (join ? 1 : 0) + (i > 0 && !join ? 1 : 0);
    }
    /* Scrolled back: keep the same text in view while new lines arrive. */
    if (t->scroll > 0 && total > t->last_total_lines)
        t->scroll += total - t->last_total_lines;
    t->last_total_lines = total;
    if (t->find_pending && t->find_q)
        find_run(t, total, h);
    int max_scroll = total > h ? total - h : 0;
    if (t->scroll > max_scroll)
        t->scroll = max_scroll;
    if (t->scroll < 0)
        t->scroll = 0;
    /* virtual line at row y0: the text starts at the top and scrolls once the pane is full */
    int first = total > h ? total - h - t->scroll : 0;
    int vline = 0;   /* the virtual line of the entry's first line */
    for (size_t i = 0; i < t->n_entries; i++) {
        struct entry *e = &t->entries[i];
        bool join = joins_previous(t, i);
        if (i > 0)
            vline += join ? entry_rows(&e[-1]) - 1 : entry_rows(&e[-1]) + 1;
        if (vline + entry_rows(e) <= first)
            continue;
        if (vline - first >= h)
            return;
        attr_t attr = entry_attr(t, e);
        char pre[160];
        if (entry_prefix(t, i, join, pre, sizeof(pre)) > 0 && vline - first >= 0) {
            int px = e->prefix_col + (e->prefix_col > 0);
            if (px < e->wrap_width)
                put_str(y0 + vline - first, px, e->wrap_width - px, pre, attr | A_BOLD);
        }
        bool past = false;   /* the pane ends inside this entry */
        for (int l = 0; l < e->n_lines; l++) {
            int row = vline + l - first;
            if (row < 0)
                continue;
            if (row >= h) {
                past = true;
                break;
            }
            int x = l == 0 ? e->wrap_col0 : 0;
            draw_row(t, e, l, y0 + row, x, e->wrap_width - x, attr);
        }
        int mrow = vline + entry_rows(e) - 1 - first;
        if (e->mark_col >= 0 && mrow >= 0 && mrow < h && e->mark_col < e->wrap_width) {
            int mw = entry_marker(t, i, join, pre, sizeof(pre));
            if (mw > 0)
                put_str(y0 + mrow, e->mark_col, e->wrap_width - e->mark_col, pre, attr | A_BOLD);
            const char *note = entry_end_note(t, e);
            int nx = e->mark_col + mw + (mw > 0);
            if (note && nx < e->wrap_width)
                put_str(y0 + mrow, nx, e->wrap_width - nx, note,
                        (attr & ~(attr_t)A_BOLD) | A_DIM);
        }
        if (past)
            return;
    }
}

static bool ascii_text;   /* t->ascii_text, for put_str */

/* A horizontal or vertical line: Unicode box drawing, or - and | (vt100, a locale that is not
 * UTF-8), never the terminal's alternate character set. */
static void draw_hline(const struct tui *t, int y, int x, int n, attr_t attr)
{
    cchar_t cc;
    wchar_t wc[2] = { t->ascii_lines ? L'-' : (wchar_t)0x2500, 0 };
    /* setcchar takes the colour pair apart: the pair inside attr would be replaced by 0 */
    setcchar(&cc, wc, attr & ~A_COLOR, (short)PAIR_NUMBER(attr), NULL);
    mvhline_set(y, x, &cc, n);
}

static void draw_vline(const struct tui *t, int y, int x, int n, attr_t attr)
{
    cchar_t cc;
    wchar_t wc[2] = { t->ascii_lines ? L'|' : (wchar_t)0x2502, 0 };
    setcchar(&cc, wc, attr & ~A_COLOR, (short)PAIR_NUMBER(attr), NULL);
    mvvline_set(y, x, &cc, n);
}

/* Draw a one-line string (status bar, message line, parameter pane): it may hold model-derived
 * text (general.name, the template, an error naming a file), so it is drawn in its visible
 * form (textsafe.h), newlines and tabs as spaces. */
static void put_str(int y, int x, int width, const char *raw, attr_t attr)
{
    if (width <= 0)
        return;
    char *safe = lc_text_safe(raw);
    if (!safe)
        return;
    for (char *p = safe; *p; p++)
        if (*p == '\n' || *p == '\t')
            *p = ' ';
    if (ascii_text) {   /* each character outside ASCII as one '?' */
        char *w = safe;
        for (const char *p = safe; *p; p++)
            if ((unsigned char)*p < 0x80)
                *w++ = *p;
            else if (((unsigned char)*p & 0xC0) != 0x80)
                *w++ = '?';
        *w = '\0';
    }
    const char *s = safe;
    attron(attr);
    size_t cap = strlen(s) + 1;   /* characters at most */
    wchar_t *wbuf = malloc(cap * sizeof(*wbuf));
    size_t n = wbuf ? mbstowcs(wbuf, s, cap) : (size_t)-1;
    if (n == (size_t)-1) {
        mvaddnstr(y, x, s, width);
    } else {
        wbuf[n] = 0;
        int col = 0;
        size_t k = 0;
        while (k < n) {
            int w = wcwidth(wbuf[k]);
            if (w < 0)
                w = 1;
            if (col + w > width)
                break;
            col += w;
            k++;
        }
        mvaddnwstr(y, x, wbuf, (int)k);
    }
    attroff(attr);
    free(wbuf);
    free(safe);
}

static void draw_params(struct tui *t, int y0, int h, int x0, int width)
{
    draw_vline(t, y0, x0, h, attr_of(t, PAIR_TITLE, A_NORMAL));
    int x = x0 + 2, w = width - 2;
    int y = y0;
    if (y < y0 + h)
        put_str(y++, x, w, t->focus == FOCUS_PARAMS ? "Parameters [edit]" : "Parameters",
                attr_of(t, PAIR_TITLE, A_BOLD));
    for (int i = 0; i < view_param_count() && y < y0 + h; i++, y++) {
        char val[32], line[64];
        tui_param_text(t, i, val, sizeof(val));
        const char *label = param_names[i];
        if (i == 7 && t->o->sampling.seed == LC_SEED_RANDOM && t->last_seed != LC_SEED_RANDOM)
            label = "seed (random)";   /* the value is the seed the last reply used */
        bool sel = t->focus == FOCUS_PARAMS && t->param_sel == i;
        attr_t attr = sel ? attr_of(t, PAIR_SEL, A_REVERSE * t->mono) : A_NORMAL;
        int vw = (int)strlen(val);   /* digits, "off", "random": ASCII */
        int lw = (int)strlen(label) > 14 ? (int)strlen(label) : 14;
        if (lw + vw > w && (int)strlen(label) + 1 + vw > w) {
            /* a value too wide for its row (seed 4294967295 after "seed (random)", top-k
             * 1000000) is never cut: the label on its row, the value whole on the next */
            snprintf(line, sizeof(line), "%-*s", w, label);
            put_str(y, x, w, line, attr);
            if (++y >= y0 + h)
                break;
            snprintf(line, sizeof(line), "%*s", w, val);
        } else if (lw + vw > w) {   /* fits with one space between them */
            snprintf(line, sizeof(line), "%s %*s", label, w - (int)strlen(label) - 1, val);
        } else {
            snprintf(line, sizeof(line), "%-14s%*s", label, w - 14 > 0 ? w - 14 : 0, val);
        }
        put_str(y, x, w, line, attr);
    }
    static const char *const help[] = { "", "Tab   edit here", "Up/Dn choose", "Lt/Rt change",
                                        "F2    hide pane", "F1    help" };
    for (size_t i = 0; i < sizeof(help) / sizeof(help[0]) && y < y0 + h; i++, y++)
        put_str(y, x, w, help[i], A_DIM);
}

static const char *state_text(const struct tui *t, char *buf, size_t len)
{
    switch (t->state) {
    case ST_LOADING: return "loading";
    case ST_IDLE: return t->kv_loading ? "reading saved context" : "idle";
    case ST_FAILED: return "no model";
    case ST_WRITING: return "writing";
    case ST_READING:
        if (t->prog_total > 0)
            snprintf(buf, len, "reading prompt %d%%",
                     (int)(100.0 * t->prog_done / t->prog_total));
        else
            snprintf(buf, len, "reading prompt");
        return buf;
    }
    return "";
}

/* Display columns of a UTF-8 string (a byte that does not decode counts one). */
static int str_width(const char *s)
{
    int w = 0;
    mbstate_t st;
    memset(&st, 0, sizeof(st));
    for (size_t n = strlen(s); n > 0;) {
        wchar_t wc;
        size_t r = mbrtowc(&wc, s, n, &st);
        if (r == (size_t)-1 || r == (size_t)-2 || r == 0) {
            memset(&st, 0, sizeof(st));
            r = 1;
            w++;
        } else {
            int cw = wcwidth(wc);
            w += cw > 0 ? cw : 0;
        }
        s += r;
        n -= r;
    }
    return w;
}

/* A speed in tokens/s as the status bar shows it: "-" when unknown, one decimal below 10,000,
 * whole thousands ("12k") above, so a tiny model's figure does not crowd out other fields. */
static void fmt_tps(char *buf, size_t size, double tps)
{
    if (tps < 0)
        snprintf(buf, size, "-");
    else if (tps < 1e4)
        snprintf(buf, size, "%.1f", tps);
    else
        snprintf(buf, size, "%.0fk", tps < 1e9 ? tps / 1e3 : 1e6);
}

static void draw_status(struct tui *t, int y, int width)
{
    char st[48], line[512], ctx[32], pp[24], gen[24];
    /* a context size not known (a remote server's: 0) is not shown as "/0": the count alone */
    if (t->n_past >= 0) {
        if (t->n_ctx > 0)
            snprintf(ctx, sizeof(ctx), "%d/%d", t->n_past, t->n_ctx);
        else
            snprintf(ctx, sizeof(ctx), "%d", t->n_past);
    } else if (t->n_ctx > 0) {
        snprintf(ctx, sizeof(ctx), "-/%d", t->n_ctx);
    } else {
        snprintf(ctx, sizeof(ctx), "-");
    }
    fmt_tps(pp, sizeof(pp), t->pp_tps);
    fmt_tps(gen, sizeof(gen), t->gen_tps);
    /* narrow: whole fields make room, never part of one: the ISA, the model's name, its
     * description, then the prompt speed, the generation speed and the context; the state
     * stays */
    char name[48], isa[48];
    snprintf(name, sizeof(name), "%.40s", t->model_name);
    snprintf(isa, sizeof(isa), "%s %dt", t->isa[0] ? t->isa : "-", t->n_threads);
    const char *desc = t->model_desc[0] ? t->model_desc : "-";
    for (int drop = 0; drop < 7; drop++) {
        char mid[256] = "", tail[128] = "";
        size_t k = 0;
        if (drop < 3)
            k += (size_t)snprintf(mid + k, sizeof(mid) - k, "%s | ", desc);
        if (drop < 2 && name[0])
            k += (size_t)snprintf(mid + k, sizeof(mid) - k, "%s | ", name);
        if (drop < 1)
            snprintf(mid + k, sizeof(mid) - k, "%s | ", isa);
        k = 0;
        if (drop < 6)
            k += (size_t)snprintf(tail + k, sizeof(tail) - k, " | ctx %s", ctx);
        if (drop < 4)
            k += (size_t)snprintf(tail + k, sizeof(tail) - k, " | pp %s t/s", pp);
        if (drop < 5)
            snprintf(tail + k, sizeof(tail) - k, " | gen %s t/s", gen);
        snprintf(line, sizeof(line), " %s | %s", state_text(t, st, sizeof(st)), mid);
        line[strlen(line) - 3] = '\0';   /* mid's last " | ": the tail has its own */
        snprintf(line + strlen(line), sizeof(line) - strlen(line), "%s", tail);
        if (str_width(line) <= width)
            break;
    }
    attr_t a = attr_of(t, PAIR_STATUS, t->mono ? A_REVERSE : A_NORMAL);
    attron(a);
    mvhline(y, 0, ' ', width);
    attroff(a);
    put_str(y, 0, width, line, a);
}

/* Shorten s (UTF-8, in a buffer of size bytes) to at most width columns: cut after the last
 * whole word that fits and add an ellipsis, never inside a word (unless one word alone is
 * wider). */
static void fit_words(char *s, size_t size, int width, bool ascii)
{
    if (width <= 0 || str_width(s) <= width)
        return;
    const char *ell = ascii ? "..." : "\xe2\x80\xa6";
    int ell_w = ascii ? 3 : 1;
    size_t cut = 0, last_space = 0;
    mbstate_t st;
    memset(&st, 0, sizeof(st));
    int w = 0;
    for (size_t i = 0, n = strlen(s); i < n;) {
        wchar_t wc;
        size_t r = mbrtowc(&wc, s + i, n - i, &st);
        int cw = 1;
        if (r == (size_t)-1 || r == (size_t)-2 || r == 0) {
            memset(&st, 0, sizeof(st));
            r = 1;
        } else {
            cw = wcwidth(wc) > 0 ? wcwidth(wc) : 0;
        }
        if (w + cw > width - ell_w - 1)
            break;
        if (s[i] == ' ' && i > 1)
            last_space = i;
        w += cw;
        i += r;
        cut = i;
    }
    /* a word that could never fit (a long path) is cut where the room ends */
    if (last_space > 0) {
        size_t end = last_space + 1 + strcspn(s + last_space + 1, " ");
        char save = s[end];
        s[end] = '\0';
        bool fits = str_width(s + last_space + 1) <= width - ell_w - 1;
        s[end] = save;
        if (fits)
            cut = last_space;
    }
    snprintf(s + cut, size - cut, " %s", ell);
}

static void draw_message_line(struct tui *t, int y, int width)
{
    draw_hline(t, y, 0, width, attr_of(t, PAIR_TITLE, A_NORMAL));
    static const char scrolled[] = " scrolled back: End follows ";
    int room = width - 2;
    if (t->scroll > 0 && width >= 40) {
        int w = (int)sizeof(scrolled) - 1;
        put_str(y, width - w - 1, w, scrolled, attr_of(t, PAIR_NOTE, A_REVERSE));
        room -= w + 1;
    }
    if (t->message[0]) {   /* the whole width: a long message is cut only where the line ends */
        char buf[sizeof(t->message) + 8];
        snprintf(buf, sizeof(buf), " %s ", t->message);
        fit_words(buf, sizeof(buf), room, t->ascii_lines);
        put_str(y, 1, room, buf,
                t->message_is_error ? attr_of(t, PAIR_ERROR, A_BOLD) : attr_of(t, PAIR_NOTE, A_BOLD));
    }
}

static const char *const help_lines[] = {
    "llamachat keys",
    "Enter         send the message",
    "Alt-Enter     new line (also a trailing \\)",
    "Up/Down       lines of a message; history",
    "Esc, Ctrl-C   stop the reply (never quits)",
    "Ctrl-D        quit (on an empty line)",
    "PgUp/PgDn     scroll the transcript",
    "Home/End      top/bottom (empty line)",
    "Ctrl-Home/End top/bottom (any time)",
    "Mouse wheel   scroll",
    "Shift-drag    select text (terminal)",
    "Tab           complete a /command line",
    "Shift-Tab     parameters (Tab on text)",
    "Ctrl-X Ctrl-E edit in $EDITOR (Ctrl-G)",
    "F2            show/hide parameters",
    "Ctrl-S        save (transcripts dir)",
    "Ctrl-R        search the history",
    "Ctrl-L        redraw the screen",
    "Ctrl-Z        suspend (fg continues)",
    "Up (empty)    edit your last message",
    "Alt-Left/Right the reply's versions",
    "              (< 2/3 >, kept by /regen)",
    "F1            this help",
    "",
    "Parameter pane (Tab)",
    "Up/Down       choose",
    "Left/Right    change (also - and +)",
    "Enter         type a value",
    "Esc, Tab      back to the input",
    "",
    "Commands",
    "/help /quit /clear /regen /params",
    "/regen        a new reply; keeps the old",
    "/undo         take back the last exchange",
    "/edit         change your last message",
    "/copy         the last reply to the",
    "              clipboard (OSC 52)",
    "/copy N       message N from the end",
    "/copy code    its last ``` code block",
    "/save [FILE]  Markdown, or JSON (.json)",
    "/save! FILE   replace an existing file",
    "/load FILE    continue a JSON transcript",
    "/system TEXT  set the system prompt",
    "/read FILE    put a text file in input",
    "/set NAME VAL e.g. /set temp 0.7",
    "/raw          replies as written / Markdown",
    "  names: temp top-k top-p min-p",
    "  repeat-penalty repeat-last-n",
    "  max-tokens seed",
    "/think        thinking shown / folded",
    "/find TEXT    search the transcript",
    "/find         the match before",
    "/models /model PATH|N  list, switch",
    "/show /chats [N] /rename T /delete [N]",
    "//text        send a line starting with /",
    "",
    "Up/Down/PgUp/PgDn scroll this help;",
    "any other key closes it",
};

int view_help_count(void)
{
    return (int)(sizeof(help_lines) / sizeof(help_lines[0]));
}

/* Rows of help text that fit: the frame takes a row above and below when there is room. */
static int help_rows(int rows, bool *frame)
{
    int n = view_help_count();
    *frame = n + 2 <= rows;
    return *frame ? n : rows;
}

static void draw_help(struct tui *t, int rows, int cols)
{
    int n = view_help_count();
    bool frame;
    int vis = help_rows(rows, &frame);
    int max_scroll = n - vis > 0 ? n - vis : 0;
    if (t->help_scroll > max_scroll)
        t->help_scroll = max_scroll;
    if (t->help_scroll < 0)
        t->help_scroll = 0;
    int w = 46 < cols - 2 ? 46 : cols - 2;
    int h = frame ? n + 2 : rows;
    int y0 = (rows - h) / 2, x0 = (cols - w - 2) / 2;
    if (x0 < 0)
        x0 = 0;
    attr_t a = attr_of(t, PAIR_STATUS, A_REVERSE * t->mono);
    for (int y = 0; y < h; y++) {
        attron(a);
        mvhline(y0 + y, x0, ' ', w + 2);
        attroff(a);
        int li = (frame ? y - 1 : y) + t->help_scroll;
        if (li >= 0 && li < n && (frame ? y >= 1 && y <= n : true)) {
            bool title = li == 0 || !strcmp(help_lines[li], "Commands") ||
                         !strcmp(help_lines[li], "Parameter pane (Tab)");
            put_str(y0 + y, x0 + 1, w, help_lines[li], a | (title ? A_BOLD : 0));
        }
    }
    /* more above or below: say so on the edge */
    if (t->help_scroll > 0)
        put_str(y0, x0 + w - 5, 6, t->ascii_lines ? " ^^^ " : " \xe2\x86\x91\xe2\x86\x91\xe2\x86\x91 ", a | A_BOLD);
    if (t->help_scroll < max_scroll)
        put_str(y0 + h - 1, x0 + w - 5, 6, t->ascii_lines ? " vvv " : " \xe2\x86\x93\xe2\x86\x93\xe2\x86\x93 ", a | A_BOLD);
}

bool view_too_small(void)
{
    return LINES < MIN_ROWS || COLS < MIN_COLS;
}

int view_transcript_height(void)
{
    return LINES - 3 > 1 ? LINES - 3 : 1;
}

/* The transcript's height and whether the pane fits beside it (view_draw's layout). */
static bool pane_fits(struct tui *t, int rows, int cols, int *tr_h)
{
    int max_in = rows / 3 > 5 ? 5 : rows / 3 > 1 ? rows / 3 : 1;
    int in_h = input_rows(t, cols, max_in);
    *tr_h = rows - in_h - 2;
    return cols >= VIEW_PANE_MIN_COLS && *tr_h >= 3;
}

bool view_pane_fits(struct tui *t)
{
    int tr_h;
    return !view_too_small() && pane_fits(t, LINES, COLS, &tr_h);
}

void view_draw(struct tui *t)
{
    int rows = LINES, cols = COLS;
    ascii_text = t->ascii_text;
    erase();
    if (view_too_small()) {
        /* keys still go to the input line, unseen; Enter is held (tui.c too_small_key) */
        const char *msg = cols >= 12 ? "terminal too small" : "too small";
        put_str(0, 0, cols, msg, A_BOLD);
        if (rows > 1) {
            char b[48];
            snprintf(b, sizeof(b), cols >= 19 ? "%dx%d: enlarge it" : "%dx%d", cols, rows);
            put_str(1, 0, cols, b, A_NORMAL);
        }
        move(0, 0);
        refresh();
        return;
    }
    int tr_h;
    bool pane = pane_fits(t, rows, cols, &tr_h) && t->show_params;
    int tr_w = pane ? cols - PARAM_PANE_W : cols;
    draw_transcript(t, 0, tr_h, tr_w);
    if (pane)
        draw_params(t, 0, tr_h, tr_w, PARAM_PANE_W);
    draw_message_line(t, tr_h, cols);
    draw_status(t, rows - 1, cols);
    if (t->show_help) {
        draw_help(t, rows, cols);
        curs_set(0);
        refresh();
        return;
    }
    curs_set(t->focus == FOCUS_INPUT ? 1 : 0);
    input_draw(t, tr_h + 1, rows - tr_h - 2, cols);   /* last: leaves the cursor in the input */
    refresh();
}
