/*
 * chat_template.h - render a conversation into the prompt text a chat model was trained on.
 *
 * A GGUF model carries its chat format as a Jinja program in `tokenizer.chat_template`.  The
 * engine runs that program with the interpreter of jinja.h (lc_chat_tmpl_*, at the end of this
 * header), which renders as transformers' apply_chat_template does (tests/test-jinja-oracle.sh).
 * The hand-coded families below are the fallback and the --chat-template overrides: like
 * llama.cpp (llm_chat_detect_template / llm_chat_apply_template in src/llama-chat.cpp, early
 * 2025), we recognise the template *family* from tell-tale substrings of the Jinja text (or from
 * a short built-in name) and render that family with hand-written code.  That output is
 * byte-identical to llama.cpp's for the 44 cases of ../shared/reference/chat-templates/cases.json
 * (tests/test-chat-template.c).
 *
 * A family's rendered text never starts with a BOS token (a Jinja rendering may: the engine
 * keeps one): the tokenizer adds BOS
 * (tokenizer.ggml.add_bos_token).  Templates that repeat BOS inside the history (llama2-sys-bos,
 * monarch, gigachat) contain the literal "<s>" text after the first turn, which must be
 * tokenized with parse_special so it becomes the BOS id.  The same holds for every other
 * special-token text a template emits ("<|im_start|>", "<|eot_id|>", ...).
 *
 * Template ids are small integers, 0 .. lc_chat_template_count()-1; the enum below names them.
 * LC_CHAT_TEMPLATE_NONE ("plain") is for base models with no chat format: the messages are
 * concatenated as they are, so the model simply continues the text.
 */
#ifndef LC_CHAT_TEMPLATE_H
#define LC_CHAT_TEMPLATE_H

#include <stdbool.h>
#include <stddef.h>

enum lc_chat_role { LC_ROLE_SYSTEM, LC_ROLE_USER, LC_ROLE_ASSISTANT };

/* One message; content is NUL-terminated UTF-8 owned by the caller. */
struct lc_chat_msg {
    enum lc_chat_role role;
    const char *content;
};

/* Template families (ids).  Names in lc_chat_template_name(); keep the two in the same order. */
enum lc_chat_template_id {
    LC_CHAT_TEMPLATE_NONE = 0,           /* "plain": no template, text continuation */
    LC_CHAT_TEMPLATE_CHATML,             /* <|im_start|>role\n...<|im_end|>\n */
    LC_CHAT_TEMPLATE_LLAMA_2,            /* [INST] ... [/INST], system folded into first turn */
    LC_CHAT_TEMPLATE_LLAMA_2_SYS,        /* ... with <<SYS>>\n...\n<</SYS>>\n\n */
    LC_CHAT_TEMPLATE_LLAMA_2_SYS_BOS,    /* ... and <s> before every later [INST] */
    LC_CHAT_TEMPLATE_LLAMA_2_SYS_STRIP,  /* ... with every message trimmed */
    LC_CHAT_TEMPLATE_MISTRAL_V1,         /* " [INST] " ... " [/INST]" */
    LC_CHAT_TEMPLATE_MISTRAL_V3,         /* "[INST] " ... "[/INST]", assistant trimmed */
    LC_CHAT_TEMPLATE_MISTRAL_V3_TEKKEN,  /* "[INST]" ... "[/INST]", no spaces */
    LC_CHAT_TEMPLATE_MISTRAL_V7,         /* [SYSTEM_PROMPT] ... [/SYSTEM_PROMPT][INST] ... */
    LC_CHAT_TEMPLATE_MISTRAL_V7_TEKKEN,  /* v7 without the spaces */
    LC_CHAT_TEMPLATE_PHI_3,              /* <|role|>\n...<|end|>\n */
    LC_CHAT_TEMPLATE_PHI_4,              /* <|im_start|>role<|im_sep|>...<|im_end|> */
    LC_CHAT_TEMPLATE_FALCON_3,           /* <|role|>\n...\n */
    LC_CHAT_TEMPLATE_ZEPHYR,             /* <|role|>\n...<|endoftext|>\n */
    LC_CHAT_TEMPLATE_MONARCH,            /* role\n...</s>\n<s>... */
    LC_CHAT_TEMPLATE_GEMMA,              /* <start_of_turn>user|model\n...<end_of_turn>\n */
    LC_CHAT_TEMPLATE_ORION,              /* Human: ...\n\nAssistant: </s>...</s> */
    LC_CHAT_TEMPLATE_OPENCHAT,           /* GPT4 Correct User: ...<|end_of_turn|> */
    LC_CHAT_TEMPLATE_VICUNA,             /* USER: ...\nASSISTANT: ...</s>\n */
    LC_CHAT_TEMPLATE_VICUNA_ORCA,        /* vicuna with "SYSTEM: " */
    LC_CHAT_TEMPLATE_DEEPSEEK,           /* ### Instruction:\n...\n### Response:\n...\n<|EOT|>\n */
    LC_CHAT_TEMPLATE_DEEPSEEK_2,         /* User: ...\n\nAssistant: ...<｜end▁of▁sentence｜> */
    LC_CHAT_TEMPLATE_DEEPSEEK_3,         /* <｜User｜>...<｜Assistant｜>... */
    LC_CHAT_TEMPLATE_COMMAND_R,          /* <|START_OF_TURN_TOKEN|><|USER_TOKEN|>... */
    LC_CHAT_TEMPLATE_LLAMA_3,            /* <|start_header_id|>role<|end_header_id|>\n\n...<|eot_id|> */
    LC_CHAT_TEMPLATE_CHATGLM_3,          /* [gMASK]sop<|role|>\n ... */
    LC_CHAT_TEMPLATE_CHATGLM_4,          /* [gMASK]<sop><|role|>\n... */
    LC_CHAT_TEMPLATE_GLMEDGE,            /* <|role|>\n... */
    LC_CHAT_TEMPLATE_MINICPM,            /* <用户>...<AI>... */
    LC_CHAT_TEMPLATE_EXAONE_3,           /* [|role|]...[|endofturn|]\n */
    LC_CHAT_TEMPLATE_RWKV_WORLD,         /* User: ...\n\nAssistant: ...\n\n */
    LC_CHAT_TEMPLATE_GRANITE,            /* <|start_of_role|>role<|end_of_role|>...<|end_of_text|>\n */
    LC_CHAT_TEMPLATE_GIGACHAT,           /* role<|role_sep|>...<|message_sep|> */
    LC_CHAT_TEMPLATE_MEGREZ,             /* <|role_start|>role<|role_end|>...<|turn_end|> */
    LC_CHAT_TEMPLATE_COUNT
};

/* Number of template ids (ids are 0 .. count-1). */
int lc_chat_template_count(void);

/*
 * Template id for a built-in name ("chatml", "llama2", "llama3", "zephyr", "mistral-v7", "phi3",
 * "gemma", "vicuna", "deepseek", "command-r", "plain", ... : the names lc_chat_template_name
 * returns, plus "none" as an alias of "plain").  Exact, case-sensitive match, as llama.cpp's
 * --chat-template.  Returns -1 for an unknown name or NULL.
 */
int lc_chat_template_from_name(const char *name);

/*
 * Built-in name of a template id (static string), or NULL if id is out of range.
 */
const char *lc_chat_template_name(int id);

/*
 * Detect the template family of a Jinja chat template (the text of `tokenizer.chat_template`)
 * or of a built-in name.  A built-in name is tried first; otherwise the Jinja text is matched
 * against substrings characteristic of each family, in llama.cpp's order (the order matters:
 * e.g. "<|im_start|>" means ChatML unless "<|im_sep|>" makes it Phi-4).  A text starting with
 * "mistral" is taken as a [INST]-style template.  Returns the template id, or -1 if the text is
 * NULL or matches no known family (the caller chooses a fallback, llama.cpp uses ChatML).
 */
int lc_chat_template_detect(const char *jinja_or_name);

/*
 * Render n messages (msgs[0..n-1], any order of roles) with template id into a malloc'd,
 * NUL-terminated string the caller frees.  add_assistant_prefix is Jinja's
 * add_generation_prompt: append the header that opens the assistant's reply (for templates
 * whose user turn already ends with it, such as llama2 or orion, it changes nothing).
 * Templates without a system role fold the system text into the first user turn, as llama.cpp.
 * On failure (id out of range, msgs NULL with n > 0, a NULL content, a role outside the enum,
 * out of memory) returns NULL and, when err is not NULL, sets *err to a malloc'd message
 * (NULL if even that allocation failed).
 */
char *lc_chat_template_apply(int id, const struct lc_chat_msg *msgs, size_t n,
                             bool add_assistant_prefix, char **err);

/* Where a message's content landed in a rendering: out[off .. off+len) holds
 * msgs[msg].content[skip .. skip+len) (skip > 0 and a shorter len when the template trims). */
struct lc_chat_span {
    size_t off, len;
    size_t msg;
    size_t skip;
};

/*
 * lc_chat_template_apply, and also where every message content landed in the output:
 * *spans (malloc'd, *n_spans entries, in output order; the caller frees it) says which bytes
 * came from which message, so a caller can tokenize content as plain text and only the
 * template's own text with special tokens.  spans may be NULL.  Same failures as
 * lc_chat_template_apply (then *spans is NULL).
 */
char *lc_chat_template_render(int id, const struct lc_chat_msg *msgs, size_t n,
                              bool add_assistant_prefix, struct lc_chat_span **spans,
                              size_t *n_spans, char **err);

/*
 * Strings that end an assistant turn in template id's format, for stopping generation when
 * the model writes them as text (e.g. "<|im_end|>", "<|eot_id|>", "</s>", or the next user
 * header such as "<|im_start|>" or "USER:").  A static list terminated by NULL; never NULL
 * itself: "plain" and out-of-range ids give an empty list.  EOS/EOT tokens are still to be
 * checked by id (lc_vocab_is_eog); these strings catch them when printed as text.
 */
const char *const *lc_chat_template_stop_strings(int id);

/* ------------------------------------------------------------------ the model's own template */

/*
 * A chat template as the engine uses it: the model's Jinja program run by the interpreter of
 * jinja.h (the rendering transformers' apply_chat_template gives), with a hand-coded family
 * as the fallback for what the interpreter cannot run.
 *   - a built-in name ("chatml", "llama3", "plain", ...): that family, no Jinja;
 *   - NULL: "plain";
 *   - any other text: parsed as Jinja; its family is detected as lc_chat_template_detect does
 *     (ChatML when none matches, as llama.cpp).  A template that does not parse uses the family
 *     alone; a rendering that fails (raise_exception, e.g. for a system message in a template
 *     without one, or an unsupported construct) or that writes bytes it computed from a
 *     message content (upper, escapes: those could spell special tokens and have no span)
 *     falls back to the family for that rendering.
 */
struct lc_chat_tmpl;

/*
 * New template from a built-in name or the Jinja text (see above).  bos_text and eos_text are
 * the vocab's BOS/EOS token texts, the template's bos_token and eos_token (NULL: "").
 * Returns NULL only when out of memory (then *note, if note is not NULL, is NULL).  *note
 * (when note is not NULL) receives a malloc'd message for the user when the Jinja text could
 * not be parsed ("chat template: line 3, column 5: ...; using the built-in 'chatml' format"),
 * else NULL.
 */
struct lc_chat_tmpl *lc_chat_tmpl_new(const char *jinja_or_name, const char *bos_text,
                                      const char *eos_text, char **note);

/* Free a template; NULL is a no-op. */
void lc_chat_tmpl_free(struct lc_chat_tmpl *t);

/*
 * Name for the user: the family name ("chatml", ...) or "jinja" when the model's Jinja
 * program is run.  A static string or one owned by t.
 */
const char *lc_chat_tmpl_name(const struct lc_chat_tmpl *t);

/* The family id (enum lc_chat_template_id) used for fallback renderings and stop strings. */
int lc_chat_tmpl_family(const struct lc_chat_tmpl *t);

/*
 * Render msgs[0..n-1] exactly as lc_chat_template_render does (same output contract, spans
 * and failures), with the model's Jinja program when it has one.  The rendering starts with
 * whatever the template writes first (Jinja templates often write bos_token; the caller keeps
 * one BOS).  Every span satisfies out[off..off+len) == msgs[msg].content[skip..skip+len), and
 * every output byte that comes from a message content lies in a span.
 */
char *lc_chat_tmpl_render(const struct lc_chat_tmpl *t, const struct lc_chat_msg *msgs,
                          size_t n, bool add_generation_prompt, struct lc_chat_span **spans,
                          size_t *n_spans, char **err);

/*
 * lc_chat_tmpl_render, and when the Jinja program could not render this conversation (so the
 * family rendered it instead), *note (when note is not NULL) receives a malloc'd message for
 * the user saying why ("chat template: line 1, column 4: raise_exception: ...; this prompt is
 * in the built-in 'chatml' format"); else *note is NULL.
 */
char *lc_chat_tmpl_render_note(const struct lc_chat_tmpl *t, const struct lc_chat_msg *msgs,
                               size_t n, bool add_generation_prompt, struct lc_chat_span **spans,
                               size_t *n_spans, char **note, char **err);

/*
 * Stop strings (NULL-terminated, owned by t, never NULL): the family's when the template's
 * family is known; for a Jinja template of no known family, the end-of-turn texts the
 * template writes (among "<|im_end|>", "<|eot_id|>", "<|end|>", "<end_of_turn>", ...) and
 * the EOS text.
 */
const char *const *lc_chat_tmpl_stop_strings(const struct lc_chat_tmpl *t);

#endif
