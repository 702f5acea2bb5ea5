/*
 * markdown.c - a reply's Markdown as styled display text (markdown.h), through libcmark.
 *
 * The tree cmark builds (https://spec.commonmark.org/0.30/) is walked once with its iterator;
 * blocks write whole lines, each opened with the margin of the blocks around it (a stack of
 * quotes, list items and code blocks), and inlines write runs of text with the style bits of
 * the emphasis, links and code around them.
 */
#include "markdown.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmark.h>

#define MAX_NEST 32   /* margins of deeper blocks are left out (the text is still shown) */

struct out {
    char *text;
    size_t len, cap;
    struct md_span *spans;
    size_t n_spans, cap_spans;
    bool oom;
};

enum ctx_kind { C_QUOTE, C_ITEM, C_PRE };

struct ctx {
    enum ctx_kind kind;
    char marker[24];     /* a list item's marker ("• ", "12. ") */
    size_t marker_len;
    int marker_cols;
    bool marker_done;    /* written on the item's first line; spaces on the next ones */
};

struct list_info {
    bool ordered, tight;
    char delim;
    int next;            /* number of the next item */
};

struct render {
    struct out o;
    unsigned opts;
    struct ctx stack[MAX_NEST];
    int depth;           /* may exceed MAX_NEST: only the first MAX_NEST have a margin */
    struct list_info lists[MAX_NEST];
    int list_depth;
    int quotes;          /* block quotes around the current block */
    bool line_open;      /* the current line has its margin (something was written on it) */
    int strong, emph, code_inline, link, heading;
    bool h1;
    size_t link_start[MAX_NEST];   /* display offset where each open link's text starts */
};

/* ---------------------------------------------------------------- output */

static void out_put(struct out *o, const char *s, size_t n, unsigned style)
{
    if (o->oom || n == 0)
        return;
    if (o->len + n + 1 > o->cap) {
        size_t cap = o->cap ? o->cap : 256;
        while (cap < o->len + n + 1)
            cap *= 2;
        char *t = realloc(o->text, cap);
        if (!t) {
            o->oom = true;
            return;
        }
        o->text = t;
        o->cap = cap;
    }
    memcpy(o->text + o->len, s, n);
    size_t start = o->len;
    o->len += n;
    o->text[o->len] = '\0';
    if (o->n_spans > 0 && o->spans[o->n_spans - 1].style == style &&
        o->spans[o->n_spans - 1].end == start) {
        o->spans[o->n_spans - 1].end = o->len;
        return;
    }
    if (o->n_spans == o->cap_spans) {
        size_t cap = o->cap_spans ? o->cap_spans * 2 : 32;
        struct md_span *sp = realloc(o->spans, cap * sizeof(*sp));
        if (!sp) {
            o->oom = true;
            return;
        }
        o->spans = sp;
        o->cap_spans = cap;
    }
    o->spans[o->n_spans++] = (struct md_span){ start, o->len, style };
}

static const char *sym(const struct render *r, const char *utf8, const char *ascii)
{
    return (r->opts & MD_OPT_ASCII) ? ascii : utf8;
}

/* The style of text written now (inline bits and the blocks around). */
static unsigned cur_style(const struct render *r)
{
    unsigned s = 0;
    if (r->strong)
        s |= MD_STRONG;
    if (r->emph)
        s |= MD_EMPH;
    if (r->code_inline)
        s |= MD_CODE;
    if (r->link)
        s |= MD_LINK;
    if (r->heading)
        s |= MD_HEADING | (r->h1 ? MD_H1 : 0);
    if (r->quotes)
        s |= MD_QUOTE;
    return s;
}

/* Open the current line: write the margin of every block around. */
static void line_begin(struct render *r)
{
    if (r->line_open)
        return;
    r->line_open = true;
    int n = r->depth < MAX_NEST ? r->depth : MAX_NEST;
    for (int i = 0; i < n; i++) {
        struct ctx *c = &r->stack[i];
        switch (c->kind) {
        case C_QUOTE: {
            const char *bar = sym(r, "\xe2\x94\x82 ", "| ");
            out_put(&r->o, bar, strlen(bar), MD_MARGIN | MD_QBAR | MD_QUOTE);
            break;
        }
        case C_ITEM:
            if (!c->marker_done) {
                out_put(&r->o, c->marker, c->marker_len, MD_MARGIN | MD_MARK);
                c->marker_done = true;
            } else {
                static const char spaces[] = "                        ";
                out_put(&r->o, spaces, (size_t)c->marker_cols, MD_MARGIN);
            }
            break;
        case C_PRE:
            out_put(&r->o, "  ", 2, MD_MARGIN | MD_PRE);
            break;
        }
    }
}

static void newline(struct render *r)
{
    out_put(&r->o, "\n", 1, 0);
    r->line_open = false;
}

/* End the current line if something is on it. */
static void end_line(struct render *r)
{
    if (r->line_open)
        newline(r);
}

/* An empty line between two blocks: only the quote bars of the margin are drawn on it. */
static void blank_line(struct render *r)
{
    end_line(r);
    if (r->o.len == 0)
        return;   /* nothing above: no separation */
    int n = r->depth < MAX_NEST ? r->depth : MAX_NEST;
    for (int i = 0; i < n; i++)
        if (r->stack[i].kind == C_QUOTE) {
            const char *bar = sym(r, "\xe2\x94\x82", "|");
            out_put(&r->o, bar, strlen(bar), MD_MARGIN | MD_QBAR | MD_QUOTE);
        }
    newline(r);
}

/* Text that may hold newlines (a code block, HTML): one line each, with the margin. */
static void put_lines(struct render *r, const char *s, size_t n, unsigned style)
{
    for (;;) {
        size_t k = 0;
        while (k < n && s[k] != '\n')
            k++;
        line_begin(r);
        out_put(&r->o, s, k, style);
        if (k == n)
            return;
        newline(r);
        s += k + 1;
        n -= k + 1;
    }
}

static void push_ctx(struct render *r, enum ctx_kind k, const char *marker)
{
    if (r->depth < MAX_NEST) {
        struct ctx *c = &r->stack[r->depth];
        memset(c, 0, sizeof(*c));
        c->kind = k;
        if (marker) {
            c->marker_len = strlen(marker);
            if (c->marker_len >= sizeof(c->marker))
                c->marker_len = sizeof(c->marker) - 1;
            memcpy(c->marker, marker, c->marker_len);
            /* columns: every character of a marker is one column wide */
            int cols = 0;
            for (size_t i = 0; i < c->marker_len; i++)
                cols += ((unsigned char)c->marker[i] & 0xC0) != 0x80;
            c->marker_cols = cols;
        }
    }
    r->depth++;
}

static void pop_ctx(struct render *r)
{
    if (r->depth > 0)
        r->depth--;
}

/* ---------------------------------------------------------------- blocks */

/* Before a block starts: the separation from what comes before it. */
static void block_sep(struct render *r, cmark_node *node)
{
    cmark_node *parent = cmark_node_parent(node);
    cmark_node_type pt = parent ? cmark_node_get_type(parent) : CMARK_NODE_NONE;
    bool tight = false;
    if (cmark_node_get_type(node) == CMARK_NODE_ITEM)
        tight = pt == CMARK_NODE_LIST && cmark_node_get_list_tight(parent);
    else if (pt == CMARK_NODE_ITEM) {
        cmark_node *list = cmark_node_parent(parent);
        tight = list && cmark_node_get_list_tight(list);
    }
    if (!cmark_node_previous(node)) {
        /* the first block of an item goes on its marker's line; of a quote, on its bar's */
        if (pt == CMARK_NODE_DOCUMENT)
            blank_line(r);   /* after the thinking part, if any */
        return;
    }
    if (tight)
        end_line(r);
    else
        blank_line(r);
}

static void code_block(struct render *r, cmark_node *node)
{
    const char *info = cmark_node_get_fence_info(node);
    const char *lit = cmark_node_get_literal(node);
    size_t n = lit ? strlen(lit) : 0;
    if (n > 0 && lit[n - 1] == '\n')
        n--;
    push_ctx(r, C_PRE, NULL);
    if (info && *info) {   /* the language: the info string's first word */
        size_t k = strcspn(info, " \t");
        line_begin(r);
        out_put(&r->o, info, k, MD_PRE | MD_MARK);
        newline(r);
    }
    line_begin(r);
    put_lines(r, lit ? lit : "", n, MD_PRE);
    pop_ctx(r);
}

static void item_enter(struct render *r, cmark_node *node)
{
    char marker[24];
    struct list_info *l = r->list_depth > 0 && r->list_depth <= MAX_NEST ? &r->lists[r->list_depth - 1] : NULL;
    if (l && l->ordered) {
        snprintf(marker, sizeof(marker), "%d%c ", l->next, l->delim);
        l->next++;
    } else {
        int level = 0;   /* bullets change with the depth of nested bullet lists */
        for (int i = 0; i < r->list_depth - 1 && i < MAX_NEST; i++)
            level += !r->lists[i].ordered;
        static const char *const bullets[] = { "\xe2\x80\xa2 ", "\xe2\x97\xa6 ", "\xe2\x96\xaa " };
        snprintf(marker, sizeof(marker), "%s", sym(r, bullets[level % 3], "- "));
    }
    (void)node;
    push_ctx(r, C_ITEM, marker);
}

/* An item that had no block: its marker alone on a line. */
static void item_exit(struct render *r)
{
    if (r->depth >= 1 && r->depth <= MAX_NEST && !r->stack[r->depth - 1].marker_done) {
        line_begin(r);
    }
    pop_ctx(r);
}

/* ---------------------------------------------------------------- the walk */

static void walk(struct render *r, cmark_node *doc)
{
    cmark_iter *it = cmark_iter_new(doc);
    if (!it) {
        r->o.oom = true;
        return;
    }
    cmark_event_type ev;
    while ((ev = cmark_iter_next(it)) != CMARK_EVENT_DONE && !r->o.oom) {
        cmark_node *node = cmark_iter_get_node(it);
        cmark_node_type type = cmark_node_get_type(node);
        bool enter = ev == CMARK_EVENT_ENTER;
        if (enter && type >= CMARK_NODE_BLOCK_QUOTE && type <= CMARK_NODE_LAST_BLOCK)
            block_sep(r, node);
        switch (type) {
        case CMARK_NODE_BLOCK_QUOTE:
            if (enter) {
                push_ctx(r, C_QUOTE, NULL);
                r->quotes++;
            } else {
                pop_ctx(r);
                r->quotes--;
            }
            break;
        case CMARK_NODE_LIST:
            if (enter) {
                if (r->list_depth < MAX_NEST) {
                    struct list_info *l = &r->lists[r->list_depth];
                    l->ordered = cmark_node_get_list_type(node) == CMARK_ORDERED_LIST;
                    l->tight = cmark_node_get_list_tight(node);
                    l->delim = cmark_node_get_list_delim(node) == CMARK_PAREN_DELIM ? ')' : '.';
                    l->next = cmark_node_get_list_start(node);
                }
                r->list_depth++;
            } else {
                r->list_depth--;
            }
            break;
        case CMARK_NODE_ITEM:
            if (enter)
                item_enter(r, node);
            else
                item_exit(r);
            break;
        case CMARK_NODE_CODE_BLOCK:
            code_block(r, node);
            break;
        case CMARK_NODE_HTML_BLOCK: {
            const char *lit = cmark_node_get_literal(node);
            size_t n = lit ? strlen(lit) : 0;
            while (n > 0 && lit[n - 1] == '\n')
                n--;
            put_lines(r, lit ? lit : "", n, cur_style(r));
            break;
        }
        case CMARK_NODE_PARAGRAPH:
            if (enter)
                line_begin(r);
            break;
        case CMARK_NODE_HEADING:
            if (enter) {
                int level = cmark_node_get_heading_level(node);
                char hashes[8];
                int k = level < 1 ? 1 : level > 6 ? 6 : level;
                memset(hashes, '#', (size_t)k);
                hashes[k] = ' ';
                r->heading++;
                r->h1 = level == 1;
                line_begin(r);
                out_put(&r->o, hashes, (size_t)k + 1, cur_style(r) | MD_MARK);
            } else {
                r->heading--;
                r->h1 = false;
            }
            break;
        case CMARK_NODE_THEMATIC_BREAK: {
            line_begin(r);
            const char *rule = sym(r, "\xe2\x94\x80", "-");
            out_put(&r->o, rule, strlen(rule), MD_RULE | MD_MARK | (r->quotes ? MD_QUOTE : 0));
            break;
        }
        case CMARK_NODE_TEXT:
        case CMARK_NODE_HTML_INLINE: {
            const char *lit = cmark_node_get_literal(node);
            if (lit)
                put_lines(r, lit, strlen(lit), cur_style(r));
            break;
        }
        case CMARK_NODE_CODE: {
            const char *lit = cmark_node_get_literal(node);
            if (lit)
                put_lines(r, lit, strlen(lit), cur_style(r) | MD_CODE);
            break;
        }
        case CMARK_NODE_SOFTBREAK:
        case CMARK_NODE_LINEBREAK:
            newline(r);
            line_begin(r);
            break;
        case CMARK_NODE_EMPH:
            r->emph += enter ? 1 : -1;
            break;
        case CMARK_NODE_STRONG:
            r->strong += enter ? 1 : -1;
            break;
        case CMARK_NODE_LINK:
        case CMARK_NODE_IMAGE:
            if (enter) {
                if (r->link < MAX_NEST)
                    r->link_start[r->link] = r->o.len;
                r->link++;
                line_begin(r);
            } else {
                r->link--;
                /* the target, unless the text already says it (autolinks) */
                const char *url = cmark_node_get_url(node);
                size_t start = r->link < MAX_NEST ? r->link_start[r->link] : r->o.len;
                size_t un = url ? strlen(url) : 0;
                const char *shown = r->o.text ? r->o.text + start : "";
                size_t sn = r->o.len - start;
                bool same = un == sn && memcmp(url, shown, sn) == 0;
                if (!same && un > 7 && !strncmp(url, "mailto:", 7))
                    same = un - 7 == sn && memcmp(url + 7, shown, sn) == 0;
                if (un > 0 && !same) {
                    unsigned st = cur_style(r) | MD_MARK;
                    out_put(&r->o, " (", 2, st);
                    put_lines(r, url, un, st);
                    out_put(&r->o, ")", 1, st);
                }
            }
            break;
        default:
            break;
        }
    }
    cmark_iter_free(it);
}

/* ---------------------------------------------------------------- thinking */

static bool is_space(char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

bool md_think_split(const char *src, size_t n, size_t *body, size_t *body_len, size_t *rest,
                    bool *closed)
{
    static const char open[] = "<think>", close[] = "</think>";
    size_t i = 0;
    while (i < n && is_space(src[i]))
        i++;
    if (n - i < sizeof(open) - 1 || memcmp(src + i, open, sizeof(open) - 1) != 0)
        return false;
    size_t b = i + sizeof(open) - 1;
    const char *end = memmem(src + b, n - b, close, sizeof(close) - 1);
    *body = b;
    if (end) {
        *body_len = (size_t)(end - (src + b));
        *rest = (size_t)(end - src) + sizeof(close) - 1;
        *closed = true;
    } else {
        *body_len = n - b;
        *rest = n;
        *closed = false;
    }
    return true;
}

static void think_part(struct render *r, const char *s, size_t n, bool closed)
{
    while (n > 0 && is_space(s[0]))
        s++, n--;
    while (n > 0 && is_space(s[n - 1]))
        n--;
    if (n == 0)
        return;
    size_t lines = 1;
    for (size_t i = 0; i < n; i++)
        lines += s[i] == '\n';
    if (closed && (r->opts & MD_OPT_FOLD_THINK)) {
        char line[96];
        snprintf(line, sizeof(line), "%s thinking (%zu line%s) %s /think shows it",
                 sym(r, "\xe2\x96\xb8", ">"), lines, lines == 1 ? "" : "s",
                 sym(r, "\xe2\x80\x94", "-"));
        out_put(&r->o, line, strlen(line), MD_THINK | MD_MARK);
        r->line_open = true;
        return;
    }
    char title[32];
    snprintf(title, sizeof(title), "%s thinking", sym(r, "\xe2\x96\xbe", "v"));
    out_put(&r->o, title, strlen(title), MD_THINK | MD_MARK);
    newline(r);
    put_lines(r, s, n, MD_THINK);
}

/* ---------------------------------------------------------------- entry points */

int md_render(const char *src, size_t n, unsigned opts, struct md_doc *doc)
{
    memset(doc, 0, sizeof(*doc));
    struct render r;
    memset(&r, 0, sizeof(r));
    r.opts = opts;
    size_t body, body_len, rest = 0;
    bool closed;
    if (md_think_split(src, n, &body, &body_len, &rest, &closed))
        think_part(&r, src + body, body_len, closed);
    else
        rest = 0;
    size_t k = rest;
    while (k < n && is_space(src[k]))
        k++;
    if (k < n) {
        cmark_node *root = cmark_parse_document(src + rest, n - rest, CMARK_OPT_VALIDATE_UTF8);
        if (!root) {
            r.o.oom = true;
        } else {
            walk(&r, root);
            cmark_node_free(root);
        }
    }
    if (r.o.oom) {
        free(r.o.text);
        free(r.o.spans);
        return -1;
    }
    /* no trailing newline */
    while (r.o.len > 0 && r.o.text[r.o.len - 1] == '\n') {
        r.o.len--;
        r.o.text[r.o.len] = '\0';
        struct md_span *last = &r.o.spans[r.o.n_spans - 1];
        if (--last->end == last->start)
            r.o.n_spans--;
    }
    if (!r.o.text) {   /* empty: an empty string, not NULL */
        r.o.text = calloc(1, 1);
        if (!r.o.text)
            return -1;
    }
    doc->text = r.o.text;
    doc->len = r.o.len;
    doc->spans = r.o.spans;
    doc->n_spans = r.o.n_spans;
    return 0;
}

void md_doc_free(struct md_doc *doc)
{
    free(doc->text);
    free(doc->spans);
    memset(doc, 0, sizeof(*doc));
}
