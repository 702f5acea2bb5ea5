#!/bin/sh
# test-tui-ends.sh - the truth about how a reply ended (chat.h "end"), kept in the transcript and
# shown again when the chat is reopened, driven in a detached tmux session (tests/tui-lib.sh):
#  1. /quit while a reply is being written: the user stopped it, so it is kept "stopped" (it
#     said "partial", "llamachat ended while this reply was being written"); --continue shows
#     "(stopped by you)";
#  2. a reply an error cuts (tests/fake-openai.py's "cut": two deltas, then the connection closes
#     without [DONE]): kept "error" with the text it had; reopened, "(cut off by an error)";
#  3. /regen that has written nothing yet (fake-openai.py's "stall"): the file keeps the reply
#     it replaces while it waits, and /quit then keeps that reply (it was lost from the file);
#  4. the local engine's decode failing mid-reply (LLAMACHAT_TEST_FAIL_AFTER): "error", as 2;
#  5. a reply (max-tokens none) the context cuts, the turn alone filling it: "context", with
#     "(cut off: the context is full)" (it said "length", "(cut at the token limit)", which
#     is max-tokens' end), and so again when reopened.
# LLAMACHAT_TEST_SLOW_MS holds the engine's end of a reply back, so /quit comes before it.
set -u
. "$(dirname "$0")/tui-lib.sh"
tui_lib_paths
command -v python3 >/dev/null 2>&1 || { echo "SKIP: python3 not installed"; exit 77; }
SRC=${LC_SRCDIR:-$(dirname "$0")/..}
tui_lib_init lc-tui-ends
fake=
tui_cleanup() { $T kill-server >/dev/null 2>&1; [ -n "$fake" ] && kill "$fake" 2>/dev/null; rm -rf "$tmp"; }
# json FILE PY-EXPR: PY-EXPR with m = the transcript's messages
json() {
    python3 -c 'import json, sys
m = json.load(open(sys.argv[1], encoding="utf-8"))["messages"]
print(eval(sys.argv[2]))' "$1" "$2"
}
H="$tmp/home"
chats="$H/.local/state/llamachat/chats"
cat >"$tmp/rc" <<RC
[model]
path = $MODEL
threads = 1
[sampling]
temp = 0
max_tokens = 3000
[ui]
show_params = off
history = on
RC
tui_lib_shell
# start NAME ENV ARGS...: llamachat with ENV (a string of VAR=VALUE, may be "") and ARGS
start() {
    name=$1; env=$2; shift 2
    $T send-keys -t lc "clear; env HOME='$H' $env '$LC' $* 2>'$tmp/$name.err'; echo EXIT=\$?" Enter
    wait_for '^ idle \|' 30 >/dev/null || { bad "$name: chat started"; tui_show_err "$name"; return 1; }
}
newest() { ls -t "$chats"/*.json 2>/dev/null | head -1; }

# 1. /quit during a reply: "stopped"
start quit "LLAMACHAT_TEST_SLOW_MS=8000" || exit 1
$T send-keys -t lc "Tom went to the park" Enter
check "quit: writing" '^ writing' 10
sleep 0.5
$T send-keys -t lc "/quit" Enter
check "quit: exits with status 0" '^EXIT=0' 30
f=$(newest)
if [ -n "$f" ] && [ "$(json "$f" 'm[1]["role"] + ":" + m[1].get("end", "")')" = "assistant:stopped" ] &&
    [ -n "$(json "$f" 'm[1]["content"]')" ]; then
    ok "quit: the reply is kept as stopped"
else bad "quit: the reply is kept as stopped"; cat "$f"; fi
start quit2 "" --continue || exit 1
check "quit: reopened, the note says the user stopped it" '\(stopped by you\)' 10
not_on_screen "quit: ... not that the reply was cut off" 'still being written when the chat was saved'
quit quit2

# 2. an error cuts the reply: "error"
python3 "$SRC/tests/fake-openai.py" "$tmp/port" & fake=$!
for _ in $(seq 100); do [ -s "$tmp/port" ] && break; sleep 0.1; done
URL="http://127.0.0.1:$(cat "$tmp/port")"
start cut "" --remote "$URL/cut" || exit 1
$T send-keys -t lc "Hi" Enter
check "cut: the reply so far" '^Hello there' 10
check "cut: the note" '\(cut off by an error\)' 10
check "cut: idle" '^ idle ' 10
quit cut
f=$(newest)
if [ -n "$f" ] && [ "$(json "$f" 'm[-1]["content"] + "|" + m[-1].get("end", "")')" = "Hello there|error" ]; then
    ok "cut: kept as error with its text"
else bad "cut: kept as error with its text"; cat "$f"; fi
start cut2 "" --continue --remote "$URL/ok" || exit 1
check "cut: reopened, the note" '\(cut off by an error\)' 10
quit cut2

# 3. /regen waiting for its first word (a server that stalls): the reply before stays in the
# file, and /quit then keeps it
start stall "" --continue --remote "$URL/stall" || exit 1
$T send-keys -t lc "/regen" Enter
check "stall: waiting" '^ (reading|writing)' 10
sleep 1.5   # (an autosave comes at once after /regen)
if [ "$(json "$f" 'm[-1]["content"] + "|" + m[-1].get("end", "")')" = "Hello there|error" ]; then
    ok "stall: the file keeps the reply being replaced"
else bad "stall: the file keeps the reply being replaced"; cat "$f"; fi
$T send-keys -t lc "/quit" Enter
check "stall: exits with status 0" '^EXIT=0' 30
if [ "$(json "$f" 'str(len(m)) + "|" + m[-1]["content"] + "|" + m[-1].get("end", "")')" = "2|Hello there|error" ]; then
    ok "stall: /quit keeps the reply /regen was replacing"
else bad "stall: /quit keeps the reply /regen was replacing"; cat "$f"; fi

# 4. the local engine's decode fails mid-reply (LLAMACHAT_TEST_FAIL_AFTER: after 6 tokens, as
# out of memory would): the error is shown, the reply so far kept "error", and reopened with
# its note
rm -f "$chats"/*.json*
start fail "LLAMACHAT_TEST_FAIL_AFTER=6" || exit 1
$T send-keys -t lc "Tom went to the park" Enter
check "fail: the error shown" 'decode failed: a fault made by LLAMACHAT_TEST_FAIL_AFTER after 6 tokens' 10
check "fail: the note" '\(cut off by an error\)' 10
quit fail
f=$(newest)
if [ -n "$f" ] && [ "$(json "$f" 'm[1]["role"] + "|" + m[1].get("end", "") + "|" + str(len(m[1]["content"]) > 0)')" = "assistant|error|True" ]; then
    ok "fail: kept as error with its text"
else bad "fail: kept as error with its text"; cat "$f"; fi
start fail2 "" --continue || exit 1
check "fail: reopened, the note" '\(cut off by an error\)' 10
quit fail2

# 5. the context fills with the turn alone (-c 64, max-tokens none): "context", not "length"
rm -f "$chats"/*.json*
start full "" -c 64 -n -1 || exit 1
$T send-keys -t lc "Once upon a time" Enter
check "full: the note" '\(cut off: the context is full\)' 30
not_on_screen "full: ... not the token limit" 'cut at the token limit'
check "full: idle" '^ idle ' 10
quit full
f=$(newest)
if [ -n "$f" ] && [ "$(json "$f" 'm[1]["role"] + "|" + m[1].get("end", "") + "|" + str(len(m[1]["content"]) > 0)')" = "assistant|context|True" ]; then
    ok "full: kept as context with its text"
else bad "full: kept as context with its text"; cat "$f"; fi
start full2 "" --continue || exit 1
check "full: reopened, the note" '\(cut off: the context is full\)' 10
not_on_screen "full: reopened, ... not the token limit" 'cut at the token limit'
quit full2

exit $fail
