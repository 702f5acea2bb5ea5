#!/bin/sh
# test-tui-edit.sh - editing the conversation (issue 14's features), in a detached tmux session
# on the default model (tests/tui-lib.sh): role labels; /regen keeps the replies before as
# versions (< 2/2 >, Alt-Left/Alt-Right) and the model reads the version shown with the token
# ids it was written as; /undo takes back the last exchange and rolls the KV cache back (the
# next turn decodes only its own tokens); /edit and Up put the last message back and a send
# replaces its exchange; /copy through OSC 52 into tmux's paste buffer; the autosaved JSON
# follows (versions kept, an undone exchange gone).
set -u
. "$(dirname "$0")/tui-lib.sh"
tui_lib_paths
tui_lib_init lc-tui-edit
log="$tmp/edit.log"
# prompts: the number of "prompt pos=" lines in the token log
# (grep -c prints 0 itself when nothing matches, and fails when the log is not there yet)
prompts() { c=$(grep -c '^prompt pos=' "$log" 2>/dev/null); echo "${c:-0}"; }
# wait_prompts N: until the log has N prompt lines (10 s)
wait_prompts() {
    i=0
    while [ $i -lt 100 ] && [ "$(prompts)" -lt "$1" ]; do sleep 0.1; i=$((i + 1)); done
    [ "$(prompts)" -ge "$1" ]
}
# idle: the status bar says idle (the reply is done)
idle() { wait_for '^ idle \|' "${1:-30}" >/dev/null; }
# say KEYS...: type KEYS that start a generation, then wait until the engine has read its prompt
# (one more "prompt" line in the token log: every generation logs one) and the chat is idle
# again; waiting for "idle" alone can see the idle left over from the turn before when the
# machine is slow to deliver the keys, and the next keys then land while the model writes
say() {
    n0=$(prompts)
    $T send-keys -t lc "$@"
    wait_prompts $((n0 + 1)) || echo "  no new prompt reached the engine after: $*"
    idle
}
# the chat's autosaved conversation (one file in chats/)
chatfile() { ls "$tmp"/home/.local/state/llamachat/chats/*.json 2>/dev/null | head -1; }
# wait_json REGEX: the autosaved file matches (5 s)
wait_json() {
    i=0
    while [ $i -lt 50 ]; do
        f=$(chatfile)
        if [ -n "$f" ] && grep -Eq -- "$1" "$f"; then return 0; fi
        sleep 0.1; i=$((i + 1))
    done
    return 1
}

mkdir -p "$tmp/home"
cat >"$tmp/rc" <<RC
[model]
path = $MODEL
threads = 1
[sampling]
temp = 1
seed = 1
max_tokens = 6
[ui]
show_params = off
labels = on
label_user = me>
RC

$T -f /dev/null new-session -d -s lc -x 100 -y 30 \
    "env HOME='$tmp/home' LLAMACHATRC='$tmp/rc' LANG=C.UTF-8 LC_ALL=C.UTF-8 TERM=tmux-256color LLAMACHAT_LOG='$log' '$LC' 2>'$tmp/err'; echo EXIT=\$?; sleep 60"
$T set-option -t lc status off >/dev/null
$T set-option -g set-clipboard on >/dev/null
idle || { echo "FAIL: the chat did not start"; screen; exit 1; }

# 1. labels: the configured one for the user ("me>"); a base model's reply continues the
# user's text on its line, so it has none (what the model reads is on screen)
say "Lily had a red ball" Enter
check "labels: the user's message has the configured label" '^me> Lily had a red ball'
wait_prompts 1 || bad "first prompt in the token log"
first=$(grep '^prompt pos=' "$log" | head -1)
reply1=$(awk '/^reply pos=/ { sub(/.*: /, ""); printf "%s ", $0 }' "$log")

# 2. /regen with another seed: a second version, shown "< 2/2 >"; Alt-Left shows the first
$T send-keys -t lc "/set seed 2" Enter
n0=$(prompts)
$T send-keys -t lc "/regen" Enter
check "regen: the new reply is version 2 of 2" '< 2/2 >'
wait_prompts $((n0 + 1)) || echo "  no new prompt reached the engine after /regen"
idle
wait_json '"chosen": 2' && ok "regen: the autosaved JSON keeps both versions" \
    || { bad "regen: the autosaved JSON keeps both versions"; cat "$(chatfile)"; }
$T send-keys -t lc M-Left
check "flip: Alt-Left shows version 1 of 2" '< 1/2 >'
check "flip: the context figure is not the other version's" 'ctx -/2048'
wait_json '"chosen": 1' && ok "flip: the autosaved JSON says version 1 is shown" \
    || { bad "flip: the autosaved JSON says version 1 is shown"; cat "$(chatfile)"; }
$T send-keys -t lc M-Left
check "flip: version 1 is the first" 'reply 1/2 is the first'

# 3. the model reads the version shown, as the ids it was written as: the next prompt starts
# inside the first reply (where it differs from the second, the one cached) and holds the
# first reply's sampled ids from there on
n=$(prompts)
say "Then" Enter
wait_prompts $((n + 1)) || bad "third prompt in the token log"
third=$(grep '^prompt pos=' "$log" | sed -n "$((n + 1))p")
pos=$(echo "$third" | sed 's/^prompt pos=\([0-9]*\).*/\1/')
start1=$(echo "$first" | sed 's/^prompt pos=0 n=\([0-9]*\):.*/\1/')
# reply 1's ids from position pos on (reply 1 was decoded at start1, start1 + 1, ...)
want=$(echo "$reply1" | tr ' ' '\n' | grep . | tail -n +$((pos - start1 + 1)) | tr '\n' ' ' | sed 's/ $//')
got=$(echo "$third" | sed 's/.*: //' | cut -d' ' -f1-$(echo "$want" | wc -w))
if [ "$pos" -ge "$start1" ] && [ -n "$want" ] && [ "$got" = "$want" ]; then
    ok "flip: the model reads version 1's own token ids ($want at $pos)"
else
    bad "flip: the model reads version 1's own token ids (prompt at $pos: '$got', want '$want')"
    cat "$log" | grep -v text:
fi
third_line=$third

# 4. /undo: the last exchange leaves the screen and the file; the KV cache is rolled back at once
# to the end of the reply kept (the status bar's ctx), and the same message again is decoded
# there as the same ids: nothing before it is computed again
# (reply 1 is 6 tokens, max_tokens: the last one sampled is not decoded with it, so the log
# has 5 "reply" lines; the third prompt read the sixth)
end1=$((start1 + $(echo "$reply1" | wc -w) + 1))
$T send-keys -t lc "/undo" Enter
check "undo: says what was removed" 'removed the last exchange \(2 messages\)'
if screen | grep -q 'Then'; then bad "undo: the message left the screen"; screen; else ok "undo: the message left the screen"; fi
check "undo: the cache is rolled back to the end of reply 1 (ctx $end1)" "ctx $end1/2048"
wait_json '"chosen": 1' && ! grep -q '"content": "Then"' "$(chatfile)" \
    && ok "undo: the autosaved JSON no longer has the exchange" \
    || { bad "undo: the autosaved JSON no longer has the exchange"; cat "$(chatfile)"; }
n=$(prompts)
say "Then" Enter
wait_prompts $((n + 1)) || bad "prompt after undo in the token log"
again=$(grep '^prompt pos=' "$log" | sed -n "$((n + 1))p")
again_n=$(echo "$again" | sed 's/^prompt pos=[0-9]* n=\([0-9]*\):.*/\1/')
again_ids=$(echo "$again" | sed 's/.*: //')
then_ids=$(echo "$third_line" | sed 's/.*: //' | tr ' ' '\n' | tail -n "$again_n" | tr '\n' ' ' | sed 's/ $//')
if [ "$(echo "$again" | sed 's/^prompt pos=\([0-9]*\).*/\1/')" = "$end1" ] && [ "$again_ids" = "$then_ids" ]; then
    ok "undo: the next turn decodes only its own tokens ($again)"
else
    bad "undo: the next turn decodes only its own tokens (got '$again'; want pos=$end1 and the ids '$then_ids' that ended '$third_line')"
fi

# 5. /edit: the message comes back; sending replaces the exchange
$T send-keys -t lc "/edit" Enter
check "edit: the last message is back in the input" '^> Then *$'
say C-e " she ran" Enter
check "edit: the new message is shown" 'Then she ran'
if screen | grep -Eq 'Then[^ ]|Then $' ; then :; fi
count=$(screen | grep -c 'Then')
[ "$count" = 1 ] && ok "edit: the old exchange is gone" || { bad "edit: the old exchange is gone ($count)"; screen; }
wait_json '"content": "Then she ran"' && ! grep -q '"content": "Then"' "$(chatfile)" \
    && ok "edit: the autosaved JSON has the new message only" \
    || { bad "edit: the autosaved JSON has the new message only"; cat "$(chatfile)"; }

# 6. Up on an empty line right after a reply: the same; Esc keeps the line as a new message
$T send-keys -t lc Up
check "Up: the last message is back in the input" '^> Then she ran *$'
check "Up: says what Enter does" 'Enter replaces that exchange'
$T send-keys -t lc Up
check "Up again: readline's history, the edit cancelled" 'edit cancelled: history'
$T send-keys -t lc C-u Up
check "Up: the last message again" 'Enter replaces that exchange'
$T send-keys -t lc Escape
check "Esc: the edit cancelled, the line kept" 'edit cancelled: Enter sends the line as a new message'
check "Esc: the line is still there" '^> Then she ran *$'
$T send-keys -t lc C-u
$T send-keys -t lc "/undo" Enter
check "undo: back to one exchange" 'removed the last exchange'

# 6b. after a command, Up is history (a shell habit does not edit); the message sent again
# unchanged (Up, Enter) is a /regen: the reply before is kept as version 1
say "Then she sat" Enter
$T send-keys -t lc "/xyz" Enter
check "a command typed" 'unknown command /xyz'
check "unknown command: the line comes back for correction" '^> /xyz *$'
$T send-keys -t lc C-u Up
check "Up after a command: the command from history" '^> /xyz *$'
if screen | grep -q 'Enter replaces that exchange'; then bad "Up after a command: no edit"; else ok "Up after a command: no edit"; fi
say C-u "Then she sat" Enter
$T send-keys -t lc Up
check "Up after a message: the edit" 'Enter replaces that exchange'
say Enter
# a base model's reply continues the message on its line: "< 2/2 >" follows the reply, not
# the message (the middle of the running text)
check "Up, Enter unchanged: the reply before kept" 'Then she sat[^<]+ < 2/2 > (\(cut at the token limit\))? *$'
not_on_screen "Up, Enter unchanged: the marker is not inside the text" 'Then she sat < 2/2 >'
count=$(screen | grep -o 'Then she sat' | wc -l | tr -d ' ')
[ "$count" = 2 ] && ok "Up, Enter unchanged: the message is not sent again" || { bad "Up, Enter unchanged: the message is not sent again ($count)"; screen; }
wait_json '"chosen": 2' && ok "Up, Enter unchanged: the autosaved JSON keeps both replies" \
    || { bad "Up, Enter unchanged: the autosaved JSON keeps both replies"; cat "$(chatfile)"; }
$T send-keys -t lc "/undo" Enter "/undo" Enter
check "undo: back to one exchange" 'removed the last exchange'

# 7. refused while the model writes, the line kept
$T send-keys -t lc "/set max-tokens -1" Enter
$T send-keys -t lc "Once upon a time" Enter
wait_for 'writing|reading' 10 >/dev/null
$T send-keys -t lc "/undo" Enter
check "undo while writing: refused" '/undo: the model is writing'
check "undo while writing: the line is kept" '^> /undo *$'
$T send-keys -t lc Escape
idle
$T send-keys -t lc C-u "/set max-tokens 6" Enter

# 8. /copy: OSC 52 through tmux into its paste buffer
$T send-keys -t lc "/copy 2" Enter
check "copy N: says what was copied" 'copied 16 characters \(message 2 from the end, yours\)'
i=0; while [ $i -lt 30 ] && ! $T show-buffer >/dev/null 2>&1; do sleep 0.1; i=$((i + 1)); done
buf=$($T show-buffer 2>/dev/null)
[ "$buf" = "Once upon a time" ] && ok "copy N: tmux's buffer holds the message" || bad "copy N: tmux's buffer holds '$buf'"
$T send-keys -t lc "/copy 99" Enter
check "copy N: out of range" '/copy 99: the conversation has [0-9]+ messages'
$T send-keys -t lc "/copy code" Enter
check "copy code: none" 'no code block'

# 9. a transcript with versions and a code block: /load shows "< 2/2 >"; /copy code copies the
# block without its fences (characters counted, not bytes); Alt-Left, then /copy: version 1
cat >"$tmp/code.json" <<'JSON'
{ "format": "llamachat-transcript", "version": 1, "messages": [
  { "role": "user", "content": "Write C" },
  { "role": "assistant", "content": "Here:\n```c\nint main(void) { return 0; } /* é */\n```\nDone.",
    "alternatives": [ { "content": "No." } ], "chosen": 2 } ] }
JSON
$T send-keys -t lc "/load $tmp/code.json" Enter
check "load: the reply shows version 2 of 2, after it" '^Done\. < 2/2 > *$'
$T delete-buffer 2>/dev/null
$T send-keys -t lc "/copy code" Enter
check "copy code: says what was copied" 'copied 36 characters \(the last code block of the last reply\)'
i=0; while [ $i -lt 30 ] && ! $T show-buffer >/dev/null 2>&1; do sleep 0.1; i=$((i + 1)); done
buf=$($T show-buffer 2>/dev/null)
[ "$buf" = "int main(void) { return 0; } /* é */" ] && ok "copy code: tmux's buffer holds the block" \
    || bad "copy code: tmux's buffer holds '$buf'"
$T send-keys -t lc M-Left
check "load: Alt-Left shows version 1, after it" 'Write CNo\. < 1/2 > *$'
$T delete-buffer 2>/dev/null
$T send-keys -t lc "/copy" Enter
check "copy: the last reply as shown" 'copied 3 characters \(the last reply\)'
i=0; while [ $i -lt 30 ] && ! $T show-buffer >/dev/null 2>&1; do sleep 0.1; i=$((i + 1)); done
buf=$($T show-buffer 2>/dev/null)
[ "$buf" = "No." ] && ok "copy: tmux's buffer holds version 1" || bad "copy: tmux's buffer holds '$buf'"

# 9b. /copy takes the reply as seen: no folded thinking part, no white space around it, no
# control characters (an ESC or BEL pasted into a shell could drive it); the note counts them
cat >"$tmp/think.json" <<'JSON'
{ "format": "llamachat-transcript", "version": 1, "messages": [
  { "role": "user", "content": "Hi" },
  { "role": "assistant", "content": " <think>plan\n</think>\n\n Yes\u001b\u0007 ok. \n" } ] }
JSON
$T send-keys -t lc "/load $tmp/think.json" Enter
check "load: the chat with a thinking part" 'loaded 2 messages'
$T delete-buffer 2>/dev/null
$T send-keys -t lc "/copy" Enter
check "copy: the visible answer, the controls counted" 'copied 7 characters \(the last reply; 2 control characters left out\)'
i=0; while [ $i -lt 30 ] && ! $T show-buffer >/dev/null 2>&1; do sleep 0.1; i=$((i + 1)); done
buf=$($T show-buffer 2>/dev/null)
[ "$buf" = "Yes ok." ] && ok "copy: tmux's buffer holds the answer only" || bad "copy: tmux's buffer holds '$buf'"
$T send-keys -t lc "/think" Enter "/copy 1" Enter
check "copy with /think: the thinking part too" 'copied 30 characters \(message 1 from the end, a reply; 2 control'
$T delete-buffer 2>/dev/null
$T send-keys -t lc "/think" Enter

$T send-keys -t lc "/quit" Enter
check "exits with status 0" '^EXIT=0'
if grep -q 'AddressSanitizer\|runtime error\|LeakSanitizer' "$tmp/err"; then
    bad "no sanitizer report"; sed 's/^/  | /' "$tmp/err" | head -30
fi

# 10. a chat template (ChatML on the same model): replies start their own line, so each message
# has its label (the defaults, the model's configured as "bot:"); a regenerated reply shows
# "bot: < 2/2 >"
$T kill-session -t lc
sed -e 's/^label_user = me>/label_model = bot:/' -e 's/^max_tokens = 6/max_tokens = 4/' "$tmp/rc" >"$tmp/rc2"
$T -f /dev/null new-session -d -s lc -x 100 -y 30 \
    "env HOME='$tmp/home' LLAMACHATRC='$tmp/rc2' LANG=C.UTF-8 LC_ALL=C.UTF-8 TERM=tmux-256color LLAMACHAT_LOG='$log' '$LC' --chat-template chatml --system 'Be kind.' 2>'$tmp/err2'; echo EXIT=\$?; sleep 60"
idle || { echo "FAIL: the chat did not start (chatml)"; screen; exit 1; }
say "Hello" Enter
check "labels: the system prompt's" '^system: Be kind\.$'
check "labels: yours" '^you: Hello$'
check "labels: the model's (configured)" '^bot: [^ ]'
say "/set seed 7" Enter "/regen" Enter
check "labels: a second version after the label" '^bot: < 2/2 > [^ ]'
$T send-keys -t lc "/quit" Enter
check "chatml: exits with status 0" '^EXIT=0'
if grep -q 'AddressSanitizer\|runtime error\|LeakSanitizer' "$tmp/err2"; then
    bad "chatml: no sanitizer report"; sed 's/^/  | /' "$tmp/err2" | head -30
fi
# 11. the chat's model file is saved with it ("model_path"); --resume without a configured model
# (no -m, no [model] path) opens it; a file that is gone: a note, and the default model
$T kill-session -t lc
grep -v '^path = ' "$tmp/rc" >"$tmp/rc3"
Q8="$S/models/stories260K-ff192-q8_0.gguf"
case $Q8 in /*) ;; *) Q8="$(pwd)/$Q8" ;; esac
Q8=$(realpath "$Q8")
for mp in "$Q8" "$tmp/gone.gguf"; do
    cat >"$tmp/mp.json" <<JSON
{ "format": "llamachat-transcript", "version": 1, "model": "stories260K", "model_path": "$mp",
  "messages": [ { "role": "user", "content": "Hi" }, { "role": "assistant", "content": "Yo." } ] }
JSON
    rm -rf "$tmp/home3"; mkdir -p "$tmp/home3"
    $T -f /dev/null new-session -d -s lc -x 160 -y 30 \
        "env HOME='$tmp/home3' LLAMACHATRC='$tmp/rc3' LANG=C.UTF-8 LC_ALL=C.UTF-8 TERM=tmux-256color LLAMACHAT_LOG='$log' '$LC' --resume '$tmp/mp.json' 2>'$tmp/err3'; echo EXIT=\$?; sleep 60"
    idle || { bad "model_path: the chat did not start"; screen; }
    if [ "$mp" != "$Q8" ]; then
        check "model_path gone: a note" "the chat's model $tmp/gone.gguf is not there"
    fi
    say "Then" Enter
    $T send-keys -t lc "/quit" Enter
    check "model_path: exits with status 0" '^EXIT=0'
    kept="$tmp/home3/.local/state/llamachat/last-chat.json"
    want=$Q8
    [ "$mp" = "$Q8" ] || want=$(realpath "$S/models/stories260K-ff192-q4_1.gguf")
    got=$(sed -n 's/^ *"model_path": "\(.*\)",*$/\1/p' "$kept" 2>/dev/null)
    [ "$got" = "$want" ] && ok "model_path: the chat ran on and saved $(basename "$want")" \
        || bad "model_path: saved '$got', want '$want'"
    $T kill-session -t lc
done
exit $fail
