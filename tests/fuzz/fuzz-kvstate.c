/*
 * fuzz-kvstate.c - libFuzzer harness for the KV state reader (llm/kvstate.h; not built by
 * `make`; tests/fuzz/run.sh).
 *
 * A state file is refused before its cells unless it names the model in use, so random bytes
 * would only ever test the first checks.  The harness therefore makes a valid state file once
 * (stories260K Q4_1 from $LC_SHARED, 6 tokens, a reply list) and reads each input as an edit of
 * it:  byte 0: flags (1: cut the file at the length in bytes 1-2; 2: seal the header's CRC
 * again after the edit; 4: seal the CRC of the ids too, at the place the edited header says);
 * bytes 3-4: offset; the rest is XORed into the file from that offset.  An input that starts
 * with "LCKVSTAT" is used as the file itself.  lc_kvstate_open, then lc_kvstate_load of every
 * token, must succeed or fail with a message, never crash, leak or read out of bounds, and a
 * failed load must leave the cache empty.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "context.h"
#include "kvstate.h"
#include "model.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static struct lc_model *model;
static struct lc_context *ctx;
static uint8_t *valid;
static size_t valid_len;
static char path[256];

static void put32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static uint32_t get32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static void init(void)
{
    const char *shared = getenv("LC_SHARED");
    char mp[512];
    snprintf(mp, sizeof(mp), "%s/models/stories260K-ff192-q4_1.gguf", shared ? shared : "../shared");
    char *err = NULL;
    model = lc_model_load(mp, false, &err);
    if (!model) {
        fprintf(stderr, "fuzz-kvstate: %s\n", err ? err : mp);
        abort();
    }
    struct lc_context_params cp = lc_context_default_params();
    cp.n_ctx = 32;
    cp.n_threads = 1;
    ctx = lc_context_new(model, &cp, &err);
    int32_t toks[6] = { 1, 400, 300, 200, 100, 50 }, reply[2] = { 200, 100 };
    struct lc_kvstate_kept kept = { 7, 5, 2, reply };
    snprintf(path, sizeof(path), "/tmp/fuzz-kvstate.%d.kv", (int)getpid());
    if (!ctx || lc_context_decode(ctx, toks, 6, 0, false, &err) != 0 ||
        lc_kvstate_save(path, ctx, toks, 6, &kept, 1, &err) != 0)
        abort();
    FILE *f = fopen(path, "rb");
    valid = malloc(1 << 16);
    valid_len = f ? fread(valid, 1, 1 << 16, f) : 0;
    if (f)
        fclose(f);
    if (valid_len < 100)
        abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!model)
        init();
    uint8_t *buf = malloc(valid_len + size + 1);
    size_t len;
    if (size >= 8 && !memcmp(data, "LCKVSTAT", 8)) {
        memcpy(buf, data, size);
        len = size;
    } else {
        memcpy(buf, valid, valid_len);
        len = valid_len;
        if (size >= 5) {
            size_t off = ((size_t)data[3] | (size_t)data[4] << 8) % len;
            for (size_t i = 5; i < size && off + i - 5 < len; i++)
                buf[off + i - 5] ^= data[i];
            if (data[0] & 2)
                put32(buf + 68, lc_crc32(0, buf, 68));
            if (data[0] & 4) {   /* the ids' CRC where the edited header puts its end */
                uint64_t end = 72 + (uint64_t)get32(buf + 60) + 4 * (uint64_t)get32(buf + 52);
                uint32_t n_kept = get32(buf + 56);
                for (uint32_t k = 0; k < n_kept && end + 20 <= len; k++)
                    end += 20 + 4 * (uint64_t)get32(buf + end + 16);
                if (end + 4 <= len)
                    put32(buf + end, lc_crc32(0, buf + 72, (size_t)(end - 72)));
            }
            if (data[0] & 1) {
                size_t cut = (size_t)data[1] | (size_t)data[2] << 8;
                if (cut < len)
                    len = cut;
            }
        }
    }
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(buf, 1, len, f) != len)
        abort();
    fclose(f);
    free(buf);
    int why = 0;
    char *err = NULL;
    struct lc_kvstate *s = lc_kvstate_open(path, ctx, &why, &err);
    if (!s) {
        if (!err || why == 0)
            abort();
        free(err);
        return 0;
    }
    const int32_t n = lc_kvstate_n_tokens(s);
    for (int32_t i = 0; i < n; i++)
        if (lc_kvstate_tokens(s)[i] < 0 || lc_kvstate_tokens(s)[i] >= model->hp.n_vocab)
            abort();
    int r = lc_kvstate_load(s, ctx, n, NULL, NULL, &why, &err);
    if (r != 0 && (!err || lc_context_n_past(ctx) != 0))
        abort();
    if (r == 0 && lc_context_n_past(ctx) != n)
        abort();
    free(err);
    lc_kvstate_close(s);
    return 0;
}
