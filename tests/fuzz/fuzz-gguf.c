/*
 * fuzz-gguf.c - libFuzzer harness for the GGUF reader (not built by `make`).
 *
 *   clang -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
 *     -D_GNU_SOURCE -Isrc/llm tests/fuzz/fuzz-gguf.c src/llm/gguf.c src/llm/quant.c \
 *     src/llm/quant_k.c -lm -o fuzz-gguf
 *   mkdir corpus && (a small GGUF, e.g. one written by lc_gguf_writer, into corpus/)
 *   ./fuzz-gguf -max_len=2048 -max_total_time=120 corpus
 *
 * Each input is written to a file (the reader maps files) and opened; an open file must answer
 * every accessor consistently and its tensor data must be readable, a failure must say why.
 */
#include "gguf.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static char path[64];
    if (!path[0])
        snprintf(path, sizeof(path), "/tmp/fuzz-gguf.%d", (int)getpid());
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (fd < 0 || write(fd, data, size) != (ssize_t)size)
        abort();
    close(fd);
    char *err = NULL;
    struct lc_gguf *g = lc_gguf_open(path, &err);
    if (g) {
        volatile unsigned x = 0;
        if (err)
            abort();
        for (int64_t i = 0; i < lc_gguf_n_kv(g); i++) {
            if (lc_gguf_find_key(g, lc_gguf_key(g, i)) != i)
                abort();
            for (uint64_t j = 0; j < lc_gguf_arr_n(g, i); j++) {
                const char *s = lc_gguf_arr_str(g, i, j);
                x += s ? (unsigned)strlen(s) : 0;
            }
        }
        for (int64_t i = 0; i < lc_gguf_n_tensors(g); i++) {
            const struct lc_gguf_tensor *t = lc_gguf_tensor(g, i);
            if (lc_gguf_find_tensor(g, t->name) != t)
                abort();
            x += ((const uint8_t *)t->data)[0] + ((const uint8_t *)t->data)[t->nbytes - 1];
        }
        lc_gguf_free(g);
    } else if (!err) {
        abort();
    }
    free(err);
    return 0;
}
