#!/bin/sh
# test-tui-turns.sh - the chat's integrity around turns, in a detached tmux session (tests/
# tui-lib.sh) on the default (base) model, 160 columns wide: a /regen the engine refuses (the
# prompt no longer fits) keeps the reply before; /undo after the context filled takes the same
# turns from the screen and the model (a /regen then answers the right message); the status
# is "loading" from a switched model's LOADED to the switch's end and typed input waits; Esc
# during a /model load keeps the model and the chat; a message typed while /chats N reads the
# file is held back (never sent into the chat being left); a message of a command during a reply
# stays on the message line with the reply's end; a base model's "< 2/2 >" follows its reply,
# not the middle of the running text; a long message uses the whole width; /load reads its file
# off the UI thread, holding a message typed meanwhile back.
# LLAMACHAT_TEST_SLOW_MS widens the windows that are otherwise a few microseconds wide (the
# engine waits before each LC_EV_DONE and each model switch, /chats N and /load before reading).
set -u
. "$(dirname "$0")/tui-lib.sh"
tui_lib_paths
F32="$S/models/stories260K.gguf"
case $F32 in /*) ;; *) F32="$(pwd)/$F32" ;; esac
[ -f "$F32" ] || { echo "SKIP: $F32 missing"; exit 77; }
tui_lib_init lc-tui-turns
log="$tmp/turns.log"
H="$tmp/home"
mkdir -p "$H"
chats="$H/.local/state/llamachat/chats"
# rc CONTEXT MAX-TOKENS: the configuration file
rc() {
    cat >"$tmp/rc" <<RC
[model]
path = $MODEL
threads = 1
context_size = $1
[sampling]
temp = 0
max_tokens = $2
[ui]
show_params = off
RC
}
# say NAME MESSAGE: send MESSAGE and wait until it is answered (check_answered, 30 s)
say() {
    c0=$(ctx_now)
    $T send-keys -t lc "$2" Enter
    check_answered "$1" "$c0" 30
}

$T -f /dev/null new-session -d -s lc -x 160 -y 40 \
    "env HOME='$H' LLAMACHATRC='$tmp/rc' LANG=C.UTF-8 LC_ALL=C.UTF-8 TERM=tmux-256color PS1='$ ' sh"
$T set-option -t lc status off >/dev/null
wait_for '^\$' 10 >/dev/null || { echo "FAIL: no shell prompt"; exit 1; }

# 1. /regen that no longer fits: a 113-token message answered with max-tokens 4 (5 tokens kept
# for the reply: 118 <= 128); with max-tokens none 16 are kept (129 > 128): the engine refuses
# the /regen, and the reply before stays on screen, in the chat and in the model's reading
rc 128 4
long=$(for i in 1 2 3 4 5 6 7 8 9 10 11 12 13 14; do printf 'Lily had a red ball. '; done | sed 's/ $//')
start regen "LLAMACHAT_LOG='$log'" || exit 1
say "regen: the long message answered" "$long"
$T send-keys -t lc "/save $tmp/r0.json" Enter
check "regen: saved before" "saved $tmp/r0.json"
# the reply's text (json-c escapes / as \/; these words have none)
reply1=$(sed -n '/"role": "assistant"/{n;s/^ *"content": "\(.*\)",*$/\1/p;}' "$tmp/r0.json")
[ -n "$reply1" ] && ok "regen: a reply ($reply1)" || { bad "regen: a reply"; cat "$tmp/r0.json"; }
$T send-keys -t lc "/set max-tokens -1" Enter
check "regen: max-tokens none" 'max-tokens = -1|max-tokens = none'
$T send-keys -t lc "/regen" Enter
check "regen: refused, with the sizes" 'cannot write a new reply: the prompt is 1[0-9][0-9] tokens, and 16 more are kept for the reply; the context holds 128'
check "regen: the message line says the reply before is kept" 'the one before is kept'
# where it was: joined to the message (a base model's running text), with the note that it was
# cut at max-tokens after it, before the error note
if screen | tr '\n' ' ' | tr -s ' ' | grep -Fq -- "red ball.$reply1 (cut at the token limit) cannot write a new reply"; then ok "regen: the reply before is still on screen, after its message"
else bad "regen: the reply before is still on screen, after its message"; screen; fi
check "regen: the input line is empty (nothing given back)" '^> *$'
$T send-keys -t lc "/save $tmp/r.json" Enter
check "regen: saved" "saved $tmp/r.json"
if grep -q '"role": "user"' "$tmp/r.json" && grep -Fq "\"content\": \"$reply1\"" "$tmp/r.json"; then
    ok "regen: the transcript keeps the message and the reply"
else bad "regen: the transcript keeps the message and the reply"; cat "$tmp/r.json"; fi
quit regen

# 2. /undo after the context filled: the oldest turns hidden from the model; undo back past
# them, then /regen answers the last message left on screen (the engine had dropped it: the
# regen found nothing to answer)
rc 128 8
rm -f "$log"
start undo "LLAMACHAT_LOG='$log'" || exit 1
# turn MESSAGE: sent; on screen (so the frame is one after the send: an "idle" from then on is
# this turn's end; the token log can run ahead of the screen), then idle
turn() {
    $T send-keys -t lc "$1" Enter
    i=0; while [ $i -lt 100 ] && ! screen | grep -v '^> ' | tr '\n' ' ' | grep -Fq -- "$1"; do
        sleep 0.1; i=$((i + 1)); done
    wait_for '^ idle \|' 30 >/dev/null
}
n=0
for m in "Tom went to the park." "The sun was hot." "A cat sat on a mat." "Sam ate a big cake." \
         "The dog ran fast." "Mia saw a bird." "Ben had a blue car." "The sky was gray." \
         "Anna found a shell." "The fish swam away."; do
    turn "$m"
    n=$((n + 1))
    if screen | grep -q 'no longer sees the oldest'; then break; fi
done
hidden=$(screen | sed -n 's/.*no longer sees the oldest \([0-9][0-9]*\) messages.*/\1/p' | tail -1)
if [ -n "$hidden" ]; then ok "undo: the context filled after $n turns ($hidden messages hidden)"
else bad "undo: the context filled"; screen; fi
hidden=${hidden:-2}
$T send-keys -t lc "/save $tmp/u.json" Enter
check "undo: saved" "saved $tmp/u.json"
nu=$(grep -c '"role": "user"' "$tmp/u.json")
[ "$nu" = "$n" ] && ok "undo: $n messages sent, each its own turn" || bad "undo: $n messages sent, each its own turn ($nu)"
# undo every turn the model still reads: the screen then ends with the last hidden turn
k=$(( n - hidden / 2 ))
i=0; while [ $i -lt $k ]; do $T send-keys -t lc "/undo" Enter; i=$((i + 1)); done
check "undo: $k exchanges removed" 'removed the last exchange'
before=$(grep -c '^prompt pos=' "$log")
$T send-keys -t lc "/regen" Enter
check "undo then regen: a second version of the last reply on screen" '< 2/2 >'
wait_for '^ idle' 10 >/dev/null
not_on_screen "undo then regen: not refused" 'nothing to regenerate|no new reply'
# the regen's prompt ends with the last message left on screen, the one shown last
want=$(printf '%s\n' "Tom went to the park." "The sun was hot." "A cat sat on a mat." "Sam ate a big cake." \
         "The dog ran fast." "Mia saw a bird." "Ben had a blue car." "The sky was gray." \
         "Anna found a shell." "The fish swam away." | sed -n "$((hidden / 2))p")
i=0; while [ $i -lt 50 ] && [ "$(grep -c '^prompt pos=' "$log")" -le "$before" ]; do sleep 0.1; i=$((i + 1)); done
if grep '^prompt text:' "$log" | tail -1 | grep -Fq -- "$want"; then
    ok "undo then regen: the model read '$want'"
else bad "undo then regen: the model read '$want'"; grep '^prompt text:' "$log" | tail -2; fi
quit undo

# 3. the status after a switched model's LOADED: "loading" until the switch is done, and a
# message typed then waits in the input (the engine is still busy)
rc 2048 4
start switch "LLAMACHAT_TEST_SLOW_MS=3000" || exit 1
say "switch: a first turn" "Once upon a time"
$T send-keys -t lc "/model $F32" Enter
check "switch: loading" "loading $F32"
check "switch: the new model known, still loading" '^ loading \| llama [0-9]+K F32 \|' 30
$T send-keys -t lc "Hi there" Enter
check "switch: a message typed meanwhile waits" 'the model is still loading'
check "switch: ... in the input line" '^> Hi there *$'
check "switch: done" 'now using llama' 30
check "switch: idle" '^ idle \| llama [0-9]+K F32 \|'
c0=$(ctx_now)
$T send-keys -t lc Enter
check_answered "switch: the message sent after" "$c0" 30

# 4. Esc during a /model load: cancelled, the model and the chat as they were
$T send-keys -t lc "/model $MODEL" Enter
check "cancel: loading" "loading $MODEL"
$T send-keys -t lc Escape
check "cancel: cancelled" 'model switch cancelled: still llama' 30
check "cancel: the F32 model still in use" '^ idle \| llama [0-9]+K F32 \|' 30
check "cancel: the chat is intact" '^Once upon a time'
check "cancel: ... both turns" 'Hi there'
$T send-keys -t lc "/show" Enter
check "cancel: /show names the F32 file" "^file: $F32 "
say "cancel: the next message answered" "The end"
quit switch

# 5. /chats N while the file is read: a message typed meanwhile is held back, never sent into
# the chat being left; the chat opens
rc 2048 4
start chats "LLAMACHAT_TEST_SLOW_MS=3000" || exit 1
say "chats: chat A" "Lily had a red ball"
$T send-keys -t lc "/clear" Enter
check "chats: cleared" 'conversation cleared'
say "chats: chat B" "Tom went to the park"
$T send-keys -t lc "/chats" Enter
check "chats: listed" '^ 2\. .*Lily had a red ball$'
fb=$(grep -l 'Tom went to the park' "$chats"/*.json 2>/dev/null | head -1)
$T send-keys -t lc "/chats 2" Enter
check "chats: opening" 'opening .*\.json'
$T send-keys -t lc "and a blue kite" Enter
check "chats: the message waits" 'not sent: a saved chat is being opened'
check "chats: opened" 'opened 2 messages from' 30
check "chats: the message is in the input line" '^> and a blue kite *$'
not_on_screen "chats: chat B is gone from the screen" 'Tom went to the park'
if [ -n "$fb" ] && ! grep -q 'blue kite' "$fb"; then ok "chats: chat B's file never had the message"
else bad "chats: chat B's file never had the message"; cat "$fb"; fi
# ... then its KV state is read (3 s of slow disk before it, 3 s before its end): the status
# says so, a message sent meanwhile is held back with the true reason (not "the model is
# writing"), and the chat is idle once the state is restored
check "chats: reading its KV state" '^ reading saved context '
$T send-keys -t lc Enter
check "chats: held while the state is read" 'not sent: the saved context is being read \(Esc stops it\)'
check "chats: the message is still in the input line" '^> and a blue kite *$'
check "chats: its KV state restored" 'tokens restored in' 30
check "chats: idle after the restore" '^ idle ' 30
$T send-keys -t lc C-u

# 6. a command's message during a reply is kept with the reply's end (DONE comes 3 s after the
# text): "saved ... · max tokens reached"
$T send-keys -t lc C-u "/set max-tokens 2" Enter
$T send-keys -t lc "Once upon a time" Enter
check "notes: writing" '^ writing' 30
$T send-keys -t lc "/save $tmp/n.md" Enter
check "notes: saved" "saved $tmp/n.md"
check "notes: both on the message line" "saved $tmp/n\.md · max tokens reached \(2\)" 30
check "notes: idle" '^ idle' 10

# 7. a base model's /regen marker after its reply, not in the middle of the text; a message
# longer than 80 columns uses the wide screen
$T send-keys -t lc "/regen" Enter
check "marker: the second version" '< 2/2 >' 30
# (the message and its reply may follow a note line, e.g. the KV state's, so the line is
# matched from the message: at least one character of reply before the marker)
check "marker: after the reply" 'Once upon a time[^<]*[a-z.,!] < 2/2 > *$' 30
not_on_screen "marker: not after the message" 'Once upon a time < 2/2 >'
p="$tmp/a-rather-long-directory-name-to-make-the-message-wide/and-a-model-file-name-that-goes-on.gguf"
$T send-keys -t lc "/model $p" Enter
check "long message: whole" "/model: $p: No such file or directory"

# 8. /load reads the file off the UI thread (3 s of slow disk): the screen answers meanwhile, a
# message typed then is held back (never sent into the chat being left), and the file opens
check "load: idle before the save" '^ idle ' 30
$T send-keys -t lc C-u "/save $tmp/l.json" Enter
check "load: saved" "saved $tmp/l\.json"
$T send-keys -t lc "/clear" Enter
check "load: cleared" 'conversation cleared'
$T send-keys -t lc "/load $tmp/l.json" Enter
check "load: reading in the background" "loading $tmp/l\.json \.\.\." 10
$T send-keys -t lc "and a green hat" Enter
check "load: the message waits" 'not sent: a saved chat is being opened' 2
check "load: ... in the input line" '^> and a green hat *$' 2
check "load: loaded" "loaded [0-9]+ messages from $tmp/l\.json" 30
check "load: the loaded chat is shown" '^Lily had a red ball'
check "load: the message is still in the input line" '^> and a green hat *$'
$T send-keys -t lc C-u
check "load: idle" '^ idle ' 30
quit chats

exit $fail
