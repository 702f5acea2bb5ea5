/*
 * fuzz-chat-template.c - libFuzzer harness for the chat templates (not built by `make`;
 * tests/fuzz/run.sh).
 *
 *   clang -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
 *     -D_GNU_SOURCE -Isrc/llm tests/fuzz/fuzz-chat-template.c src/llm/chat_template.c \
 *     src/llm/strbuf.c -o fuzz-chat-template
 *   ./fuzz-chat-template -max_len=4096 -max_total_time=60 corpus-copy/
 *
 * The whole input, as a string, goes to lc_chat_template_detect (a Jinja text or a name: the
 * answer is -1 or a valid id).  Then it is read as a conversation: byte 0 is
 * add_assistant_prefix (bit 0), the rest is split at NUL bytes into messages whose first byte
 * gives the role (byte % 3) and the rest the content.  For every template id,
 * lc_chat_template_render must succeed, equal lc_chat_template_apply's text, and give spans in
 * output order, not overlapping, inside the output, each naming a message and holding exactly
 * the bytes of that message's content from span.skip on; the template's own text (outside the
 * spans) never holds the \x01 of the renderer's markers.
 */
#include "chat_template.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MAX_MSGS 64

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > 1 << 16)
        return 0;
    char *s = malloc(size + 1);
    if (!s)
        abort();
    memcpy(s, data, size);
    s[size] = '\0';

    int id = lc_chat_template_detect(s);
    if (id < -1 || id >= lc_chat_template_count())
        abort();
    if (id >= 0 && !lc_chat_template_name(id))
        abort();
    int by_name = lc_chat_template_from_name(s);
    if (by_name < -1 || by_name >= lc_chat_template_count())
        abort();

    /* The conversation: the NUL-separated parts of s after the flag byte. */
    struct lc_chat_msg msgs[MAX_MSGS];
    size_t n = 0;
    bool prefix = size > 0 && (data[0] & 1);
    for (size_t i = 1; i < size + 1 && n < MAX_MSGS;) {
        size_t l = strlen(s + i);
        if (i + l > size)
            break;
        msgs[n].role = (enum lc_chat_role)((unsigned char)s[i] % 3);
        msgs[n].content = l > 0 ? s + i + 1 : "";
        n++;
        i += l + 1;
    }

    for (int t = 0; t < lc_chat_template_count(); t++) {
        struct lc_chat_span *sp = NULL;
        size_t nsp = 0;
        char *err = NULL;
        char *out = lc_chat_template_render(t, msgs, n, prefix, &sp, &nsp, &err);
        if (!out || err)
            abort();
        size_t olen = strlen(out);
        size_t at = 0;   /* end of the previous span */
        for (size_t k = 0; k < nsp; k++) {
            const struct lc_chat_span *p = &sp[k];
            if (p->msg >= n || p->off < at || p->off > olen || p->len > olen - p->off)
                abort();
            size_t cl = strlen(msgs[p->msg].content);
            if (p->skip > cl || p->len > cl - p->skip)
                abort();
            if (memcmp(out + p->off, msgs[p->msg].content + p->skip, p->len) != 0)
                abort();
            if (memchr(out + at, '\x01', p->off - at))
                abort();
            at = p->off + p->len;
        }
        if (memchr(out + at, '\x01', olen - at))
            abort();
        char *again = lc_chat_template_apply(t, msgs, n, prefix, NULL);
        if (!again || strcmp(again, out) != 0)
            abort();
        free(again);
        free(out);
        free(sp);
    }
    free(s);
    return 0;
}
