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
 *     - "gpt2" (byte-level BPE, llm_tokenizer_bpe): cut the fragment into pre-tokens with the
 *       regexes of tokenizer.ggml.pre (PCRE2), map each pre-token's bytes to GPT-2's printable
 *       code points, and merge pairs by lowest rank in tokenizer.ggml.merges.
 *
 * Decoding maps each token to its piece: U+2581 back to ' ' (spm) or code points back to bytes
 * (gpt2), byte tokens to their byte, control and unknown tokens to "" unless special.
 *
 * A loaded vocab is read-only: lc_tokenize and the decoders may run on it from several threads.
 */
#include "tokenizer.h"

#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gguf.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

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

enum vocab_kind { VOCAB_SPM = 1, VOCAB_BPE = 2 };

#define MAX_PRE_REGEX 6

struct lc_vocab {
    enum vocab_kind kind;
    int32_t n_tokens;

    const char **text;   /* [n_tokens] piece texts, NUL-terminated, inside text_arena */
    uint32_t *text_len;  /* [n_tokens] */
    float *score;        /* [n_tokens] */
    uint16_t *attr;      /* [n_tokens] ATTR_* bits */
    uint8_t *eog;        /* [n_tokens] 1 if end-of-generation */
    char *text_arena;

    /* Pieces for decoding with special = true (llama.cpp's cache_token_to_piece). */
    char *piece_arena;
    size_t *piece_off;   /* [n_tokens] */
    uint32_t *piece_len; /* [n_tokens] */
    size_t max_piece;    /* the longest piece_len (at least 1) */

    /* text -> id: open addressing, linear probing, -1 = empty slot. */
    int32_t *ht;
    uint32_t ht_mask;

    /* Special-token candidates for the partition, longest text first. */
    int32_t *special;
    int32_t n_special;

    int32_t byte_tok[256]; /* byte -> token for byte fallback, -1 if none */

    int32_t bos, eos, eot, eom, unk;
    bool add_bos, add_space_prefix;
    bool add_eos; /* read for completeness; lc_tokenize only ever adds BOS */

    /* Byte-level BPE ("gpt2") only. */
    bool ignore_merges; /* a pre-token that is a whole token skips the merges (llama3) */
    bool clean_spaces;  /* detokenize removes " ," " ." ... (clean_up_tokenization_spaces) */
    pcre2_code *re[MAX_PRE_REGEX]; /* pre-tokenizer regexes, applied in turn */
    int n_re;
    /* Merge ranks: merge i is "first second"; hashed on (first, second). */
    char *merge_arena;
    uint32_t *merge_off, *merge_first, *merge_second; /* [n_merges] offset, part lengths */
    int32_t n_merges;
    int32_t *mht; /* -1 = empty, else merge index */
    uint32_t mht_mask;
    char byte_enc[256][3]; /* GPT-2 bytes_to_unicode: byte -> UTF-8 of its code point */
    uint8_t byte_enc_len[256];
    int16_t byte_dec[512]; /* code point -> byte, -1 if none */
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

/* Length of the UTF-8 sequence that starts with byte c, from its high nibble alone (llama.cpp's
 * unicode_len_utf8): a continuation byte counts as 1, any byte 0xF0-0xFF as 4. */
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

typedef void (*try_bigram_fn)(const struct lc_vocab *v, const char *text,
                              const struct spm_sym *sym, struct spm_heap *h, int32_t left,
                              int32_t right);

/*
 * The merge loop of SentencePiece (llm_tokenizer_spm) and byte-level BPE (llm_tokenizer_bpe,
 * after llama.cpp): text[0, n) (n >= 1) split into one symbol per UTF-8 character (a truncated
 * sequence at the end keeps what is left), then the best queued bigram (try_bigram queues a
 * pair with its score: spm's vocab score, BPE's -rank; ties to the leftmost) merged until none
 * is left.  Returns the symbols (malloc'd; walk from 0 by .next to -1, each .off / .n a piece of
 * text), or NULL without memory.
 */
static struct spm_sym *merge_symbols(const struct lc_vocab *v, const char *text, size_t n,
                                     try_bigram_fn try_bigram)
{
    if (n > (size_t)INT32_MAX)
        return NULL;
    struct spm_sym *sym = malloc(n * sizeof(*sym));
    struct spm_heap h = {0};
    if (!sym)
        return NULL;
    int32_t n_sym = 0;
    for (size_t off = 0; off < n;) {
        size_t len = utf8_len((unsigned char)text[off]);
        if (len > n - off)
            len = n - off;
        sym[n_sym] = (struct spm_sym){n_sym - 1, off + len == n ? -1 : n_sym + 1, (uint32_t)off,
                                      (uint32_t)len};
        off += len;
        n_sym++;
    }
    for (int32_t i = 1; i < n_sym; i++)
        try_bigram(v, text, sym, &h, i - 1, i);
    while (h.n > 0 && !h.oom) {
        struct spm_bigram b = heap_pop(&h);
        struct spm_sym *l = &sym[b.left], *r = &sym[b.right];
        /* Stale entry: one side was merged away, or the left one grew since it was queued
         * (llama.cpp compares the texts; with contiguous symbols the sizes suffice). */
        if (l->n == 0 || r->n == 0 || l->n + r->n != b.size)
            continue;
        l->n += r->n;
        r->n = 0;
        l->next = r->next;
        if (r->next >= 0)
            sym[r->next].prev = b.left;
        try_bigram(v, text, sym, &h, l->prev, b.left);
        try_bigram(v, text, sym, &h, b.left, l->next);
    }
    free(h.v);
    if (h.oom) {
        free(sym);
        return NULL;
    }
    return sym;
}

/* Tokenize one raw fragment (already escaped: spaces are U+2581) of n bytes.  Returns false
 * on allocation failure. */
static bool spm_tokenize(const struct lc_vocab *v, const char *text, size_t n, struct toks *out)
{
    if (n == 0)
        return true;
    struct spm_sym *sym = merge_symbols(v, text, n, spm_try_bigram);
    if (!sym)
        return false;
    for (int32_t i = 0; i != -1; i = sym[i].next)
        spm_emit(v, text + sym[i].off, sym[i].n, out);
    free(sym);
    return true;
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

/* ------------------------------------------------------------------ byte-level BPE (gpt2) */

/*
 * llama.cpp's llm_tokenizer_bpe: the fragment is decoded to code points (an invalid byte
 * becomes U+FFFD), cut into pre-tokens by the model's regexes (each regex splits the pieces
 * left by the previous one; text between matches is a piece of its own), each pre-token's
 * bytes are mapped to GPT-2's printable code points (bytes_to_unicode), and the pre-token is
 * merged pairwise by lowest merge rank (ties: leftmost).  A final symbol that is not a token
 * is emitted byte by byte, keeping only bytes that are tokens themselves.
 */

/* Decode one code point as llama.cpp's unicode_cpt_from_utf8 does: the lead byte gives the
 * length, continuation bytes must be 10xxxxxx, overlong forms and surrogates are accepted.
 * Returns the length, or 0 for an invalid sequence. */
static size_t utf8_decode(const unsigned char *s, size_t n, uint32_t *cp)
{
    unsigned char c = s[0];
    if (!(c & 0x80)) {
        *cp = c;
        return 1;
    }
    size_t len;
    if (!(c & 0x40))
        return 0;
    else if (!(c & 0x20))
        len = 2;
    else if (!(c & 0x10))
        len = 3;
    else if (!(c & 0x08))
        len = 4;
    else
        return 0;
    if (len > n)
        return 0;
    uint32_t v = c & (0x7f >> len);
    for (size_t i = 1; i < len; i++) {
        if ((s[i] & 0xc0) != 0x80)
            return 0;
        v = (v << 6) | (s[i] & 0x3f);
    }
    *cp = v;
    return len;
}

static size_t utf8_encode(uint32_t cp, char *out)
{
    if (cp < 0x80) {
        out[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        out[0] = (char)(0xc0 | (cp >> 6));
        out[1] = (char)(0x80 | (cp & 0x3f));
        return 2;
    }
    if (cp < 0x10000) {
        out[0] = (char)(0xe0 | (cp >> 12));
        out[1] = (char)(0x80 | ((cp >> 6) & 0x3f));
        out[2] = (char)(0x80 | (cp & 0x3f));
        return 3;
    }
    out[0] = (char)(0xf0 | (cp >> 18));
    out[1] = (char)(0x80 | ((cp >> 12) & 0x3f));
    out[2] = (char)(0x80 | ((cp >> 6) & 0x3f));
    out[3] = (char)(0x80 | (cp & 0x3f));
    return 4;
}

/*
 * Rewrite s[0..n) as code points the way llama.cpp sees them: *out gets the bytes used for the
 * tokens (invalid bytes as U+FFFD, overlong forms re-encoded), *subj the same with surrogates
 * (and code points past U+10FFFF) also as U+FFFD, so that PCRE2 sees valid UTF-8.  Both have the
 * same length at every code point boundary.  Returns false on allocation failure.
 */
static bool bpe_normalize(const char *s, size_t n, char **out, char **subj, size_t *m)
{
    *out = malloc(3 * n + 1);
    *subj = malloc(3 * n + 1);
    if (!*out || !*subj) {
        free(*out);
        free(*subj);
        return false;
    }
    size_t k = 0;
    for (size_t i = 0; i < n;) {
        uint32_t cp = 0;
        size_t l = utf8_decode((const unsigned char *)s + i, n - i, &cp);
        if (l == 0) {
            cp = 0xfffd;
            l = 1;
        }
        i += l;
        if (cp > 0x10ffff)
            cp = 0xfffd; /* llama.cpp throws here */
        size_t e = utf8_encode(cp, *out + k);
        if (cp >= 0xd800 && cp <= 0xdfff)
            utf8_encode(0xfffd, *subj + k);
        else
            memcpy(*subj + k, *out + k, e);
        k += e;
    }
    *m = k;
    return true;
}

struct spans {
    size_t *v; /* lengths of consecutive pieces */
    size_t n, cap;
    bool oom;
};

static void spans_push(struct spans *s, size_t len)
{
    if (s->oom)
        return;
    if (s->n == s->cap) {
        size_t cap = s->cap ? s->cap * 2 : 64;
        size_t *p = realloc(s->v, cap * sizeof(*p));
        if (!p) {
            s->oom = true;
            return;
        }
        s->v = p;
        s->cap = cap;
    }
    s->v[s->n++] = len;
}

/* Split every piece of *sp by one regex (llama.cpp unicode_regex_split_stl: each piece is
 * matched as a subject of its own; text between matches stays a piece). */
static bool regex_split(const pcre2_code *re, const char *subj, struct spans *sp)
{
    pcre2_match_data *md = pcre2_match_data_create_from_pattern(re, NULL);
    if (!md)
        return false;
    struct spans out = {0};
    size_t base = 0;
    for (size_t k = 0; k < sp->n && !out.oom; k++) {
        size_t len = sp->v[k];
        PCRE2_SPTR p = (PCRE2_SPTR)(subj + base);
        size_t at = 0, prev = 0;
        while (at < len) {
            int rc = pcre2_match(re, p, len, at, PCRE2_NO_UTF_CHECK, md, NULL);
            if (rc < 0)
                break;
            PCRE2_SIZE *ov = pcre2_get_ovector_pointer(md);
            size_t ms = ov[0], me = ov[1];
            if (me <= ms) { /* empty match: no split, step over one character */
                at = ms + utf8_len((unsigned char)subj[base + ms]);
                continue;
            }
            if (ms > prev)
                spans_push(&out, ms - prev);
            spans_push(&out, me - ms);
            prev = at = me;
        }
        if (prev < len)
            spans_push(&out, len - prev);
        base += len;
    }
    pcre2_match_data_free(md);
    free(sp->v);
    *sp = out;
    return !out.oom;
}

/* Rank of merging the symbols a[0..an) and b[0..bn), or -1. */
static int32_t merge_rank(const struct lc_vocab *v, const char *a, size_t an, const char *b,
                          size_t bn)
{
    if (!v->mht)
        return -1;
    /* FNV-1a over a, a NUL separator, then b (the key hashed at load). */
    uint32_t h = 2166136261u;
    for (size_t i = 0; i < an; i++)
        h = (h ^ (unsigned char)a[i]) * 16777619u;
    h *= 16777619u;
    for (size_t i = 0; i < bn; i++)
        h = (h ^ (unsigned char)b[i]) * 16777619u;
    for (uint32_t i = h & v->mht_mask;; i = (i + 1) & v->mht_mask) {
        int32_t m = v->mht[i];
        if (m < 0)
            return -1;
        const char *s = v->merge_arena + v->merge_off[m];
        if (v->merge_first[m] == an && v->merge_second[m] == bn && memcmp(s, a, an) == 0 &&
            memcmp(s + an + 1, b, bn) == 0)
            return m;
    }
}

/* Heap entries reuse spm_bigram: score holds -rank so that the spm order (higher score, then
 * leftmost) is the BPE order (lower rank, then leftmost).  Ranks < 2^24 are exact in a float. */
static void bpe_try_bigram(const struct lc_vocab *v, const char *text, const struct spm_sym *sym,
                           struct spm_heap *h, int32_t left, int32_t right)
{
    if (left < 0 || right < 0)
        return;
    int32_t r = merge_rank(v, text + sym[left].off, sym[left].n, text + sym[right].off,
                           sym[right].n);
    if (r < 0)
        return;
    struct spm_bigram b = {left, right, -(float)r, sym[left].n + sym[right].n};
    heap_push(h, b);
}

/* Merge one byte-encoded pre-token and emit its tokens. */
static bool bpe_word(const struct lc_vocab *v, const char *w, size_t n, struct toks *out)
{
    if (n == 0)
        return true;
    if (v->ignore_merges) {
        int32_t id = vocab_lookup(v, w, n);
        if (id >= 0) {
            toks_push(out, id);
            return true;
        }
    }
    struct spm_sym *sym = merge_symbols(v, w, n, bpe_try_bigram);
    if (!sym)
        return false;
    for (int32_t i = 0; i != -1; i = sym[i].next) {
        int32_t id = vocab_lookup(v, w + sym[i].off, sym[i].n);
        if (id >= 0) {
            toks_push(out, id);
            continue;
        }
        for (uint32_t j = 0; j < sym[i].n; j++) {
            id = vocab_lookup(v, w + sym[i].off + j, 1);
            if (id >= 0)
                toks_push(out, id);
        }
    }
    free(sym);
    return true;
}

/* Tokenize one raw fragment with byte-level BPE. */
static bool bpe_tokenize(const struct lc_vocab *v, const char *text, size_t n, struct toks *out)
{
    if (n == 0)
        return true;
    char *bytes, *subj;
    size_t m;
    if (n > (size_t)INT32_MAX / 8 || !bpe_normalize(text, n, &bytes, &subj, &m))
        return false;
    struct spans sp = {0};
    spans_push(&sp, m);
    bool ok = !sp.oom;
    for (int i = 0; i < v->n_re && ok; i++)
        ok = regex_split(v->re[i], subj, &sp);
    char *w = ok ? malloc(2 * m + 1) : NULL;
    ok = ok && w;
    size_t base = 0;
    for (size_t k = 0; k < sp.n && ok; k++) {
        size_t wn = 0;
        for (size_t i = base; i < base + sp.v[k]; i++) {
            unsigned char c = (unsigned char)bytes[i];
            memcpy(w + wn, v->byte_enc[c], v->byte_enc_len[c]);
            wn += v->byte_enc_len[c];
        }
        ok = bpe_word(v, w, wn, out);
        base += sp.v[k];
    }
    free(w);
    free(sp.v);
    free(bytes);
    free(subj);
    return ok;
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

/* A user-defined token spelled like a control token ("<|im_end|>", "<eot_id>", "[INST]"):
 * some conversions mark chat markers user-defined instead of control; in user text they stay
 * characters too.  Other user-defined tokens (runs of spaces, "\n\n") are ordinary text. */
static bool looks_special(const char *t, size_t n)
{
    return n >= 3 && ((t[0] == '<' && t[n - 1] == '>') || (t[0] == '[' && t[n - 1] == ']'));
}

/* Split raw fragments at special-token texts (llama.cpp tokenizer_st_partition).  On return
 * *fr holds the fragments in order; false on allocation failure. */
static bool partition(const struct lc_vocab *v, const char *text, size_t len, bool parse_special,
                      const uint8_t *plain, struct frags *fr)
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
            /* A control/unknown token's text is matched only where no byte of it is plain
             * (user) text: a user typing "<s>" gets the characters, not BOS. */
            bool guarded = plain && ((a & (ATTR_CONTROL | ATTR_UNKNOWN)) ||
                                     ((a & ATTR_USER_DEFINED) && looks_special(st, sl)));
            size_t off = f.off, rem = f.len, from = f.off;
            while (rem > 0) {
                size_t avail = off + rem - from;
                const char *m = avail >= sl ? memmem(text + from, avail, st, sl) : NULL;
                if (m && guarded) {
                    size_t p = (size_t)(m - text), q = 0;
                    while (q < sl && !plain[p + q])
                        q++;
                    if (q < sl) {
                        from = p + 1;
                        continue;
                    }
                }
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
                from = off;
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
    return lc_tokenize_mixed(v, text, len, NULL, add_bos, parse_special, true, out, n_max);
}

int32_t lc_tokenize_mixed(const struct lc_vocab *v, const char *text, size_t len,
                          const uint8_t *plain, bool add_bos, bool parse_special,
                          bool space_prefix, int32_t *out, int32_t n_max)
{
    if (!v || (!text && len > 0) || len > (size_t)INT32_MAX - 8)
        return INT32_MIN;
    struct toks t = {0};
    struct frags fr = {0};
    if (!partition(v, text, len, parse_special, plain, &fr))
        return INT32_MIN;

    bool ok = true;
    if (add_bos && v->bos >= 0)
        toks_push(&t, v->bos);
    /* The first fragment (unless the text continues earlier text), and every fragment after a
     * special token, gets the space prefix. */
    bool prev_special = space_prefix;
    for (size_t i = 0; i < fr.n && ok; i++) {
        if (fr.v[i].tok >= 0) {
            toks_push(&t, fr.v[i].tok);
            prev_special = true;
            continue;
        }
        if (v->kind == VOCAB_BPE) {
            ok = bpe_tokenize(v, text + fr.v[i].off, fr.v[i].len, &t);
        } else {
            size_t en = 0;
            char *esc = spm_escape(text + fr.v[i].off, fr.v[i].len,
                                   v->add_space_prefix && prev_special, &en);
            ok = esc && spm_tokenize(v, esc, en, &t);
            free(esc);
        }
        prev_special = false;
    }
    free(fr.v);
    if (!ok || t.oom || t.n > (size_t)INT32_MAX) {
        free(t.v);
        return INT32_MIN;
    }
    int32_t n = (int32_t)t.n;
    if (n > n_max || (n > 0 && !out)) {
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

const char *lc_vocab_piece(const struct lc_vocab *v, int32_t tok, bool special, size_t *len)
{
    *len = 0;
    if (!v || tok < 0 || tok >= v->n_tokens)
        return "";
    if (!special && (v->attr[tok] & (ATTR_UNKNOWN | ATTR_CONTROL)))
        return "";
    *len = v->piece_len[tok];
    return v->piece_arena + v->piece_off[tok];
}

size_t lc_vocab_max_piece_len(const struct lc_vocab *v)
{
    return v && v->max_piece > 1 ? v->max_piece : 1;
}

/* llama.cpp's clean_up_tokenization_spaces, in place over s[0..n); returns the new length.
 * Pass 1 drops the space before ? ! . ,  pass 2 turns " ' " into "'", pass 3 drops the space
 * before 's 'm 're 've.  Each pass compacts left to right and reads the characters around
 * position i as the previous pass left them (pass 2 blanks the space it skips to NUL). */
static size_t clean_spaces(char *s, size_t n)
{
    size_t total = n ? 1 : 0;
    for (size_t i = 1; i < n; i++) {
        char x = s[i];
        if (s[i - 1] == ' ' && (x == '?' || x == '!' || x == '.' || x == ','))
            total--;
        s[total++] = x;
    }
    n = total;
    total = n ? 1 : 0;
    for (size_t i = 1; i < n; i++) {
        char x = s[i];
        if (x == '\'' && i + 1 < n && s[i - 1] == ' ' && s[i + 1] == ' ') {
            total--;
            s[++i] = '\0';
        }
        s[total++] = x;
    }
    n = total;
    total = n ? 1 : 0;
    for (size_t i = 1; i < n; i++) {
        char x = s[i];
        if (s[i - 1] == ' ' && x == '\'' && i + 1 < n) {
            char x1 = s[i + 1];
            if (x1 == 's' || x1 == 'm')
                total--;
            else if (x1 != 't' && x1 != 'd' && i + 2 < n &&
                     ((x1 == 'r' && s[i + 2] == 'e') || (x1 == 'v' && s[i + 2] == 'e')))
                total--;
        }
        s[total++] = x;
    }
    return total;
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
    if (v->clean_spaces)
        k = clean_spaces(s, k);
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
    free(v->attr);
    free(v->eog);
    free(v->text_arena);
    free(v->piece_arena);
    free(v->piece_off);
    free(v->piece_len);
    free(v->ht);
    free(v->special);
    for (int i = 0; i < v->n_re; i++)
        pcre2_code_free(v->re[i]);
    free(v->merge_arena);
    free(v->merge_off);
    free(v->merge_first);
    free(v->merge_second);
    free(v->mht);
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

/* Bytes of a byte-level BPE token text (llama.cpp llama_decode_text): each code point maps
 * back to its byte; one that is not in GPT-2's table gives "[UNK_BYTE_0x<hex>" + text + "]".
 * Writes to dst when not NULL; returns the length. */
static size_t bpe_decode_text(const struct lc_vocab *v, const char *s, uint32_t n, char *dst)
{
    size_t k = 0;
    for (uint32_t i = 0; i < n;) {
        uint32_t cp = 0;
        size_t l = utf8_decode((const unsigned char *)s + i, n - i, &cp);
        if (l == 0) {
            cp = 0xfffd;
            l = 1;
        }
        i += (uint32_t)l;
        int b = cp < 512 ? v->byte_dec[cp] : -1;
        if (b >= 0) {
            if (dst)
                dst[k] = (char)b;
            k++;
            continue;
        }
        char u[4], tmp[64];
        size_t ul = utf8_encode(cp > 0x10ffff ? 0xfffd : cp, u);
        int tl = snprintf(tmp, sizeof(tmp), "[UNK_BYTE_0x");
        for (size_t j = 0; j < ul; j++)
            tl += snprintf(tmp + tl, sizeof(tmp) - (size_t)tl, "%02x", (unsigned char)u[j]);
        if (dst) {
            memcpy(dst + k, tmp, (size_t)tl);
            memcpy(dst + k + tl, s, n);
            dst[k + (size_t)tl + n] = ']';
        }
        k += (size_t)tl + n + 1;
    }
    return k;
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
    if ((a & ATTR_NORMAL) && v->kind == VOCAB_BPE)
        return bpe_decode_text(v, s, n, dst);
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
    if ((a & ATTR_BYTE) && v->kind == VOCAB_SPM) {
        if (dst)
            dst[0] = (char)byte_of_token(s, n);
        return 1;
    }
    return 0; /* unused / undefined tokens decode to nothing */
}

static bool ht_build(struct lc_vocab *v, const char *path, char **err)
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
                set_err(err, fmt_err("%s: tokenizer.ggml.tokens: tokens %d and %d have the "
                                     "same text '%s'",
                                     path, o, id, v->text[id]));
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
    if (!ht_build(v, g && lc_gguf_path(g) ? lc_gguf_path(g) : "gguf", err))
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
        if (v->piece_len[t] > v->max_piece)
            v->max_piece = v->piece_len[t];
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
        const char *pre = lc_gguf_get_str(g, "tokenizer.ggml.pre");
        int32_t mask = pre && (strstr(pre, "jina-v2-de") || strstr(pre, "jina-v2-es") ||
                               strstr(pre, "jina-v2-code"))
                           ? lc_vocab_find(v, "<mask>")
                           : -1;
        if (mask >= 0) {
            v->attr[mask] |= ATTR_LSTRIP;
        } else if (strstr(lower, "phi-3") || strstr(lower, "phi3")) {
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
        set_err(err, fmt_err("%s: %s: expected an array of %s", path, key,
                             elem == LC_GGUF_STRING    ? "strings"
                             : elem == LC_GGUF_FLOAT32 ? "float32"
                                                       : "int32"));
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

/* ------------------------------------------------------------------ BPE setup */

/* Pre-tokenizer regexes, written for PCRE2 (UTF + UCP) from llama.cpp's llm_tokenizer_bpe.
 * \s is spelled out as llama.cpp's whitespace set (Unicode White_Space), since PCRE2's \s
 * differs from it. */
#define WSC "\\t\\n\\x0b\\f\\r \\x{85}\\x{a0}\\x{1680}\\x{2000}-\\x{200a}\\x{2028}\\x{2029}" \
            "\\x{202f}\\x{205f}\\x{3000}"
#define WS "[" WSC "]"
#define NOT_WS "[^" WSC "]"
#define RE_GPT2 "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^" WSC "\\p{L}\\p{N}]+|" WS \
                "+(?!" NOT_WS ")"
#define RE_LLAMA3_HEAD "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|" \
                       "[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|"
#define RE_LLAMA3_TAIL "| ?[^" WSC "\\p{L}\\p{N}]+[\\r\\n]*|" WS "*[\\r\\n]+|" WS "+(?!" NOT_WS \
                       ")|" WS "+"
#define RE_LLAMA3 RE_LLAMA3_HEAD "\\p{N}{1,3}" RE_LLAMA3_TAIL
#define RE_QWEN2 RE_LLAMA3_HEAD "\\p{N}" RE_LLAMA3_TAIL
#define RE_PORO " ?[^(" WSC "|.,!?\\x{2026}\\x{3002}\\x{ff0c}\\x{3001}\\x{0964}\\x{06d4}" \
                "\\x{060c})]+"

struct pre_type {
    const char *names; /* tokenizer.ggml.pre values, '|'-separated, '|' at both ends */
    const char *re[MAX_PRE_REGEX];
    bool ignore_merges, clean_spaces, add_bos, no_bos;
};

static const struct pre_type pre_types[] = {
    {"|default|", {"[\\p{P}\\$\\+<=>\\^~\\|]+", RE_GPT2, "\\p{N}+", "[0-9][0-9][0-9]"},
     false, true, false, false},
    {"|gpt-2|phi-2|jina-es|jina-de|gigachat|jina-v1-en|jina-v2-es|jina-v2-de|jina-v2-code|"
     "roberta-bpe|mpt|olmo|jais|",
     {RE_GPT2}, false, true, false, false},
    {"|llama3|llama-v3|llama-bpe|falcon3|", {RE_LLAMA3}, true, true, true, false},
    {"|dbrx|smaug-bpe|", {RE_LLAMA3}, false, true, false, false},
    {"|chatglm-bpe|", {RE_LLAMA3}, false, true, false, true},
    {"|qwen2|megrez|", {RE_QWEN2}, false, false, false, false},
    {"|stablelm2|", {RE_QWEN2}, false, true, false, false},
    {"|starcoder|refact|codeshell|exaone|minerva-7b|", {"\\p{N}", RE_GPT2}, false, true, false,
     false},
    {"|command-r|smollm|", {"\\p{N}", RE_GPT2}, false, false, false, false},
    {"|falcon|", {"[\\p{P}\\$\\+<=>\\^~\\|`]+", RE_GPT2, "[0-9][0-9][0-9]"}, false, true, false,
     false},
    {"|deepseek-coder|",
     {"[\\r\\n]", WS "?\\p{L}+", WS "?\\p{P}+", "[\\x{4e00}-\\x{9fa5}\\x{0800}-\\x{4e00}"
      "\\x{ac00}-\\x{d7ff}]+", "\\p{N}"},
     false, false, false, false},
    {"|poro-chat|", {RE_PORO}, false, false, false, false},
    {"|bloom|gpt3-finnish|", {RE_PORO}, false, true, false, false},
    {"|viking|", {RE_PORO, "\\p{N}"}, false, false, false, false},
};

static const struct pre_type *find_pre_type(const char *pre)
{
    if (!pre || !*pre)
        pre = "default"; /* llama.cpp warns and uses the default regexes */
    char key[128];
    if (strlen(pre) + 3 > sizeof(key) || strchr(pre, '|'))
        return NULL;
    snprintf(key, sizeof(key), "|%s|", pre);
    for (size_t i = 0; i < sizeof(pre_types) / sizeof(pre_types[0]); i++)
        if (strstr(pre_types[i].names, key))
            return &pre_types[i];
    return NULL;
}

/* GPT-2's bytes_to_unicode: the printable bytes ! .. ~, U+00A1 .. U+00AC and U+00AE .. U+00FF
 * stand for themselves; the other 68 bytes, in order, take the code points U+0100 onwards. */
static void build_byte_tables(struct lc_vocab *v)
{
    int next = 256;
    for (int i = 0; i < 512; i++)
        v->byte_dec[i] = -1;
    for (int b = 0; b < 256; b++) {
        bool printable = (b >= '!' && b <= '~') || (b >= 0xa1 && b <= 0xac) || b >= 0xae;
        int cp = printable ? b : next++;
        v->byte_enc_len[b] = (uint8_t)utf8_encode((uint32_t)cp, v->byte_enc[b]);
        v->byte_dec[cp] = (int16_t)b;
    }
}

/* Merges "first second" (split at the first space after the first byte, as llama.cpp does);
 * the rank is the index; of two equal pairs the first counts. */
static bool load_merges(struct lc_vocab *v, const struct lc_gguf *g, char **err)
{
    const char *path = lc_gguf_path(g) ? lc_gguf_path(g) : "gguf";
    int64_t mi = get_array(g, "tokenizer.ggml.merges", LC_GGUF_STRING, 0, true, err);
    if (mi < 0)
        return false;
    uint64_t nm = lc_gguf_arr_n(g, mi);
    if (nm > (1u << 24)) { /* ranks must stay exact as floats in the merge queue */
        set_err(err, fmt_err("%s: tokenizer.ggml.merges: too many merges (%llu)", path,
                             (unsigned long long)nm));
        return false;
    }
    size_t total = 0;
    for (uint64_t i = 0; i < nm; i++) {
        const char *s = lc_gguf_arr_str(g, mi, i);
        size_t l = s ? strlen(s) : 0;
        if (!s || l > UINT32_MAX / 4) {
            set_err(err, fmt_err("%s: tokenizer.ggml.merges[%llu]: unreadable", path,
                                 (unsigned long long)i));
            return false;
        }
        total += l + 1;
    }
    uint32_t size = 16;
    while (size < 2 * nm)
        size *= 2;
    v->merge_arena = malloc(total ? total : 1);
    v->merge_off = malloc((nm ? nm : 1) * sizeof(uint32_t));
    v->merge_first = malloc((nm ? nm : 1) * sizeof(uint32_t));
    v->merge_second = malloc((nm ? nm : 1) * sizeof(uint32_t));
    v->mht = malloc(size * sizeof(int32_t));
    if (!v->merge_arena || !v->merge_off || !v->merge_first || !v->merge_second || !v->mht ||
        total > UINT32_MAX)
        return false;
    memset(v->mht, 0xff, size * sizeof(int32_t));
    v->mht_mask = size - 1;
    size_t k = 0;
    for (uint64_t i = 0; i < nm; i++) {
        const char *s = lc_gguf_arr_str(g, mi, i);
        size_t l = strlen(s);
        const char *sp = l > 1 ? memchr(s + 1, ' ', l - 1) : NULL;
        if (!sp)
            continue; /* llama.cpp files it as ("", ""), which never matches */
        int32_t m = v->n_merges++;
        memcpy(v->merge_arena + k, s, l + 1);
        v->merge_arena[k + (size_t)(sp - s)] = '\0';
        v->merge_off[m] = (uint32_t)k;
        v->merge_first[m] = (uint32_t)(sp - s);
        v->merge_second[m] = (uint32_t)(l - (size_t)(sp - s) - 1);
        /* The rank is m: increasing with the line index, so it orders merges as the file. */
        k += l + 1;
        const char *a = v->merge_arena + v->merge_off[m];
        if (merge_rank(v, a, v->merge_first[m], a + v->merge_first[m] + 1,
                       v->merge_second[m]) >= 0) {
            v->n_merges--; /* duplicate pair: the earlier rank stays */
            continue;
        }
        uint32_t h = hash_bytes(a, v->merge_first[m] + 1 + v->merge_second[m]);
        uint32_t j = h & v->mht_mask;
        while (v->mht[j] >= 0)
            j = (j + 1) & v->mht_mask;
        v->mht[j] = m;
    }
    return true;
}

/* Settings, regexes, byte tables and merges of a "gpt2" vocab. */
static bool bpe_setup(struct lc_vocab *v, const struct lc_gguf *g, char **err)
{
    const char *path = lc_gguf_path(g) ? lc_gguf_path(g) : "gguf";
    const char *pre = lc_gguf_get_str(g, "tokenizer.ggml.pre");
    const struct pre_type *pt = find_pre_type(pre);
    if (!pt) {
        set_err(err, fmt_err("%s: tokenizer.ggml.pre: unsupported pre-tokenizer '%s'", path,
                             pre));
        return false;
    }
    v->ignore_merges = pt->ignore_merges;
    v->clean_spaces = pt->clean_spaces;
    v->add_bos = pt->add_bos;
    if (pt->no_bos)
        v->bos = -1;
    for (int i = 0; i < MAX_PRE_REGEX && pt->re[i]; i++) {
        int code;
        PCRE2_SIZE off;
        v->re[i] = pcre2_compile((PCRE2_SPTR)pt->re[i], PCRE2_ZERO_TERMINATED,
                                 PCRE2_UTF | PCRE2_UCP | PCRE2_NO_UTF_CHECK, &code, &off, NULL);
        if (!v->re[i]) {
            PCRE2_UCHAR msg[256];
            pcre2_get_error_message(code, msg, sizeof(msg));
            set_err(err, fmt_err("%s: pre-tokenizer '%s': regex %d: %s at %zu", path,
                                 pre ? pre : "default", i, (const char *)msg, (size_t)off));
            return false;
        }
        pcre2_jit_compile(v->re[i], PCRE2_JIT_COMPLETE); /* optional: falls back to the interpreter */
        v->n_re = i + 1;
    }
    build_byte_tables(v);
    return load_merges(v, g, err);
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
    bool bpe = strcmp(model, "gpt2") == 0;
    if (strcmp(model, "llama") != 0 && !bpe) {
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
    if (bpe) {
        /* ... and for "gpt2" (byte-level BPE); the pre-tokenizer may change them. */
        v->kind = VOCAB_BPE;
        v->bos = 11;
        v->eos = 11;
        v->unk = -1;
        v->add_bos = false;
        v->add_space_prefix = false;
    }

    v->text = malloc((size_t)n * sizeof(*v->text));
    v->text_len = malloc((size_t)n * sizeof(*v->text_len));
    v->score = malloc((size_t)n * sizeof(*v->score));
    v->attr = malloc((size_t)n * sizeof(*v->attr));
    if (!v->text || !v->text_len || !v->score || !v->attr)
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
        v->attr[i] = types ? attr_of_type(ty) : ATTR_NORMAL;
    }

    char *e = NULL;
    if ((bpe && !bpe_setup(v, g, &e)) || !vocab_finish(v, g, &e)) {
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
