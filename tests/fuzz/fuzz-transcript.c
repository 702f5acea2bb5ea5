/*
 * fuzz-transcript.c - libFuzzer harness for the JSON transcript reader and the writers (not
 * built by `make`; tests/fuzz/run.sh).
 *
 *   clang -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
 *     -D_GNU_SOURCE -Isrc -Isrc/llm tests/fuzz/fuzz-transcript.c src/chat.c src/textsafe.c \
 *     src/fileutil.c src/llm/sampler.c src/llm/strbuf.c $(pkg-config --cflags --libs json-c) \
 *     -lm -o fuzz-transcript
 *   ./fuzz-transcript -max_len=8192 -max_total_time=60 corpus-copy/
 *
 * The input goes to lc_chat_from_json.  A failure must say why; a transcript that loads must
 * save (lc_chat_to_json) and load again with the same messages (roles, exact bytes, times) and
 * model name, a second save must give the same JSON (but for the "saved" time), and its
 * Markdown (lc_chat_to_markdown) must hold no control byte but \n and \t and no DEL, whatever
 * bytes the messages hold.
 */
#include "chat.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void same(const struct lc_chat *a, const struct lc_chat *b)
{
    if (a->n != b->n)
        abort();
    for (size_t i = 0; i < a->n; i++) {
        const struct lc_message *x = &a->msgs[i], *y = &b->msgs[i];
        if (x->role != y->role || x->len != y->len || memcmp(x->text, y->text, x->len) != 0 ||
            x->text[x->len] != '\0' || y->text[y->len] != '\0' || x->time != y->time ||
            x->n_alts != y->n_alts || x->chosen != y->chosen)
            abort();
        for (size_t k = 0; k < x->n_alts; k++)   /* /regen's versions round-trip too */
            if (x->alts[k].len != y->alts[k].len || x->alts[k].time != y->alts[k].time ||
                memcmp(x->alts[k].text, y->alts[k].text, x->alts[k].len) != 0)
                abort();
    }
    if (!a->model != !b->model)
        abort();
}

/* Blank the digits of the "saved" time (the clock, which may tick between two saves). */
static void mask_saved(char *json)
{
    char *p = strstr(json, "\"saved\"");
    for (int i = 0; p && p[i] && i < 40; i++)
        if (p[i] >= '0' && p[i] <= '9')
            p[i] = '0';
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *err = NULL;
    struct lc_chat *c = lc_chat_from_json((const char *)data, size, "fuzz", &err);
    if (!c) {
        if (!err)
            abort();
        free(err);
        return 0;
    }
    if (err)
        abort();
    char *json = lc_chat_to_json(c);
    if (!json)
        abort();
    struct lc_chat *c2 = lc_chat_from_json(json, strlen(json), "saved", &err);
    if (!c2) {
        fprintf(stderr, "saved transcript does not load: %s\n%s\n", err ? err : "?", json);
        abort();
    }
    same(c, c2);
    /* a second save of what was read back is the same file (but for the time of the save) */
    char *json2 = lc_chat_to_json(c2);
    if (!json2)
        abort();
    mask_saved(json);
    mask_saved(json2);
    if (strcmp(json, json2) != 0) {
        fprintf(stderr, "saved twice:\n%s\n%s\n", json, json2);
        abort();
    }
    char *md = lc_chat_to_markdown(c);
    if (!md)
        abort();
    for (const unsigned char *p = (const unsigned char *)md; *p; p++)
        if ((*p < 0x20 && *p != '\n' && *p != '\t') || *p == 0x7F)
            abort();
    free(md);
    free(json);
    free(json2);
    lc_chat_free(c);
    lc_chat_free(c2);
    return 0;
}
