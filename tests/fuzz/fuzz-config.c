/*
 * fuzz-config.c - libFuzzer harness for the rc-file parser (not built by `make`;
 * tests/fuzz/run.sh).
 *
 *   clang -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
 *     -D_GNU_SOURCE -Isrc -Isrc/llm tests/fuzz/fuzz-config.c src/config.c \
 *     src/llm/chat_template.c src/llm/sampler.c src/llm/strbuf.c -liniparser -lm -o fuzz-config
 *   ./fuzz-config -max_len=4096 -max_total_time=60 corpus-copy/
 *
 * Each input is written to a file and read by lc_config_load over the defaults.  It must
 * return, report problems consistently (a count > 0 exactly when there is a warning text, one
 * "FILE:LINE: ..." line per problem, each naming the file) and leave settings in range.
 */
#include "config.h"
#include "llm/chat_template.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Every numeric setting (by its command-line name) within the range of its definition. */
static void in_range(const struct lc_options *o)
{
    static const char *const names[] = { "threads", "ctx-size", "batch-size", "temp", "top-k",
                                         "top-p", "min-p", "repeat-penalty", "repeat-last-n",
                                         "n-predict" };
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        const struct lc_option_def *d = lc_config_option(names[i], 0);
        if (!d)
            abort();
        const char *f = (const char *)o + d->off;
        double v;
        if (d->type == LC_OPT_INT)
            v = *(const int32_t *)(const void *)f;
        else if (d->type == LC_OPT_FLOAT)
            v = (double)*(const float *)(const void *)f;
        else
            abort();
        if (!(v >= d->lo && v <= d->hi))   /* NaN fails too */
            abort();
    }
    if (o->chat_template && lc_chat_template_from_name(o->chat_template) < 0 &&
        strcmp(o->chat_template, "none") != 0)
        abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static char path[64];
    if (!path[0])
        snprintf(path, sizeof(path), "/tmp/fuzz-config.%d", (int)getpid());
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (fd < 0 || write(fd, data, size) != (ssize_t)size)
        abort();
    close(fd);
    struct lc_options o;
    memset(&o, 0, sizeof(o));
    lc_config_defaults(&o);
    char *warn = NULL;
    int n = lc_config_load(&o, path, &warn);
    if (n < 0 || (n > 0) != (warn != NULL))
        abort();
    if (warn) {
        const char *last = lc_config_last_warnings();
        if (!last || strcmp(last, warn) != 0)
            abort();
        int lines = 0;
        for (const char *p = warn; *p;) {
            if (strncmp(p, path, strlen(path)) != 0)
                abort();
            const char *nl = strchr(p, '\n');
            lines++;
            p = nl ? nl + 1 : p + strlen(p);
        }
        if (lines != n)
            abort();
    }
    in_range(&o);
    free(warn);
    lc_config_free(&o);
    return 0;
}
