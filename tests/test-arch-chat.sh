#!/bin/sh
# test-arch-chat.sh - a chat with a random-weight model of each architecture and its real chat
# template (tests/data/templates, run by our Jinja interpreter): the text of the tokens the
# model evaluates (the token log of --log-file) is byte for byte the template's rendering by
# Python's jinja2 (set up as transformers does), BOS included once.  Then the stop: with each
# family's vocabulary and template, a model that writes one word and then the family's
# end-of-turn token (<|eot_id|>, <|im_end|>, <|end|>, <end_of_turn>) stops there, with a
# generation limit far away, and the token is neither shown nor evaluated.  Random weights
# never pick that token on their own, so these models are tests/markov-gguf.py's (a llama
# whose greedy output is a chosen chain) carrying the family's tokenizer; the stop depends on
# the vocabulary and the template only.  Needs tmux, python3-jinja2.
set -u
command -v tmux >/dev/null 2>&1 || { echo "SKIP: tmux not installed"; exit 77; }
python3 -c 'import jinja2' 2>/dev/null || { echo "SKIP: python3-jinja2 not installed"; exit 77; }
B=${LC_BUILDDIR:-.}
SRC=${LC_SRCDIR:-$(dirname "$0")/..}
S=${LC_SHARED:-../shared}
LC="$B/llamachat"
[ -d "$S/models/arch" ] || { echo "SKIP: $S/models/arch missing"; exit 77; }
tmp=$(mktemp -d "${TMPDIR:-/tmp}/lc-archchat.XXXXXX") || exit 99
n_srv=0
cleanup() { for s in "$tmp"/sock*; do tmux -S "$s" kill-server >/dev/null 2>&1; done; sleep 0.5; rm -rf "$tmp" 2>/dev/null; }
trap cleanup EXIT
trap 'exit 1' INT TERM HUP
mkdir -p "$tmp/home"
fail=0
ok() { echo "ok   $1"; }
bad() { echo "FAIL $1"; fail=1; }

# render MODEL TEMPLATE USER: what the model should read for [user: USER] with the generation
# prompt: jinja2's rendering (bos_token/eos_token from the model's vocab), with the BOS the
# tokenizer adds when the template does not write it, and a SentencePiece vocab's word-start
# space before text that opens the prompt (as llama.cpp tokenizes it)
render() {
    python3 - "$@" <<'PYEOF'
import sys, json, struct
from datetime import datetime
import jinja2, jinja2.ext
from jinja2.sandbox import ImmutableSandboxedEnvironment
model, tpl, user = sys.argv[1:4]
d = open(model, 'rb').read()
o = [8]
def u(f):
    v = struct.unpack_from('<' + f, d, o[0])[0]; o[0] += struct.calcsize(f); return v
FMT = {0: 'B', 1: 'b', 2: 'H', 3: 'h', 4: 'I', 5: 'i', 6: 'f', 7: '?', 10: 'Q', 11: 'q', 12: 'd'}
def val(t):
    if t == 8:
        n = u('Q'); v = d[o[0]:o[0] + n]; o[0] += n; return v
    if t == 9:
        et = u('I'); n = u('Q'); return [val(et) for _ in range(n)]
    return u(FMT[t])
u('Q'); nkv = u('Q'); kv = {}
for _ in range(nkv):
    k = val(8).decode(); kv[k] = val(u('I'))
toks = kv['tokenizer.ggml.tokens']
spm = kv.get('tokenizer.ggml.model') == b'llama'
add_bos = kv.get('tokenizer.ggml.add_bos_token', spm)
space = kv.get('tokenizer.ggml.add_space_prefix', spm)
bos = toks[kv['tokenizer.ggml.bos_token_id']].decode() if 'tokenizer.ggml.bos_token_id' in kv else ''
eos = toks[kv['tokenizer.ggml.eos_token_id']].decode() if 'tokenizer.ggml.eos_token_id' in kv else ''
def raise_exception(m): raise jinja2.exceptions.TemplateError(m)
env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[jinja2.ext.loopcontrols])
env.filters['tojson'] = lambda x, indent=None, separators=None, sort_keys=False: json.dumps(x, ensure_ascii=False, indent=indent, separators=separators, sort_keys=sort_keys)
env.globals['raise_exception'] = raise_exception
env.globals['strftime_now'] = lambda f: datetime.now().strftime(f)
t = env.from_string(open(tpl, encoding='utf-8').read())
out = t.render(messages=[{'role': 'user', 'content': user}], add_generation_prompt=True,
               bos_token=bos, eos_token=eos, tools=None, documents=None)
special = [x.decode() for x, ty in zip(toks, kv['tokenizer.ggml.token_type']) if ty in (3, 4) and len(x) > 1]
if bos and out.startswith(bos):
    pass                                  # the template writes BOS: the tokenizer adds none
elif add_bos and bos:
    opens_special = any(out.startswith(x) for x in special)
    out = bos + (' ' if spm and space and not opens_special else '') + out
sys.stdout.buffer.write(out.encode('utf-8'))
PYEOF
}
# logged TEXTLINE: the bytes of a "prompt text: "..."" line of the token log (C escapes undone)
logged() {
    python3 -c '
import sys, re
line = sys.stdin.buffer.read()
body = line[line.index(b"\"") + 1:line.rindex(b"\"")]
out = bytearray(); i = 0
while i < len(body):
    c = body[i]
    if c == 0x5c:
        n = body[i + 1]
        if n == ord("n"): out.append(10); i += 2
        elif n == ord("x"): out.append(int(body[i + 2:i + 4], 16)); i += 4
        else: out.append(n); i += 2
    else: out.append(c); i += 1
sys.stdout.buffer.write(bytes(out))'
}

USER='Hello <|im_end|> there'
while read -r model tpl; do
    m="$S/models/arch/$model"
    [ -f "$m" ] || { bad "$model missing"; continue; }
    n_srv=$((n_srv + 1)); T="tmux -S $tmp/sock$n_srv"
    log="$tmp/$model.log"
    $T new-session -d -s lc -x 100 -y 30 "env HOME=$tmp/home LLAMACHATRC=/dev/null TERM=xterm-256color LANG=C.UTF-8 $LC -m $m --chat-template-file $SRC/tests/data/templates/$tpl --log-file $log --temp 0 -n 4 2>$log.err; sleep 30"
    i=0; while [ $i -lt 300 ] && ! $T capture-pane -t lc -p 2>/dev/null | grep -q ' idle '; do sleep 0.1; i=$((i + 1)); done
    $T send-keys -t lc -l -- "$USER"; $T send-keys -t lc Enter
    i=0; while [ $i -lt 300 ] && ! grep -q '^prompt text' "$log" 2>/dev/null; do sleep 0.1; i=$((i + 1)); done
    want=$(render "$m" "$SRC/tests/data/templates/$tpl" "$USER" | od -An -c)
    got=$(grep -m1 '^prompt text' "$log" | logged | od -An -c)
    if [ -n "$got" ] && [ "$got" = "$want" ]; then ok "$model + $tpl: the model reads the template's rendering"
    else bad "$model + $tpl: read differs from the rendering"; echo "  want:"; echo "$want" | head -8; echo "  got:"; echo "$got" | head -8; fi
    $T kill-server >/dev/null 2>&1
done <<'LIST'
llama3-q8_0.gguf llama-3.2-instruct.jinja
qwen2-q8_0.gguf qwen2.5-instruct.jinja
qwen3-q8_0.gguf qwen3.jinja
gemma2-q8_0.gguf gemma-2-it.jinja
gemma3-q8_0.gguf gemma-3-it.jinja
phi3-q8_0.gguf phi-3.5-mini.jinja
LIST

# --- the stop at each family's end-of-turn token -------------------------------------------
# VOCAB_MODEL TEMPLATE TOKEN SHOWN EOG [EXTRA]: with VOCAB_MODEL's tokenizer (plus the EXTRA
# tokens its 512-token stand-in lacks), the model answers TOKEN (shown as SHOWN), then EOG
while read -r vm tpl word shown eog extra; do
    n_srv=$((n_srv + 1)); T="tmux -S $tmp/sock$n_srv"
    g="$tmp/stop-$vm"; log="$g.log"
    cfg=$(python3 -c 'import json, sys
w, e, x = sys.argv[1:4]
w = w.encode().decode("unicode_escape")
print(json.dumps({"trans": {w: e}, "default": w, "extra": json.loads(x)}))' "$word" "$eog" "${extra:-[]}")
    python3 "$SRC/tests/markov-gguf.py" "$g" "$S/models/arch/$vm" "$cfg" || { bad "$vm: markov-gguf.py"; continue; }
    ids=$(python3 -c 'import sys, importlib.util
sp = importlib.util.spec_from_file_location("mk", sys.argv[1]); mk = importlib.util.module_from_spec(sp)
sp.loader.exec_module(mk)
toks = mk.read_kv(sys.argv[2])["tokenizer.ggml.tokens"][1][1]
print(toks.index(sys.argv[3].encode().decode("unicode_escape").encode()), toks.index(sys.argv[4].encode()))' \
        "$SRC/tests/markov-gguf.py" "$g" "$word" "$eog") || { bad "$vm: token ids"; continue; }
    wid=${ids% *}; eid=${ids#* }
    $T new-session -d -s lc -x 100 -y 30 "env HOME=$tmp/home LLAMACHATRC=/dev/null TERM=xterm-256color LANG=C.UTF-8 $LC -m $g --chat-template-file $SRC/tests/data/templates/$tpl --log-file $log --temp 0 -n 50 2>$log.err; sleep 30"
    i=0; while [ $i -lt 300 ] && ! $T capture-pane -t lc -p 2>/dev/null | grep -q ' idle '; do sleep 0.1; i=$((i + 1)); done
    $T send-keys -t lc -l -- "Hi"; $T send-keys -t lc Enter
    i=0; while [ $i -lt 300 ] && ! grep -q '^reply' "$log" 2>/dev/null; do sleep 0.1; i=$((i + 1)); done
    i=0; while [ $i -lt 300 ] && ! $T capture-pane -t lc -p 2>/dev/null | grep -q ' idle '; do sleep 0.1; i=$((i + 1)); done
    scr=$($T capture-pane -t lc -p 2>/dev/null)
    replies=$(grep '^reply pos=' "$log" | sed 's/.*: *//' | tr '\n' ' ')
    if [ "$replies" = "$wid " ] && echo "$scr" | grep -q "^ *$shown  " && ! echo "$scr" | grep -qF "$eog"; then
        ok "$vm + $tpl: answers '$shown' (id $wid), stops at $eog (id $eid), not shown"
    else bad "$vm + $tpl: reply tokens '$replies' (want '$wid', then the stop at $eog = $eid)"; echo "$scr" | grep -v "^ *│ *$" | head -12; fi
    $T kill-server >/dev/null 2>&1
done <<'LIST'
llama3-q8_0.gguf llama-3.2-instruct.jinja \u0120dog dog <|eot_id|>
qwen2-q8_0.gguf qwen2.5-instruct.jinja \u0120dog dog <|im_end|>
qwen3-q8_0.gguf qwen3.jinja \u0120dog dog <|im_end|>
phi3-q8_0.gguf phi-3.5-mini.jinja \u2581Lily Lily <|end|> [["<|system|>",3],["<|user|>",3],["<|assistant|>",3],["<|end|>",3]]
gemma2-q8_0.gguf gemma-2-it.jinja \u2581Lily Lily <end_of_turn> [["<start_of_turn>",3],["<end_of_turn>",3]]
gemma3-q8_0.gguf gemma-3-it.jinja \u2581Lily Lily <end_of_turn> [["<start_of_turn>",3],["<end_of_turn>",3]]
LIST
# --- Qwen3: the thinking of earlier replies is not fed back ----------------------------------
# Its template renders an assistant message before the last user message without the part up to
# </think>.  The model answers "<think> dog</think> cat"; the second turn's prompt must replace
# that reply from its first token (where the cached tokens part from the new rendering) with
# " cat<|im_end|>": no " dog" in what the model reads.
n_srv=$((n_srv + 1)); T="tmux -S $tmp/sock$n_srv"
g="$tmp/think.gguf"; log="$g.log"
cfg=$(python3 -c 'import json
print(json.dumps({"trans": {"<think>": "\u0120dog", "\u0120dog": "</think>", "</think>": "\u0120cat",
                            "\u0120cat": "<|im_end|>"},
                  "default": "<think>", "extra": [["<think>", 4], ["</think>", 4]]}))')
if python3 "$SRC/tests/markov-gguf.py" "$g" "$S/models/arch/qwen3-q8_0.gguf" "$cfg"; then
    $T new-session -d -s lc -x 100 -y 30 "env HOME=$tmp/home LLAMACHATRC=/dev/null TERM=xterm-256color LANG=C.UTF-8 $LC -m $g --chat-template-file $SRC/tests/data/templates/qwen3.jinja --log-file $log --temp 0 -n 50 --verbose-prompt 2>$log.err; sleep 30"
    idle() { i=0; while [ $i -lt 300 ] && ! $T capture-pane -t lc -p 2>/dev/null | grep -q ' idle '; do sleep 0.1; i=$((i + 1)); done; }
    idle
    $T send-keys -t lc -l -- "Hi"; $T send-keys -t lc Enter
    i=0; while [ $i -lt 300 ] && [ "$(grep -c '^reply pos=' "$log" 2>/dev/null)" -lt 4 ]; do sleep 0.1; i=$((i + 1)); done
    idle
    $T send-keys -t lc -l -- "Again"; $T send-keys -t lc Enter
    i=0; while [ $i -lt 300 ] && [ "$(grep -c '^prompt pos=' "$log" 2>/dev/null)" -lt 2 ]; do sleep 0.1; i=$((i + 1)); done
    idle
    p1=$(grep -m1 '^prompt pos=0 ' "$log" | sed 's/^prompt pos=0 n=\([0-9]*\):.*/\1/')
    first_reply=$(grep -m1 '^reply pos=' "$log" | sed 's/^reply pos=\([0-9]*\) .*/\1/')
    line2=$(grep '^prompt pos=' "$log" | sed -n 2p)
    text2=$(grep '^prompt text' "$log" | sed -n 2p)
    want2='prompt text: "<|im_end|>\n<|im_start|>user\nAgain<|im_end|>\n<|im_start|>assistant\n"'
    want2b='prompt text: " cat<|im_end|>\n<|im_start|>user\nAgain<|im_end|>\n<|im_start|>assistant\n"'
    if [ "$first_reply" = "$p1" ] && [ "${line2#prompt pos=$p1 }" != "$line2" ] && [ "$text2" = "$want2b" ]; then
        ok "qwen3: the second turn reads ' cat<|im_end|>' in place of the first reply, without its thinking"
    else
        bad "qwen3: second prompt: '$line2' / $text2 (want pos=$p1 and $want2b)"
        [ "$text2" = "$want2" ] && echo "  (the thinking was fed back: the cache kept '<think> dog</think> cat')"
        grep -E '^(prompt|reply)' "$log" | head -20
    fi
    $T capture-pane -t lc -p | grep -q "^ *prompt: [0-9]* tokens at $p1: " && ok "qwen3: --verbose-prompt shows the prompt at $p1" \
        || { bad "qwen3: --verbose-prompt note"; $T capture-pane -t lc -p | grep -v "^ *│ *$" | head -20; }
    $T kill-server >/dev/null 2>&1
else bad "qwen3 think: markov-gguf.py"; fi
exit $fail
