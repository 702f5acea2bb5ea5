#!/bin/sh
# test-durability.sh - what the chat keeps on disk survives kill -9 (issue 11 items 4 and 5),
# driven in a detached tmux session as tests/test-tui.sh is:
#  1. kill -9 while a long reply streams: chats/START.json (dir 0700, file 0600) is a whole JSON
#     transcript with the message and the reply so far; the history file has the line;
#     --continue reopens that file, says which, shows both, and keeps saving to it;
#  2. kill -9 after a finished turn: the whole reply is in the file;
#  3. --continue with nothing saved: a note; [ui] history = off: nothing written at all;
#     [chat] autosave = off: no chats/ file, the history is kept;
#  4. state that cannot be kept is reported on screen and on stderr at exit, with the path and
#     the cause: XDG_STATE_HOME a regular file, the history file a directory, HOME unset.
set -u
command -v tmux >/dev/null 2>&1 || { echo "SKIP: tmux not installed"; exit 77; }
command -v python3 >/dev/null 2>&1 || { echo "SKIP: python3 not installed"; exit 77; }
B=${LC_BUILDDIR:-.}
S=${LC_SHARED:-../shared}
LC="$B/llamachat"
case $LC in /*) ;; *) LC="$(pwd)/$LC" ;; esac
MODEL="$S/models/stories260K-ff192-q4_1.gguf"
case $MODEL in /*) ;; *) MODEL="$(pwd)/$MODEL" ;; esac
[ -f "$MODEL" ] || { echo "SKIP: $MODEL missing"; exit 77; }
[ -x "$LC" ] || { echo "FAIL: $LC not built"; exit 1; }

. "$(dirname "$0")/tui-lib.sh"
tui_lib_init lc-durable -J
# pids whose parent is $1 (from /proc: pgrep may not be installed)
child_of() {
    for d in /proc/[0-9]*; do
        [ "$(cut -d' ' -f4 "$d/stat" 2>/dev/null)" = "$1" ] && echo "${d#/proc/}"
    done
}
# start NAME ARGS...: llamachat from the window's shell (env first), stderr to $tmp/NAME.err
start() {
    name=$1; shift
    $T send-keys -t lc "clear; env $* 2>'$tmp/$name.err'; echo EXIT=\$?" Enter
    wait_for '^ idle \|' 30 >/dev/null || { bad "$name: chat started"; return 1; }
}
kill9() {
    shell=$($T list-panes -t lc -F '#{pane_pid}')
    envpid=$(child_of "$shell" | head -1)
    kill -9 "$envpid"
    check "$1: killed" 'EXIT=137'
    # nothing restored the terminal: do it from the shell (C-j: Enter is CR in raw mode)
    $T send-keys -t lc "stty sane; printf '\\033[?1049l\\033[?2004l'; clear" C-j
    wait_for '^\$ *$' 10 >/dev/null
}
# json FILE PY-EXPR: evaluate PY-EXPR with m = the messages of the transcript (exit 1 if it
# does not parse)
json() {
    python3 -c 'import json, sys
d = json.load(open(sys.argv[1], encoding="utf-8"))
m = d["messages"]
print(eval(sys.argv[2]))' "$1" "$2"
}

home="$tmp/home"
chats="$home/.local/state/llamachat/chats"
mkdir -p "$home"
cat >"$tmp/rc" <<RC
[model]
path = $MODEL
threads = 1
context_size = 4096
[sampling]
temp = 0
max_tokens = 3000
[ui]
show_params = off
history = on
RC
RUN="HOME='$home' LLAMACHATRC='$tmp/rc' '$LC'"

$T -f /dev/null new-session -d -s lc -x 250 -y 30 \
    "env LANG=C.UTF-8 LC_ALL=C.UTF-8 TERM=tmux-256color PS1='$ ' sh"
$T set-option -t lc status off >/dev/null
wait_for '^\$' 10 >/dev/null || { echo "FAIL: no shell prompt"; exit 1; }

# 1. kill -9 before the reply ends (3000 tokens at 1 thread take under a second on a fast CPU:
# the engine holds the reply's end back 10 s, so the kill comes before the turn is complete
# however fast the machine)
start crash1 "LLAMACHAT_TEST_SLOW_MS=10000 $RUN" || exit 1
$T send-keys -t lc "Tom went to the park" Enter
check "writing" '^ writing'
sleep 1.5
kill9 "during the reply"
n=$(ls "$chats" 2>/dev/null | wc -l)
f=$(ls -d "$chats"/*.json 2>/dev/null | head -1)
if [ "$n" = 1 ] && [ -n "$f" ]; then ok "one file in chats/"; else bad "one file in chats/ ($n)"; ls -la "$chats"; fi
case ${f##*/} in
[0-9][0-9][0-9][0-9]-[0-9][0-9]-[0-9][0-9]T[0-9][0-9]-[0-9][0-9]-[0-9][0-9].json) ok "named by the start time" ;;
*) bad "named by the start time: ${f##*/}" ;;
esac
if [ "$(stat -c %a "$chats")" = 700 ] && [ "$(stat -c %a "$f")" = 600 ]; then
    ok "modes 0700 and 0600"
else
    bad "modes 0700 and 0600: $(stat -c %a "$chats") $(stat -c %a "$f")"
fi
if [ "$(json "$f" 'm[0]["role"] + ":" + m[0]["content"]')" = "user:Tom went to the park" ]; then
    ok "the message is in the file"
else
    bad "the message is in the file"; cat "$f"
fi
partial=$(json "$f" 'm[1]["content"] if len(m) > 1 and m[1]["role"] == "assistant" else ""')
if [ ${#partial} -gt 20 ]; then ok "the partial reply is in the file (${#partial} bytes)"; else bad "the partial reply is in the file: '$partial'"; fi
# the reply was still being written when saved: the file says so (chat.h "end")
if [ "$(json "$f" 'm[1].get("end", "") if len(m) > 1 else ""')" = partial ]; then
    ok "the partial reply is marked partial"
else
    bad "the partial reply is marked partial"; cat "$f"
fi
if grep -Fxq "Tom went to the park" "$home/.local/state/llamachat/history"; then
    ok "history has the line"
else
    bad "history has the line"
fi
# --continue: the same file, said so; message and reply on screen
start continue1 "$RUN" --continue || exit 1
check "--continue names the file" "continue: 2 messages from $f"
$T send-keys -t lc Home   # the top of the transcript (a long partial reply fills the screen)
check "message on screen" "Tom went to the park"
head30=$(printf '%s' "$partial" | head -c 30)
check "partial reply on screen" "$(printf '%s' "$head30" | sed 's/[][\\.*^$()+?{}|]/\\&/g')"
$T send-keys -t lc End
# ... and it does not look finished: a note after it
check "cut-off note after the partial reply" '\(cut off: this reply was still being written when the chat was saved\)'
$T send-keys -t lc "/set max-tokens 8" Enter
c0=$(ctx_now)
$T send-keys -t lc "Lily saw a cat" Enter
check_answered "second reply finished" "$c0"
check "a reply cut at max-tokens says so" '\(cut at the token limit\)'
sleep 0.3
kill9 "after the turn"
# (beside it may be its KV state, START.json.kv, written after a reply: llamachat(1) INSTANT RESUME)
if [ "$(ls "$chats" | grep -v '\.json\.kv$' | wc -l)" = 1 ] && [ "$(json "$f" 'len(m)')" = 4 ] &&
    [ "$(json "$f" 'm[2]["content"]')" = "Lily saw a cat" ] &&
    [ -n "$(json "$f" 'm[3]["content"]')" ]; then
    ok "--continue kept saving to the same file; the finished turn is whole"
    if [ "$(json "$f" 'm[1].get("end", "") + "," + m[3].get("end", "")')" = "partial,length" ]; then
        ok "the cut-off reply stays partial, the one cut at max-tokens says length"
    else
        bad "ends partial,length"; cat "$f"
    fi
else
    bad "--continue kept saving to the same file"; ls -la "$chats"; cat "$f"
fi
if [ "$(grep -c . "$home/.local/state/llamachat/history")" = 3 ]; then
    ok "history has the three lines"
else
    bad "history has the three lines"; cat "$home/.local/state/llamachat/history"
fi

# 2. --continue with nothing kept: a note
mkdir -p "$tmp/empty"
start none "HOME='$tmp/empty' LLAMACHATRC='$tmp/rc' '$LC'" --continue || exit 1
check "--continue with nothing saved: a note" "no saved conversation in $tmp/empty/.local/state/llamachat/chats"
$T send-keys -t lc C-d
check "none: exits" '^EXIT=0'

# 3. [ui] history = off: nothing written; [chat] autosave = off: no chats/ file
sed 's/^history = on/history = off/' "$tmp/rc" >"$tmp/rc.off"
mkdir -p "$tmp/off"
start off "HOME='$tmp/off' LLAMACHATRC='$tmp/rc.off' '$LC'" || exit 1
$T send-keys -t lc "/set max-tokens 4" Enter "private words" Enter
check "history off: reply" '^ idle .*ctx [1-9]'
$T send-keys -t lc C-d
check "history off: exits" '^EXIT=0'
if [ -z "$(find "$tmp/off" -type f)" ]; then ok "history off: no file written"; else bad "history off: no file written"; find "$tmp/off" -type f; fi
printf '[chat]\nautosave = off\n' | cat "$tmp/rc" - >"$tmp/rc.noauto"
mkdir -p "$tmp/noauto"
start noauto "HOME='$tmp/noauto' LLAMACHATRC='$tmp/rc.noauto' '$LC'" || exit 1
$T send-keys -t lc "/set max-tokens 4" Enter "kept words" Enter
check "autosave off: reply" '^ idle .*ctx [1-9]'
sleep 1.2
kill9 "autosave off"
if [ -z "$(ls "$tmp/noauto/.local/state/llamachat/chats" 2>/dev/null)" ] &&
    grep -Fxq "kept words" "$tmp/noauto/.local/state/llamachat/history"; then
    ok "autosave off: no chats/ file; the history kept"
else
    bad "autosave off: no chats/ file; the history kept"; find "$tmp/noauto" -type f
fi

# 4. failures to keep state are said, with the path and the cause
: >"$tmp/afile"
start xdgfile "HOME='$home' XDG_STATE_HOME='$tmp/afile' LLAMACHATRC='$tmp/rc' '$LC'" || exit 1
check "XDG_STATE_HOME a file: history failure on screen" \
    "could not keep the input history: $tmp/afile/llamachat: cannot create the directory: Not a directory"
check "XDG_STATE_HOME a file: on the message line" '^ idle .*|.*could not keep' 5
$T send-keys -t lc "/set max-tokens 4" Enter "hello" Enter
check "XDG_STATE_HOME a file: conversation failure on screen" \
    "could not keep the conversation: $tmp/afile/llamachat: cannot create the directory: Not a directory"
$T send-keys -t lc C-d
check "XDG_STATE_HOME a file: exits" '^EXIT=0'
if grep -Fxq "llamachat: could not keep the input history: $tmp/afile/llamachat: cannot create the directory: Not a directory" "$tmp/xdgfile.err" &&
    grep -Fq "llamachat: could not keep the conversation: $tmp/afile/llamachat" "$tmp/xdgfile.err"; then
    ok "XDG_STATE_HOME a file: on stderr at exit"
else
    bad "XDG_STATE_HOME a file: on stderr at exit"; sed 's/^/  | /' "$tmp/xdgfile.err"
fi
# a directory that cannot be written: under a regular file (chmod does not stop root)
start ro "HOME='$home' XDG_STATE_HOME='$tmp/afile/x' LLAMACHATRC='$tmp/rc' '$LC'" || exit 1
check "unwritable state dir: said on screen" "could not keep the input history: $tmp/afile/x"
$T send-keys -t lc C-d
check "unwritable state dir: exits" '^EXIT=0'
if grep -q "^llamachat: could not keep the input history: $tmp/afile/x.*Not a directory" "$tmp/ro.err"; then
    ok "unwritable state dir: on stderr"
else
    bad "unwritable state dir: on stderr"; sed 's/^/  | /' "$tmp/ro.err"
fi
# the history file is a directory: the append fails, once, with the cause
mkdir -p "$tmp/hd/llamachat/history"
start histdir "HOME='$home' XDG_STATE_HOME='$tmp/hd' LLAMACHATRC='$tmp/rc' '$LC'" || exit 1
$T send-keys -t lc "/set max-tokens 4" Enter
check "history a directory: said on screen" "could not keep the input history: $tmp/hd/llamachat/history: cannot append: Is a directory"
$T send-keys -t lc "/params" Enter
$T send-keys -t lc C-d
check "history a directory: exits" '^EXIT=0'
if [ "$(grep -c 'could not keep the input history' "$tmp/histdir.err")" = 1 ]; then
    ok "history a directory: said once on stderr"
else
    bad "history a directory: said once on stderr"; sed 's/^/  | /' "$tmp/histdir.err"
fi
# HOME and XDG_STATE_HOME unset
start nohome "-u HOME -u XDG_STATE_HOME LLAMACHATRC='$tmp/rc' '$LC'" || exit 1
check "HOME unset: said on screen" "could not keep the input history: nowhere to keep"
$T send-keys -t lc C-d
check "HOME unset: exits" '^EXIT=0'
if grep -q "^llamachat: could not keep the input history: nowhere to keep the history and conversations: neither XDG_STATE_HOME nor HOME is set" "$tmp/nohome.err"; then
    ok "HOME unset: on stderr"
else
    bad "HOME unset: on stderr"; sed 's/^/  | /' "$tmp/nohome.err"
fi
# no sanitizer report from any run that ended by itself
if grep -l 'AddressSanitizer\|LeakSanitizer\|runtime error' "$tmp"/*.err 2>/dev/null; then
    bad "no sanitizer report"; grep -h -A5 'Sanitizer\|runtime error' "$tmp"/*.err | head -40
else
    ok "no sanitizer report"
fi
exit $fail
