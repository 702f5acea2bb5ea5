/*
 * test-jinja-engine.c - the engine runs the model's own Jinja chat template.
 *
 * Writes a copy of stories260K.gguf with a `tokenizer.chat_template`, starts the engine on it
 * and checks: the template is run by the interpreter ("template=jinja"), the prompt is the
 * Jinja rendering, and a user message holding the EOS text "</s>" is read as plain characters
 * while the template's own "</s>" is the EOS token (the spans of lc_chat_tmpl_render).
 */
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine.h"
#include "llm/chat_template.h"
#include "llm/gguf.h"
#include "llm/model.h"
#include "llm/tokenizer.h"
#include "testutil.h"

static const char *TMPL =
    "{% for m in messages %}[{{ m.role }}] {{ m.content | trim }}</s>{% endfor %}"
    "{% if add_generation_prompt %}[assistant]{% endif %}";

/* Copy src to dst with the chat template set; 0 or -1. */
static int write_copy(const char *src, const char *dst)
{
    char *err = NULL;
    struct lc_gguf *g = lc_gguf_open(src, &err);
    if (!g) {
        fprintf(stderr, "%s\n", err ? err : "open");
        free(err);
        return -1;
    }
    struct lc_gguf_writer *w = lc_gguf_writer_new();
    int rc = w && !lc_gguf_writer_copy_kvs(w, g) &&
             !lc_gguf_writer_set_str(w, "tokenizer.chat_template", TMPL) ? 0 : -1;
    for (int64_t i = 0; rc == 0 && i < lc_gguf_n_tensors(g); i++) {
        const struct lc_gguf_tensor *t = lc_gguf_tensor(g, i);
        rc = lc_gguf_writer_add_tensor(w, t->name, t->type, t->n_dims, t->ne);
    }
    if (rc == 0)
        rc = lc_gguf_writer_begin(w, dst, &err);
    for (int64_t i = 0; rc == 0 && i < lc_gguf_n_tensors(g); i++) {
        const struct lc_gguf_tensor *t = lc_gguf_tensor(g, i);
        rc = lc_gguf_writer_write_data(w, t->data, t->nbytes, &err);
    }
    if (rc == 0)
        rc = lc_gguf_writer_end(w, &err);
    if (rc)
        fprintf(stderr, "write %s: %s\n", dst, err ? err : "?");
    free(err);
    lc_gguf_writer_free(w);
    lc_gguf_free(g);
    return rc;
}

int main(void)
{
    char src[1024], dir[] = "/tmp/lc-jinja-XXXXXX", dst[1100];
    tu_shared("models/stories260K.gguf", src, sizeof(src));
    if (access(src, R_OK) != 0) {
        fprintf(stderr, "%s missing: skipped\n", src);
        return 77;
    }
    if (!mkdtemp(dir))
        return 1;
    snprintf(dst, sizeof(dst), "%s/chat.gguf", dir);
    CHECK(write_copy(src, dst) == 0, "write the model copy");

    char *err = NULL;
    struct lc_engine_config cfg = { .model_path = dst, .n_ctx = 256, .n_threads = 1,
                                    .n_batch = 512, .n_predict = 1, .verbose_prompt = true };
    cfg.sampling = lc_sampler_default_params();
    cfg.sampling.temp = 0;
    struct lc_engine *e = lc_engine_start(&cfg, &err);
    CHECK(e != NULL, "start: %s", err ? err : "");
    char tmpl_name[64] = "", note[1024] = "";
    int n_eval = -1, errors = 0;
    bool submitted = false;
    for (int spins = 0; e && spins < 600;) {
        struct lc_event ev;
        if (!lc_engine_poll(e, &ev)) {
            struct pollfd p = { lc_engine_fd(e), POLLIN, 0 };
            if (poll(&p, 1, 100) == 0)
                spins++;
            continue;
        }
        if (ev.type == LC_EV_INFO && !strncmp(ev.text, "template=", 9))
            snprintf(tmpl_name, sizeof(tmpl_name), "%.*s", (int)ev.len - 9, ev.text + 9);
        if (ev.type == LC_EV_NOTE && (note[0] || !strncmp(ev.text, "prompt:", 7))) {
            size_t have = strlen(note);
            snprintf(note + have, sizeof(note) - have, "%.*s", (int)ev.len, ev.text);
        }
        if (ev.type == LC_EV_ERROR)
            errors++;
        if (ev.type == LC_EV_LOADED && !ev.more && !submitted) {
            lc_engine_submit(e, "  Hi </s> there \n");
            submitted = true;
        }
        if (ev.type == LC_EV_DONE) {
            n_eval = (int)ev.x;
            break;
        }
    }
    lc_engine_free(e);
    CHECK(errors == 0, "engine errors");
    CHECK(!strcmp(tmpl_name, "jinja"), "template=%s", tmpl_name);
    /* (a SentencePiece vocab puts a space before the text that follows a special token) */
    CHECK(strstr(note, "[user] Hi </s> there</s> [assistant]") != NULL, "prompt note: %s", note);

    /* the expected tokens: BOS, template text with special tokens, the content as plain text */
    struct lc_model *m = lc_model_load(src, true, &err);
    CHECK(m != NULL, "load vocab");
    if (m) {
        const struct lc_vocab *v = m->vocab;
        const char *text = "[user] Hi </s> there</s>[assistant]";
        uint8_t plain[64] = { 0 };
        memset(plain + 7, 1, strlen("Hi </s> there"));
        int32_t ids[128];
        int32_t n_mixed = lc_tokenize_mixed(v, text, strlen(text), plain, true, true, true, ids, 128);
        int32_t n_special = lc_tokenize(v, text, strlen(text), true, true, ids, 128);
        int n_eos = 0;
        n_mixed = lc_tokenize_mixed(v, text, strlen(text), plain, true, true, true, ids, 128);
        for (int32_t i = 0; i < n_mixed; i++)
            n_eos += ids[i] == lc_vocab_eos(v);
        CHECK(n_eos == 1, "one EOS token (the template's), got %d", n_eos);
        CHECK(n_special != n_mixed, "the user's </s> changes the count when special (%d)", n_special);
        CHECK(n_eval == n_mixed, "prompt tokens evaluated %d, expected %d", n_eval, n_mixed);
        lc_model_free(m);
    }
    unlink(dst);
    rmdir(dir);
    return tu_finish("test-jinja-engine");
}
