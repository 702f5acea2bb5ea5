#!/bin/sh
# test-tui-markdown.sh - Markdown in replies and Qwen3's <think> part (issues 14 and 12), in the
# real chat in tmux (tests/tui-lib.sh): a saved chat whose reply holds Markdown and a thinking
# part, resumed with --resume on the random-weight Qwen3 model with its real template: heading
# bold and underlined, emphasis, inline code and a code block set apart (capture-pane -e shows
# the attributes), list and quote margins kept when wrapped, the thinking folded and dimmed,
# /think and /raw, a 10x3 terminal and back, transcripts saved as written, the rc keys; then
# replies streamed by an OpenAI-compatible server (tests/fake-openai.py) three characters a
# piece: rendered, the thinking folded when complete and shown while it is not.
set -u
command -v tmux >/dev/null 2>&1 || { echo "SKIP: tmux not installed"; exit 77; }
B=${LC_BUILDDIR:-.}
S=${LC_SHARED:-../shared}
SRC=${LC_SRCDIR:-$(dirname "$0")/..}
LC="$B/llamachat"
case $LC in /*) ;; *) LC="$(pwd)/$LC" ;; esac
MODEL="$S/models/arch/qwen3-q4_1.gguf"
case $MODEL in /*) ;; *) MODEL="$(pwd)/$MODEL" ;; esac
TPL="$SRC/tests/data/templates/qwen3.jinja"
case $TPL in /*) ;; *) TPL="$(pwd)/$TPL" ;; esac
[ -f "$MODEL" ] || { echo "SKIP: $MODEL missing"; exit 77; }
[ -x "$LC" ] || { echo "FAIL: $LC not built"; exit 1; }

. "$(dirname "$0")/tui-lib.sh"
tui_lib_init wt-markdown-tui
# screen_attrs: the screen with its attributes, from capture-pane -e (which writes only the
# changes of SGR state, carried across lines), as runs: plain text as it is, other runs as
# [ATTRS|text] with ATTRS among "b d i u fgN bgN" in that order (bold, dim, italic,
# underline, colours by number: 32 -> fg2, 48;5;236 -> bg236); -N keeps trailing cells (a
# code block's background)
screen_attrs() {
    $T capture-pane -t lc -p -e -N | python3 -c '
import re, sys
st = {}
def tag():
    out = [k for k in "bdiu" if st.get(k)]
    out += ["%s%d" % (k, st[k]) for k in ("fg", "bg") if k in st]
    return " ".join(out)
for line in sys.stdin.read().split("\n"):
    res, cur, buf = [], None, ""
    def flush():
        global buf
        if buf:
            res.append("[%s|%s]" % (cur, buf) if cur else buf)
        buf = ""
    for m in re.finditer(r"\x1b\[([0-9;]*)m|([^\x1b]+)", line):
        if m.group(2) is not None:
            t = tag()
            if t != cur:
                flush(); cur = t
            buf += m.group(2)
            continue
        ps = [int(x) if x else 0 for x in m.group(1).split(";")]
        i = 0
        while i < len(ps):
            p = ps[i]
            if p == 0: st.clear()
            elif p in (1, 2, 3, 4): st["xbdiu"[p]] = True
            elif p == 22: st.pop("b", None); st.pop("d", None)
            elif p == 23: st.pop("i", None)
            elif p == 24: st.pop("u", None)
            elif 30 <= p <= 37: st["fg"] = p - 30
            elif p == 39: st.pop("fg", None)
            elif 40 <= p <= 47: st["bg"] = p - 40
            elif p == 49: st.pop("bg", None)
            elif p in (38, 48) and i + 2 < len(ps) and ps[i + 1] == 5:
                st["fg" if p == 38 else "bg"] = ps[i + 2]; i += 2
            i += 1
    flush()
    print("".join(res).rstrip())
'
}
# check_a NAME REGEX: poll the screen's attribute runs (screen_attrs) until a line matches
check_a() {
    i=0
    while [ $i -lt 100 ]; do
        a=$(screen_attrs)
        if printf '%s\n' "$a" | grep -Eq -- "$2"; then ok "$1"; return 0; fi
        sleep 0.1; i=$((i + 1))
    done
    bad "$1"; screen_attrs | sed 's/^/  | /'
}
# start NAME ENV ARGS: llamachat with the environment ENV and arguments ARGS (shell words)
start() {
    $T send-keys -t lc "clear; env $2 '$LC' $3 2>'$tmp/$1.err'; echo EXIT=\$?" Enter
    wait_for '^ idle \|' 30 >/dev/null || { bad "$name: chat started"; return 1; }
}

mkdir -p "$tmp/home"
cat >"$tmp/rc" <<RC
[model]
threads = 1
[sampling]
temp = 0
max_tokens = 4
[ui]
show_params = off
history = off
RC

# The reply as the model wrote it (JSON-escaped): thinking, then Markdown.
REPLY='<think>\nThe user asks for Python.\nI should show a list and code.\n</think>\n\n# Title here\n\nSome **bold** text, *italic*, and `inline code`.\n\n- first item which is quite long and should wrap onto the next line nicely when narrow\n- second\n  - nested\n\n> a quote that is also long enough to wrap at narrow widths\n\n```python\ndef f(x):\n    return x * 2\n```\n\n1. one\n2. two'
cat >"$tmp/chat.json" <<JSON
{ "format": "llamachat-transcript", "version": 1, "model": "qwen3",
  "messages": [ { "role": "user", "content": "Show me Markdown" },
                { "role": "assistant", "content": "$REPLY" } ] }
JSON

$T -f /dev/null new-session -d -s lc -x 80 -y 30 \
    "env HOME='$tmp/home' LLAMACHATRC='$tmp/rc' LANG=C.UTF-8 LC_ALL=C.UTF-8 TERM=tmux-256color PS1='$ ' sh"
$T set-option -t lc status off >/dev/null
wait_for '^\$' 10 >/dev/null || { echo "FAIL: no shell prompt"; exit 1; }

# 1. resumed: rendered, with attributes
ARGS="-m '$MODEL' --chat-template-file '$TPL' --resume '$tmp/chat.json'"
start resume "" "$ARGS" || exit 1
check "resume: heading without its markup but its #" '^# Title here *$'
check "resume: emphasis markup gone" '^Some bold text, italic, and inline code\. *$'
# the separator line keeps its colour (setcchar takes the pair apart; it was drawn in pair 0)
check_a "separator drawn in the title colour" '\]\[fg2\|─{5,}'
check_a "resume: heading bold in the title colour, its text underlined too" '^\[b fg2\|# \]\[b u fg2\|Title here\]$'
check_a "resume: **bold** is bold, *italic* italic, inline code on the code background" \
    '^Some \[b\|bold\] text, \[i\|italic\], and \[bg236\|inline code\]\.$'
check "resume: list bullets, the long item wrapped under its text" \
    '^• first item which is quite long and should wrap onto the next line nicely when *$'
check "resume: ... its second row indented" '^  narrow *$'
check "resume: nested bullet" '^  ◦ nested *$'
check "resume: block quote behind a bar" '^│ a quote that is also long enough to wrap at narrow widths *$'
check "resume: code block language shown" '^  python *$'
check_a "resume: code block set apart: indented on the background to the text width" \
    '^\[bg236\|  def f\(x\): {69}\]$'
check_a "resume: code indentation kept" '^\[bg236\|      return x \* 2 {62}\]$'
check "resume: ordered list" '^2\. two *$'
check "resume: the thinking folded to one line" '^▸ thinking \(2 lines\) — /think shows it *$'
check_a "resume: ... dimmed" '^\[d i\|▸ thinking \(2 lines\) — /think shows it\]$'
not_on_screen "resume: no markup, tags or thinking text shown" '\*\*|```|<think>|</think>|^#$|The user asks'

# 2. /think unfolds (dimmed), and folds again
$T send-keys -t lc "/think" Enter
check "/think: the thinking shown" '^The user asks for Python\. *$'
check "/think: under its title" '^▾ thinking *$'
check_a "/think: dimmed" '^\[d\|I should show a list and code\.\]$'
not_on_screen "/think: no tags" '<think>|</think>'
$T send-keys -t lc "/think" Enter
check "/think again: folded" '^▸ thinking \(2 lines\)'
not_on_screen "/think again: the text gone" 'The user asks'

# 3. /raw: the characters as written; again: Markdown
$T send-keys -t lc "/raw" Enter
check "/raw: the emphasis markup shown" '^Some \*\*bold\*\* text, \*italic\*, and `inline code`\. *$'
check "/raw: the tags and thinking shown" '^<think> *$'
check "/raw: the fence shown" '^```python *$'
check "/raw: the heading as written" '^# Title here *$'
check_a "/raw: no attributes on **bold**" '^Some \*\*bold\*\* text, \*italic\*, and `inline code`\.$'
$T send-keys -t lc "/raw" Enter
check "/raw again: Markdown" '^Some bold text, italic, and inline code\. *$'

# 4. narrow: wrapped rows keep the list indent and the quote bar; 10x3 and back
$T resize-window -t lc -x 30 -y 40
check "30 columns: the item's rows indented" '^  long and should wrap onto *$'
check "30 columns: the quote's rows keep the bar" '^│ enough to wrap at narrow *$'
check "30 columns: the code line wrapped between words, indented" '^      return x \* 2 *$'
$T resize-window -t lc -x 10 -y 3
check "10x3: says too small" 'too small'
$T resize-window -t lc -x 80 -y 30
check "back to 80x30: rendered again" '^• first item which is quite long and should wrap onto the next line nicely when *$'

# 5. transcripts stay as the model wrote them
$T send-keys -t lc "/save $tmp/out.md" Enter
check "saved Markdown" "saved $tmp/out.md"
$T send-keys -t lc "/save $tmp/out.json" Enter
check "saved JSON" "saved $tmp/out.json"
for f in out.md out.json; do
    if grep -Fq '<think>' "$tmp/$f" && grep -Fq 'Some **bold** text, *italic*, and `inline code`.' "$tmp/$f" &&
       grep -Fq '```python' "$tmp/$f"; then
        ok "$f: the reply as written (thinking, markup)"
    else bad "$f: the reply as written (thinking, markup)"; sed 's/^/  | /' "$tmp/$f"; fi
done
quit resume

# 6. [ui] markdown = off, show_thinking = on: as written from the start
printf '[ui]\nmarkdown = off\nshow_thinking = on\nshow_params = off\nhistory = off\n' >"$tmp/rc2"
start rc-off "LLAMACHATRC='$tmp/rc2'" "$ARGS" || exit 1
check "[ui] markdown = off: as written" '^Some \*\*bold\*\* text'
$T send-keys -t lc "/raw" Enter
check "[ui] show_thinking = on: the thinking shown once Markdown is on" '^The user asks for Python\. *$'
quit rc-off

# 7. streamed replies (fake OpenAI server), three characters a piece
if command -v python3 >/dev/null 2>&1; then
    python3 - "$tmp" <<'PYEOF'
import json, sys
d = sys.argv[1]
def sse(name, text):
    with open(f"{d}/{name}.sse", "w") as f:
        def ev(delta, finish=None):
            f.write("data: " + json.dumps({"id": "x", "object": "chat.completion.chunk", "model": "fake",
                    "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}) + "\n\n")
        ev({"role": "assistant", "content": ""})
        for i in range(0, len(text), 3):
            ev({"content": text[i:i + 3]})
        ev({}, "stop")
        f.write("data: [DONE]\n\n")
sse("md", "<think>\nPlan the answer.\n</think>\n\n## Résumé — done\n\n* **naïve** `x`\n")
sse("open", "<think>\nStill thinking about the ünïcode")
PYEOF
    python3 "$SRC/tests/fake-openai.py" "$tmp/port" "$tmp" & fake=$!
    trap 'kill $fake 2>/dev/null; tui_cleanup' EXIT
    i=0; while [ $i -lt 50 ] && [ ! -f "$tmp/port" ]; do sleep 0.1; i=$((i + 1)); done
    PORT=$(cat "$tmp/port" 2>/dev/null)
    start stream "" "--remote http://127.0.0.1:$PORT/fix-md" || exit 1
    $T send-keys -t lc "hello" Enter
    check "streamed: heading rendered" '^## Résumé — done *$'
    check "streamed: bold and code in a list item" '^• naïve x *$'
    check "streamed: the thinking folded once complete" '^▸ thinking \(1 line\) — /think shows it *$'
    check_a "streamed: bold" '^\[d\|• \]\[b\|naïve\] \[bg236\|x\]$'
    quit stream
    start stream-open "" "--remote http://127.0.0.1:$PORT/fix-open" || exit 1
    $T send-keys -t lc "hello" Enter
    check "streamed, thinking not closed: shown under its title" '^▾ thinking *$'
    check_a "streamed, thinking not closed: dimmed" '^\[d\|Still thinking about the ünïcode\]$'
    quit stream-open
else
    echo "SKIP: python3 missing: streamed replies not tested"
fi

exit $fail
