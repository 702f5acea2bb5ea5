/*
 * markdown.h - a reply's Markdown as styled text for the chat's transcript (issues 14 and 12).
 *
 * md_render() parses the text of a reply with libcmark (CommonMark 0.30, the reference C
 * parser; https://spec.commonmark.org/) and maps its tree to display text: the markup
 * characters that only say how to show the text (`**`, `` ` ``, `#`, fences, link targets'
 * brackets) are dropped, and every byte of the display text gets a style (MD_* bits) that
 * src/tui/view.c turns into curses attributes.  No curses here: the mapping is unit-tested
 * (tests/test-markdown.c).  The text is re-parsed whole as a reply grows (it is small).
 *
 * Layout of the display text (UTF-8, lines separated by '\n', no trailing newline):
 *   - blocks are separated by one empty line (items of a tight list, and the paragraphs in
 *     them, are not);
 *   - a soft line break stays a line break (the model's line breaks are kept, as GitHub
 *     shows comments), a hard one too;
 *   - each line starts with its margin, styled MD_MARGIN: "│ " per enclosing block quote
 *     (MD_QBAR), the list marker ("• ", "1. ") on an item's first line and as many spaces on
 *     its other lines, "  " before each line of a code block.  When view.c wraps a line, the
 *     continuation rows repeat its margin with every character that is not MD_QBAR drawn as
 *     a space, so a wrapped item stays indented under its text;
 *   - headings keep their "# " (MD_MARK) so that levels show without colours; a code block's
 *     language (info string's first word) is shown on a line of its own before the code
 *     (MD_MARK | MD_PRE); a thematic break is one MD_RULE character that view.c draws across
 *     the width; a link's URL follows its text in parentheses (MD_MARK) unless they are the
 *     same; HTML is shown as it was written.
 *
 * Thinking (Qwen3 and other reasoning models): a reply that starts, after white space, with
 * "<think>" has a thinking part up to "</think>" (or the end of the text while it is still
 * being written).  The tags are not shown.  The part is shown as plain text styled MD_THINK
 * under a line "▾ thinking" (MD_THINK | MD_MARK), unless it is complete and MD_OPT_FOLD_THINK
 * is given: then it is one line "▸ thinking (N lines) — /think shows it" (MD_THINK |
 * MD_MARK).  A thinking part with only white space is not shown at all.  The rest of the reply
 * is rendered as Markdown.
 *
 * The display text is not sanitized here: view.c decodes it through textsafe.h like any text
 * from the model (an ESC written by the model, or by an entity such as &#27;, is shown as
 * U+241B).  cmark replaces invalid UTF-8 and NUL bytes with U+FFFD (CMARK_OPT_VALIDATE_UTF8).
 */
#ifndef LC_TUI_MARKDOWN_H
#define LC_TUI_MARKDOWN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Style bits of the display text (a byte may have several). */
enum {
    MD_STRONG = 1 << 0,   /* **strong** */
    MD_EMPH = 1 << 1,     /* *emphasis* */
    MD_CODE = 1 << 2,     /* `inline code` */
    MD_PRE = 1 << 3,      /* a code block (its margin, language line and text) */
    MD_HEADING = 1 << 4,  /* a heading's text and its "# " */
    MD_H1 = 1 << 5,       /* ... of level 1 */
    MD_LINK = 1 << 6,     /* a link's or an image's text */
    MD_QUOTE = 1 << 7,    /* text inside a block quote */
    MD_MARK = 1 << 8,     /* shown markup: list markers, "# ", a link's URL, a code language,
                             the thinking part's title line */
    MD_MARGIN = 1 << 9,   /* the margin at the start of a line (see above) */
    MD_QBAR = 1 << 10,    /* a block quote's bar in a margin: repeated on wrapped rows */
    MD_RULE = 1 << 11,    /* a thematic break (one character) */
    MD_THINK = 1 << 12,   /* the thinking part of a reply */
};

/* Options of md_render. */
enum {
    MD_OPT_ASCII = 1 << 0,       /* markers in ASCII ("* ", "| ", "-", "v thinking"): the
                                    terminal's locale is not UTF-8 */
    MD_OPT_FOLD_THINK = 1 << 1,  /* a complete thinking part is one line */
};

/* A run of display text bytes [start, end) with one style. */
struct md_span {
    size_t start, end;
    unsigned style;
};

/* The display text of a reply: text (NUL-terminated, len bytes) and its spans, in order,
 * contiguous, covering [0, len) exactly (bytes without style have a span of style 0;
 * neighbouring spans have different styles).  Owned: md_doc_free releases both arrays. */
struct md_doc {
    char *text;
    size_t len;
    struct md_span *spans;
    size_t n_spans;
};

/*
 * Render src[0..n) (a reply's text, UTF-8; invalid bytes are shown as U+FFFD) into *doc with
 * opts (MD_OPT_*).  A caller streaming a reply passes only whole characters (an incomplete
 * UTF-8 tail would become U+FFFD).  Returns 0, or -1 on allocation failure (then *doc is
 * empty and needs no md_doc_free, though calling it is harmless).
 */
int md_render(const char *src, size_t n, unsigned opts, struct md_doc *doc);
void md_doc_free(struct md_doc *doc);

/*
 * The thinking part of a reply (see above): when src[0..n) starts, after white space, with
 * "<think>", sets *body and *body_len to the text between the tags, *rest to the offset of what
 * follows "</think>" (n when it has not come yet), *closed to whether it came; returns true.
 * Returns false otherwise (nothing set).
 */
bool md_think_split(const char *src, size_t n, size_t *body, size_t *body_len, size_t *rest,
                    bool *closed);

#endif
