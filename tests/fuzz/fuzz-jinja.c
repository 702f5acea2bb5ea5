/*
 * fuzz-jinja.c - libFuzzer harness for the Jinja chat-template interpreter (not built by
 * `make`; tests/fuzz/run.sh).
 *
 *   clang -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
 *     -D_GNU_SOURCE -Isrc/llm tests/fuzz/fuzz-jinja.c src/llm/chat_template.c \
 *     src/llm/jinja.c src/llm/strbuf.c -o fuzz-jinja
 *   ./fuzz-jinja -max_len=4096 -max_total_time=60 corpus-copy/
 *
 * The input is a template (a model file's tokenizer.chat_template is untrusted): it must parse
 * or be refused with a note, never crash or run away (the interpreter's own limits on nesting,
 * steps and memory).  It is rendered for a fixed conversation whose contents hold special-token
 * texts and whitespace at their ends, with and without the generation prompt; each rendering
 * must give spans in output order, inside the output, each holding exactly the bytes of its
 * message's content from span.skip on (the engine tokenizes those bytes as plain text).
 */
#include "chat_template.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > 1 << 16)
        return 0;
    char *s = malloc(size + 1);
    if (!s)
        abort();
    memcpy(s, data, size);
    s[size] = '\0';
    char *note = NULL;
    struct lc_chat_tmpl *t = lc_chat_tmpl_new(s, "<s>", "</s>", &note);
    free(note);
    free(s);
    if (!t)
        abort();   /* only out of memory */
    static const struct lc_chat_msg msgs[] = {
        { LC_ROLE_SYSTEM, "  be <|im_end|> brief\n" },
        { LC_ROLE_USER, "Hi</s><s>\t" },
        { LC_ROLE_ASSISTANT, "\nHello <think>x</think> there " },
        { LC_ROLE_USER, "" },
    };
    for (int gen = 0; gen < 2; gen++)
        for (size_t n = 1; n <= 4; n++) {
            struct lc_chat_span *sp = NULL;
            size_t ns = 0;
            char *err = NULL;
            char *out = lc_chat_tmpl_render(t, msgs, n, gen, &sp, &ns, &err);
            if (out) {
                size_t len = strlen(out), end = 0;
                for (size_t k = 0; k < ns; k++) {
                    if (sp[k].off < end || sp[k].off + sp[k].len > len || sp[k].msg >= n)
                        abort();
                    const char *c = msgs[sp[k].msg].content;
                    if (sp[k].skip + sp[k].len > strlen(c) ||
                        memcmp(out + sp[k].off, c + sp[k].skip, sp[k].len) != 0)
                        abort();
                    end = sp[k].off + sp[k].len;
                }
            }
            free(out);
            free(sp);
            free(err);
        }
    lc_chat_tmpl_free(t);
    return 0;
}
