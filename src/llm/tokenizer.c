/*
 * tokenizer.c - the vocabulary of a GGUF model, and its tokenizer / detokenizer.
 *
 * The model: llama.cpp's src/llama-vocab.cpp (build 4748), which is the peer whose token ids we
 * must reproduce exactly.  A vocabulary is the list of pieces tokenizer.ggml.tokens with their
 * scores (tokenizer.ggml.scores) and types (tokenizer.ggml.token_type).  Each token gets a set of
 * attribute bits (llama.cpp's llama_token_attr) derived from its type, plus LSTRIP/RSTRIP for a
 * few model families and a CONTROL override for tokens whose text looks like an end-of-turn or
 * fill-in-the-middle marker (llama.cpp detects those by text; so do we).
 *
 * Tokenizing runs in two passes:
 *
 *  1. Special-token partition.  The input is cut into fragments: raw text, or one special token.
 *     The candidates are every CONTROL, USER_DEFINED or UNKNOWN token, longest text first; for
 *     each in turn, every raw fragment is split at each (leftmost, non-overlapping) occurrence of
 *     its text.  CONTROL and UNKNOWN tokens are candidates only with parse_special; USER_DEFINED
 *     ones always are (as in llama.cpp and HF tokenizers: added tokens are pre-tokenized first).
 *
 *  2. Each raw fragment is tokenized by the vocab's model:
 *     - "llama" (SentencePiece BPE, llm_tokenizer_spm): prefix a space if the fragment is first
 *       or follows a special token (add_space_prefix), replace every ' ' by U+2581, split into
 *       UTF-8 characters, then repeatedly merge the adjacent pair whose concatenation is a
 *       piece with the highest score (ties: leftmost pair), using a priority queue with lazy
 *       deletion.  A final symbol that is not a piece is emitted as its bytes <0xNN>.
 *
 * Decoding maps each token to its piece: U+2581 back to ' ', byte tokens to their byte, control
 * and unknown tokens to "" unless special.
 */
#include "tokenizer.h"

#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gguf.h"

/* Token attribute bits, as llama.cpp's llama_token_attr. */
enum {
    ATTR_UNDEFINED = 0,
    ATTR_UNKNOWN = 1 << 0,
    ATTR_UNUSED = 1 << 1,
    ATTR_NORMAL = 1 << 2,
    ATTR_CONTROL = 1 << 3,
    ATTR_USER_DEFINED = 1 << 4,
    ATTR_BYTE = 1 << 5,
    ATTR_NORMALIZED = 1 << 6,
    ATTR_LSTRIP = 1 << 7,
    ATTR_RSTRIP = 1 << 8,
};

enum vocab_kind { VOCAB_SPM = 1 };

struct lc_vocab {
    enum vocab_kind kind;
    int32_t n_tokens;

    const char **text;   /* [n_tokens] piece texts, NUL-terminated, inside text_arena */
    uint32_t *text_len;  /* [n_tokens] */
    float *score;        /* [n_tokens] */
    uint8_t *type;       /* [n_tokens] enum lc_token_type as stored */
    uint16_t *attr;      /* [n_tokens] ATTR_* bits */
    uint8_t *eog;        /* [n_tokens] 1 if end-of-generation */
    char *text_arena;

    /* Pieces for decoding with special = true (llama.cpp's cache_token_to_piece). */
    char *piece_arena;
    size_t *piece_off;   /* [n_tokens] */
    uint32_t *piece_len; /* [n_tokens] */

    /* text -> id: open addressing, linear probing, -1 = empty slot. */
    int32_t *ht;
    uint32_t ht_mask;

    /* Special-token candidates for the partition, longest text first. */
    int32_t *special;
    int32_t n_special;

    int32_t byte_tok[256]; /* byte -> token for byte fallback, -1 if none */

    int32_t bos, eos, eot, eom, unk;
    bool add_bos, add_eos, add_space_prefix;
};

/* ------------------------------------------------------------------ small helpers */

static char *fmt_err(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static char *fmt_err(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char *s = NULL;
    if (vasprintf(&s, fmt, ap) < 0)
        s = NULL;
    va_end(ap);
    return s;
}

static void set_err(char **err, char *msg)
{
    if (err)
        *err = msg;
    else
        free(msg);
}

/* Length of the UTF-8 sequence that starts with byte c, from its high nibble (llama.cpp's
 * unicode_len_utf8): continuation and invalid lead bytes count as one byte. */
static size_t utf8_len(unsigned char c)
{
    static const uint8_t lookup[16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4};
    return lookup[c >> 4];
}

static bool is_ascii_space(unsigned char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r';
}

/* FNV-1a, 32 bit. */
static uint32_t hash_bytes(const char *s, size_t n)
{
    uint32_t h = 2166136261u;
    for (size_t i = 0; i < n; i++) {
        h ^= (unsigned char)s[i];
        h *= 16777619u;
    }
    return h;
}

/* Token id whose text is exactly s[0..n), or -1. */
static int32_t vocab_lookup(const struct lc_vocab *v, const char *s, size_t n)
{
    uint32_t i = hash_bytes(s, n) & v->ht_mask;
    for (;;) {
        int32_t id = v->ht[i];
        if (id < 0)
            return -1;
        if (v->text_len[id] == n && memcmp(v->text[id], s, n) == 0)
            return id;
        i = (i + 1) & v->ht_mask;
    }
}

/* Growable token list. */
struct toks {
    int32_t *v;
    size_t n, cap;
    bool oom;
};

static void toks_push(struct toks *t, int32_t id)
{
    if (t->oom)
        return;
    if (t->n == t->cap) {
        size_t cap = t->cap ? t->cap * 2 : 64;
        int32_t *p = realloc(t->v, cap * sizeof(*p));
        if (!p) {
            t->oom = true;
            return;
        }
        t->v = p;
        t->cap = cap;
    }
    t->v[t->n++] = id;
}

/* ------------------------------------------------------------------ SentencePiece (spm) */

struct spm_sym {
    int32_t prev, next; /* neighbours in the live chain, -1 at the ends */
    uint32_t off, n;    /* bytes of the escaped text; n == 0 once merged into its left */
};

struct spm_bigram {
    int32_t left, right;
    float score;
    uint32_t size; /* bytes of left + right when queued: a mismatch later means stale */
};

struct spm_heap {
    struct spm_bigram *v;
    size_t n, cap;
    bool oom;
};

/* Priority order of llama.cpp's llm_bigram_spm::comparator: higher score first, then the
 * leftmost pair. */
static bool bigram_before(const struct spm_bigram *a, const struct spm_bigram *b)
{
    return a->score > b->score || (a->score == b->score && a->left < b->left);
}

static void heap_push(struct spm_heap *h, struct spm_bigram b)
{
    if (h->oom)
        return;
    if (h->n == h->cap) {
        size_t cap = h->cap ? h->cap * 2 : 64;
        struct spm_bigram *p = realloc(h->v, cap * sizeof(*p));
        if (!p) {
            h->oom = true;
            return;
        }
        h->v = p;
        h->cap = cap;
    }
    size_t i = h->n++;
    while (i > 0) {
        size_t parent = (i - 1) / 2;
        if (!bigram_before(&b, &h->v[parent]))
            break;
        h->v[i] = h->v[parent];
        i = parent;
    }
    h->v[i] = b;
}

static struct spm_bigram heap_pop(struct spm_heap *h)
{
    struct spm_bigram top = h->v[0];
    struct spm_bigram last = h->v[--h->n];
    size_t i = 0;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= h->n)
            break;
        if (c + 1 < h->n && bigram_before(&h->v[c + 1], &h->v[c]))
            c++;
        if (!bigram_before(&h->v[c], &last))
            break;
        h->v[i] = h->v[c];
        i = c;
    }
    if (h->n > 0)
        h->v[i] = last;
    return top;
}

/* Queue the pair (left, right) if their concatenation is a piece (llama.cpp try_add_bigram). */
static void spm_try_bigram(const struct lc_vocab *v, const char *text, const struct spm_sym *sym,
                           struct spm_heap *h, int32_t left, int32_t right)
{
    if (left < 0 || right < 0)
        return;
    uint32_t size = sym[left].n + sym[right].n;
    int32_t id = vocab_lookup(v, text + sym[left].off, size);
    if (id < 0)
        return;
    struct spm_bigram b = {left, right, v->score[id], size};
    heap_push(h, b);
}

/* Emit one final symbol: its piece, or its bytes as byte tokens (llama.cpp resegment; its
 * rev_merge path never fires, since every merged symbol is a piece). */
static void spm_emit(const struct lc_vocab *v, const char *s, uint32_t n, struct toks *out)
{
    int32_t id = vocab_lookup(v, s, n);
    if (id >= 0) {
        toks_push(out, id);
        return;
    }
    for (uint32_t j = 0; j < n; j++) {
        int32_t b = v->byte_tok[(unsigned char)s[j]];
        /* llama.cpp throws when the vocab has no token for a byte; we fall back to UNK. */
        if (b < 0)
            b = v->unk;
        if (b >= 0)
            toks_push(out, b);
    }
}

/* Tokenize one raw fragment (already escaped: spaces are U+2581) of n bytes.  Returns false
 * on allocation failure. */
static bool spm_tokenize(const struct lc_vocab *v, const char *text, size_t n, struct toks *out)
{
    if (n == 0)
        return true;
    if (n > (size_t)INT32_MAX)
        return false;
    struct spm_sym *sym = malloc(n * sizeof(*sym));
    struct spm_heap h = {0};
    if (!sym)
        return false;

    /* One symbol per UTF-8 character (a truncated sequence at the end keeps what is left). */
    int32_t n_sym = 0;
    for (size_t off = 0; off < n;) {
        size_t len = utf8_len((unsigned char)text[off]);
        if (len > n - off)
            len = n - off;
        sym[n_sym].off = (uint32_t)off;
        sym[n_sym].n = (uint32_t)len;
        sym[n_sym].prev = n_sym - 1;
        off += len;
        sym[n_sym].next = off == n ? -1 : n_sym + 1;
        n_sym++;
    }

    for (int32_t i = 1; i < n_sym; i++)
        spm_try_bigram(v, text, sym, &h, i - 1, i);

    while (h.n > 0 && !h.oom) {
        struct spm_bigram b = heap_pop(&h);
        struct spm_sym *l = &sym[b.left], *r = &sym[b.right];
        /* Stale entry: one side was merged away, or the left one grew since it was queued. */
        if (l->n == 0 || r->n == 0 || l->n + r->n != b.size)
            continue;
        l->n += r->n;
        r->n = 0;
        l->next = r->next;
        if (r->next >= 0)
            sym[r->next].prev = b.left;
        spm_try_bigram(v, text, sym, &h, l->prev, b.left);
        spm_try_bigram(v, text, sym, &h, b.left, l->next);
    }
    bool ok = !h.oom;
    if (ok)
        for (int32_t i = 0; i != -1; i = sym[i].next)
            spm_emit(v, text + sym[i].off, sym[i].n, out);
    free(h.v);
    free(sym);
    return ok;
}

/* Escape a raw fragment for spm: optional leading space, then ' ' -> U+2581 (E2 96 81). */
static char *spm_escape(const char *s, size_t n, bool prefix, size_t *out_n)
{
    size_t spaces = prefix ? 1 : 0;
    for (size_t i = 0; i < n; i++)
        spaces += s[i] == ' ';
    size_t m = n + (prefix ? 1 : 0) + 2 * spaces;
    char *e = malloc(m ? m : 1);
    if (!e)
        return NULL;
    size_t k = 0;
    if (prefix) {
        memcpy(e, "\xe2\x96\x81", 3);
        k = 3;
    }
    for (size_t i = 0; i < n; i++) {
        if (s[i] == ' ') {
            memcpy(e + k, "\xe2\x96\x81", 3);
            k += 3;
        } else {
            e[k++] = s[i];
        }
    }
    *out_n = k;
    return e;
}

/* ------------------------------------------------------------------ special-token partition */

struct frag {
    int32_t tok;     /* token id, or -1 for raw text */
    size_t off, len; /* raw text span */
};

struct frags {
    struct frag *v;
    size_t n, cap;
    bool oom;
};

static void frags_push(struct frags *f, int32_t tok, size_t off, size_t len)
{
    if (f->oom)
        return;
    if (f->n == f->cap) {
        size_t cap = f->cap ? f->cap * 2 : 16;
        struct frag *p = realloc(f->v, cap * sizeof(*p));
        if (!p) {
            f->oom = true;
            return;
        }
        f->v = p;
        f->cap = cap;
    }
    f->v[f->n++] = (struct frag){tok, off, len};
}

/* Split raw fragments at special-token texts (llama.cpp tokenizer_st_partition).  On return
 * *fr holds the fragments in order; false on allocation failure. */
static bool partition(const struct lc_vocab *v, const char *text, size_t len, bool parse_special,
                      struct frags *fr)
{
    struct frags cur = {0}, next = {0};
    if (len > 0)
        frags_push(&cur, -1, 0, len);
    for (int32_t k = 0; k < v->n_special && !cur.oom; k++) {
        int32_t id = v->special[k];
        uint16_t a = v->attr[id];
        if (!parse_special && (a & (ATTR_CONTROL | ATTR_UNKNOWN)))
            continue;
        const char *st = v->text[id];
        size_t sl = v->text_len[id];
        /* Skip this token quickly when no raw fragment can hold it. */
        bool any = false;
        for (size_t i = 0; i < cur.n && !any; i++)
            any = cur.v[i].tok < 0 && cur.v[i].len >= sl &&
                  memmem(text + cur.v[i].off, cur.v[i].len, st, sl) != NULL;
        if (!any)
            continue;
        next.n = 0;
        for (size_t i = 0; i < cur.n; i++) {
            struct frag f = cur.v[i];
            if (f.tok >= 0) {
                frags_push(&next, f.tok, 0, 0);
                continue;
            }
            size_t off = f.off, rem = f.len;
            while (rem > 0) {
                const char *m = rem >= sl ? memmem(text + off, rem, st, sl) : NULL;
                if (!m) {
                    frags_push(&next, -1, off, rem);
                    break;
                }
                size_t pos = (size_t)(m - text);
                size_t left = pos - off;
                if (a & ATTR_LSTRIP)
                    while (left > 0 && is_ascii_space((unsigned char)text[off + left - 1]))
                        left--;
                if (left > 0)
                    frags_push(&next, -1, off, left);
                frags_push(&next, id, 0, 0);
                size_t roff = pos + sl, rlen = off + rem - roff;
                if (a & ATTR_RSTRIP)
                    while (rlen > 0 && is_ascii_space((unsigned char)text[roff])) {
                        roff++;
                        rlen--;
                    }
                off = roff;
                rem = rlen;
            }
        }
        struct frags t = cur;
        cur = next;
        next = t;
    }
    free(next.v);
    if (cur.oom || next.oom) {
        free(cur.v);
        return false;
    }
    *fr = cur;
    return true;
}

/* ------------------------------------------------------------------ tokenize */

int32_t lc_tokenize(const struct lc_vocab *v, const char *text, size_t len, bool add_bos,
                    bool parse_special, int32_t *out, int32_t n_max)
{
    if (!v || (!text && len > 0) || len > (size_t)INT32_MAX - 8)
        return INT32_MIN;
    struct toks t = {0};
    struct frags fr = {0};
    if (!partition(v, text, len, parse_special, &fr))
        return INT32_MIN;

    bool ok = true;
    if (add_bos && v->bos >= 0)
        toks_push(&t, v->bos);
    /* The first fragment, and every fragment after a special token, gets the space prefix. */
    bool prev_special = true;
    for (size_t i = 0; i < fr.n && ok; i++) {
        if (fr.v[i].tok >= 0) {
            toks_push(&t, fr.v[i].tok);
            prev_special = true;
            continue;
        }
        size_t en = 0;
        char *esc = spm_escape(text + fr.v[i].off, fr.v[i].len,
                               v->add_space_prefix && prev_special, &en);
        ok = esc && spm_tokenize(v, esc, en, &t);
        free(esc);
        prev_special = false;
    }
    free(fr.v);
    if (!ok || t.oom || t.n > (size_t)INT32_MAX) {
        free(t.v);
        return INT32_MIN;
    }
    int32_t n = (int32_t)t.n;
    if (n > n_max) {
        free(t.v);
        return -n;
    }
    if (n > 0)
        memcpy(out, t.v, t.n * sizeof(*out));
    free(t.v);
    return n;
}

/* ------------------------------------------------------------------ decode */

int32_t lc_token_to_piece(const struct lc_vocab *v, int32_t tok, char *buf, int32_t len,
                          bool special)
{
    if (!v || tok < 0 || tok >= v->n_tokens)
        return 0;
    if (!special && (v->attr[tok] & (ATTR_UNKNOWN | ATTR_CONTROL)))
        return 0;
    uint32_t n = v->piece_len[tok];
    if (len < 0 || (uint32_t)len < n)
        return -(int32_t)n;
    if (n > 0)
        memcpy(buf, v->piece_arena + v->piece_off[tok], n);
    return (int32_t)n;
}

char *lc_detokenize(const struct lc_vocab *v, const int32_t *toks, int32_t n, bool special,
                    bool remove_leading_space)
{
    if (!v || n < 0 || (n > 0 && !toks))
        return NULL;
    /* The tokenizer's space prefix sits on the first token after a leading BOS. */
    int32_t strip_at = -1;
    if (remove_leading_space && v->add_space_prefix && n > 0)
        strip_at = (toks[0] == v->bos && v->bos >= 0) ? 1 : 0;

    size_t total = 0;
    for (int32_t i = 0; i < n; i++) {
        int32_t t = toks[i];
        if (t < 0 || t >= v->n_tokens)
            continue;
        if (!special && (v->attr[t] & (ATTR_UNKNOWN | ATTR_CONTROL)))
            continue;
        total += v->piece_len[t];
    }
    char *s = malloc(total + 1);
    if (!s)
        return NULL;
    size_t k = 0;
    for (int32_t i = 0; i < n; i++) {
        int32_t t = toks[i];
        if (t < 0 || t >= v->n_tokens)
            continue;
        if (!special && (v->attr[t] & (ATTR_UNKNOWN | ATTR_CONTROL)))
            continue;
        const char *p = v->piece_arena + v->piece_off[t];
        uint32_t pn = v->piece_len[t];
        if (i == strip_at && pn > 0 && p[0] == ' ') {
            p++;
            pn--;
        }
        memcpy(s + k, p, pn);
        k += pn;
    }
    s[k] = '\0';
    return s;
}

/* ------------------------------------------------------------------ accessors */

int32_t lc_vocab_n_tokens(const struct lc_vocab *v) { return v ? v->n_tokens : 0; }
int32_t lc_vocab_bos(const struct lc_vocab *v) { return v ? v->bos : -1; }
int32_t lc_vocab_eos(const struct lc_vocab *v) { return v ? v->eos : -1; }
int32_t lc_vocab_eot(const struct lc_vocab *v) { return v ? v->eot : -1; }
bool lc_vocab_add_bos(const struct lc_vocab *v) { return v && v->add_bos; }

bool lc_vocab_is_eog(const struct lc_vocab *v, int32_t tok)
{
    return v && tok >= 0 && tok < v->n_tokens && v->eog[tok];
}

bool lc_vocab_is_control(const struct lc_vocab *v, int32_t tok)
{
    return v && tok >= 0 && tok < v->n_tokens && (v->attr[tok] & ATTR_CONTROL);
}

const char *lc_vocab_text(const struct lc_vocab *v, int32_t tok)
{
    return v && tok >= 0 && tok < v->n_tokens ? v->text[tok] : NULL;
}

int32_t lc_vocab_find(const struct lc_vocab *v, const char *text)
{
    return v && text ? vocab_lookup(v, text, strlen(text)) : -1;
}

/* ------------------------------------------------------------------ load */

void lc_vocab_free(struct lc_vocab *v)
{
    if (!v)
        return;
    free(v->text);
    free(v->text_len);
    free(v->score);
    free(v->type);
    free(v->attr);
    free(v->eog);
    free(v->text_arena);
    free(v->piece_arena);
    free(v->piece_off);
    free(v->piece_len);
    free(v->ht);
    free(v->special);
    free(v);
}

static uint16_t attr_of_type(int32_t type)
{
    switch (type) {
    case LC_TOKEN_NORMAL: return ATTR_NORMAL;
    case LC_TOKEN_UNKNOWN: return ATTR_UNKNOWN;
    case LC_TOKEN_CONTROL: return ATTR_CONTROL;
    case LC_TOKEN_USER_DEFINED: return ATTR_USER_DEFINED;
    case LC_TOKEN_UNUSED: return ATTR_UNUSED;
    case LC_TOKEN_BYTE: return ATTR_BYTE;
    default: return ATTR_UNDEFINED;
    }
}

static int hexval(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

/* Byte of a byte token "<0xNN>": the hex digits at text[3..5) (llama.cpp token_to_byte:
 * strtol over that substring, stopping at the first non-digit). */
static unsigned char byte_of_token(const char *s, uint32_t n)
{
    unsigned v = 0;
    for (uint32_t i = 3; i < 5 && i < n; i++) {
        int h = hexval(s[i]);
        if (h < 0)
            break;
        v = v * 16 + (unsigned)h;
    }
    return (unsigned char)v;
}

/* Decoded piece of a token for special = true (llama.cpp token_to_piece, spm branch). */
static size_t piece_of(const struct lc_vocab *v, int32_t id, char *dst)
{
    const char *s = v->text[id];
    uint32_t n = v->text_len[id];
    uint16_t a = v->attr[id];
    if (a & (ATTR_UNKNOWN | ATTR_CONTROL | ATTR_USER_DEFINED)) {
        if (dst)
            memcpy(dst, s, n);
        return n;
    }
    if (a & ATTR_NORMAL) {
        size_t k = 0;
        for (uint32_t i = 0; i < n;) {
            if (i + 3 <= n && memcmp(s + i, "\xe2\x96\x81", 3) == 0) {
                if (dst)
                    dst[k] = ' ';
                k++;
                i += 3;
            } else {
                if (dst)
                    dst[k] = s[i];
                k++;
                i++;
            }
        }
        return k;
    }
    if (a & ATTR_BYTE) {
        if (dst)
            dst[0] = (char)byte_of_token(s, n);
        return 1;
    }
    return 0; /* unused / undefined tokens decode to nothing */
}

static bool ht_build(struct lc_vocab *v, char **err)
{
    uint32_t size = 16;
    while (size < (uint32_t)v->n_tokens * 2u)
        size *= 2;
    v->ht = malloc(size * sizeof(*v->ht));
    if (!v->ht)
        return false;
    memset(v->ht, 0xff, size * sizeof(*v->ht));
    v->ht_mask = size - 1;
    for (int32_t id = 0; id < v->n_tokens; id++) {
        uint32_t i = hash_bytes(v->text[id], v->text_len[id]) & v->ht_mask;
        while (v->ht[i] >= 0) {
            int32_t o = v->ht[i];
            if (v->text_len[o] == v->text_len[id] &&
                memcmp(v->text[o], v->text[id], v->text_len[id]) == 0) {
                /* llama.cpp asserts that the texts are unique. */
                set_err(err, fmt_err("tokenizer.ggml.tokens: tokens %d and %d have the same "
                                     "text '%s'",
                                     o, id, v->text[id]));
                return false;
            }
            i = (i + 1) & v->ht_mask;
        }
        v->ht[i] = id;
    }
    return true;
}

static int cmp_special(const void *pa, const void *pb, void *arg)
{
    const struct lc_vocab *v = arg;
    int32_t a = *(const int32_t *)pa, b = *(const int32_t *)pb;
    if (v->text_len[a] != v->text_len[b])
        return v->text_len[a] > v->text_len[b] ? -1 : 1;
    return (a > b) - (a < b);
}

static bool text_in(const char *s, const char *const *list)
{
    for (; *list; list++)
        if (strcmp(s, *list) == 0)
            return true;
    return false;
}

/* Find a special token by its text when the file does not name it, and make it CONTROL
 * (llama.cpp "auto-detect special tokens by text"). */
static void detect_by_text(struct lc_vocab *v, int32_t *id, const char *const *texts)
{
    if (*id >= 0)
        return;
    for (int32_t t = 0; t < v->n_tokens; t++) {
        if (text_in(v->text[t], texts)) {
            *id = t;
            v->attr[t] = ATTR_CONTROL;
            return;
        }
    }
}

/* Read an optional special-token id key: kept at its default when absent or out of range. */
static void get_id(const struct lc_gguf *g, const char *key, int32_t *id, int32_t n_tokens)
{
    uint32_t u;
    if (lc_gguf_get_u32(g, key, &u) && u < (uint32_t)n_tokens)
        *id = (int32_t)u;
}

/* Build everything derived from texts, scores, types and the special ids. */
static bool vocab_finish(struct lc_vocab *v, const struct lc_gguf *g, char **err)
{
    int32_t n = v->n_tokens;
    if (!ht_build(v, err))
        return false;

    int32_t fim_pre = -1, fim_suf = -1, fim_mid = -1, fim_pad = -1, fim_rep = -1, fim_sep = -1;
    if (g) {
        get_id(g, "tokenizer.ggml.bos_token_id", &v->bos, n);
        get_id(g, "tokenizer.ggml.eos_token_id", &v->eos, n);
        get_id(g, "tokenizer.ggml.eot_token_id", &v->eot, n);
        get_id(g, "tokenizer.ggml.eom_token_id", &v->eom, n);
        get_id(g, "tokenizer.ggml.unknown_token_id", &v->unk, n);
        get_id(g, "tokenizer.ggml.fim_pre_token_id", &fim_pre, n);
        get_id(g, "tokenizer.ggml.fim_suf_token_id", &fim_suf, n);
        get_id(g, "tokenizer.ggml.fim_mid_token_id", &fim_mid, n);
        get_id(g, "tokenizer.ggml.fim_pad_token_id", &fim_pad, n);
        get_id(g, "tokenizer.ggml.fim_rep_token_id", &fim_rep, n);
        get_id(g, "tokenizer.ggml.fim_sep_token_id", &fim_sep, n);
        get_id(g, "tokenizer.ggml.prefix_token_id", &fim_pre, n);
        get_id(g, "tokenizer.ggml.suffix_token_id", &fim_suf, n);
        get_id(g, "tokenizer.ggml.middle_token_id", &fim_mid, n);
        bool b;
        if (lc_gguf_get_bool(g, "tokenizer.ggml.add_bos_token", &b))
            v->add_bos = b;
        if (lc_gguf_get_bool(g, "tokenizer.ggml.add_eos_token", &b))
            v->add_eos = b;
        if (lc_gguf_get_bool(g, "tokenizer.ggml.add_space_prefix", &b))
            v->add_space_prefix = b;
    }
    /* Defaults that do not exist in a small vocab are "none". */
    if (v->bos >= n)
        v->bos = -1;
    if (v->eos >= n)
        v->eos = -1;
    if (v->unk >= n)
        v->unk = -1;

    static const char *const eot_texts[] = {"<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>",
                                            "<|endoftext|>", "<EOT>",
                                            "<\xef\xbd\x9c" "end\xe2\x96\x81" "of"
                                            "\xe2\x96\x81" "sentence\xef\xbd\x9c>",
                                            NULL};
    static const char *const eom_texts[] = {"<|eom_id|>", NULL};
    static const char *const pre_texts[] = {"<|fim_prefix|>", "<fim-prefix>",
                                            "<\xef\xbd\x9c" "fim\xe2\x96\x81" "begin\xef\xbd\x9c>",
                                            "<PRE>", NULL};
    static const char *const suf_texts[] = {"<|fim_suffix|>", "<fim-suffix>",
                                            "<\xef\xbd\x9c" "fim\xe2\x96\x81" "hole\xef\xbd\x9c>",
                                            "<SUF>", NULL};
    static const char *const mid_texts[] = {"<|fim_middle|>", "<fim-middle>",
                                            "<\xef\xbd\x9c" "fim\xe2\x96\x81" "end\xef\xbd\x9c>",
                                            "<MID>", NULL};
    static const char *const pad_texts[] = {"<|fim_pad|>", "<fim-pad>", "<PAD>", NULL};
    static const char *const rep_texts[] = {"<|fim_repo|>", "<|repo_name|>", "<fim-repo>",
                                            "<REPO>", NULL};
    static const char *const sep_texts[] = {"<|file_sep|>", NULL};
    static const char *const eog_texts[] = {"<|eot_id|>", "<|im_end|>", "<|end|>",
                                            "<end_of_turn>", "<|endoftext|>", "<|eom_id|>",
                                            "<EOT>", NULL};
    detect_by_text(v, &v->eot, eot_texts);
    detect_by_text(v, &v->eom, eom_texts);
    detect_by_text(v, &fim_pre, pre_texts);
    detect_by_text(v, &fim_suf, suf_texts);
    detect_by_text(v, &fim_mid, mid_texts);
    detect_by_text(v, &fim_pad, pad_texts);
    detect_by_text(v, &fim_rep, rep_texts);
    detect_by_text(v, &fim_sep, sep_texts);

    /* End-of-generation set: text-matched stop tokens, EOS, EOT, EOM and the FIM pad/repo/sep. */
    v->eog = calloc((size_t)n, 1);
    if (!v->eog)
        return false;
    for (int32_t t = 0; t < n; t++)
        if (text_in(v->text[t], eog_texts)) {
            v->eog[t] = 1;
            v->attr[t] = ATTR_CONTROL;
        }
    int32_t eog_ids[] = {v->eos, v->eot, v->eom, fim_pad, fim_rep, fim_sep};
    for (size_t i = 0; i < sizeof(eog_ids) / sizeof(eog_ids[0]); i++)
        if (eog_ids[i] >= 0)
            v->eog[eog_ids[i]] = 1;

    /* Special-token candidates, longest text first (ties by id, to be deterministic). */
    v->special = malloc((size_t)n * sizeof(*v->special));
    if (!v->special)
        return false;
    for (int32_t t = 0; t < n; t++)
        if (v->attr[t] & (ATTR_CONTROL | ATTR_USER_DEFINED | ATTR_UNKNOWN))
            v->special[v->n_special++] = t;
    qsort_r(v->special, (size_t)v->n_special, sizeof(*v->special), cmp_special, v);

    /* Decoded pieces (special = true). */
    size_t total = 0;
    for (int32_t t = 0; t < n; t++)
        total += piece_of(v, t, NULL);
    v->piece_arena = malloc(total ? total : 1);
    v->piece_off = malloc((size_t)n * sizeof(*v->piece_off));
    v->piece_len = malloc((size_t)n * sizeof(*v->piece_len));
    if (!v->piece_arena || !v->piece_off || !v->piece_len)
        return false;
    size_t k = 0;
    for (int32_t t = 0; t < n; t++) {
        v->piece_off[t] = k;
        v->piece_len[t] = (uint32_t)piece_of(v, t, v->piece_arena + k);
        k += v->piece_len[t];
    }

    /* Per-model strip attributes (set after the piece cache, as in llama.cpp). */
    if (g) {
        const char *name = lc_gguf_get_str(g, "general.name");
        char lower[256] = "";
        if (name) {
            size_t i = 0;
            for (; name[i] && i + 1 < sizeof(lower); i++)
                lower[i] = (char)((name[i] >= 'A' && name[i] <= 'Z') ? name[i] + 32 : name[i]);
            lower[i] = '\0';
        }
        if (strstr(lower, "phi-3") || strstr(lower, "phi3")) {
            for (int32_t i = 0; i < v->n_special; i++)
                v->attr[v->special[i]] |= ATTR_RSTRIP;
            int32_t t = lc_vocab_find(v, "</s>");
            if (t >= 0)
                v->attr[t] |= ATTR_RSTRIP;
            static const char *const no_rstrip[] = {"<unk>", "<s>", "<|endoftext|>"};
            for (size_t i = 0; i < 3; i++)
                if ((t = lc_vocab_find(v, no_rstrip[i])) >= 0)
                    v->attr[t] &= (uint16_t)~ATTR_RSTRIP;
        }
    }

    /* Byte fallback: "<0xNN>", else the one-byte piece (llama.cpp byte_to_token). */
    for (int b = 0; b < 256; b++) {
        char buf[8];
        snprintf(buf, sizeof(buf), "<0x%02X>", b);
        int32_t t = vocab_lookup(v, buf, 6);
        if (t < 0) {
            char c = (char)b;
            t = vocab_lookup(v, &c, 1);
        }
        v->byte_tok[b] = t;
    }
    return true;
}

/* Fetch a metadata array by key, checking its element type and count. */
static int64_t get_array(const struct lc_gguf *g, const char *key, enum lc_gguf_type elem,
                         uint64_t n_expect, bool required, char **err)
{
    const char *path = lc_gguf_path(g) ? lc_gguf_path(g) : "gguf";
    int64_t i = lc_gguf_find_key(g, key);
    if (i < 0) {
        if (required)
            set_err(err, fmt_err("%s: %s: missing", path, key));
        return -1;
    }
    if (lc_gguf_kv_type(g, i) != LC_GGUF_ARRAY || lc_gguf_arr_type(g, i) != elem) {
        set_err(err, fmt_err("%s: %s: expected an array of type %d", path, key, (int)elem));
        return -2;
    }
    if (n_expect && lc_gguf_arr_n(g, i) != n_expect) {
        set_err(err, fmt_err("%s: %s: %llu elements, expected %llu", path, key,
                             (unsigned long long)lc_gguf_arr_n(g, i),
                             (unsigned long long)n_expect));
        return -2;
    }
    return i;
}

struct lc_vocab *lc_vocab_load(const struct lc_gguf *g, char **err)
{
    if (err)
        *err = NULL;
    if (!g) {
        set_err(err, fmt_err("lc_vocab_load: no GGUF"));
        return NULL;
    }
    const char *path = lc_gguf_path(g) ? lc_gguf_path(g) : "gguf";
    const char *model = lc_gguf_get_str(g, "tokenizer.ggml.model");
    if (!model) {
        set_err(err, fmt_err("%s: tokenizer.ggml.model: missing", path));
        return NULL;
    }
    if (strcmp(model, "llama") != 0) {
        set_err(err, fmt_err("%s: tokenizer.ggml.model: unsupported tokenizer '%s'", path, model));
        return NULL;
    }

    int64_t ti = get_array(g, "tokenizer.ggml.tokens", LC_GGUF_STRING, 0, true, err);
    if (ti < 0)
        return NULL;
    uint64_t n64 = lc_gguf_arr_n(g, ti);
    if (n64 == 0 || n64 > (uint64_t)INT32_MAX / 2) {
        set_err(err, fmt_err("%s: tokenizer.ggml.tokens: bad token count %llu", path,
                             (unsigned long long)n64));
        return NULL;
    }
    int32_t n = (int32_t)n64;
    int64_t si = get_array(g, "tokenizer.ggml.scores", LC_GGUF_FLOAT32, n64, false, err);
    int64_t yi = si == -2 ? -2
                          : get_array(g, "tokenizer.ggml.token_type", LC_GGUF_INT32, n64, false, err);
    if (si == -2 || yi == -2)
        return NULL;

    struct lc_vocab *v = calloc(1, sizeof(*v));
    if (!v)
        goto oom;
    v->kind = VOCAB_SPM;
    v->n_tokens = n;
    /* llama.cpp's defaults for "llama" (spm). */
    v->bos = 1;
    v->eos = 2;
    v->unk = 0;
    v->eot = -1;
    v->eom = -1;
    v->add_bos = true;
    v->add_eos = false;
    v->add_space_prefix = true;

    v->text = malloc((size_t)n * sizeof(*v->text));
    v->text_len = malloc((size_t)n * sizeof(*v->text_len));
    v->score = malloc((size_t)n * sizeof(*v->score));
    v->type = malloc((size_t)n);
    v->attr = malloc((size_t)n * sizeof(*v->attr));
    if (!v->text || !v->text_len || !v->score || !v->type || !v->attr)
        goto oom;

    /* Texts: an empty piece becomes "[EMPTY_<i>]", as in llama.cpp. */
    size_t total = 0;
    for (int32_t i = 0; i < n; i++) {
        const char *s = lc_gguf_arr_str(g, ti, (uint64_t)i);
        if (!s) {
            set_err(err, fmt_err("%s: tokenizer.ggml.tokens[%d]: unreadable", path, i));
            lc_vocab_free(v);
            return NULL;
        }
        size_t l = strlen(s);
        if (l > UINT32_MAX / 2) {
            set_err(err, fmt_err("%s: tokenizer.ggml.tokens[%d]: too long", path, i));
            lc_vocab_free(v);
            return NULL;
        }
        total += (l ? l : 24) + 1;
    }
    v->text_arena = malloc(total);
    if (!v->text_arena)
        goto oom;
    size_t k = 0;
    const unsigned char *scores = si >= 0 ? lc_gguf_arr_data(g, si) : NULL;
    const unsigned char *types = yi >= 0 ? lc_gguf_arr_data(g, yi) : NULL;
    for (int32_t i = 0; i < n; i++) {
        const char *s = lc_gguf_arr_str(g, ti, (uint64_t)i);
        size_t l = strlen(s);
        char *d = v->text_arena + k;
        if (l == 0)
            l = (size_t)snprintf(d, 25, "[EMPTY_%d]", i);
        else
            memcpy(d, s, l + 1);
        v->text[i] = d;
        v->text_len[i] = (uint32_t)l;
        k += l + 1;
        float sc = 0.0f;
        if (scores)
            memcpy(&sc, scores + 4 * (size_t)i, 4);
        v->score[i] = sc;
        int32_t ty = LC_TOKEN_NORMAL;
        if (types)
            memcpy(&ty, types + 4 * (size_t)i, 4);
        v->type[i] = (uint8_t)(ty >= 0 && ty <= LC_TOKEN_BYTE ? ty : LC_TOKEN_UNDEFINED);
        v->attr[i] = types ? attr_of_type(ty) : ATTR_NORMAL;
    }

    char *e = NULL;
    if (!vocab_finish(v, g, &e)) {
        lc_vocab_free(v);
        if (!e)
            e = fmt_err("%s: out of memory loading the vocab", path);
        set_err(err, e);
        return NULL;
    }
    return v;

oom:
    lc_vocab_free(v);
    set_err(err, fmt_err("%s: out of memory loading the vocab", path));
    return NULL;
}
