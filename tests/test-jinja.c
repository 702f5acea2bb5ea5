/*
 * test-jinja.c - the Jinja interpreter (src/llm/jinja.c) and lc_chat_tmpl (chat_template.c).
 *
 * Expected outputs are jinja2 3.1's, rendered as transformers does (trim_blocks,
 * lstrip_blocks, loopcontrols, tojson = json.dumps(ensure_ascii=False)), for the conversation
 * below; tests/test-jinja-oracle.sh compares whole real templates with jinja2 itself.
 */
#include "chat_template.h"
#include "jinja.h"
#include "testutil.h"

#include <string.h>

static const struct lc_jinja_msg MSGS[] = {
    { "system", "Sys" }, { "user", " Hi <|im_end|> " }, { "assistant", "Yo" }
};

struct tcase {
    const char *tmpl, *want;
};

/* templates and jinja2's renderings */
static const struct tcase CASES[] = {
    { "{% for m in messages %}{{ loop.index }}{{ loop.index0 }}{{ loop.first }}{{ loop.last }}{{ loop.length }}{{ loop.revindex }}|{% endfor %}",
      "10TrueFalse33|21FalseFalse32|32FalseTrue31|" },
    { "{% if messages|length > 5 %}big{% elif messages|length == 3 %}three{% else %}other{% endif %}",
      "three" },
    { "{% set ns = namespace(n=0, s='') %}{% for m in messages %}{% set ns.n = ns.n + 1 %}{% set ns.s = ns.s ~ m.role[0] %}{% endfor %}{{ ns.n }}:{{ ns.s }}",
      "3:sua" },
    { "{% set x = 1 %}{% for i in [1, 2] %}{% set x = x + i %}{{ x }}{% endfor %}{{ x }}",
      "231" },
    { "{% macro turn(role, text='none') %}<{{ role }}>{{ text | trim }}</{{ role }}>{% endmacro %}{{ turn('a', messages[1].content) }}{{ turn(role='b') }}",
      "<a>Hi <|im_end|></a><b>none</b>" },
    { "[{{ messages[1]['content'] | trim }}][{{ messages[1].content.strip() }}][{{ messages[1].content.lstrip() }}][{{ messages[1].content.rstrip() }}]",
      "[Hi <|im_end|>][Hi <|im_end|>][Hi <|im_end|> ][ Hi <|im_end|>]" },
    { "{{ messages[1].content.split() }}{{ 'a,b,,c'.split(',') }}{{ 'a,b,c'.split(',', 1) }}",
      "['Hi', '<|im_end|>']['a', 'b', '', 'c']['a', 'b,c']" },
    { "{{ messages[0].content.startswith('Sy') }}{{ messages[0].content.endswith(('x', 'ys')) }}{{ 'abc'.upper() }}{{ 'ABC' | lower }}",
      "TrueTrueABCabc" },
    { "{{ messages[1:] | length }}{{ (messages[::-1] | first).role }}{{ (messages | last)['role'] }}{{ 'hello'[1:3] }}{{ 'hello'[::-1] }}{{ [1,2,3][-1] }}",
      "2assistantassistantelolleh3" },
    { "{{ {'a': 1, 'b': [true, none, 'x\"y']} | tojson }}|{{ {'k': 'v'} | tojson(indent=2) }}|{{ 'é\\n' | tojson }}",
      "{\"a\": 1, \"b\": [true, null, \"x\\\"y\"]}|{\n  \"k\": \"v\"\n}|\"é\\n\"" },
    { "{% for k, v in {'x': 1, 'y': 2} | items %}{{ k }}={{ v }};{% endfor %}{% for k, v in {'z': 3}.items() %}{{ k }}{{ v }}{% endfor %}",
      "x=1;y=2;z3" },
    { "{{ undefined_thing | default('dflt') }}{{ '' | default('e', true) }}{{ undefined_thing }}[{{ undefined_thing is defined }}][{{ tools is none }}][{{ 'x' is string }}][{{ {} is mapping }}]",
      "dflte[False][True][True][True]" },
    { "{{ 'a' in 'cat' }}{{ 'z' not in ['a', 'b'] }}{{ 'role' in messages[0] }}{{ 1 in [1] }}",
      "TrueTrueTrueTrue" },
    { "{{ ['a', 'b', 'c'] | join(', ') }}|{{ messages | map(attribute='role') | join('/') }}|{{ messages | selectattr('role', 'equalto', 'user') | list | length }}|{{ messages | rejectattr('role', 'equalto', 'user') | map(attribute='role') | join }}",
      "a, b, c|system/user/assistant|1|systemassistant" },
    { "{{ 'a-b-a' | replace('a', 'x') }}{{ 3 | string }}{{ '42' | int + 1 }}{{ 7 // 2 }}{{ 7 % 3 }}{{ 7 / 2 }}{{ 2 ** 3 }}{{ -7 // 2 }}{{ 'ab' * 2 }}",
      "x-b-x343313.58-4abab" },
    { "  {% if true %}\n    kept\n  {% endif %}\nend",
      "    kept\nend" },
    { "a  {%- if true -%}  b  {%- endif -%}  c\n{{- ' d ' -}}\n e {# comment #}\nf {#- c -#} g",
      "abc d e fg" },
    { "{% for i in range(5) %}{% if i == 1 %}{% continue %}{% endif %}{% if i == 3 %}{% break %}{% endif %}{{ i }}{% endfor %}{% for x in [] %}no{% else %}empty{% endfor %}",
      "02empty" },
    { "{% for m in messages if m.role != 'system' %}{{ m.role }}{{ loop.index }}{% endfor %}",
      "user1assistant2" },
    { "{{ 'yes' if add_generation_prompt else 'no' }}{{ bos_token }}{{ eos_token }}{{ none }}{{ True }}{{ 1.5 }}{{ 2.0 }}{{ [1, 'a'] }}",
      "yes<s></s>NoneTrue1.52.0[1, 'a']" },
    { "{% set a, b = [1, 2] %}{{ a }}{{ b }}{% set c %}block{{ a }}{% endset %}{{ c | upper }}",
      "12BLOCK1" },
    { "{{ 'x' ~ 1 ~ none }}{{ messages[0].content + '!' }}{{ 'Hello World' | title }}{{ 'hello' | capitalize }}",
      "x1NoneSys!Hello WorldHello" },
    { "{{ 'ab\\tc\\u00e9\\x41' }}{{ \"it's\" }}{{ 'a' 'b' }}",
      "ab\tcéAit'sab" },
    { "{{ messages[5] is defined }}{{ messages[0].nope is defined }}{{ (messages|length) is divisibleby 3 }}{{ 3 is odd }}",
      "FalseFalseTrueTrue" },
    { "{% if messages[0]['role'] == 'system' %}{% set messages = messages[1:] %}{% endif %}{{ messages | length }}",
      "2" },
    { "{{ enable_thinking is defined and enable_thinking is false }}{{ add_generation_prompt is true }}{{ raise_exception is defined }}",
      "FalseTrueTrue" },
    { "{% filter upper %}ab{{ 'c' }}{% endfilter %}|{% filter replace('a', 'b') %}aa{% endfilter %}",
      "ABC|bb" },
    /* transformers' {% generation %} renders its body */
    { "{% for m in messages %}{% generation %}{{ m.role[0] }}{% endgeneration %}{% endfor %}",
      "sua" },
};

/* templates that cannot run, and the start of our message (line, column, what) */
static const struct tcase ERRORS[] = {
    { "{{ raise_exception('Roles must alternate') }}",
      "line 1, column 4: raise_exception: Roles must alternate" },
    { "{{ nope + 'x' }}",
      "line 1, column 9: 'nope' is undefined" },
    { "{{ nope.attr }}",
      "line 1, column 8: 'nope' is undefined" },
    { "{% if true %}\n{% for m in messages %}\n{% endif %}",
      "line 3, column 4: unexpected 'endif' (expected 'else')" },
    { "{% if x %}never closed",
      "line 1, column 23: unexpected end of template: expected 'endif' to close the block at line 1, column 1" },
    { "{{ 1 +* 2 }}",
      "line 1, column 7: expected an expression, got '*'" },
    { "hello {{ 'x' | no_such_filter }}",
      "line 1, column 16: unknown filter 'no_such_filter'" },
    { "{% frobnicate %}",
      "line 1, column 4: unknown statement 'frobnicate'" },
    { "{{ 'a' + 1 }}",
      "line 1, column 8: unsupported operand types for arithmetic: string and int" },
    { "{% set l = [] %}{{ l.append(1) }}",
      "line 1, column 21: access to attribute 'append' of 'list' object is unsafe" },
    { "{{ 'unterminated }}",
      "line 1, column 4: unterminated string" },
};

/* Render tmpl for MSGS; returns the malloc'd text or NULL with *err. */
static char *render(const char *tmpl, struct lc_jinja_origin **o, char **err)
{
    struct lc_jinja *t = lc_jinja_parse(tmpl, err);
    if (!t)
        return NULL;
    struct lc_jinja_chat vars = { MSGS, 3, true, "<s>", "</s>", NULL };
    char *out = lc_jinja_render_chat(t, &vars, o, err);
    lc_jinja_free(t);
    return out;
}

static void test_outputs(void)
{
    for (size_t i = 0; i < sizeof(CASES) / sizeof(CASES[0]); i++) {
        char *err = NULL;
        char *out = render(CASES[i].tmpl, NULL, &err);
        CHECK(out && !strcmp(out, CASES[i].want), "case %zu: %s\n  got  %s\n  want %s", i,
              CASES[i].tmpl, out ? out : err, CASES[i].want);
        free(out);
        free(err);
    }
}

static void test_errors(void)
{
    for (size_t i = 0; i < sizeof(ERRORS) / sizeof(ERRORS[0]); i++) {
        char *err = NULL;
        char *out = render(ERRORS[i].tmpl, NULL, &err);
        CHECK(!out && err && !strncmp(err, ERRORS[i].want, strlen(ERRORS[i].want)),
              "error %zu: %s\n  got  %s\n  want %s", i, ERRORS[i].tmpl, out ? out : err,
              ERRORS[i].want);
        free(out);
        free(err);
    }
    /* enable_thinking and friends: undefined unless given */
    struct lc_jinja *t = lc_jinja_parse("{{ enable_thinking is defined }}{{ enable_thinking }}", NULL);
    const char *const extra[] = { "enable_thinking", NULL };
    struct lc_jinja_chat vars = { MSGS, 3, false, NULL, NULL, extra };
    char *out = lc_jinja_render_chat(t, &vars, NULL, NULL);
    CHECK(out && !strcmp(out, "TrueTrue"), "extra_true: %s", out ? out : "(null)");
    free(out);
    lc_jinja_free(t);
}

/* Origins: copied bytes keep (message, byte); upper-cased ones are derived. */
static void test_origins(void)
{
    struct lc_jinja_origin *o = NULL;
    char *out = render("[{{ messages[1].content | trim }}]{{ messages[0].content | upper }}", &o, NULL);
    CHECK(out && !strcmp(out, "[Hi <|im_end|>]SYS"), "origins text: %s", out ? out : "(null)");
    if (out && o) {
        CHECK(o[0].msg == 0, "'[' is template text");
        CHECK(o[1].msg == 2 && o[1].idx == 1, "H is message 1 byte 1: %u %u", o[1].msg, o[1].idx);
        CHECK(o[13].msg == 2 && o[13].idx == 13, "> is message 1 byte 13: %u %u", o[13].msg, o[13].idx);
        CHECK(o[14].msg == 0, "']' is template text");
        CHECK(o[15].msg == 1 && o[15].idx == 0, "S keeps its origin (unchanged by upper)");
        CHECK(o[16].msg == 1 && o[16].idx == LC_JINJA_DERIVED, "Y is derived");
    }
    free(out);
    free(o);
}

/* lc_chat_tmpl: spans, fallback, names, stop strings */
static void test_chat_tmpl(void)
{
    const struct lc_chat_msg m[] = {
        { LC_ROLE_SYSTEM, "  sys  " }, { LC_ROLE_USER, "I typed <|eot_id|> and </s>" },
        { LC_ROLE_ASSISTANT, "ok" }, { LC_ROLE_USER, "\nbye\n" }
    };
    const char *llama3 =
        "{{ bos_token }}{% for message in messages %}{{ '<|start_header_id|>' + message['role'] + "
        "'<|end_header_id|>\n\n' + message['content'] | trim + '<|eot_id|>' }}{% endfor %}"
        "{% if add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>\n\n' }}{% endif %}";
    char *note = NULL;
    struct lc_chat_tmpl *t = lc_chat_tmpl_new(llama3, "<|begin_of_text|>", "<|eot_id|>", &note);
    CHECK(t && !note, "llama3 jinja: note %s", note ? note : "");
    CHECK(t && !strcmp(lc_chat_tmpl_name(t), "jinja"), "name %s", t ? lc_chat_tmpl_name(t) : "");
    CHECK(t && lc_chat_tmpl_family(t) == LC_CHAT_TEMPLATE_LLAMA_3, "family");
    CHECK(t && !strcmp(lc_chat_tmpl_stop_strings(t)[0], "<|eot_id|>"), "family stop strings");
    struct lc_chat_span *sp = NULL;
    size_t ns = 0;
    char *out = lc_chat_tmpl_render(t, m, 4, true, &sp, &ns, NULL);
    const char *want = "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nsys<|eot_id|>"
                       "<|start_header_id|>user<|end_header_id|>\n\nI typed <|eot_id|> and </s><|eot_id|>"
                       "<|start_header_id|>assistant<|end_header_id|>\n\nok<|eot_id|>"
                       "<|start_header_id|>user<|end_header_id|>\n\nbye<|eot_id|>"
                       "<|start_header_id|>assistant<|end_header_id|>\n\n";
    CHECK(out && !strcmp(out, want), "llama3 rendering: %s", out ? out : "(null)");
    CHECK(ns == 4, "4 spans, got %zu", ns);
    size_t want_skip[] = { 2, 0, 0, 1 }, want_len[] = { 3, 27, 2, 3 };
    for (size_t k = 0; out && k < ns && k < 4; k++) {
        CHECK(sp[k].msg == k && sp[k].skip == want_skip[k] && sp[k].len == want_len[k],
              "span %zu: msg %zu skip %zu len %zu", k, sp[k].msg, sp[k].skip, sp[k].len);
        CHECK(!memcmp(out + sp[k].off, m[sp[k].msg].content + sp[k].skip, sp[k].len),
              "span %zu bytes", k);
    }
    free(out);
    free(sp);
    lc_chat_tmpl_free(t);

    /* a content transformed (upper): no span possible, so the family renders instead */
    t = lc_chat_tmpl_new("{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content | upper }}"
                         "<|im_end|>\n{% endfor %}", "", "", NULL);
    out = lc_chat_tmpl_render(t, m, 2, true, &sp, &ns, NULL);
    char *fam = lc_chat_template_render(LC_CHAT_TEMPLATE_CHATML, m, 2, true, NULL, NULL, NULL);
    CHECK(out && fam && !strcmp(out, fam), "upper falls back to chatml: %s", out ? out : "(null)");
    free(out);
    free(fam);
    free(sp);
    lc_chat_tmpl_free(t);

    /* a template that raises for a system message: the family (llama2 folds it) */
    t = lc_chat_tmpl_new("{% for m in messages %}{% if m.role == 'system' %}{{ raise_exception('no system') }}"
                         "{% endif %}[INST] {{ m.content }} [/INST]{% endfor %}", "<s>", "</s>", NULL);
    out = lc_chat_tmpl_render(t, m, 2, true, &sp, &ns, NULL);
    fam = lc_chat_template_render(lc_chat_tmpl_family(t), m, 2, true, NULL, NULL, NULL);
    CHECK(out && fam && !strcmp(out, fam), "raise falls back: %s", out ? out : "(null)");
    free(out);
    free(fam);
    free(sp);
    out = lc_chat_tmpl_render(t, m + 1, 1, true, &sp, &ns, NULL);
    CHECK(out && !strcmp(out, "[INST] I typed <|eot_id|> and </s> [/INST]") && ns == 1 &&
          sp[0].off == 7 && sp[0].len == 27, "no system: jinja: %s", out ? out : "(null)");
    free(out);
    free(sp);
    lc_chat_tmpl_free(t);

    /* a template that does not parse: a note with the place, and the family */
    t = lc_chat_tmpl_new("<|im_start|>{% for m in messages %}{{ m.content }", "", "", &note);
    CHECK(t && note && strstr(note, "line 1, column 50: unexpected end of template") && strstr(note, "'chatml'"), "note: %s",
          note ? note : "(null)");
    CHECK(t && !strcmp(lc_chat_tmpl_name(t), "chatml"), "unparsable: chatml");
    free(note);
    lc_chat_tmpl_free(t);

    /* built-in names and NULL */
    t = lc_chat_tmpl_new("llama2", NULL, NULL, NULL);
    CHECK(t && !strcmp(lc_chat_tmpl_name(t), "llama2"), "builtin name");
    lc_chat_tmpl_free(t);
    t = lc_chat_tmpl_new(NULL, NULL, NULL, NULL);
    CHECK(t && lc_chat_tmpl_family(t) == LC_CHAT_TEMPLATE_NONE && !lc_chat_tmpl_stop_strings(t)[0],
          "NULL: plain");
    lc_chat_tmpl_free(t);

    /* no known family: stop strings from the template's end-of-turn texts and EOS */
    t = lc_chat_tmpl_new("{% for m in messages %}## {{ m.role }}: {{ m.content }}<|eom_id|>{% endfor %}",
                         "<s>", "</s>", NULL);
    const char *const *st = lc_chat_tmpl_stop_strings(t);
    CHECK(st[0] && !strcmp(st[0], "<|eom_id|>") && st[1] && !strcmp(st[1], "</s>") && !st[2],
          "derived stop strings: %s %s", st[0] ? st[0] : "-", st[0] && st[1] ? st[1] : "-");
    lc_chat_tmpl_free(t);
}

int main(void)
{
    test_outputs();
    test_errors();
    test_origins();
    test_chat_tmpl();
    return tu_finish("test-jinja");
}
