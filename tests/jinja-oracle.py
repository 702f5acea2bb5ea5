#!/usr/bin/env python3
"""jinja-oracle.py - compare our Jinja renderer with Python's jinja2, byte for byte.

Usage: jinja-oracle.py RENDERER SRCDIR [SHARED]
Renders every template of the test set (tests/data/templates/*.jinja, the Jinja templates of
SHARED/reference/chat-templates/cases.json, the tokenizer.chat_template of SHARED/models/arch/
*.gguf) for dozens of conversations with jinja2 set up as transformers' apply_chat_template
does (ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, loopcontrols),
raise_exception, strftime_now, tojson = json.dumps(ensure_ascii=False)), and with RENDERER
(tests/jinja-render), then compares.  Both failing counts as agreement.  Exit 0 when all agree,
1 otherwise, 77 when jinja2 is missing.
"""
import glob, json, os, struct, subprocess, sys, tempfile
from datetime import datetime

try:
    import jinja2
    import jinja2.ext
    import jinja2.nodes
    from jinja2.sandbox import ImmutableSandboxedEnvironment
except ImportError:
    print("python3-jinja2 is missing: skipped")
    sys.exit(77)


def gguf_template(path):
    """tokenizer.chat_template of a GGUF file (v2/v3), or None."""
    with open(path, 'rb') as f:
        d = f.read()
    if d[:4] != b'GGUF':
        return None
    o = 8
    _, nkv = struct.unpack_from('<QQ', d, o)
    o += 16
    sizes = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}

    def rstr(o):
        n, = struct.unpack_from('<Q', d, o)
        return d[o + 8:o + 8 + n], o + 8 + n

    def skip(t, o):
        if t == 8:
            return rstr(o)[1]
        if t == 9:
            at, n = struct.unpack_from('<IQ', d, o)
            o += 12
            if at in sizes:
                return o + sizes[at] * n
            for _ in range(n):
                o = skip(at, o)
            return o
        return o + sizes[t]

    for _ in range(nkv):
        k, o = rstr(o)
        t, = struct.unpack_from('<I', d, o)
        o += 4
        if k == b'tokenizer.chat_template' and t == 8:
            return rstr(o)[0].decode('utf-8')
        o = skip(t, o)
    return None


def tokens_for(tmpl):
    if '<|begin_of_text|>' in tmpl or '<|eot_id|>' in tmpl:
        return '<|begin_of_text|>', '<|eot_id|>'
    if '<|im_start|>' in tmpl:
        return '<|endoftext|>', '<|im_end|>'
    if '<start_of_turn>' in tmpl:
        return '<bos>', '<eos>'
    return '<s>', '</s>'


def conversations():
    """(messages, add_generation_prompt) pairs: system or not, several turns, odd contents."""
    odd = ['Hello', '  padded both sides \n', '\n\nleading newlines', 'trailing newline\n',
           'special <|im_end|> <|eot_id|> </s> <s> [INST] <end_of_turn> texts',
           'quotes \' " and \\ backslash', 'unicode: héllo wörld ✓ 日本語', '',
           'multi\nline\n  indented', '<think>\nsome reasoning\n</think>\n\nthe answer',
           '{{ not a template }} {% neither %}', '\t tabs \t']
    convs = []
    for sysmsg in (None, 'You are a helpful assistant', '  System with spaces  \n'):
        for n_turns in (1, 2, 3):
            for last_assistant in (False, True):
                msgs = []
                if sysmsg is not None:
                    msgs.append({'role': 'system', 'content': sysmsg})
                for t in range(n_turns):
                    msgs.append({'role': 'user', 'content': odd[(t * 3 + len(convs)) % len(odd)]})
                    if t < n_turns - 1 or last_assistant:
                        msgs.append({'role': 'assistant',
                                     'content': odd[(t * 5 + 1 + len(convs)) % len(odd)]})
                convs.append((msgs, not last_assistant))
    # every odd content once as a user and once as an assistant message
    for c in odd:
        convs.append(([{'role': 'user', 'content': c}], True))
        convs.append(([{'role': 'user', 'content': 'q'}, {'role': 'assistant', 'content': c},
                       {'role': 'user', 'content': c}], True))
    convs.append(([], True))
    convs.append(([{'role': 'system', 'content': 'only a system message'}], True))
    convs.append(([{'role': 'user', 'content': 'a'}, {'role': 'user', 'content': 'b'}], False))
    return convs


class Generation(jinja2.ext.Extension):
    """transformers' {% generation %} block (AssistantTracker): renders its body."""
    tags = {'generation'}

    def parse(self, parser):
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(['name:endgeneration'], drop_needle=True)
        return jinja2.nodes.CallBlock(self.call_method('_render'), [], [], body).set_lineno(lineno)

    def _render(self, caller):
        return caller()


def make_env():
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                        extensions=['jinja2.ext.loopcontrols', Generation])

    def raise_exception(message):
        raise jinja2.exceptions.TemplateError(message)

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators,
                          sort_keys=sort_keys)

    def strftime_now(fmt):
        return datetime.now().strftime(fmt)

    env.filters['tojson'] = tojson
    env.globals['raise_exception'] = raise_exception
    env.globals['strftime_now'] = strftime_now
    return env


def main():
    renderer, srcdir = sys.argv[1], sys.argv[2]
    shared = sys.argv[3] if len(sys.argv) > 3 else os.path.join(srcdir, '..', 'shared')
    templates = []
    for p in sorted(glob.glob(os.path.join(srcdir, 'tests/data/templates/*.jinja'))):
        with open(p, encoding='utf-8') as f:
            templates.append((os.path.basename(p), f.read()))
    cj = os.path.join(shared, 'reference/chat-templates/cases.json')
    if os.path.exists(cj):
        with open(cj, encoding='utf-8') as f:
            for c in json.load(f)['cases']:
                if '{' in c['template']:
                    templates.append(('cases.json: ' + c['name'], c['template']))
    n_gguf = 0
    for p in sorted(glob.glob(os.path.join(shared, 'models/arch/*.gguf'))):
        t = gguf_template(p)
        if t:
            templates.append((os.path.basename(p), t))
            n_gguf += 1
    env = make_env()
    convs = conversations()
    cases, expect = [], []
    for name, tmpl in templates:
        bos, eos = tokens_for(tmpl)
        try:
            compiled = env.from_string(tmpl)
        except Exception as ex:       # a template jinja2 cannot compile: we must refuse it too
            compiled = None
            cerr = str(ex)
        for msgs, agp in convs:
            cases.append({'template': tmpl, 'bos': bos, 'eos': eos,
                          'add_generation_prompt': agp, 'messages': msgs})
            if compiled is None:
                expect.append(('error', cerr))
                continue
            try:
                out = compiled.render(messages=msgs, tools=None, documents=None,
                                      add_generation_prompt=agp, bos_token=bos, eos_token=eos)
                expect.append(('out', out))
            except Exception as ex:
                expect.append(('error', type(ex).__name__ + ': ' + str(ex)))
    with tempfile.NamedTemporaryFile('w', suffix='.json', delete=False, encoding='utf-8') as f:
        json.dump(cases, f, ensure_ascii=False)
        path = f.name
    try:
        pr = subprocess.run([renderer, path], capture_output=True)
    finally:
        os.unlink(path)
    sys.stderr.write(pr.stderr.decode('utf-8', 'replace'))
    got = json.loads(pr.stdout.decode('utf-8'))
    bad_tmpl = {}
    same = 0
    per = len(convs)
    for i, (exp, g) in enumerate(zip(expect, got)):
        name = templates[i // per][0]
        ok = ('out' in g and exp[0] == 'out' and g['out'] == exp[1]) or \
             ('error' in g and exp[0] == 'error')
        if ok:
            same += 1
            continue
        if name not in bad_tmpl:
            bad_tmpl[name] = 0
            print('MISMATCH %s, conversation %d (agp=%s):' % (name, i % per,
                                                              cases[i]['add_generation_prompt']))
            print('  jinja2: %r' % (exp,))
            print('  ours:   %r' % (g.get('out', None) if 'out' in g else ('error', g['error']),))
        bad_tmpl[name] += 1
    print('%d templates (%d from GGUF files), %d conversations each: %d/%d renderings identical;'
          ' templates with every rendering identical: %d/%d'
          % (len(templates), n_gguf, per, same, len(cases), len(templates) - len(bad_tmpl),
             len(templates)))
    for name, n in bad_tmpl.items():
        print('  %s: %d/%d differ' % (name, n, per))
    if pr.returncode != 0:
        print('jinja-render failed (status %d): span or origin check' % pr.returncode)
        return 1
    return 0 if not bad_tmpl else 1


if __name__ == '__main__':
    sys.exit(main())
