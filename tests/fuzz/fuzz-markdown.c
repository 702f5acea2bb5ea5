/*
 * fuzz-markdown.c - libFuzzer harness for a reply's Markdown as styled display text
 * (src/tui/markdown.c, libcmark; not built by `make`; tests/fuzz/run.sh).
 *
 *   clang -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
 *     -D_GNU_SOURCE -Isrc tests/fuzz/fuzz-markdown.c src/tui/markdown.c -lcmark -o fuzz-markdown
 *   ./fuzz-markdown -max_len=8192 -max_total_time=60 corpus-copy/
 *
 * Byte 0 of the input is md_render's options (its low two bits); the rest is the reply, whole
 * and as every prefix ending at a quarter of it (a reply streaming).  Every rendering must keep
 * markdown.h's promises: the text NUL-terminated at len, without a trailing newline; spans in
 * order, contiguous, covering [0, len) exactly, neighbours with different styles, no unknown
 * style bit; a thinking part's title only when the reply starts with <think>.
 */
#include "tui/markdown.h"

#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(const char *src, size_t n, unsigned opts)
{
    struct md_doc d;
    if (md_render(src, n, opts, &d) != 0)
        return;   /* out of memory: nothing to check */
    if (!d.text || d.text[d.len] != '\0' || (d.len > 0 && d.text[d.len - 1] == '\n'))
        abort();
    size_t at = 0;
    for (size_t i = 0; i < d.n_spans; i++) {
        const struct md_span *s = &d.spans[i];
        if (s->start != at || s->end <= s->start || s->style >= (MD_THINK << 1) ||
            (i > 0 && s->style == d.spans[i - 1].style))
            abort();
        if ((s->style & MD_THINK) && (s->style & MD_MARK)) {
            size_t b, bl, r;
            bool closed;
            if (!md_think_split(src, n, &b, &bl, &r, &closed))
                abort();
        }
        at = s->end;
    }
    if (at != d.len)
        abort();
    md_doc_free(&d);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    unsigned opts = data[0] & 3;
    const char *src = (const char *)data + 1;
    size_t n = size - 1;
    for (int q = 1; q <= 4; q++)
        check(src, n * (size_t)q / 4, opts);
    return 0;
}
