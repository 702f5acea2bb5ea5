/*
 * remote.h - a client of OpenAI-compatible chat servers (llamachat-server, llama.cpp's
 * llama-server, vLLM, Ollama, ...) over libcurl: the engine thread's remote mode.
 *
 * A request renders nothing locally: the conversation goes as "messages" and the server applies
 * its model's chat template.  Replies are streamed (stream: true; server-sent events, sse.h).
 * Every call runs on the calling thread and polls `stop` (an atomic flag the UI sets) every
 * 50 ms, so that Esc cancels a request at once, connecting included.  No call hangs: a connect
 * timeout (LLAMACHAT_REMOTE_CONNECT_TIMEOUT, default 10 s) and an idle timeout (no byte from
 * the server, keep-alive comments included, for LLAMACHAT_REMOTE_IDLE_TIMEOUT seconds, default
 * 120) end it with an error.
 *
 * The API key is given by value (read by the caller from the environment variable the user
 * named); it goes only into the Authorization header and is cut out of every message.
 */
#ifndef LC_REMOTE_H
#define LC_REMOTE_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "chat.h"
#include "llm/sampler.h"

struct lc_remote;

/*
 * A client for the server at url ("http://host:port" or with a path prefix such as ".../v1"
 * removed: "/v1/..." is appended).  model may be NULL (the server's first model, from
 * GET /v1/models, or none).  api_key may be NULL.  Strings are copied.  Returns NULL with a
 * malloc'd *err when libcurl cannot be set up or the URL is not http(s).
 */
struct lc_remote *lc_remote_new(const char *url, const char *model, const char *api_key,
                                char **err);
void lc_remote_free(struct lc_remote *r);

/* The model name requests use (may be NULL until lc_remote_models found one). */
const char *lc_remote_model(const struct lc_remote *r);
/* Ask for model (copied) from the next request on.  Returns 0, or -1 (out of memory: the
 * model is unchanged). */
int lc_remote_set_model(struct lc_remote *r, const char *model);

/*
 * GET {url}/v1/models.  Returns a malloc'd list of model ids, one per line (may be ""), and,
 * when no model was configured, takes the first one as the model.  NULL with a malloc'd *err
 * (one line) on failure.
 */
char *lc_remote_models(struct lc_remote *r, const atomic_bool *stop, char **err);

/*
 * The context size, in tokens, a request to the model in use gets, or 0 when the server does
 * not say: llama.cpp's llama-server (and llamachat-server) GET /props
 * default_generation_settings.n_ctx (per slot), else the "max_model_len" vLLM gives in the
 * model list (read by the last lc_remote_models).  Never an error: a server without /props is
 * normal.  Polls stop as every call does.
 */
int32_t lc_remote_n_ctx(struct lc_remote *r, const atomic_bool *stop);

enum lc_remote_end {
    LC_REMOTE_END_STOP = 0,  /* finish_reason "stop" (or [DONE] without a reason) */
    LC_REMOTE_END_LENGTH,    /* finish_reason "length": max_tokens reached */
    LC_REMOTE_END_CANCELLED, /* stop was set */
    LC_REMOTE_END_ERROR,     /* *err says why; text received so far was delivered */
    LC_REMOTE_END_CUT,       /* the stream ended before its end (partial reply) */
};

struct lc_remote_callbacks {
    void (*on_text)(void *ud, const char *s, size_t n);          /* content delta bytes */
    void (*on_usage)(void *ud, int64_t prompt_tokens, int64_t completion_tokens);
    void *ud;
};

/*
 * POST {url}/v1/chat/completions with the conversation (system, user, assistant messages),
 * the sampling parameters (temperature, top_p, top_k, min_p, repeat_penalty; seed unless
 * random; max_tokens when n_predict >= 0) and stream: true with usage asked for.  Content is
 * handed to cb->on_text as it arrives.  Returns an lc_remote_end; for ERROR and CUT a malloc'd
 * one-line *err.  *n_chunks (may be NULL) receives the number of content deltas.
 */
int lc_remote_chat(struct lc_remote *r, const struct lc_chat *conv,
                   const struct lc_sampler_params *p, int32_t n_predict, const atomic_bool *stop,
                   const struct lc_remote_callbacks *cb, int32_t *n_chunks, char **err);

#endif
