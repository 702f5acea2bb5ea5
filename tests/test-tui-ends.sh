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
#  5. a greedy reply after /load or /clear: no "seed_used" (it was the seed of the conversation
#     before: a seed that made nothing in this one);
#  6. a continued chat outgrowing last-chat.json: its earlier state there is not called another
#     chat on stderr, and a second such exit moves its own aside without replacing the first.
#  7. a reply (max-tokens none) the context cuts, the turn alone filling it: "context", with
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
# kept_as NAME END: the newest chat file's reply (message 1) has text and ends END
kept_as() {
    f=$(newest)
    if [ -n "$f" ] && [ "$(json "$f" 'm[1]["role"] + "|" + m[1].get("end", "") + "|" + str(len(m[1]["content"]) > 0)')" = "assistant|$2|True" ]; then
        ok "$1: kept as $2 with its text"
    else bad "$1: kept as $2 with its text"; cat "$f"; fi
}

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
kept_as "fail" error
start fail2 "" --continue || exit 1
check "fail: reopened, the note" '\(cut off by an error\)' 10
quit fail2

# 5. a greedy reply (temp 0) uses no seed, so its chat records none ("seed_used"), not the seed
# a sampled reply of the conversation before it drew: /load (another chat object) and /clear
# (the same one) start a conversation that has used no seed yet
seed_of() {
    python3 -c 'import json, sys
print(json.load(open(sys.argv[1], encoding="utf-8"))["parameters"].get("seed_used", "none"))' "$1"
}
# answer NAME TEXT: TEXT sent, the reply written and the chat idle again
answer() {
    $T send-keys -t lc "/set max-tokens 40" Enter
    old=$(ctx_now)
    $T send-keys -t lc "$2" Enter
    check_answered "$1" "$old"
}
rm -f "$chats"/*.json*
start seed1 "" || exit 1
answer "seed: a greedy chat" "Lily had a cat"
quit seed1
greedy=$(newest)
start seed2 "" || exit 1
$T send-keys -t lc "/set temp 0.8" Enter
answer "seed: a sampled chat" "Tom went to the park"
$T send-keys -t lc "/load $greedy" Enter
check "seed: the greedy chat loaded" 'loaded 2 messages'
answer "seed: a greedy reply in it" "The sun was hot"
quit seed2
start seed3 "" || exit 1
$T send-keys -t lc "/set temp 0.8" Enter
answer "seed: another sampled chat" "Ben had a dog"
$T send-keys -t lc "/clear" Enter
check "seed: cleared" 'conversation cleared'
$T send-keys -t lc "/set temp 0" Enter
answer "seed: a greedy reply after /clear" "Sue saw a bird"
quit seed3
f=$(grep -l 'The sun was hot' "$chats"/*.json)
if [ -n "$f" ] && [ "$(seed_of "$f")" = none ]; then
    ok "seed: the loaded greedy chat records no seed"
else bad "seed: the loaded greedy chat records no seed"; grep -h seed "$f"; fi
f=$(grep -l 'Sue saw a bird' "$chats"/*.json)
if [ -n "$f" ] && [ "$(seed_of "$f")" = none ]; then
    ok "seed: the greedy chat after /clear records no seed"
else bad "seed: the greedy chat after /clear records no seed"; grep -h seed "$f"; fi
f=$(grep -l 'Ben had a dog' "$chats"/*.json)
if [ -n "$f" ] && [ "$(seed_of "$f")" != none ]; then
    ok "seed: a sampled chat records its seed"
else bad "seed: a sampled chat records its seed"; grep -h seed "$f"; fi

# 6. a chat continued (--continue) that grows too large for last-chat.json: the last-chat.json
# its first run left is this very chat as it was then; it goes aside, and stderr must not call
# it another chat (it said "the earlier chat ... (it is not this one)")
rm -rf "$chats" "$H/.local/state/llamachat/last-chat"*
start grow1 "" || exit 1
answer "grow: a first run" "Lily had a cat"
quit grow1
st="$H/.local/state/llamachat"
size=$(stat -c %s "$st/last-chat.json")
start grow2 "LLAMACHAT_TEST_MAX_CHAT_FILE=$((size + 200))" --continue || exit 1
answer "grow: continued past the limit" "Tom went to the park and saw a big dog and a little cat"
quit grow2
if grep -q '"content": "Lily had a cat"' "$st/last-chat-earlier.json" 2>/dev/null &&
    grep -q "what last-chat.json held (an earlier exit's: another chat, or this one as it was then) is now $st/last-chat-earlier.json" "$tmp/grow2.err" &&
    ! grep -q 'not this one' "$tmp/grow2.err"; then
    ok "grow: this chat's earlier state is not called another chat"
else bad "grow: this chat's earlier state is not called another chat"; sed 's/^/  | /' "$tmp/grow2.err"; fi
# ... and a second such exit does not replace that file (with autosave off it may be the only
# copy of a chat): it goes to last-chat-earlier-2.json
start grow3 "" || exit 1
answer "grow: another run" "Sam saw a red ball"
quit grow3
start grow4 "LLAMACHAT_TEST_MAX_CHAT_FILE=$((size + 200))" --continue || exit 1
answer "grow: continued past the limit again" "Tom went to the park and saw a big dog and a little cat"
quit grow4
if grep -q '"content": "Lily had a cat"' "$st/last-chat-earlier.json" 2>/dev/null &&
    grep -q '"content": "Sam saw a red ball"' "$st/last-chat-earlier-2.json" 2>/dev/null &&
    grep -q "is now $st/last-chat-earlier-2.json" "$tmp/grow4.err"; then
    ok "grow: a second earlier chat does not replace the first"
else bad "grow: a second earlier chat does not replace the first"; ls -la "$st"; sed 's/^/  | /' "$tmp/grow4.err"; fi

# 7. the context fills with the turn alone (-c 64, max-tokens none): "context", not "length"
rm -f "$chats"/*.json*
start full "" -c 64 -n -1 || exit 1
$T send-keys -t lc "Once upon a time" Enter
check "full: the note" '\(cut off: the context is full\)' 30
not_on_screen "full: ... not the token limit" 'cut at the token limit'
check "full: idle" '^ idle ' 10
quit full
kept_as "full" context
start full2 "" --continue || exit 1
check "full: reopened, the note" '\(cut off: the context is full\)' 10
not_on_screen "full: reopened, ... not the token limit" 'cut at the token limit'
quit full2

exit $fail
