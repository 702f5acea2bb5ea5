/*
 * chat_template.c - chat template families: detection from Jinja text, rendering in C.
 *
 * The model: a chat template is one of a few dozen fixed formats.  Each family below is a
 * table row (name, stop strings) plus a case in render(); detection is a list of substring
 * tests run in a fixed order.  Formats, the detection order and the quirks (which families trim
 * messages, where BOS repeats, how a system message is folded into a template without a system
 * role) follow llama.cpp's src/llama-chat.cpp (llm_chat_detect_template /
 * llm_chat_apply_template, as of early 2025), which is the behaviour the golden cases in
 * ../shared/reference/chat-templates/cases.json record.  This file is UTF-8.
 */
#include "chat_template.h"
#include "jinja.h"
#include "strbuf.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------ names and stop strings */

static const char *const stop_none[] = { NULL };
static const char *const stop_chatml[] = { "<|im_end|>", "<|im_start|>", NULL };
static const char *const stop_inst[] = { "</s>", "[INST]", NULL };
static const char *const stop_phi3[] = { "<|end|>", "<|endoftext|>", "<|user|>", NULL };
static const char *const stop_falcon3[] = { "<|endoftext|>", "<|user|>", NULL };
static const char *const stop_zephyr[] = { "<|endoftext|>", "</s>", "<|user|>", NULL };
static const char *const stop_monarch[] = { "</s>", "<s>user", NULL };
static const char *const stop_gemma[] = { "<end_of_turn>", "<start_of_turn>", NULL };
static const char *const stop_orion[] = { "</s>", "Human:", NULL };
static const char *const stop_openchat[] = { "<|end_of_turn|>", "GPT4 Correct User:", NULL };
static const char *const stop_vicuna[] = { "</s>", "USER:", NULL };
static const char *const stop_deepseek[] = { "<|EOT|>", "### Instruction:", NULL };
static const char *const stop_deepseek2[] = { "<｜end▁of▁sentence｜>", "User:", NULL };
static const char *const stop_deepseek3[] = { "<｜end▁of▁sentence｜>", "<｜User｜>", NULL };
static const char *const stop_command_r[] = { "<|END_OF_TURN_TOKEN|>", "<|START_OF_TURN_TOKEN|>",
                                              NULL };
static const char *const stop_llama3[] = { "<|eot_id|>", "<|end_of_text|>", "<|start_header_id|>",
                                           NULL };
static const char *const stop_glm[] = { "<|user|>", "<|observation|>", "<|endoftext|>", NULL };
static const char *const stop_minicpm[] = { "</s>", "<用户>", NULL };
static const char *const stop_exaone3[] = { "[|endofturn|]", "[|user|]", NULL };
static const char *const stop_rwkv[] = { "\n\n", "User:", NULL };
static const char *const stop_granite[] = { "<|end_of_text|>", "<|start_of_role|>", NULL };
static const char *const stop_gigachat[] = { "<|message_sep|>", "</s>", NULL };
static const char *const stop_megrez[] = { "<|turn_end|>", "<|role_start|>", NULL };

/* Indexed by enum lc_chat_template_id. */
static const struct {
    const char *name;
    const char *const *stop;
} families[LC_CHAT_TEMPLATE_COUNT] = {
    [LC_CHAT_TEMPLATE_NONE] = { "plain", stop_none },
    [LC_CHAT_TEMPLATE_CHATML] = { "chatml", stop_chatml },
    [LC_CHAT_TEMPLATE_LLAMA_2] = { "llama2", stop_inst },
    [LC_CHAT_TEMPLATE_LLAMA_2_SYS] = { "llama2-sys", stop_inst },
    [LC_CHAT_TEMPLATE_LLAMA_2_SYS_BOS] = { "llama2-sys-bos", stop_inst },
    [LC_CHAT_TEMPLATE_LLAMA_2_SYS_STRIP] = { "llama2-sys-strip", stop_inst },
    [LC_CHAT_TEMPLATE_MISTRAL_V1] = { "mistral-v1", stop_inst },
    [LC_CHAT_TEMPLATE_MISTRAL_V3] = { "mistral-v3", stop_inst },
    [LC_CHAT_TEMPLATE_MISTRAL_V3_TEKKEN] = { "mistral-v3-tekken", stop_inst },
    [LC_CHAT_TEMPLATE_MISTRAL_V7] = { "mistral-v7", stop_inst },
    [LC_CHAT_TEMPLATE_MISTRAL_V7_TEKKEN] = { "mistral-v7-tekken", stop_inst },
    [LC_CHAT_TEMPLATE_PHI_3] = { "phi3", stop_phi3 },
    [LC_CHAT_TEMPLATE_PHI_4] = { "phi4", stop_chatml },
    [LC_CHAT_TEMPLATE_FALCON_3] = { "falcon3", stop_falcon3 },
    [LC_CHAT_TEMPLATE_ZEPHYR] = { "zephyr", stop_zephyr },
    [LC_CHAT_TEMPLATE_MONARCH] = { "monarch", stop_monarch },
    [LC_CHAT_TEMPLATE_GEMMA] = { "gemma", stop_gemma },
    [LC_CHAT_TEMPLATE_ORION] = { "orion", stop_orion },
    [LC_CHAT_TEMPLATE_OPENCHAT] = { "openchat", stop_openchat },
    [LC_CHAT_TEMPLATE_VICUNA] = { "vicuna", stop_vicuna },
    [LC_CHAT_TEMPLATE_VICUNA_ORCA] = { "vicuna-orca", stop_vicuna },
    [LC_CHAT_TEMPLATE_DEEPSEEK] = { "deepseek", stop_deepseek },
    [LC_CHAT_TEMPLATE_DEEPSEEK_2] = { "deepseek2", stop_deepseek2 },
    [LC_CHAT_TEMPLATE_DEEPSEEK_3] = { "deepseek3", stop_deepseek3 },
    [LC_CHAT_TEMPLATE_COMMAND_R] = { "command-r", stop_command_r },
    [LC_CHAT_TEMPLATE_LLAMA_3] = { "llama3", stop_llama3 },
    [LC_CHAT_TEMPLATE_CHATGLM_3] = { "chatglm3", stop_glm },
    [LC_CHAT_TEMPLATE_CHATGLM_4] = { "chatglm4", stop_glm },
    [LC_CHAT_TEMPLATE_GLMEDGE] = { "glmedge", stop_glm },
    [LC_CHAT_TEMPLATE_MINICPM] = { "minicpm", stop_minicpm },
    [LC_CHAT_TEMPLATE_EXAONE_3] = { "exaone3", stop_exaone3 },
    [LC_CHAT_TEMPLATE_RWKV_WORLD] = { "rwkv-world", stop_rwkv },
    [LC_CHAT_TEMPLATE_GRANITE] = { "granite", stop_granite },
    [LC_CHAT_TEMPLATE_GIGACHAT] = { "gigachat", stop_gigachat },
    [LC_CHAT_TEMPLATE_MEGREZ] = { "megrez", stop_megrez },
};

int lc_chat_template_count(void)
{
    return LC_CHAT_TEMPLATE_COUNT;
}

const char *lc_chat_template_name(int id)
{
    if (id < 0 || id >= LC_CHAT_TEMPLATE_COUNT)
        return NULL;
    return families[id].name;
}

int lc_chat_template_from_name(const char *name)
{
    if (!name)
        return -1;
    if (strcmp(name, "none") == 0)
        return LC_CHAT_TEMPLATE_NONE;
    for (int id = 0; id < LC_CHAT_TEMPLATE_COUNT; id++)
        if (strcmp(name, families[id].name) == 0)
            return id;
    return -1;
}

const char *const *lc_chat_template_stop_strings(int id)
{
    if (id < 0 || id >= LC_CHAT_TEMPLATE_COUNT)
        return stop_none;
    return families[id].stop;
}

/* ------------------------------------------------------------------ detection */

static bool has(const char *hay, const char *needle)
{
    return strstr(hay, needle) != NULL;
}

int lc_chat_template_detect(const char *t)
{
    if (!t)
        return -1;
    int id = lc_chat_template_from_name(t);
    if (id >= 0)
        return id;

    /* The tests mirror llama.cpp's order; earlier tests shadow later ones on purpose (a Phi-4
     * template also contains "<|im_start|>", a Zephyr-like one "<|user|>"). */
    if (has(t, "<|im_start|>"))
        return has(t, "<|im_sep|>") ? LC_CHAT_TEMPLATE_PHI_4 : LC_CHAT_TEMPLATE_CHATML;
    if (strncmp(t, "mistral", 7) == 0 || has(t, "[INST]")) {
        if (has(t, "[SYSTEM_PROMPT]"))
            return LC_CHAT_TEMPLATE_MISTRAL_V7;
        /* Mistral's official v1 template prepends the system message as "' [INST] ' +
         * system_message"; v3 and v3-tekken declare tool support with [AVAILABLE_TOOLS]. */
        if (has(t, "' [INST] ' + system_message") || has(t, "[AVAILABLE_TOOLS]")) {
            if (has(t, " [INST]"))
                return LC_CHAT_TEMPLATE_MISTRAL_V1;
            if (has(t, "\"[INST]\""))
                return LC_CHAT_TEMPLATE_MISTRAL_V3_TEKKEN;
            return LC_CHAT_TEMPLATE_MISTRAL_V3;
        }
        /* Llama-2 and its variants (https://huggingface.co/blog/llama2#how-to-prompt-llama-2). */
        if (has(t, "content.strip()"))
            return LC_CHAT_TEMPLATE_LLAMA_2_SYS_STRIP;
        if (has(t, "bos_token + '[INST]"))
            return LC_CHAT_TEMPLATE_LLAMA_2_SYS_BOS;
        if (has(t, "<<SYS>>"))
            return LC_CHAT_TEMPLATE_LLAMA_2_SYS;
        return LC_CHAT_TEMPLATE_LLAMA_2;
    }
    if (has(t, "<|assistant|>") && has(t, "<|end|>"))
        return LC_CHAT_TEMPLATE_PHI_3;
    if (has(t, "[gMASK]<sop>"))
        return LC_CHAT_TEMPLATE_CHATGLM_4;
    if (has(t, "<|assistant|>") && has(t, "<|user|>"))
        return has(t, "</s>") ? LC_CHAT_TEMPLATE_FALCON_3 : LC_CHAT_TEMPLATE_GLMEDGE;
    if (has(t, "<|user|>") && has(t, "<|endoftext|>"))
        return LC_CHAT_TEMPLATE_ZEPHYR;
    if (has(t, "bos_token + message['role']"))
        return LC_CHAT_TEMPLATE_MONARCH;
    if (has(t, "<start_of_turn>"))
        return LC_CHAT_TEMPLATE_GEMMA;
    if (has(t, "'\\n\\nAssistant: ' + eos_token"))  /* OrionStarAI/Orion-14B-Chat */
        return LC_CHAT_TEMPLATE_ORION;
    if (has(t, "GPT4 Correct "))                     /* openchat/openchat-3.5-0106 */
        return LC_CHAT_TEMPLATE_OPENCHAT;
    if (has(t, "USER: ") && has(t, "ASSISTANT: "))   /* eachadea/vicuna-13b-1.1, Orca-Vicuna */
        return has(t, "SYSTEM: ") ? LC_CHAT_TEMPLATE_VICUNA_ORCA : LC_CHAT_TEMPLATE_VICUNA;
    if (has(t, "### Instruction:") && has(t, "<|EOT|>"))  /* deepseek-coder-33b-instruct */
        return LC_CHAT_TEMPLATE_DEEPSEEK;
    if (has(t, "<|START_OF_TURN_TOKEN|>") && has(t, "<|USER_TOKEN|>"))  /* c4ai-command-r */
        return LC_CHAT_TEMPLATE_COMMAND_R;
    if (has(t, "<|start_header_id|>") && has(t, "<|end_header_id|>"))
        return LC_CHAT_TEMPLATE_LLAMA_3;
    if (has(t, "[gMASK]sop"))
        return LC_CHAT_TEMPLATE_CHATGLM_3;
    if (has(t, "<用户>"))                            /* MiniCPM-3B-OpenHermes-2.5-v2 */
        return LC_CHAT_TEMPLATE_MINICPM;
    if (has(t, "'Assistant: ' + message['content'] + eos_token"))
        return LC_CHAT_TEMPLATE_DEEPSEEK_2;
    if (has(t, "<｜Assistant｜>") && has(t, "<｜User｜>") && has(t, "<｜end▁of▁sentence｜>"))
        return LC_CHAT_TEMPLATE_DEEPSEEK_3;
    if (has(t, "[|system|]") && has(t, "[|assistant|]") && has(t, "[|endofturn|]"))
        return LC_CHAT_TEMPLATE_EXAONE_3;
    if (has(t, "rwkv-world") || has(t, "{{- 'User: ' + message['content']|trim + '\\n\\n' -}}"))
        return LC_CHAT_TEMPLATE_RWKV_WORLD;
    if (has(t, "<|start_of_role|>"))
        return LC_CHAT_TEMPLATE_GRANITE;
    if (has(t, "message['role'] + additional_special_tokens[0] + message['content'] + "
               "additional_special_tokens[1]"))
        return LC_CHAT_TEMPLATE_GIGACHAT;
    if (has(t, "<|role_start|>"))
        return LC_CHAT_TEMPLATE_MEGREZ;
    return -1;
}

/* ------------------------------------------------------------------ rendering */

/* Growable output string; oom latches so callers check once at the end. */
/* The C-locale isspace set, as llama.cpp's trim() sees it. */
static bool is_space(char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r';
}

/* Bounds of s without leading and trailing white space (Jinja's |trim, Python's .strip()). */
static void trim_bounds(const char *s, size_t *off, size_t *len)
{
    size_t a = 0, n = strlen(s);
    while (a < n && is_space(s[a]))
        a++;
    while (n > a && is_space(s[n - 1]))
        n--;
    *off = a;
    *len = n - a;
}

/*
 * Message contents are not copied while a template renders: put_content writes a marker
 * "\x01" ('T' trimmed | 'R' as is) index "\x02" instead, and expand() replaces the markers with
 * the contents afterwards.  So the renderer knows exactly which output bytes came from which
 * message (lc_chat_template_render's spans), a content can never be mistaken for template text,
 * and templates that move a content around (Gemma folds the system text into the first user
 * turn) carry the marker with it.  Template text never contains \x01.
 */
static void put_content(struct lc_strbuf *b, const struct lc_chat_msg *m, size_t i, bool trim)
{
    (void)m;
    lc_strbuf_printf(b, "\x01%c%zu\x02", trim ? 'T' : 'R', i);
}

static bool push_span(struct lc_chat_span **v, size_t *n, size_t *cap, struct lc_chat_span s)
{
    if (*n == *cap) {
        size_t c = *cap ? *cap * 2 : 16;
        struct lc_chat_span *p = realloc(*v, c * sizeof(*p));
        if (!p)
            return false;
        *v = p;
        *cap = c;
    }
    (*v)[(*n)++] = s;
    return true;
}

/* Replace the markers of put_content in r by the contents; record spans when wanted. */
static bool expand(const char *r, size_t rn, const struct lc_chat_msg *msgs, size_t n,
                   struct lc_strbuf *out, struct lc_chat_span **spans, size_t *n_spans)
{
    size_t cap = 0;
    const char *end = r + rn;
    while (r < end) {
        const char *m = memchr(r, '\x01', (size_t)(end - r));
        if (!m) {
            lc_strbuf_putn(out, r, (size_t)(end - r));
            break;
        }
        lc_strbuf_putn(out, r, (size_t)(m - r));
        char *e = NULL;
        unsigned long long i = strtoull(m + 2, &e, 10);
        if (!e || *e != '\x02' || i >= n)
            return false;   /* cannot happen: markers are only written by put_content */
        size_t off = 0, len = strlen(msgs[i].content);
        if (m[1] == 'T')
            trim_bounds(msgs[i].content, &off, &len);
        if (spans && !push_span(spans, n_spans, &cap,
                                (struct lc_chat_span){ out->len, len, (size_t)i, off }))
            return false;
        lc_strbuf_putn(out, msgs[i].content + off, len);
        r = e + 1;
    }
    return !out->oom;
}

static const char *role_name(enum lc_chat_role r)
{
    switch (r) {
    case LC_ROLE_SYSTEM: return "system";
    case LC_ROLE_USER: return "user";
    case LC_ROLE_ASSISTANT: return "assistant";
    }
    return NULL;
}

static void set_err(char **err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void set_err(char **err, const char *fmt, ...)
{
    if (!err)
        return;
    va_list ap;
    va_start(ap, fmt);
    char *s = NULL;
    if (vasprintf(&s, fmt, ap) < 0)
        s = NULL;
    va_end(ap);
    *err = s;
}

/* Llama-2 family: "[INST] " opens a turn, the user text ends with " [/INST]", the assistant
 * reply with "</s>".  The first "[INST] " comes without BOS (the tokenizer adds it). */
static void render_llama2(struct lc_strbuf *b, int id, const struct lc_chat_msg *m, size_t n)
{
    bool with_sys = id != LC_CHAT_TEMPLATE_LLAMA_2;
    bool bos_in_history = id == LC_CHAT_TEMPLATE_LLAMA_2_SYS_BOS;
    bool strip = id == LC_CHAT_TEMPLATE_LLAMA_2_SYS_STRIP;
    bool in_turn = true;
    lc_strbuf_put(b, "[INST] ");
    for (size_t i = 0; i < n; i++) {
        if (!in_turn) {
            in_turn = true;
            lc_strbuf_put(b, bos_in_history ? "<s>[INST] " : "[INST] ");
        }
        switch (m[i].role) {
        case LC_ROLE_SYSTEM:
            if (with_sys) {
                lc_strbuf_put(b, "<<SYS>>\n");
                put_content(b, m, i, strip);
                lc_strbuf_put(b, "\n<</SYS>>\n\n");
            } else {
                /* no system role: the text still leads the first instruction */
                put_content(b, m, i, strip);
                lc_strbuf_put(b, "\n");
            }
            break;
        case LC_ROLE_USER:
            put_content(b, m, i, strip);
            lc_strbuf_put(b, " [/INST]");
            break;
        case LC_ROLE_ASSISTANT:
            put_content(b, m, i, strip);
            lc_strbuf_put(b, "</s>");
            in_turn = false;
            break;
        }
    }
}

/* Mistral v1 / v3 / v3-tekken (mistralai/cookbook, concept-deep-dive/tokenization): they differ
 * only in the spaces around [INST] and in trimming the assistant reply (v3). */
static void render_mistral(struct lc_strbuf *b, int id, const struct lc_chat_msg *m, size_t n)
{
    const char *lead = id == LC_CHAT_TEMPLATE_MISTRAL_V1 ? " " : "";
    const char *trail = id == LC_CHAT_TEMPLATE_MISTRAL_V3_TEKKEN ? "" : " ";
    bool trim_reply = id == LC_CHAT_TEMPLATE_MISTRAL_V3;
    bool in_turn = false;
    for (size_t i = 0; i < n; i++) {
        if (!in_turn) {
            lc_strbuf_put(b, lead);
            lc_strbuf_put(b, "[INST]");
            lc_strbuf_put(b, trail);
            in_turn = true;
        }
        switch (m[i].role) {
        case LC_ROLE_SYSTEM:
            put_content(b, m, i, false);
            lc_strbuf_put(b, "\n\n");
            break;
        case LC_ROLE_USER:
            put_content(b, m, i, false);
            lc_strbuf_put(b, lead);
            lc_strbuf_put(b, "[/INST]");
            break;
        case LC_ROLE_ASSISTANT:
            lc_strbuf_put(b, trail);
            put_content(b, m, i, trim_reply);
            lc_strbuf_put(b, "</s>");
            in_turn = false;
            break;
        }
    }
}

/* Gemma has no system role and calls the assistant "model": system text (trimmed, several
 * concatenated) is put in front of the next user turn, separated by a blank line. */
static void render_gemma(struct lc_strbuf *b, const struct lc_chat_msg *m, size_t n, bool add_ass)
{
    struct lc_strbuf sys = { 0 };
    for (size_t i = 0; i < n; i++) {
        if (m[i].role == LC_ROLE_SYSTEM) {
            put_content(&sys, m, i, true);
            continue;
        }
        bool is_user = m[i].role == LC_ROLE_USER;
        lc_strbuf_put(b, is_user ? "<start_of_turn>user\n" : "<start_of_turn>model\n");
        if (is_user && sys.len > 0) {
            lc_strbuf_putn(b, sys.p, sys.len);
            lc_strbuf_put(b, "\n\n");
            sys.len = 0;
        }
        put_content(b, m, i, true);
        lc_strbuf_put(b, "<end_of_turn>\n");
    }
    if (sys.oom)
        b->oom = true;
    free(sys.p);
    if (add_ass)
        lc_strbuf_put(b, "<start_of_turn>model\n");
}

/* Orion: no system role either; the user turn already ends with the assistant header. */
static void render_orion(struct lc_strbuf *b, const struct lc_chat_msg *m, size_t n)
{
    struct lc_strbuf sys = { 0 };
    for (size_t i = 0; i < n; i++) {
        switch (m[i].role) {
        case LC_ROLE_SYSTEM:
            put_content(&sys, m, i, false);
            break;
        case LC_ROLE_USER:
            lc_strbuf_put(b, "Human: ");
            if (sys.len > 0) {
                lc_strbuf_putn(b, sys.p, sys.len);
                lc_strbuf_put(b, "\n\n");
                sys.len = 0;
            }
            put_content(b, m, i, false);
            lc_strbuf_put(b, "\n\nAssistant: </s>");
            break;
        case LC_ROLE_ASSISTANT:
            put_content(b, m, i, false);
            lc_strbuf_put(b, "</s>");
            break;
        }
    }
    if (sys.oom)
        b->oom = true;
    free(sys.p);
}

/*
 * The shape most families share: per message open, the role's name, mid, the content (trimmed of
 * surrounding white space when trim), close; then ass (the assistant's header) when add_ass.
 */
static void render_headed(struct lc_strbuf *b, const struct lc_chat_msg *m, size_t n, bool add_ass,
                          const char *open, const char *mid, bool trim, const char *close,
                          const char *ass)
{
    for (size_t i = 0; i < n; i++) {
        lc_strbuf_put(b, open);
        lc_strbuf_put(b, role_name(m[i].role));
        lc_strbuf_put(b, mid);
        put_content(b, m, i, trim);
        lc_strbuf_put(b, close);
    }
    if (add_ass)
        lc_strbuf_put(b, ass);
}

/*
 * The other common shape: each message is its role's prefix, the content (trimmed when trim),
 * its role's suffix (pre / suf indexed by enum lc_chat_role); then ass when add_ass.
 */
static void render_roles(struct lc_strbuf *b, const struct lc_chat_msg *m, size_t n, bool add_ass,
                         const char *const pre[3], const char *const suf[3], bool trim,
                         const char *ass)
{
    for (size_t i = 0; i < n; i++) {
        lc_strbuf_put(b, pre[m[i].role]);
        put_content(b, m, i, trim);
        lc_strbuf_put(b, suf[m[i].role]);
    }
    if (add_ass)
        lc_strbuf_put(b, ass);
}

/* Append the rendering of m[0..n-1] in family id to b (roles and contents already checked). */
static void render(struct lc_strbuf *b, int id, const struct lc_chat_msg *m, size_t n, bool add_ass)
{
    switch ((enum lc_chat_template_id)id) {
    case LC_CHAT_TEMPLATE_NONE:
        /* A base model reads one running text: each message continues the one before it, as
         * the chat shows it (inline).  The system prompt is a preamble: a blank line ends it
         * (unless it already ends with a newline), and the chat shows it as its own paragraph. */
        for (size_t i = 0; i < n; i++) {
            put_content(b, m, i, false);
            size_t sl = strlen(m[i].content);
            if (m[i].role == LC_ROLE_SYSTEM && sl > 0 && m[i].content[sl - 1] != '\n')
                lc_strbuf_put(b, "\n\n");
        }
        break;
    case LC_CHAT_TEMPLATE_CHATML:
        render_headed(b, m, n, add_ass, "<|im_start|>", "\n", false, "<|im_end|>\n",
                      "<|im_start|>assistant\n");
        break;
    case LC_CHAT_TEMPLATE_LLAMA_2:
    case LC_CHAT_TEMPLATE_LLAMA_2_SYS:
    case LC_CHAT_TEMPLATE_LLAMA_2_SYS_BOS:
    case LC_CHAT_TEMPLATE_LLAMA_2_SYS_STRIP:
        render_llama2(b, id, m, n);
        break;
    case LC_CHAT_TEMPLATE_MISTRAL_V1:
    case LC_CHAT_TEMPLATE_MISTRAL_V3:
    case LC_CHAT_TEMPLATE_MISTRAL_V3_TEKKEN:
        render_mistral(b, id, m, n);
        break;
    case LC_CHAT_TEMPLATE_MISTRAL_V7:
    case LC_CHAT_TEMPLATE_MISTRAL_V7_TEKKEN: {
        /* https://huggingface.co/mistralai/Mistral-Large-Instruct-2411 (v7) */
        const bool v7 = id == LC_CHAT_TEMPLATE_MISTRAL_V7;
        static const char *const suf[3] = {"[/SYSTEM_PROMPT]", "[/INST]", "</s>"};
        const char *const pre[3] = {v7 ? "[SYSTEM_PROMPT] " : "[SYSTEM_PROMPT]",
                                    v7 ? "[INST] " : "[INST]", v7 ? " " : ""};
        render_roles(b, m, n, false, pre, suf, false, "");
        break;
    }
    case LC_CHAT_TEMPLATE_PHI_3:
    case LC_CHAT_TEMPLATE_FALCON_3:
    case LC_CHAT_TEMPLATE_ZEPHYR:
        /* <|role|>\n content end, with end "<|end|>\n", "\n", "<|endoftext|>\n" */
        render_headed(b, m, n, add_ass, "<|", "|>\n", false,
                      id == LC_CHAT_TEMPLATE_PHI_3    ? "<|end|>\n"
                      : id == LC_CHAT_TEMPLATE_ZEPHYR ? "<|endoftext|>\n"
                                                      : "\n",
                      "<|assistant|>\n");
        break;
    case LC_CHAT_TEMPLATE_PHI_4:
        render_headed(b, m, n, add_ass, "<|im_start|>", "<|im_sep|>", false, "<|im_end|>",
                      "<|im_start|>assistant<|im_sep|>");
        break;
    case LC_CHAT_TEMPLATE_MONARCH:
        /* mlabonne/AlphaMonarch-7B: BOS opens every message; the first one is the tokenizer's */
        for (size_t i = 0; i < n; i++) {
            if (i > 0)
                lc_strbuf_put(b, "<s>");
            lc_strbuf_put(b, role_name(m[i].role));
            lc_strbuf_put(b, "\n");
            put_content(b, m, i, false);
            lc_strbuf_put(b, "</s>\n");
        }
        if (add_ass)
            lc_strbuf_put(b, "<s>assistant\n");
        break;
    case LC_CHAT_TEMPLATE_GEMMA:
        render_gemma(b, m, n, add_ass);
        break;
    case LC_CHAT_TEMPLATE_ORION:
        render_orion(b, m, n);
        break;
    case LC_CHAT_TEMPLATE_OPENCHAT: {
        static const char *const pre[3] = {"", "GPT4 Correct User: ", "GPT4 Correct Assistant: "};
        static const char *const suf[3] = {"<|end_of_turn|>", "<|end_of_turn|>", "<|end_of_turn|>"};
        render_roles(b, m, n, add_ass, pre, suf, false, "GPT4 Correct Assistant:");
        break;
    }
    case LC_CHAT_TEMPLATE_VICUNA:
    case LC_CHAT_TEMPLATE_VICUNA_ORCA: {
        const bool orca = id == LC_CHAT_TEMPLATE_VICUNA_ORCA;
        static const char *const suf_orca[3] = {"\n", "\n", "</s>\n"};
        static const char *const suf[3] = {"\n\n", "\n", "</s>\n"};
        const char *const pre[3] = {orca ? "SYSTEM: " : "", "USER: ", "ASSISTANT: "};
        render_roles(b, m, n, add_ass, pre, orca ? suf_orca : suf, false, "ASSISTANT:");
        break;
    }
    case LC_CHAT_TEMPLATE_DEEPSEEK: {
        static const char *const pre[3] = {"", "### Instruction:\n", "### Response:\n"};
        static const char *const suf[3] = {"", "\n", "\n<|EOT|>\n"};
        render_roles(b, m, n, add_ass, pre, suf, false, "### Response:\n");
        break;
    }
    case LC_CHAT_TEMPLATE_DEEPSEEK_2:
    case LC_CHAT_TEMPLATE_DEEPSEEK_3: {
        const bool v3 = id == LC_CHAT_TEMPLATE_DEEPSEEK_3;
        const char *const pre[3] = {"", v3 ? "<｜User｜>" : "User: ",
                                    v3 ? "<｜Assistant｜>" : "Assistant: "};
        const char *const suf[3] = {"\n\n", v3 ? "" : "\n\n", "<｜end▁of▁sentence｜>"};
        render_roles(b, m, n, add_ass, pre, suf, false, v3 ? "<｜Assistant｜>" : "Assistant:");
        break;
    }
    case LC_CHAT_TEMPLATE_COMMAND_R:
        for (size_t i = 0; i < n; i++) {
            lc_strbuf_put(b, m[i].role == LC_ROLE_SYSTEM ? "<|START_OF_TURN_TOKEN|><|SYSTEM_TOKEN|>"
                      : m[i].role == LC_ROLE_USER ? "<|START_OF_TURN_TOKEN|><|USER_TOKEN|>"
                                                  : "<|START_OF_TURN_TOKEN|><|CHATBOT_TOKEN|>");
            put_content(b, m, i, true);
            lc_strbuf_put(b, "<|END_OF_TURN_TOKEN|>");
        }
        if (add_ass)
            lc_strbuf_put(b, "<|START_OF_TURN_TOKEN|><|CHATBOT_TOKEN|>");
        break;
    case LC_CHAT_TEMPLATE_LLAMA_3:
        render_headed(b, m, n, add_ass, "<|start_header_id|>", "<|end_header_id|>\n\n", true,
                      "<|eot_id|>", "<|start_header_id|>assistant<|end_header_id|>\n\n");
        break;
    case LC_CHAT_TEMPLATE_CHATGLM_3:
    case LC_CHAT_TEMPLATE_CHATGLM_4:
    case LC_CHAT_TEMPLATE_GLMEDGE:
        /* <|role|>\n content; ChatGLM3 adds a space after the newline, ChatGLM3/4 open with a
         * fixed [gMASK] prefix, GLMEdge has none */
        if (id == LC_CHAT_TEMPLATE_CHATGLM_3)
            lc_strbuf_put(b, "[gMASK]sop");
        else if (id == LC_CHAT_TEMPLATE_CHATGLM_4)
            lc_strbuf_put(b, "[gMASK]<sop>");
        render_headed(b, m, n, add_ass, "<|", id == LC_CHAT_TEMPLATE_CHATGLM_3 ? "|>\n " : "|>\n",
                      false, "", "<|assistant|>");
        break;
    case LC_CHAT_TEMPLATE_MINICPM:
        for (size_t i = 0; i < n; i++) {
            if (m[i].role == LC_ROLE_USER) {
                lc_strbuf_put(b, "<用户>");
                put_content(b, m, i, true);
                lc_strbuf_put(b, "<AI>");
            } else {
                put_content(b, m, i, true);
            }
        }
        break;
    case LC_CHAT_TEMPLATE_EXAONE_3: {
        /* LGAI-EXAONE/EXAONE-3.0-7.8B-Instruct: the user turn has no [|endofturn|] */
        static const char *const pre[3] = {"[|system|]", "[|user|]", "[|assistant|]"};
        static const char *const suf[3] = {"[|endofturn|]\n", "\n", "[|endofturn|]\n"};
        render_roles(b, m, n, add_ass, pre, suf, true, "[|assistant|]");
        break;
    }
    case LC_CHAT_TEMPLATE_RWKV_WORLD:
        /* "\n\n" is the model's end of turn; the header after the last user turn is always
         * written, as llama.cpp does */
        for (size_t i = 0; i < n; i++) {
            lc_strbuf_put(b, m[i].role == LC_ROLE_SYSTEM ? "System: "
                      : m[i].role == LC_ROLE_USER ? "User: "
                                                  : "Assistant: ");
            put_content(b, m, i, true);
            lc_strbuf_put(b, "\n\n");
            if (m[i].role == LC_ROLE_USER && i == n - 1)
                lc_strbuf_put(b, "Assistant:");
        }
        break;
    case LC_CHAT_TEMPLATE_GRANITE:
        render_headed(b, m, n, add_ass, "<|start_of_role|>", "<|end_of_role|>", false,
                      "<|end_of_text|>\n", "<|start_of_role|>assistant<|end_of_role|>\n");
        break;
    case LC_CHAT_TEMPLATE_GIGACHAT: {
        /* ai-sage/GigaChat: only a leading system message is kept; every user turn is followed
         * by an empty function list */
        size_t i = 0;
        lc_strbuf_put(b, "<s>");
        if (n > 0 && m[0].role == LC_ROLE_SYSTEM) {
            put_content(b, m, 0, false);
            lc_strbuf_put(b, "<|message_sep|>");
            i = 1;
        }
        for (; i < n; i++) {
            if (m[i].role == LC_ROLE_USER) {
                lc_strbuf_put(b, "user<|role_sep|>");
                put_content(b, m, i, false);
                lc_strbuf_put(b, "<|message_sep|>available functions<|role_sep|>[]<|message_sep|>");
            } else if (m[i].role == LC_ROLE_ASSISTANT) {
                lc_strbuf_put(b, "assistant<|role_sep|>");
                put_content(b, m, i, false);
                lc_strbuf_put(b, "<|message_sep|>");
            }
        }
        if (add_ass)
            lc_strbuf_put(b, "assistant<|role_sep|>");
        break;
    }
    case LC_CHAT_TEMPLATE_MEGREZ:
        render_headed(b, m, n, add_ass, "<|role_start|>", "<|role_end|>", false, "<|turn_end|>",
                      "<|role_start|>assistant<|role_end|>");
        break;
    case LC_CHAT_TEMPLATE_COUNT:
        break;
    }
}

char *lc_chat_template_render(int id, const struct lc_chat_msg *msgs, size_t n,
                              bool add_assistant_prefix, struct lc_chat_span **spans,
                              size_t *n_spans, char **err)
{
    if (err)
        *err = NULL;
    if (spans) {
        *spans = NULL;
        *n_spans = 0;
    }
    if (id < 0 || id >= LC_CHAT_TEMPLATE_COUNT) {
        set_err(err, "chat template: unknown template id %d", id);
        return NULL;
    }
    if (n > 0 && !msgs) {
        set_err(err, "chat template: %zu messages but no message array", n);
        return NULL;
    }
    for (size_t i = 0; i < n; i++) {
        if (!role_name(msgs[i].role)) {
            set_err(err, "chat template: message %zu has invalid role %d", i, (int)msgs[i].role);
            return NULL;
        }
        if (!msgs[i].content) {
            set_err(err, "chat template: message %zu (%s) has no content", i,
                    role_name(msgs[i].role));
            return NULL;
        }
    }
    struct lc_strbuf b = { 0 }, out = { 0 };
    lc_strbuf_putn(&b, "", 0);
    lc_strbuf_putn(&out, "", 0);  /* an empty conversation still gives a valid "" */
    render(&b, id, msgs, n, add_assistant_prefix);
    bool ok = !b.oom && expand(b.p, b.len, msgs, n, &out, spans, n_spans);
    free(b.p);
    if (!ok) {
        free(out.p);
        if (spans) {
            free(*spans);
            *spans = NULL;
            *n_spans = 0;
        }
        set_err(err, "chat template %s: out of memory rendering %zu messages", families[id].name,
                n);
        return NULL;
    }
    return out.p;
}

char *lc_chat_template_apply(int id, const struct lc_chat_msg *msgs, size_t n,
                             bool add_assistant_prefix, char **err)
{
    return lc_chat_template_render(id, msgs, n, add_assistant_prefix, NULL, NULL, err);
}

/* ------------------------------------------------------------------ the model's own template */

struct lc_chat_tmpl {
    int family;
    struct lc_jinja *jinja;         /* NULL: the family renders */
    char *bos, *eos;
    const char *stops[16];          /* for a Jinja template of no known family */
    bool own_stops;
};

/* End-of-turn texts looked for in a template of no known family, for its stop strings. */
static const char *const eot_texts[] = {
    "<|im_end|>", "<|eot_id|>", "<|end|>", "<end_of_turn>", "<|endoftext|>", "<|end_of_text|>",
    "<|END_OF_TURN_TOKEN|>", "<|eom_id|>", "<|end_of_turn|>", "<|EOT|>", "[/INST]", NULL
};

static char *dup_or_empty(const char *s)
{
    return strdup(s ? s : "");
}

struct lc_chat_tmpl *lc_chat_tmpl_new(const char *jinja_or_name, const char *bos_text,
                                      const char *eos_text, char **note)
{
    if (note)
        *note = NULL;
    struct lc_chat_tmpl *t = calloc(1, sizeof(*t));
    if (!t)
        return NULL;
    t->bos = dup_or_empty(bos_text);
    t->eos = dup_or_empty(eos_text);
    if (!t->bos || !t->eos) {
        lc_chat_tmpl_free(t);
        return NULL;
    }
    if (!jinja_or_name) {
        t->family = LC_CHAT_TEMPLATE_NONE;
        return t;
    }
    int id = lc_chat_template_from_name(jinja_or_name);
    if (id >= 0) {
        t->family = id;
        return t;
    }
    id = lc_chat_template_detect(jinja_or_name);
    bool known = id >= 0;
    t->family = known ? id : LC_CHAT_TEMPLATE_CHATML;
    char *err = NULL;
    t->jinja = lc_jinja_parse(jinja_or_name, &err);
    if (!t->jinja) {
        if (note) {
            const char *fam = families[t->family].name;
            size_t need = (err ? strlen(err) : 16) + strlen(fam) + 64;
            *note = malloc(need);
            if (*note)
                snprintf(*note, need, "chat template: %s; using the built-in '%s' format",
                         err ? err : "out of memory", fam);
        }
        free(err);
        return t;
    }
    if (!known) {
        size_t k = 0;
        for (int i = 0; eot_texts[i] && k + 2 < sizeof(t->stops) / sizeof(t->stops[0]); i++)
            if (strstr(jinja_or_name, eot_texts[i]))
                t->stops[k++] = eot_texts[i];
        if (t->eos[0]) {
            bool dup = false;
            for (size_t i = 0; i < k; i++)
                dup = dup || !strcmp(t->stops[i], t->eos);
            if (!dup)
                t->stops[k++] = t->eos;
        }
        t->stops[k] = NULL;
        t->own_stops = true;
    }
    return t;
}

void lc_chat_tmpl_free(struct lc_chat_tmpl *t)
{
    if (!t)
        return;
    lc_jinja_free(t->jinja);
    free(t->bos);
    free(t->eos);
    free(t);
}

const char *lc_chat_tmpl_name(const struct lc_chat_tmpl *t)
{
    if (!t)
        return families[LC_CHAT_TEMPLATE_NONE].name;
    return t->jinja ? "jinja" : families[t->family].name;
}

int lc_chat_tmpl_family(const struct lc_chat_tmpl *t)
{
    return t ? t->family : LC_CHAT_TEMPLATE_NONE;
}

const char *const *lc_chat_tmpl_stop_strings(const struct lc_chat_tmpl *t)
{
    if (t && t->own_stops)
        return t->stops;
    return lc_chat_template_stop_strings(t ? t->family : LC_CHAT_TEMPLATE_NONE);
}

/*
 * The Jinja rendering with spans from the per-byte origins: a span is a maximal run of bytes
 * that copy consecutive bytes of one message.  Returns NULL (and no error) when the rendering
 * fails or holds a byte computed from a content, so that the caller falls back.
 */
static char *render_jinja(const struct lc_chat_tmpl *t, const struct lc_chat_msg *msgs, size_t n,
                          bool add_gen, struct lc_chat_span **spans, size_t *n_spans, char **why)
{
    struct lc_jinja_msg *jm = calloc(n ? n : 1, sizeof(*jm));
    if (!jm)
        return NULL;
    for (size_t i = 0; i < n; i++) {
        if ((unsigned)msgs[i].role > LC_ROLE_ASSISTANT || !msgs[i].content) {
            free(jm);
            return NULL;
        }
        jm[i].role = role_name(msgs[i].role);
        jm[i].content = msgs[i].content;
    }
    struct lc_jinja_chat vars = { jm, n, add_gen, t->bos, t->eos, NULL };
    struct lc_jinja_origin *o = NULL;
    char *out = lc_jinja_render_chat(t->jinja, &vars, &o, why);
    free(jm);
    if (!out)
        return NULL;
    size_t len = strlen(out);
    struct lc_chat_span *v = NULL;
    size_t nv = 0, cap = 0;
    bool ok = true;
    for (size_t j = 0; j < len && ok;) {
        if (o[j].msg == 0) {
            j++;
            continue;
        }
        if (o[j].idx == LC_JINJA_DERIVED) {
            ok = false;
            break;
        }
        size_t k = j + 1;
        while (k < len && o[k].msg == o[j].msg && o[k].idx == o[j].idx + (k - j))
            k++;
        if (spans)
            ok = push_span(&v, &nv, &cap, (struct lc_chat_span){ j, k - j, o[j].msg - 1, o[j].idx });
        j = k;
    }
    free(o);
    if (!ok) {
        free(out);
        free(v);
        if (why)
            *why = strdup("it writes text computed from a message (not a copy of it)");
        return NULL;
    }
    if (spans) {
        *spans = v;
        *n_spans = nv;
    }
    return out;
}

char *lc_chat_tmpl_render(const struct lc_chat_tmpl *t, const struct lc_chat_msg *msgs,
                          size_t n, bool add_generation_prompt, struct lc_chat_span **spans,
                          size_t *n_spans, char **err)
{
    return lc_chat_tmpl_render_note(t, msgs, n, add_generation_prompt, spans, n_spans, NULL, err);
}

char *lc_chat_tmpl_render_note(const struct lc_chat_tmpl *t, const struct lc_chat_msg *msgs,
                               size_t n, bool add_generation_prompt, struct lc_chat_span **spans,
                               size_t *n_spans, char **note, char **err)
{
    if (note)
        *note = NULL;
    if (spans) {
        *spans = NULL;
        *n_spans = 0;
    }
    if (!t) {
        set_err(err, "chat template: none");
        return NULL;
    }
    if (t->jinja && (msgs || n == 0)) {
        char *why = NULL;
        char *out = render_jinja(t, msgs, n, add_generation_prompt, spans, n_spans,
                                 note ? &why : NULL);
        if (out)
            return out;
        if (note) {
            const char *fam = families[t->family].name;
            if (asprintf(note, "chat template: %s; this prompt is in the built-in '%s' format",
                         why ? why : "the rendering failed", fam) < 0)
                *note = NULL;
        }
        free(why);
    }
    return lc_chat_template_render(t->family, msgs, n, add_generation_prompt, spans, n_spans, err);
}
