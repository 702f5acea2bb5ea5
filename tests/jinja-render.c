/*
 * jinja-render.c - render chat templates for tests/test-jinja-oracle.sh.
 *
 * Usage: jinja-render CASES.json
 * CASES.json is an array of {"template", "bos", "eos", "add_generation_prompt",
 * "messages": [{"role", "content"}, ...]}.  Prints a JSON array with, per case,
 * {"out": text} or {"error": message} from lc_jinja_render_chat.
 *
 * Every case is also checked (exit status 2 and a message on stderr when one fails):
 *   - every output byte whose origin is (message k, byte i) equals byte i of message k;
 *   - lc_chat_tmpl_render (the engine's entry point; roles system/user/assistant only) gives
 *     the same text when the Jinja rendering has no derived bytes, and each of its spans
 *     satisfies out[off..off+len) == content[skip..skip+len), in order, without overlap.
 */
#include "chat_template.h"
#include "jinja.h"

#include <json-c/json.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *jstr(json_object *o, const char *k)
{
    json_object *v;
    if (!json_object_object_get_ex(o, k, &v) || !json_object_is_type(v, json_type_string))
        return NULL;
    return json_object_get_string(v);
}

/* Check the per-byte origins of a Jinja rendering; returns the number of derived bytes or
 * -1 when an origin is wrong. */
static long check_origins(const char *out, const struct lc_jinja_origin *o,
                          const struct lc_jinja_msg *m, size_t n)
{
    long derived = 0;
    size_t len = strlen(out);
    for (size_t j = 0; j < len; j++) {
        if (o[j].msg == 0)
            continue;
        if (o[j].msg > n)
            return -1;
        if (o[j].idx == LC_JINJA_DERIVED) {
            derived++;
            continue;
        }
        const char *c = m[o[j].msg - 1].content;
        if (o[j].idx >= strlen(c) || c[o[j].idx] != out[j])
            return -1;
    }
    return derived;
}

/* The span invariant of lc_chat_tmpl_render; returns NULL or what is wrong. */
static const char *check_spans(const char *out, const struct lc_chat_span *s, size_t ns,
                               const struct lc_chat_msg *m, size_t n)
{
    size_t len = strlen(out), end = 0;
    for (size_t k = 0; k < ns; k++) {
        if (s[k].msg >= n)
            return "span of a message that does not exist";
        if (s[k].off < end)
            return "spans overlap or are out of order";
        if (s[k].off + s[k].len > len)
            return "span past the end of the output";
        const char *c = m[s[k].msg].content;
        if (s[k].skip + s[k].len > strlen(c))
            return "span past the end of the content";
        if (memcmp(out + s[k].off, c + s[k].skip, s[k].len) != 0)
            return "span bytes differ from the content";
        end = s[k].off + s[k].len;
    }
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: %s CASES.json\n", argv[0]);
        return 1;
    }
    json_object *cases = json_object_from_file(argv[1]);
    if (!cases || !json_object_is_type(cases, json_type_array)) {
        fprintf(stderr, "%s: cannot read a JSON array\n", argv[1]);
        return 1;
    }
    json_object *res = json_object_new_array();
    int status = 0;
    size_t nc = json_object_array_length(cases);
    for (size_t ci = 0; ci < nc; ci++) {
        json_object *c = json_object_array_get_idx(cases, ci), *jm, *ag;
        const char *tmpl = jstr(c, "template");
        json_object_object_get_ex(c, "messages", &jm);
        json_object_object_get_ex(c, "add_generation_prompt", &ag);
        size_t n = jm ? json_object_array_length(jm) : 0;
        struct lc_jinja_msg *m = calloc(n ? n : 1, sizeof(*m));
        struct lc_chat_msg *cm = calloc(n ? n : 1, sizeof(*cm));
        bool plain_roles = true;
        for (size_t i = 0; i < n; i++) {
            json_object *x = json_object_array_get_idx(jm, i);
            m[i].role = jstr(x, "role");
            m[i].content = jstr(x, "content");
            cm[i].content = m[i].content;
            if (!strcmp(m[i].role, "system"))
                cm[i].role = LC_ROLE_SYSTEM;
            else if (!strcmp(m[i].role, "user"))
                cm[i].role = LC_ROLE_USER;
            else if (!strcmp(m[i].role, "assistant"))
                cm[i].role = LC_ROLE_ASSISTANT;
            else
                plain_roles = false;
        }
        struct lc_jinja_chat vars = { m, n, json_object_get_boolean(ag), jstr(c, "bos"),
                                      jstr(c, "eos"), NULL };
        char *err = NULL;
        json_object *r = json_object_new_object();
        struct lc_jinja *t = lc_jinja_parse(tmpl, &err);
        struct lc_jinja_origin *o = NULL;
        char *out = t ? lc_jinja_render_chat(t, &vars, &o, &err) : NULL;
        long derived = 0;
        if (out) {
            json_object_object_add(r, "out", json_object_new_string(out));
            derived = check_origins(out, o, m, n);
            if (derived < 0) {
                fprintf(stderr, "case %zu: a byte's origin is wrong\n", ci);
                status = 2;
            }
        } else {
            json_object_object_add(r, "error", json_object_new_string(err ? err : "?"));
        }
        if (plain_roles) {
            struct lc_chat_tmpl *ct = lc_chat_tmpl_new(tmpl, vars.bos_token, vars.eos_token, NULL);
            struct lc_chat_span *sp = NULL;
            size_t ns = 0;
            char *err2 = NULL;
            char *out2 = lc_chat_tmpl_render(ct, cm, n, vars.add_generation_prompt, &sp, &ns, &err2);
            const char *why = out2 ? check_spans(out2, sp, ns, cm, n) : NULL;
            if (why) {
                fprintf(stderr, "case %zu: %s\n", ci, why);
                status = 2;
            }
            if (out && derived == 0 && (!out2 || strcmp(out, out2) != 0)) {
                fprintf(stderr, "case %zu: lc_chat_tmpl_render differs from the Jinja rendering\n",
                        ci);
                status = 2;
            }
            json_object_object_add(r, "spans", json_object_new_int((int)ns));
            free(out2);
            free(sp);
            free(err2);
            lc_chat_tmpl_free(ct);
        }
        json_object_array_add(res, r);
        free(out);
        free(o);
        free(err);
        lc_jinja_free(t);
        free(m);
        free(cm);
    }
    fputs(json_object_to_json_string_ext(res, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE),
          stdout);
    fputc('\n', stdout);
    json_object_put(res);
    json_object_put(cases);
    return status;
}
