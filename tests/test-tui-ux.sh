#!/bin/sh
# test-tui-ux.sh - faults a demanding new user met, driven in a detached tmux session as
# tests/test-tui-first.sh is (tests/tui-lib.sh: private HOME and rc, every wait polls the
# screen): the parameter pane shows every value whole (a seed or top-k wider than its row is
# not cut to its first digits); --resume keeps the command line's options over the saved
# parameters and applies --system; /save onto a directory or a FIFO says so at once; a second
# chat's --continue does not take over the conversation file another one is writing; commands
# without arguments refuse one.
set -u
. "$(dirname "$0")/tui-lib.sh"
tui_lib_paths
tui_lib_init lc-tui-ux

mkdir -p "$tmp/home"
cat >"$tmp/rc" <<RC
[model]
path = $MODEL
threads = 1
[sampling]
temp = 0
max_tokens = 8
[ui]
show_params = on
RC

tui_lib_shell

# 1. the parameter pane never cuts a value: it was "seed          527269" for 52726912 and
# "top-k         100000" for 1000000 (the row's last columns dropped)
start pane || exit 1
$T send-keys -t lc "/set seed 52726912" Enter
check "pane: an 8-digit seed whole on its row" '│ seed        52726912$'
$T send-keys -t lc "/set top-k 1000000" Enter
check "pane: a 7-digit top-k whole" '│ top-k        1000000$'
$T send-keys -t lc "/set max-tokens 123456789" Enter
check "pane: a 9-digit max-tokens whole" '│ max-tokens 123456789$'
$T send-keys -t lc "/set seed 18446744073709551614" Enter
check "pane: the largest seed on the row under its label" '│ 18446744073709551614$'
if screen | grep -A1 '│ seed *$' | grep -q '│ 18446744073709551614$'; then
    ok "pane: the label on the row above"
else bad "pane: the label on the row above"; screen | sed 's/^/  | /'; fi
check "pane: the help rows follow it" '│ Tab   edit here$'
# the usual widths keep the usual layout
$T send-keys -t lc "/set seed 5" Enter "/set top-k 40" Enter
check "pane: a short seed as before" '│ seed               5$'
check "pane: top-k as before" '│ top-k             40$'
quit pane

# 2. --resume and --continue: options given on the command line win over the parameters saved
# in the transcript (-n 3 and --temp 0 were ignored: the saved max_tokens 8 and temp 0.8 ran),
# and --system replaces the saved system prompt (it was dropped without a word); the rc file's
# values and system prompt do not
start saved || exit 1
$T send-keys -t lc "/set temp 0.7" Enter "/set max-tokens 6" Enter "Once upon a time" Enter
check "resume: answered" 'max tokens reached \(6\)'
$T send-keys -t lc "/save $tmp/r.json" Enter
check "resume: saved" "saved $tmp/r.json"
quit saved
rm -f "$tmp/r.json.kv"
# start_args NAME ARGS...: llamachat with ARGS (one string, for the shell) and the token log
start_args() {
    name=$1; shift
    $T send-keys -t lc "clear; '$LC' $* --log-file '$tmp/$name.log' 2>'$tmp/$name.err'; echo EXIT=\$?" Enter
    wait_for '^ idle \|' 30 >/dev/null || { bad "$name: chat started"; tui_show_err "$name"; return 1; }
}
start_args cli "--resume '$tmp/r.json' -n 3 --temp 0 --seed 77 --system 'Be kind.'" || exit 1
check "resume: -n wins over the saved max_tokens" '│ max-tokens         3$'
check "resume: --temp wins over the saved temp" '│ temp            0\.00$'
check "resume: --seed wins over the saved seed" '│ seed {14}77$'
check "resume: the saved top-k stays (not on the command line)" '│ top-k             40$'
check "resume: --system says it was added" '^--system: its system prompt is added to the saved chat'
check "resume: the system prompt is shown first" '^Be kind\. +│ Parameters$'
$T send-keys -t lc "The end" Enter
check "resume: three tokens" 'max tokens reached \(3\)'
if grep -q '^prompt text: "<s> Be kind\.\\n\\nOnce upon a time' "$tmp/cli.log"; then
    ok "resume: the model reads the system prompt first"
else bad "resume: the model reads the system prompt first"; grep '^prompt text' "$tmp/cli.log"; fi
# 3 tokens written, the first 2 evaluated (the last ends the reply before it is)
n=$(grep -c '^reply pos' "$tmp/cli.log")
[ "$n" = 2 ] && ok "resume: the reply has 3 tokens" || bad "resume: the reply has 3 tokens ($n evaluated)"
quit cli
# without options: the saved parameters (max_tokens 6, temp 0.7), not the rc file's (8, 0)
start_args plain "--resume '$tmp/r.json'" || exit 1
check "resume: the saved max_tokens" '│ max-tokens         6$'
check "resume: the saved temp" '│ temp            0\.70$'
not_on_screen "resume: no note about --system" '^--system'
quit plain
# --continue with --system "": the kept chat's system prompt removed
start_args sys "--resume '$tmp/r.json' --system 'Be kind.'" || exit 1
$T send-keys -t lc "/save $tmp/r2.json" Enter
check "resume: saved with the system prompt" "saved $tmp/r2.json"
quit sys
start_args nosys "--resume '$tmp/r2.json' --system ''" || exit 1
check "resume: --system '' says the saved one is removed" '^--system "": the saved system prompt is removed'
not_on_screen "resume: the system prompt is gone" '^Be kind\.'
quit nosys
start_args other "--resume '$tmp/r2.json' --system 'Be brief.'" || exit 1
check "resume: --system says it replaced the saved one" '^--system: its system prompt replaces the saved one'
check "resume: the new system prompt is shown" '^Be brief\. +│ Parameters$'
quit other

# 3. /save onto what is not a file: a directory or a FIFO was "exists: Enter replaces it
# (/save! NAME)", and Enter then failed ("cannot rename the temporary file over it: Is a
# directory"); now it says what is there at once and gives the line back to correct
mkdir "$tmp/dir"
mkfifo "$tmp/fifo"
start save || exit 1
$T send-keys -t lc "Once upon a time" Enter
check "save: answered" 'max tokens reached'
$T send-keys -t lc "/save $tmp/dir" Enter
check "save: a directory is said to be one" "save failed: $tmp/dir is a directory; not saved"
check "save: the line is back to correct" "^> /save $tmp/dir *\$"
not_on_screen "save: no offer to replace a directory" 'Enter replaces it'
$T send-keys -t lc C-e C-u "/save! $tmp/fifo" Enter
check "save: a FIFO is said to be one" "save failed: $tmp/fifo is a FIFO; not saved"
check "save: /save! comes back as typed" "^> /save! $tmp/fifo *\$"
[ -p "$tmp/fifo" ] && [ -d "$tmp/dir" ] && ok "save: both left as they were" || bad "save: both left as they were"
[ -z "$(ls "$tmp/dir")" ] && ok "save: nothing written in the directory" || bad "save: nothing written in the directory"
$T send-keys -t lc C-e C-u "/save $tmp/dir/a.md" Enter
check "save: a file in it is saved" "saved $tmp/dir/a\.md"
quit save

# 4. a command that takes no argument, given one: "/undo 3" took back one exchange, "/clear x"
# cleared; now refused, nothing done, the line back; /copy N says N as typed
start args || exit 1
$T send-keys -t lc "Once upon a time" Enter
check "args: answered" 'max tokens reached'
$T send-keys -t lc "/undo 3" Enter
check "args: /undo 3 refused" '/undo takes no argument \(not done\): /undo alone'
check "args: the line is back" '^> /undo 3 *$'
check "args: the exchange is still there" '^Once upon a time'
$T send-keys -t lc C-e C-u "/clear all" Enter
check "args: /clear all refused" '/clear takes no argument \(not done\)'
check "args: nothing cleared" '^Once upon a time'
$T send-keys -t lc C-e C-u "/copy 99999999999999999999" Enter
check "args: /copy N as typed" '/copy 99999999999999999999: the conversation has 2 messages'
$T send-keys -t lc C-e C-u "/undo" Enter
check "args: /undo alone works" 'removed the last exchange \(2 messages\)'
quit args

# 5. two chats on one kept conversation: a second llamachat's --continue took over the file the
# first one was still writing, and each save of one overwrote the other's turns (the second's
# exchange was lost).  Now the first keeps its file (a lock in chats/.lock) and the second goes
# on in a new one with a note; both keep every turn; /delete of the kept file is refused.
CHATS="$tmp/home/.local/state/llamachat/chats"
rm -rf "$CHATS"
start first || exit 1
$T send-keys -t lc "Alpha one" Enter
check "two: first answered" 'max tokens reached'
i=0; while [ -z "$(ls "$CHATS"/*.json 2>/dev/null)" ] && [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done
kept=$(ls "$CHATS"/*.json)
[ "$(stat -c %a "$CHATS/.lock" 2>/dev/null)" = 600 ] && ok "two: the lock file is hidden, 0600" || bad "two: the lock file is hidden, 0600"
$T -f /dev/null new-session -d -s lc2 -x 100 -y 24 \
    "env HOME='$tmp/home' LLAMACHATRC='$tmp/rc' LANG=C.UTF-8 LC_ALL=C.UTF-8 TERM=tmux-256color '$LC' --continue 2>'$tmp/second.err'; echo EXIT=\$?; sleep 30"
screen2() { $T capture-pane -t lc2 -p; }
i=0; while ! screen2 | grep -q '^ idle |' && [ $i -lt 300 ]; do sleep 0.1; i=$((i + 1)); done
if screen2 | tr -d '\n' | grep -q "which another llamachat has open: this copy goes on in a new file"; then
    ok "two: --continue says the chat is open elsewhere"
else bad "two: --continue says the chat is open elsewhere"; screen2 | sed 's/^/  | /'; fi
$T send-keys -t lc2 "Beta two" Enter
i=0; while ! screen2 | grep -q 'max tokens reached' && [ $i -lt 300 ]; do sleep 0.1; i=$((i + 1)); done
# the first may not delete the file the second keeps
$T send-keys -t lc "/chats" Enter
check "two: /chats lists both" '^ *2\. '
n=$(screen | sed -n 's/^ *\([0-9]\)\. .*/\1 &/p' | grep -v 'this one' | cut -d' ' -f1 | head -1)
$T send-keys -t lc "/delete! $n" Enter
check "two: /delete of the file another chat keeps is refused" "not deleted: another llamachat has it open: /"
old=$(ctx_now)
$T send-keys -t lc "Gamma three" Enter
check_answered "two: first answered again" "$old"
sleep 1.5   # the saves of both (about once a second, and after each turn)
$T send-keys -t lc2 C-d
i=0; while ! screen2 | grep -q '^EXIT=0' && [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done
quit first
n=$(ls "$CHATS"/*.json | wc -l)
[ "$n" = 2 ] && ok "two: two conversation files" || bad "two: two conversation files ($n)"
if grep -q '"content": "Gamma three"' "$kept" && ! grep -q '"content": "Beta two"' "$kept"; then
    ok "two: the first file has the first chat's turns"
else bad "two: the first file has the first chat's turns"; cat "$kept"; fi
other=$(ls "$CHATS"/*.json | grep -v "^$kept\$")
if grep -q '"content": "Alpha one"' "$other" && grep -q '"content": "Beta two"' "$other"; then
    ok "two: the second file has the conversation and the second chat's turn"
else bad "two: the second file has the conversation and the second chat's turn"; cat "$other"; fi
n=$(ls "$CHATS" | grep -vc '\.json$\|\.json\.kv$')
[ "$n" = 0 ] && ok "two: nothing else in chats/" || bad "two: nothing else in chats/: $(ls "$CHATS")"

exit $fail
