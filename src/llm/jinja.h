/*
 * jinja.h - an interpreter for the Jinja subset that Hugging Face chat templates use.
 *
 * A GGUF model carries its chat format as a Jinja program (`tokenizer.chat_template`), the
 * same text transformers renders with jinja2 in apply_chat_template.  This module parses such
 * a program into a tree once (lc_jinja_parse) and renders it for a conversation
 * (lc_jinja_render_chat) with the environment transformers uses: trim_blocks, lstrip_blocks,
 * the loopcontrols extension (break/continue), raise_exception, strftime_now, and a tojson
 * filter that writes json.dumps(x, ensure_ascii=False).  The source of truth for behaviour is
 * jinja2 3.1 (tests/test-jinja-oracle.sh compares renderings byte for byte).
 *
 * Provenance.  Every string value carries, per byte, where it came from: template text (or
 * anything computed, such as a number) or byte i of message k's content.  Slicing, strip,
 * split, concatenation, join, replace and direct output keep the origin of every byte that
 * is copied; a byte a transformation computes from a content (upper, lower, title, JSON or
 * repr escapes) is marked "derived from message k" without a position.  The caller turns the
 * origins of the rendering into spans of message text (which it tokenizes as plain text, so
 * that a user typing "<|im_end|>" gets those characters) and a mask of user bytes.
 *
 * Supported: {{ }}, {% %}, {# #} with -/+ whitespace control; for (tuple targets, `if`
 * filter, else, loop.index/index0/revindex/revindex0/first/last/length/previtem/nextitem),
 * if/elif/else, set (names, tuples, ns.attr, block set), macro (positional and keyword
 * arguments with defaults), break/continue, filter blocks, transformers' generation block; literals (strings, numbers, lists, tuples, dicts,
 * true/false/none in either case); operators or/and/not, comparisons, in/not in, + - * / //
 * % ** ~, conditional expressions, attribute/item access, slices with steps; filters trim,
 * tojson, length/count, items, default/d, upper, lower, replace, first, last, join, string,
 * int, float, list, select/reject, selectattr/rejectattr, map(attribute=), capitalize,
 * title, abs, safe, unique, reverse, indent, dictsort... (see apply_filter in jinja.c); tests
 * defined/undefined/none/string/mapping/iterable/sequence/number/integer/float/boolean/
 * true/false/even/odd/divisibleby/equalto/sameas/in/lower/upper; string methods strip,
 * lstrip, rstrip, split, startswith, endswith, upper, lower, replace, title, capitalize,
 * find, count; dict methods items, keys, values, get; list append (transformers renders in
 * an immutable sandbox, where append fails; so it is refused here too).
 * Undefined variables behave like jinja2's default Undefined: falsy, print as nothing,
 * iterate as empty, and fail on arithmetic, attribute access and calls.
 *
 * No global state: a parsed template is read-only and may be rendered from several threads.
 */
#ifndef LC_JINJA_H
#define LC_JINJA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct lc_jinja;

/* Origin of one output byte: msg 0 = the template's own text (or a computed value);
 * msg k+1 = message k's content, byte idx of it, or LC_JINJA_DERIVED when the byte was
 * computed from that content (upper, escapes) and has no position. */
struct lc_jinja_origin {
    uint32_t msg;
    uint32_t idx;
};
#define LC_JINJA_DERIVED UINT32_MAX

/* One message as the template sees it: {"role": role, "content": content}.  Both are
 * NUL-terminated UTF-8 owned by the caller. */
struct lc_jinja_msg {
    const char *role;
    const char *content;
};

/* The variables of a chat rendering (transformers' apply_chat_template).  tools and
 * documents are none; every other name is undefined unless listed in extra_true (names set to
 * true, e.g. "enable_thinking"; may be NULL, NULL-terminated). */
struct lc_jinja_chat {
    const struct lc_jinja_msg *msgs;
    size_t n_msgs;
    bool add_generation_prompt;
    const char *bos_token;      /* "" when the vocab has none; NULL is taken as "" */
    const char *eos_token;
    const char *const *extra_true;
};

/*
 * Parse a Jinja template (UTF-8, NUL-terminated).  Returns the parsed template (free with
 * lc_jinja_free), or NULL with *err (malloc'd, may be NULL if err is NULL or on out of
 * memory) saying what and where: "line 3, column 14: expected 'endif', got 'endfor'".
 */
struct lc_jinja *lc_jinja_parse(const char *src, char **err);

/* Free a parsed template; NULL is a no-op. */
void lc_jinja_free(struct lc_jinja *t);

/*
 * Render t for a conversation.  Returns the malloc'd, NUL-terminated text (the caller frees
 * it); when origin is not NULL, *origin receives a malloc'd array of strlen(text) origins
 * (NULL when the text is empty).  On failure (raise_exception, an undefined value used in
 * arithmetic, a type error, out of memory, a recursion or size limit) returns NULL and sets
 * *err (malloc'd, when err is not NULL) to a message with the line and column, e.g.
 * "line 1, column 52: raise_exception: Conversation roles must alternate".
 */
char *lc_jinja_render_chat(const struct lc_jinja *t, const struct lc_jinja_chat *vars,
                           struct lc_jinja_origin **origin, char **err);

#endif
