/*
 * sse.h - server-sent events framing and OpenAI chat-completion chunks, without any I/O.
 *
 * The remote client (remote.c) feeds whatever bytes libcurl hands it to lc_sse_feed; tests
 * replay recorded streams (tests/data/sse/) through the same functions.
 *
 * Framing (the WHATWG "server-sent events" algorithm, the part these servers use): lines end in
 * LF, CRLF or CR; a line "data: X" (or "data:X") appends X and a newline to the event's data;
 * a line starting with ':' is a comment (keep-alives: ": ping"); other fields (event:, id:,
 * retry:) are ignored; an empty line ends the event and hands its data (without the last
 * newline) to the callback.  An event without data lines is not dispatched.
 */
#ifndef LC_SSE_H
#define LC_SSE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct lc_sse;

/* Called once per event with its data (NUL-terminated, len bytes).  Return 0 to go on,
 * non-zero to stop lc_sse_feed (which then returns that value). */
typedef int (*lc_sse_cb)(void *ud, const char *data, size_t len);

/* A parser with no pending bytes; NULL on allocation failure.  Lines are limited to max_line
 * bytes (0: 4 MiB); a longer one is an error (-1 from lc_sse_feed). */
struct lc_sse *lc_sse_new(size_t max_line);
void lc_sse_free(struct lc_sse *s);
/* Feed n bytes (any split).  Returns 0, the callback's non-zero value, or -1 (out of memory,
 * line too long). */
int lc_sse_feed(struct lc_sse *s, const char *buf, size_t n, lc_sse_cb cb, void *ud);
/* Comment lines seen so far (keep-alives), for tests and idle timers. */
uint64_t lc_sse_comments(const struct lc_sse *s);
/* True when bytes of an unfinished event are pending (a stream cut in the middle). */
bool lc_sse_pending(const struct lc_sse *s);

/*
 * One chunk of POST /v1/chat/completions with stream: true (object "chat.completion.chunk"),
 * or a non-streamed /v1/chat/completions answer's first choice.  Pointers point into a json-c
 * object owned by the chunk; call lc_chunk_clear when done.
 */
struct lc_chunk {
    bool done;                 /* the data was "[DONE]" */
    const char *role;          /* delta.role, or NULL */
    const char *content;       /* delta.content (or message.content), or NULL; may be "" */
    size_t content_len;
    /* a reasoning model's thinking, which servers send apart from the content:
     * delta.reasoning_content (llama-server, DeepSeek, vLLM) or delta.reasoning (vLLM 0.9+,
     * OpenRouter, Ollama), or NULL */
    const char *reasoning;
    size_t reasoning_len;
    const char *finish_reason; /* "stop", "length", ..., or NULL */
    const char *model;         /* "model", or NULL */
    bool has_usage;            /* a usage object with numbers */
    int64_t prompt_tokens, completion_tokens;
    const char *error;         /* an {"error": {"message": ...}} or {"error": "..."} payload */
    void *json;                /* the parsed object (json_object *) */
};

/* Parse data (len bytes) into c.  Returns 0, or -1 when it is not JSON or not an object; then
 * c is cleared.  Unknown fields are ignored; "choices": [] (a usage-only chunk) is fine. */
int lc_chunk_parse(struct lc_chunk *c, const char *data, size_t len);
void lc_chunk_clear(struct lc_chunk *c);

#endif
