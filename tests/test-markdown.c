/* test-markdown.c - a reply's Markdown as styled display text (src/tui/markdown.c, libcmark):
 * the exact text and spans for given inputs, Qwen3's <think> part folded and unfolded, and
 * the invariants (spans contiguous, covering the text) on every prefix of a streamed reply. */
#include <stdlib.h>
#include <string.h>

#include "../src/tui/markdown.h"
#include "testutil.h"

/* The display text with its spans: a span of style 0 as its bytes, any other as
 * [LETTERS|bytes], one letter per style bit in this order: */
static const char letters[] = "SECPH1LQMGBRT";
/*                             S strong, E emph, C code, P pre, H heading, 1 level 1, L link,
 *                             Q quote, M mark, G margin, B quote bar, R rule, T think */

static char *dump(const struct md_doc *d)
{
    size_t cap = d->len * 4 + 64, n = 0;
    char *s = malloc(cap);
    if (!s)
        abort();
    for (size_t i = 0; i < d->n_spans; i++) {
        const struct md_span *sp = &d->spans[i];
        if (sp->style) {
            s[n++] = '[';
            for (int b = 0; b < 13; b++)
                if (sp->style & (1u << b))
                    s[n++] = letters[b];
            s[n++] = '|';
        }
        memcpy(s + n, d->text + sp->start, sp->end - sp->start);
        n += sp->end - sp->start;
        if (sp->style)
            s[n++] = ']';
    }
    s[n] = '\0';
    return s;
}

/* The spans are in order, contiguous, cover [0, len) and neighbours differ; no trailing
 * newline.  Returns true when they do. */
static bool invariants(const char *name, const struct md_doc *d)
{
    size_t at = 0;
    bool ok = d->text != NULL && strlen(d->text) == d->len;
    for (size_t i = 0; ok && i < d->n_spans; i++) {
        ok = d->spans[i].start == at && d->spans[i].end > at &&
             (i == 0 || d->spans[i].style != d->spans[i - 1].style);
        at = d->spans[i].end;
    }
    ok = ok && at == d->len && (d->len == 0 || d->text[d->len - 1] != '\n');
    CHECK(ok, "%s: spans do not cover the text exactly", name);
    return ok;
}

static void expect(const char *name, const char *src, unsigned opts, const char *want)
{
    struct md_doc d;
    int r = md_render(src, strlen(src), opts, &d);
    CHECK(r == 0, "%s: md_render failed", name);
    if (r != 0)
        return;
    invariants(name, &d);
    char *got = dump(&d);
    CHECK(strcmp(got, want) == 0, "%s:\n--- got\n%s\n--- want\n%s\n---", name, got, want);
    free(got);
    md_doc_free(&d);
}

static void test_inlines(void)
{
    expect("heading, emphasis, inline code",
           "# Title\n\nSome **bold** and *it* and `x = 1`.\n\n## Sub *em*\n",
           0,
           "[H1M|# ][H1|Title]\n\nSome [S|bold] and [E|it] and [C|x = 1].\n\n"
           "[HM|## ][H|Sub ][EH|em]");
    expect("setext heading, nested emphasis",
           "Top\n===\n***both*** _u_",
           0, "[H1M|# ][H1|Top]\n\n[SE|both] [E|u]");
    expect("soft and hard breaks stay line breaks",
           "one\ntwo  \nthree\\\nfour", 0, "one\ntwo\nthree\nfour");
    expect("links: URL after the text unless the same",
           "[docs](https://x.org/a) <https://y.org> <me@z.org>", 0,
           "[L|docs][M| (https://x.org/a)] [L|https://y.org] [L|me@z.org]");
    expect("image: its alt text and URL", "![a cat](cat.png)", 0, "[L|a cat][M| (cat.png)]");
    expect("HTML shown as written", "<b>hi</b> & &amp;\n\n<div>\nx\n</div>", 0,
           "<b>hi</b> & &\n\n<div>\nx\n</div>");
    expect("backslash escapes", "\\*not em\\* \\# no", 0, "*not em* # no");
    expect("empty", "", 0, "");
    expect("white space only", " \n\n \t", 0, "");
}

static void test_blocks(void)
{
    expect("tight lists, nested bullets change",
           "- one\n- two\n  - nested\n    - deeper\n\n3) c\n4) d", 0,
           "[MG|• ]one\n[MG|• ]two\n[G|  ][MG|◦ ]nested\n[G|    ][MG|▪ ]deeper\n\n"
           "[MG|3) ]c\n[MG|4) ]d");
    expect("loose list: blank lines, continuation paragraph indented",
           "1. a\n\n2. b\n\n   more", 0,
           "[MG|1. ]a\n\n[MG|2. ]b\n\n[G|   ]more");
    expect("wide ordered markers", "9. nine\n10. ten\n", 0, "[MG|9. ]nine\n[MG|10. ]ten");
    expect("block quote: bars on every line, blank ones too",
           "> quote\n> two\n>\n> - item\n>   wrapped", 0,
           "[QGB|│ ][Q|quote]\n[QGB|│ ][Q|two]\n[QGB|│]\n[QGB|│ ][MG|• ][Q|item]\n"
           "[QGB|│ ][G|  ][Q|wrapped]");
    expect("nested quotes", "> a\n>> b", 0, "[QGB|│ ][Q|a]\n[QGB|│]\n[QGB|│ │ ][Q|b]");
    expect("fenced code: language line, margin, text",
           "Run:\n\n```python  extra\ndef f():\n\treturn 1\n\n```\nafter", 0,
           "Run:\n\n[PG|  ][PM|python]\n[PG|  ][P|def f():]\n[PG|  ][P|\treturn 1]\n[PG|  ]\n\n"
           "after");
    expect("indented code, no language", "    x <- 1\n", 0, "[PG|  ][P|x <- 1]");
    expect("empty code block", "```\n```", 0, "[PG|  ]");
    expect("unclosed fence (streaming): code to the end", "```sh\nls -l", 0,
           "[PG|  ][PM|sh]\n[PG|  ][P|ls -l]");
    expect("code in a list item", "- x\n\n  ```\n  y\n  ```", 0,
           "[MG|• ]x\n\n[G|  ][PG|  ][P|y]");
    expect("thematic break", "a\n\n---\n\nb", 0, "a\n\n[MR|─]\n\nb");
    expect("empty item", "- \n- b", 0, "[MG|• ]\n[MG|• ]b");
    expect("ASCII markers", "- a\n  - b\n\n> q\n\n---", MD_OPT_ASCII,
           "[MG|- ]a\n[G|  ][MG|- ]b\n\n[QGB|| ][Q|q]\n\n[MR|-]");
}

static void test_think(void)
{
    const char *reply = "<think>\nThe user greets.\nAnswer **briefly**.\n</think>\n\nHello *there*.";
    expect("thinking folded", reply, MD_OPT_FOLD_THINK,
           "[MT|▸ thinking (2 lines) — /think shows it]\n\nHello [E|there].");
    expect("thinking shown, as written (no Markdown), dimmed", reply, 0,
           "[MT|▾ thinking]\n[T|The user greets.]\n[T|Answer **briefly**.]\n\nHello [E|there].");
    expect("thinking folded, ASCII", reply, MD_OPT_FOLD_THINK | MD_OPT_ASCII,
           "[MT|> thinking (2 lines) - /think shows it]\n\nHello [E|there].");
    expect("thinking still being written: never folded", "  <think>\nStep one", MD_OPT_FOLD_THINK,
           "[MT|▾ thinking]\n[T|Step one]");
    expect("one line", "<think>hmm</think>ok", MD_OPT_FOLD_THINK,
           "[MT|▸ thinking (1 line) — /think shows it]\n\nok");
    expect("empty thinking (enable_thinking off): nothing shown",
           "<think>\n\n</think>\n\n# Hi", MD_OPT_FOLD_THINK, "[H1M|# ][H1|Hi]");
    expect("thinking only", "<think>a\nb</think>\n", MD_OPT_FOLD_THINK,
           "[MT|▸ thinking (2 lines) — /think shows it]");
    expect("<think> not at the start: Markdown's HTML", "Hi <think>x</think>", MD_OPT_FOLD_THINK,
           "Hi <think>x</think>");

    size_t body, body_len, rest;
    bool closed;
    const char *s = "\n <think>ab</think>cd";
    CHECK(md_think_split(s, strlen(s), &body, &body_len, &rest, &closed) && body == 9 &&
              body_len == 2 && rest == 19 && closed,
          "split: body %zu+%zu rest %zu closed %d", body, body_len, rest, closed);
    s = "<think>abc</thi";
    CHECK(md_think_split(s, strlen(s), &body, &body_len, &rest, &closed) && body == 7 &&
              body_len == 8 && rest == 15 && !closed,
          "split open: body %zu+%zu rest %zu closed %d", body, body_len, rest, closed);
    CHECK(!md_think_split("x<think>", 8, &body, &body_len, &rest, &closed), "split: not at start");
    CHECK(!md_think_split("<thin", 5, &body, &body_len, &rest, &closed), "split: tag cut short");
}

/* Untrusted text: markdown.c does not sanitize (view.c does, through textsafe.h), but it keeps
 * the bytes for it to see, and cmark makes invalid UTF-8 and NUL U+FFFD. */
static void test_untrusted(void)
{
    expect("ESC kept for the sanitizer, also from an entity", "a\x1b[2Jb &#27;", 0,
           "a\x1b[2Jb \x1b");
    const char bad[] = "x\xff\xc3 y\0z";
    struct md_doc d;
    CHECK(md_render(bad, sizeof(bad) - 1, 0, &d) == 0, "invalid UTF-8: render");
    CHECK(strcmp(d.text, "x\xef\xbf\xbd\xef\xbf\xbd y\xef\xbf\xbdz") == 0, "invalid UTF-8: '%s'", d.text);
    md_doc_free(&d);

    /* deep nesting: margins stop at 32 levels, nothing breaks */
    size_t n = 3000;
    char *deep = malloc(2 * n + 2);
    for (size_t i = 0; i < n; i++)
        deep[i] = '>';
    deep[n] = 'x';
    deep[n + 1] = '\0';
    CHECK(md_render(deep, n + 1, 0, &d) == 0, "deep quotes: render");
    invariants("deep quotes", &d);
    CHECK(d.len == 32 * strlen("│ ") + 1 && d.text[d.len - 1] == 'x', "deep quotes: %zu bytes", d.len);
    md_doc_free(&d);
    for (size_t i = 0; i < n; i++)
        memcpy(deep + 2 * i, "- ", 2);
    deep[2 * n] = 'y';
    deep[2 * n + 1] = '\0';
    CHECK(md_render(deep, 2 * n + 1, 0, &d) == 0, "deep lists: render");
    invariants("deep lists", &d);
    md_doc_free(&d);
    free(deep);
}

/* A reply streamed byte by byte (whole characters): every prefix renders. */
static void test_prefixes(void)
{
    const char *reply =
        "<think>\nPlan: list, code.\n</think>\n\n## Steps\n\n1. **Install** the `pkg`:\n\n"
        "   ```bash\n   apt-get install -y pkg\n   ```\n2. Run it\n   > note: *careful*\n\n"
        "| a | b |\n|---|---|\n\n[x](http://e.org) — done.\n";
    size_t n = strlen(reply);
    int bad = 0;
    for (size_t k = 0; k <= n; k++) {
        if (k < n && ((unsigned char)reply[k] & 0xC0) == 0x80)
            continue;   /* not a character boundary */
        for (unsigned opts = 0; opts < 4; opts++) {
            struct md_doc d;
            if (md_render(reply, k, opts, &d) != 0) {
                bad++;
                continue;
            }
            char name[64];
            snprintf(name, sizeof(name), "prefix %zu opts %u", k, opts);
            if (!invariants(name, &d))
                bad++;
            md_doc_free(&d);
        }
    }
    CHECK(bad == 0, "%d prefixes failed", bad);
}

int main(void)
{
    test_inlines();
    test_blocks();
    test_think();
    test_untrusted();
    test_prefixes();
    return tu_finish("test-markdown");
}
