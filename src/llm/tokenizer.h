/*
 * tokenizer.h - the vocabulary and tokenizers of a GGUF model.
 *
 * Supported `tokenizer.ggml.model` values: "llama" (SentencePiece BPE over scores, with byte
 * fallback tokens <0xNN>, as llama.cpp's llm_tokenizer_spm) and, where implemented, "gpt2"
 * (byte-level BPE).  Vocab, scores, token types and special ids come from the tokenizer.ggml.*
 * keys.  Special/control tokens are only produced from text when parse_special is set.
 */
#ifndef LC_TOKENIZER_H
#define LC_TOKENIZER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct lc_gguf;
struct lc_vocab;

/* Token types as stored in tokenizer.ggml.token_type (llama.cpp's LLAMA_TOKEN_TYPE_*). */
enum lc_token_type {
    LC_TOKEN_UNDEFINED = 0,
    LC_TOKEN_NORMAL = 1,
    LC_TOKEN_UNKNOWN = 2,
    LC_TOKEN_CONTROL = 3,
    LC_TOKEN_USER_DEFINED = 4,
    LC_TOKEN_UNUSED = 5,
    LC_TOKEN_BYTE = 6,
};

/* Load the vocabulary from a GGUF's metadata (no tensors needed).  NULL + malloc'd *err on failure. */
struct lc_vocab *lc_vocab_load(const struct lc_gguf *g, char **err);
void lc_vocab_free(struct lc_vocab *v);

int32_t lc_vocab_n_tokens(const struct lc_vocab *v);
int32_t lc_vocab_bos(const struct lc_vocab *v);   /* -1 if none */
int32_t lc_vocab_eos(const struct lc_vocab *v);   /* -1 if none */
int32_t lc_vocab_eot(const struct lc_vocab *v);   /* end of turn, -1 if none */
bool lc_vocab_add_bos(const struct lc_vocab *v);  /* tokenizer.ggml.add_bos_token (default true for llama) */
/* True for end-of-generation tokens (EOS, EOT, and chat-template stop tokens like <|im_end|>). */
bool lc_vocab_is_eog(const struct lc_vocab *v, int32_t tok);
bool lc_vocab_is_control(const struct lc_vocab *v, int32_t tok);
/* Raw piece text of a token as stored (e.g. "\xe2\x96\x81the"), or NULL if out of range. */
const char *lc_vocab_text(const struct lc_vocab *v, int32_t tok);
/* Token id of an exact piece text, or -1. */
int32_t lc_vocab_find(const struct lc_vocab *v, const char *text);

/*
 * Tokenize len bytes of UTF-8 text into out (capacity n_max).  add_bos prepends BOS (when the
 * vocab has one); parse_special lets control/user-defined token texts in the input map to
 * their ids.  Returns the number of tokens, or -(number needed) when n_max is too small,
 * or INT32_MIN on an internal error.
 */
int32_t lc_tokenize(const struct lc_vocab *v, const char *text, size_t len, bool add_bos,
                    bool parse_special, int32_t *out, int32_t n_max);

/*
 * lc_tokenize for a text in which some bytes are plain text whatever parse_special says:
 * plain[i] != 0 (len entries, or NULL for none) marks byte i as user text, where no
 * control/unknown token is matched (a chat template's own text around it still gets its special
 * tokens; llama.cpp has no such mode, it tokenizes the whole rendering with parse_special).
 * space_prefix false: the text continues earlier text, so a SentencePiece vocab adds no leading
 * space to its first fragment.  Same return values as lc_tokenize.
 */
int32_t lc_tokenize_mixed(const struct lc_vocab *v, const char *text, size_t len,
                          const uint8_t *plain, bool add_bos, bool parse_special,
                          bool space_prefix, int32_t *out, int32_t n_max);

/*
 * The bytes of token tok as text (as lc_token_to_piece, without a length limit): a pointer
 * into the vocab (valid until lc_vocab_free, not NUL-terminated) and *len bytes.  Control and
 * unknown tokens give "" unless special; an id out of range gives "".
 */
const char *lc_vocab_piece(const struct lc_vocab *v, int32_t tok, bool special, size_t *len);
/* The longest token text in bytes (at least 1): a text of B bytes needs >= B / this tokens. */
size_t lc_vocab_max_piece_len(const struct lc_vocab *v);

/*
 * Bytes of one token as text: the leading-space marker U+2581 becomes ' ', byte tokens
 * <0xNN> become the byte NN, control tokens give "" unless special.  Writes at most len bytes
 * (no NUL); returns the byte count, or -(needed) if len is too small.  A multi-byte UTF-8
 * character split over byte tokens comes out one byte per token: callers assemble the bytes.
 */
int32_t lc_token_to_piece(const struct lc_vocab *v, int32_t tok, char *buf, int32_t len,
                          bool special);

/*
 * Decode a token sequence to text (the inverse of lc_tokenize for plain text: a leading space
 * added by the tokenizer after BOS is removed when remove_leading_space).  Returns a malloc'd
 * NUL-terminated string, or NULL on allocation failure.
 */
char *lc_detokenize(const struct lc_vocab *v, const int32_t *toks, int32_t n, bool special,
                    bool remove_leading_space);

#endif
