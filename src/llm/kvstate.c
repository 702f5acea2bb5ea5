/*
 * kvstate.c - the KV cache of a conversation in a file (format and contract in kvstate.h).
 */
#include "kvstate.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "gguf.h"
#include "quant.h"

static const char magic[8] = { 'L', 'C', 'K', 'V', 'S', 'T', 'A', 'T' };
#define HEADER_BYTES 68      /* the fixed fields, then their CRC */
#define META_OFFSET 72
#define MAX_TOKENS (1 << 26) /* far above any context; keeps every size product in range */
#define MAX_NAME 255

static char *fmt(const char *f, ...) __attribute__((format(printf, 1, 2)));
static char *fmt(const char *f, ...)
{
    va_list ap;
    va_start(ap, f);
    char *s = NULL;
    if (vasprintf(&s, f, ap) < 0)
        s = NULL;
    va_end(ap);
    return s;
}

/* ---------------------------------------------------------------- CRC-32, FNV-1a */

/* crc_tab[0] is the classic byte-at-a-time table (Sarwate); crc_tab[k][b] is the CRC of byte b
 * followed by k zero bytes, which lets eight bytes be folded in with eight lookups. */
static uint32_t crc_tab[8][256];
static pthread_once_t crc_once = PTHREAD_ONCE_INIT;

static void crc_init(void)
{
    for (uint32_t b = 0; b < 256; b++) {
        uint32_t c = b;
        for (int k = 0; k < 8; k++)
            c = c & 1 ? 0xEDB88320u ^ (c >> 1) : c >> 1;
        crc_tab[0][b] = c;
    }
    for (uint32_t b = 0; b < 256; b++)
        for (int k = 1; k < 8; k++)
            crc_tab[k][b] = (crc_tab[k - 1][b] >> 8) ^ crc_tab[0][crc_tab[k - 1][b] & 0xFF];
}

uint32_t lc_crc32(uint32_t crc, const void *p, size_t n)
{
    pthread_once(&crc_once, crc_init);
    const uint8_t *s = p;
    uint32_t c = ~crc;
    for (; n >= 8; n -= 8, s += 8) {
        uint32_t lo = c ^ ((uint32_t)s[0] | (uint32_t)s[1] << 8 | (uint32_t)s[2] << 16 |
                           (uint32_t)s[3] << 24);
        c = crc_tab[7][lo & 0xFF] ^ crc_tab[6][(lo >> 8) & 0xFF] ^ crc_tab[5][(lo >> 16) & 0xFF] ^
            crc_tab[4][lo >> 24] ^ crc_tab[3][s[4]] ^ crc_tab[2][s[5]] ^ crc_tab[1][s[6]] ^
            crc_tab[0][s[7]];
    }
    while (n--)
        c = crc_tab[0][(c ^ *s++) & 0xFF] ^ (c >> 8);
    return ~c;
}

uint64_t lc_fnv64(uint64_t h, const void *p, size_t n)
{
    const uint8_t *s = p;
    for (size_t i = 0; i < n; i++) {
        h ^= s[i];
        h *= 0x100000001b3ULL;
    }
    return h;
}

static void put32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static void put64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static uint32_t get32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static uint64_t get64(const uint8_t *p)
{
    return (uint64_t)get32(p) | (uint64_t)get32(p + 4) << 32;
}

uint64_t lc_kvstate_model_hash(const struct lc_model *m)
{
    uint64_t h = LC_FNV64_INIT;
    const int np = m->n_parts > 0 ? m->n_parts : 1;
    for (int p = 0; p < np; p++) {
        const struct lc_gguf *g = m->n_parts > 0 ? m->parts[p] : m->gguf;
        const uint8_t *map = lc_gguf_map(g);
        const size_t size = lc_gguf_file_size(g), off = lc_gguf_data_offset(g);
        uint8_t b[8];
        put64(b, size);
        h = lc_fnv64(h, b, 8);
        if (!map || off > size)
            continue;
        h = lc_fnv64(h, map, off);
        const size_t data = size - off, len = data < 64 ? data : 64;
        for (size_t i = 0; len && i < 64; i++)
            h = lc_fnv64(h, map + off + (data - len) / 63 * i, len);
    }
    return h;
}

static uint64_t model_bytes(const struct lc_model *m)
{
    uint64_t n = 0;
    const int np = m->n_parts > 0 ? m->n_parts : 1;
    for (int p = 0; p < np; p++)
        n += lc_gguf_file_size(m->n_parts > 0 ? m->parts[p] : m->gguf);
    return n;
}

static const char *type_name(uint32_t t)
{
    return t == LC_TYPE_F32 ? "f32" : t == LC_TYPE_F16 ? "f16" : t == LC_TYPE_Q8_0 ? "q8_0" : "?";
}

/* ---------------------------------------------------------------- saving */

/* A write with a running CRC; the first failure sticks. */
struct wr {
    FILE *f;
    uint32_t crc;
    int err;
};

static void wr(struct wr *w, const void *p, size_t n)
{
    if (w->err || n == 0)
        return;
    w->crc = lc_crc32(w->crc, p, n);
    if (fwrite(p, 1, n, w->f) != n)
        w->err = errno ? errno : EIO;
}

/* Write the running CRC and start a new one. */
static void wr_crc(struct wr *w)
{
    uint8_t b[4];
    put32(b, w->crc);
    wr(w, b, 4);
    w->crc = 0;
}

int lc_kvstate_save(const char *path, const struct lc_context *c, const int32_t *tokens,
                    int32_t n_tokens, const struct lc_kvstate_kept *kept, size_t n_kept,
                    char **err)
{
    *err = NULL;
    const struct lc_model *m = lc_context_model(c);
    const size_t row = lc_context_kv_row_bytes(c);
    const int n_layer = m->hp.n_layer;
    if (n_tokens < 0 || n_tokens > lc_context_n_past(c) || n_kept > (size_t)n_tokens) {
        *err = fmt("nothing to save (%d tokens, %d cached)", n_tokens, lc_context_n_past(c));
        return -1;
    }
    size_t name_len = strnlen(m->name, sizeof(m->name));   /* < 128 <= MAX_NAME */
    uint64_t size = META_OFFSET + name_len + 4 * (uint64_t)n_tokens + 4 +
                    (uint64_t)n_layer * 2 * (uint64_t)n_tokens * row + 4;
    for (size_t i = 0; i < n_kept; i++)
        size += 20 + 4 * (uint64_t)kept[i].n;
    uint8_t h[HEADER_BYTES];
    memcpy(h, magic, 8);
    put32(h + 8, LC_KVSTATE_FORMAT_VERSION);
    put32(h + 12, (uint32_t)lc_context_kv_type(c));
    put64(h + 16, size);
    put64(h + 24, model_bytes(m));
    put64(h + 32, lc_kvstate_model_hash(m));
    put32(h + 40, (uint32_t)n_layer);
    put32(h + 44, (uint32_t)lc_context_kv_n_embd(c));
    put32(h + 48, (uint32_t)m->hp.n_vocab);
    put32(h + 52, (uint32_t)n_tokens);
    put32(h + 56, (uint32_t)n_kept);
    put32(h + 60, (uint32_t)name_len);
    put32(h + 64, lc_context_compute_flags(c));

    char *tmp = fmt("%s.tmp-XXXXXX", path);
    int32_t chunk = n_tokens < 256 ? n_tokens : 256;
    uint8_t *buf = malloc(chunk > 0 ? (size_t)chunk * row : 1);
    if (!tmp || !buf) {
        free(tmp);
        free(buf);
        *err = fmt("out of memory");
        return -1;
    }
    int fd = mkstemp(tmp);   /* mode 0600 */
    if (fd < 0) {
        /* the temporary file is ours: name what the user can act on */
        const char *slash = strrchr(path, '/');
        int dir_len = slash == path ? 1 : slash ? (int)(slash - path) : 1;
        const char *dir = slash ? path : ".";
        if (errno == ENOENT || errno == ENOTDIR)
            *err = fmt("the directory %.*s does not exist", dir_len, dir);
        else
            *err = fmt("cannot create it: %s", strerror(errno));
        free(tmp);
        free(buf);
        return -1;
    }
    struct wr w = { fdopen(fd, "wb"), 0, 0 };
    if (!w.f) {
        w.err = errno;
        close(fd);
    } else {
        errno = 0;
        wr(&w, h, HEADER_BYTES);
        wr_crc(&w);
        wr(&w, m->name, name_len);
        for (int32_t i = 0; i < n_tokens; i++) {
            uint8_t b[4];
            put32(b, (uint32_t)tokens[i]);
            wr(&w, b, 4);
        }
        for (size_t i = 0; i < n_kept; i++) {
            uint8_t b[20];
            put64(b, kept[i].hash);
            put64(b + 8, kept[i].bytes);
            put32(b + 16, (uint32_t)kept[i].n);
            wr(&w, b, 20);
            for (int32_t j = 0; j < kept[i].n; j++) {
                put32(b, (uint32_t)kept[i].ids[j]);
                wr(&w, b, 4);
            }
        }
        wr_crc(&w);
        for (int il = 0; il < n_layer && !w.err; il++)
            for (int v = 0; v < 2; v++)
                for (int32_t p = 0; p < n_tokens; p += chunk) {
                    int32_t n = n_tokens - p < chunk ? n_tokens - p : chunk;
                    lc_context_kv_read(c, il, v, p, n, buf);
                    wr(&w, buf, (size_t)n * row);
                }
        wr_crc(&w);
        if (fflush(w.f) != 0 && !w.err)
            w.err = errno ? errno : EIO;
        if (fclose(w.f) != 0 && !w.err)
            w.err = errno ? errno : EIO;
    }
    free(buf);
    if (!w.err && rename(tmp, path) != 0)
        w.err = errno;
    if (w.err) {
        unlink(tmp);
        *err = fmt("write failed: %s", strerror(w.err));
        free(tmp);
        return -1;
    }
    free(tmp);
    return 0;
}

/* ---------------------------------------------------------------- loading */

struct lc_kvstate {
    FILE *f;
    uint64_t size;            /* bytes of the file */
    uint32_t n_layer;
    size_t row;               /* bytes of a cell row */
    int32_t n_tokens;
    int32_t *tokens;
    struct lc_kvstate_kept *kept;
    size_t n_kept;
};

int32_t lc_kvstate_n_tokens(const struct lc_kvstate *s) { return s->n_tokens; }
const int32_t *lc_kvstate_tokens(const struct lc_kvstate *s) { return s->tokens; }
size_t lc_kvstate_n_kept(const struct lc_kvstate *s) { return s->n_kept; }
const struct lc_kvstate_kept *lc_kvstate_kept(const struct lc_kvstate *s, size_t i)
{
    return i < s->n_kept ? &s->kept[i] : NULL;
}

void lc_kvstate_close(struct lc_kvstate *s)
{
    if (!s)
        return;
    if (s->f)
        fclose(s->f);
    free(s->tokens);
    for (size_t i = 0; i < s->n_kept; i++)
        free(s->kept[i].ids);
    free(s->kept);
    free(s);
}

/* Read exactly n bytes, adding them to *crc.  The size was checked, so a short read is the
 * file changing under us or an I/O error. */
static int rd(struct lc_kvstate *s, void *p, size_t n, uint32_t *crc, int *why, char **err)
{
    if (n && fread(p, 1, n, s->f) != n) {
        int e = ferror(s->f) ? errno : 0;
        *why = e ? LC_KVSTATE_IO : LC_KVSTATE_TRUNCATED;
        *err = e ? fmt("cannot read: %s", strerror(e)) : fmt("truncated while it was read");
        return -1;
    }
    *crc = lc_crc32(*crc, p, n);
    return 0;
}

/* Read the stored CRC and compare it with crc. */
static int rd_crc(struct lc_kvstate *s, uint32_t crc, int *why, char **err)
{
    uint8_t b[4];
    uint32_t ignore = 0;
    if (rd(s, b, 4, &ignore, why, err) != 0)
        return -1;
    if (get32(b) != crc) {
        *why = LC_KVSTATE_CHECKSUM;
        *err = fmt("bad checksum (the file is damaged)");
        return -1;
    }
    return 0;
}

struct lc_kvstate *lc_kvstate_open(const char *path, const struct lc_context *c, int *why,
                                   char **err)
{
    *err = NULL;
    *why = LC_KVSTATE_OK;
    const struct lc_model *m = lc_context_model(c);
    struct lc_kvstate *s = calloc(1, sizeof(*s));
    if (!s) {
        *why = LC_KVSTATE_IO;
        *err = fmt("out of memory");
        return NULL;
    }
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        int e = fd < 0 ? errno : 0;
        if (fd >= 0)
            close(fd);
        free(s);
        *why = e == ENOENT ? LC_KVSTATE_MISSING : LC_KVSTATE_IO;
        if (e != ENOENT)
            *err = e ? fmt("cannot open: %s", strerror(e)) : fmt("not a regular file");
        return NULL;
    }
    s->size = (uint64_t)st.st_size;
    s->f = fdopen(fd, "rb");
    if (!s->f) {
        close(fd);
        free(s);
        *why = LC_KVSTATE_IO;
        *err = fmt("out of memory");
        return NULL;
    }
    uint8_t h[HEADER_BYTES + 4];
    size_t got = fread(h, 1, sizeof(h), s->f);
    uint32_t crc = 0;
    if (memcmp(h, magic, got < 8 ? got : 8) != 0) {
        *why = LC_KVSTATE_FORMAT;
        *err = fmt("not a llamachat KV state file");
        goto fail;
    }
    if (got < sizeof(h)) {
        *why = LC_KVSTATE_TRUNCATED;
        *err = fmt("truncated (%llu bytes, the header alone is %d)", (unsigned long long)s->size,
                   (int)sizeof(h));
        goto fail;
    }
    if (get32(h + 8) != LC_KVSTATE_FORMAT_VERSION) {
        *why = LC_KVSTATE_VERSION;
        *err = fmt("format version %u; this llamachat reads version %d", get32(h + 8),
                   LC_KVSTATE_FORMAT_VERSION);
        goto fail;
    }
    if (get32(h + HEADER_BYTES) != lc_crc32(0, h, HEADER_BYTES)) {
        *why = LC_KVSTATE_CHECKSUM;
        *err = fmt("bad checksum (the file is damaged)");
        goto fail;
    }
    const uint64_t want = get64(h + 16);
    if (s->size != want) {
        *why = LC_KVSTATE_TRUNCATED;
        *err = s->size < want ? fmt("truncated (%llu of %llu bytes)", (unsigned long long)s->size,
                                    (unsigned long long)want)
                              : fmt("%llu bytes where %llu were written", (unsigned long long)s->size,
                                    (unsigned long long)want);
        goto fail;
    }
    const uint32_t type = get32(h + 12), n_layer = get32(h + 40), n_embd = get32(h + 44),
                   n_vocab = get32(h + 48), n_tokens = get32(h + 52), n_kept = get32(h + 56),
                   name_len = get32(h + 60);
    if (name_len > MAX_NAME || n_tokens > MAX_TOKENS || n_kept > n_tokens) {
        /* the header's CRC held, so this is a file made to look like one */
        *why = LC_KVSTATE_FORMAT;
        *err = fmt("not a llamachat KV state file (impossible counts)");
        goto fail;
    }
    char name[MAX_NAME + 1];
    if (rd(s, name, name_len, &crc, why, err) != 0)
        goto fail;
    name[name_len] = '\0';
    for (uint32_t i = 0; i < name_len; i++)   /* shown to the user */
        if ((unsigned char)name[i] < 0x20 || name[i] == 0x7F)
            name[i] = '?';
    if (get64(h + 24) != model_bytes(m) || get64(h + 32) != lc_kvstate_model_hash(m) ||
        n_layer != (uint32_t)m->hp.n_layer || n_embd != (uint32_t)lc_context_kv_n_embd(c) ||
        n_vocab != (uint32_t)m->hp.n_vocab) {
        *why = LC_KVSTATE_MODEL;
        *err = fmt("made with another model (%s)", name);
        goto fail;
    }
    if (type != (uint32_t)lc_context_kv_type(c)) {
        *why = LC_KVSTATE_CACHE;
        *err = fmt("made with --cache-type %s; this run uses %s", type_name(type),
                   type_name((uint32_t)lc_context_kv_type(c)));
        goto fail;
    }
    const uint32_t flags = get32(h + 64), ours = lc_context_compute_flags(c);
    if (flags != ours) {
        *why = LC_KVSTATE_MATH;
        if (flags & ~(LC_COMPUTE_FAST_MATH | LC_COMPUTE_FLASH_ATTN))
            *err = fmt("made with options this llamachat does not know (flags 0x%x)", flags);
        else if ((flags ^ ours) & LC_COMPUTE_FAST_MATH)
            *err = fmt(flags & LC_COMPUTE_FAST_MATH
                           ? "made with --fast-math; this run computes in llama.cpp's order"
                           : "made in llama.cpp's order; this run uses --fast-math");
        else
            *err = fmt(flags & LC_COMPUTE_FLASH_ATTN ? "made with flash attention (-fa); this run "
                                                       "computes attention without it"
                                                     : "made without flash attention; this run "
                                                       "uses it (-fa)");
        goto fail;
    }
    if (n_tokens > (uint32_t)lc_context_n_ctx(c)) {
        *why = LC_KVSTATE_CONTEXT;
        *err = fmt("it holds %u tokens; the context is %d (-c)", n_tokens, lc_context_n_ctx(c));
        goto fail;
    }
    s->n_layer = n_layer;
    s->row = lc_context_kv_row_bytes(c);
    /* the rest must add up to the size: the cells and three CRCs after the lists */
    uint64_t left = s->size - META_OFFSET - name_len;
    const uint64_t cells = (uint64_t)n_layer * 2 * n_tokens * s->row;
    if (left < 4 * (uint64_t)n_tokens + 4 + cells + 4) {
        *why = LC_KVSTATE_CHECKSUM;
        *err = fmt("bad checksum (the file is damaged)");
        goto fail;
    }
    left -= 4 * (uint64_t)n_tokens + 4 + cells + 4;   /* bytes of the reply lists */
    s->tokens = malloc(n_tokens ? 4 * (size_t)n_tokens : 1);
    s->kept = calloc(n_kept ? n_kept : 1, sizeof(*s->kept));
    if (!s->tokens || !s->kept) {
        *why = LC_KVSTATE_IO;
        *err = fmt("out of memory");
        goto fail;
    }
    if (rd(s, s->tokens, 4 * (size_t)n_tokens, &crc, why, err) != 0)
        goto fail;
    s->n_tokens = (int32_t)n_tokens;
    bool bad_id = false;
    for (uint32_t i = 0; i < n_tokens; i++) {
        s->tokens[i] = (int32_t)get32((const uint8_t *)&s->tokens[i]);
        bad_id |= s->tokens[i] < 0 || s->tokens[i] >= m->hp.n_vocab;
    }
    uint64_t kept_ids = 0;
    for (uint32_t i = 0; i < n_kept; i++) {
        uint8_t b[20];
        if (left < 20 || rd(s, b, 20, &crc, why, err) != 0) {
            if (left < 20) {
                *why = LC_KVSTATE_CHECKSUM;
                *err = fmt("bad checksum (the file is damaged)");
            }
            goto fail;
        }
        left -= 20;
        struct lc_kvstate_kept *k = &s->kept[i];
        uint32_t n = get32(b + 16);
        kept_ids += n;
        if (n == 0 || kept_ids > n_tokens || left < 4 * (uint64_t)n) {
            *why = LC_KVSTATE_CHECKSUM;
            *err = fmt("bad checksum (the file is damaged)");
            goto fail;
        }
        left -= 4 * (uint64_t)n;
        k->hash = get64(b);
        k->bytes = get64(b + 8);
        k->ids = malloc(4 * (size_t)n);
        if (!k->ids) {
            *why = LC_KVSTATE_IO;
            *err = fmt("out of memory");
            goto fail;
        }
        s->n_kept = i + 1;
        if (rd(s, k->ids, 4 * (size_t)n, &crc, why, err) != 0)
            goto fail;
        k->n = (int32_t)n;
        for (uint32_t j = 0; j < n; j++) {
            k->ids[j] = (int32_t)get32((const uint8_t *)&k->ids[j]);
            bad_id |= k->ids[j] < 0 || k->ids[j] >= m->hp.n_vocab;
        }
    }
    if (left != 0 || rd_crc(s, crc, why, err) != 0) {
        if (left != 0) {
            *why = LC_KVSTATE_CHECKSUM;
            *err = fmt("bad checksum (the file is damaged)");
        }
        goto fail;
    }
    if (bad_id) {   /* a CRC that holds over ids outside the vocabulary: made, not damaged */
        *why = LC_KVSTATE_FORMAT;
        *err = fmt("not a llamachat KV state file (token ids outside the vocabulary)");
        goto fail;
    }
    return s;
fail:
    lc_kvstate_close(s);
    return NULL;
}

int lc_kvstate_load(struct lc_kvstate *s, struct lc_context *c, int32_t n_use,
                    lc_progress_fn progress, void *user, int *why, char **err)
{
    *why = LC_KVSTATE_OK;
    *err = NULL;
    if (n_use < 0 || n_use > s->n_tokens || s->row != lc_context_kv_row_bytes(c) ||
        s->n_layer != (uint32_t)lc_context_model(c)->hp.n_layer) {
        *why = LC_KVSTATE_IO;
        *err = fmt("the state does not fit this context");
        return -1;
    }
    lc_context_truncate(c, 0);
    const size_t half = (size_t)s->n_tokens * s->row;   /* one layer's K or V rows */
    uint8_t *buf = malloc(half ? half : 1);
    if (!buf) {
        *why = LC_KVSTATE_IO;
        *err = fmt("out of memory");
        return -1;
    }
    uint32_t crc = 0;
    int rc = 0;
    for (uint32_t il = 0; il < s->n_layer && rc == 0; il++) {
        /* in tokens, as a prompt's progress: the share of the layers read */
        int32_t done = (int32_t)((int64_t)s->n_tokens * il / s->n_layer);
        if (progress && progress(user, done, s->n_tokens)) {
            *why = LC_KVSTATE_STOPPED;
            rc = 1;
            break;
        }
        for (int v = 0; v < 2 && rc == 0; v++) {
            if (rd(s, buf, half, &crc, why, err) != 0)
                rc = -1;
            else if (lc_context_kv_write(c, (int)il, v, 0, n_use, buf) != 0) {
                *why = LC_KVSTATE_IO;
                *err = fmt("the state does not fit this context");
                rc = -1;
            }
        }
    }
    free(buf);
    if (rc == 0 && rd_crc(s, crc, why, err) != 0)
        rc = -1;
    if (rc == 0 && lc_context_kv_commit(c, n_use) != 0) {
        *why = LC_KVSTATE_IO;
        *err = fmt("the state does not fit this context");
        rc = -1;
    }
    if (rc != 0)
        lc_context_truncate(c, 0);
    return rc;
}
