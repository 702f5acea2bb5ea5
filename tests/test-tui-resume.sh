#!/bin/sh
# test-tui-resume.sh - instant resume in the running chat (issue 15 item 4), driven in tmux
# (private HOME and rc; every wait polls the screen or a file): a chat kept in chats/ gets its KV
# cache beside it (START.json.kv, 0600); --continue reads it back with a note and the next
# message is the only text the model reads (the token log's prompt starts at the restored
# position); the reply is the same as after --resume of the same transcript with --no-kv-file,
# which reads it all; a damaged file is refused with its note and the chat goes on as without it.
set -u
command -v python3 >/dev/null 2>&1 || { echo "SKIP: python3 not installed"; exit 77; }
. "$(dirname "$0")/tui-lib.sh"
tui_lib_paths
tui_lib_init lc-tui-resume
# wait_file FILE: poll until FILE exists and is not empty (10 s)
wait_file() {
    i=0
    while [ $i -lt 100 ]; do
        [ -s "$1" ] && return 0
        sleep 0.1; i=$((i + 1))
    done
    return 1
}
quit() {
    $T send-keys -t lc C-e C-u C-d
    check "$1: exits with status 0" '^EXIT=0'
    if grep -q 'AddressSanitizer\|runtime error\|LeakSanitizer' "$tmp/$1.err"; then
        bad "$1: no sanitizer report"; sed 's/^/  | /' "$tmp/$1.err" | head -30
    fi
    wait_for '^\$ *$' 10 >/dev/null
}
# start NAME ARGS...: llamachat with ARGS, stderr to $tmp/NAME.err
start() {
    name=$1; shift
    $T send-keys -t lc "clear; '$LC' $* 2>'$tmp/$name.err'; echo EXIT=\$?" Enter
    wait_for '^ idle \|' 30 >/dev/null || { bad "$name: chat started"; return 1; }
}
# last_reply FILE: the text of the last assistant message of a JSON transcript
last_reply() {
    python3 -c 'import json,sys; m=[x for x in json.load(open(sys.argv[1]))["messages"] if x["role"]=="assistant"]; print(m[-1]["content"] if m else "")' "$1"
}

H="$tmp/home"
mkdir -p "$H"
cat >"$tmp/rc" <<RC
[model]
path = $MODEL
threads = 1
[sampling]
temp = 0
max_tokens = 8
[ui]
show_params = off
RC
$T -f /dev/null new-session -d -s lc -x 200 -y 40 \
    "env HOME='$H' LLAMACHATRC='$tmp/rc' LANG=C.UTF-8 LC_ALL=C.UTF-8 TERM=tmux-256color PS1='$ ' sh"
$T set-option -t lc status off >/dev/null
wait_for '^\$' 10 >/dev/null || { echo "FAIL: no shell prompt"; exit 1; }
CHATS="$H/.local/state/llamachat/chats"

# 1. a chat of two turns: its transcript and, beside it, its KV cache
start first || exit 1
$T send-keys -t lc "Lily had a red ball" Enter
check "turn 1 answered" 'max tokens reached \(8\)'
c=$(ctx_now)
$T send-keys -t lc "She gave it to her friend Tom" Enter
check_answered "turn 2 answered" "$c"
n_first=$(ctx_now)
quit first
chat=$(ls "$CHATS"/*.json 2>/dev/null | head -1)
if [ -n "$chat" ] && wait_file "$chat.kv"; then ok "the KV state beside the transcript"; else bad "the KV state beside the transcript: $(ls -la "$CHATS")"; fi
[ "$(stat -c %a "$chat.kv" 2>/dev/null)" = 600 ] && ok "the KV state is 0600" || bad "the KV state is 0600: $(stat -c %a "$chat.kv")"
head -c 8 "$chat.kv" | grep -q '^LCKVSTAT$' && ok "its magic" || bad "its magic"
cp "$chat" "$tmp/saved.json"
cp "$chat.kv" "$tmp/saved.json.kv"
# last-chat.json (kept at exit) shares that state: the same file, linked
LAST="$H/.local/state/llamachat/last-chat.json"
if [ -s "$LAST.kv" ] && [ "$(stat -c %i "$LAST.kv")" = "$(stat -c %i "$chat.kv")" ]; then
    ok "last-chat.json.kv is the chat's KV state"
else
    bad "last-chat.json.kv is the chat's KV state: $(ls -li "$LAST.kv" "$chat.kv" 2>&1)"
fi

# 2. --continue: restored, and only the new message is read
start cont "--continue --log-file '$tmp/cont.log'" || exit 1
check "--continue: the note" "KV state $chat\.kv: [0-9]+ tokens restored in [0-9.]+ s"
restored=$(screen | sed -n 's/.*KV state .*: \([0-9][0-9]*\) tokens restored in.*/\1/p' | head -1)
[ "${restored:-0}" -gt 20 ] && ok "--continue: $restored tokens restored" || bad "--continue: restored '${restored:-}'"
check "--continue: the context shown is the restored cache" "\| ctx $restored/"
$T send-keys -t lc "Tom said thank you" Enter
check_answered "--continue: answered" "$restored"
first=$(grep -m1 '^prompt pos=' "$tmp/cont.log")
pos=$(printf '%s\n' "$first" | sed -n 's/^prompt pos=\([0-9]*\) n=\([0-9]*\):.*/\1/p')
n=$(printf '%s\n' "$first" | sed -n 's/^prompt pos=\([0-9]*\) n=\([0-9]*\):.*/\2/p')
if [ "${pos:-0}" -ge "$((restored - 1))" ] && [ "${n:-99}" -le 10 ]; then
    ok "--continue: the model read only the new message ($first)"
else
    bad "--continue: the model read only the new message: '$first', $restored restored"
fi
quit cont
[ "$restored" -le "$n_first" ] && ok "restored <= the first run's context ($n_first)" || bad "restored $restored > $n_first"

# 3. the same transcript with its state, and with --no-kv-file: the same reply
cp "$tmp/saved.json" "$tmp/a.json"; cp "$tmp/saved.json.kv" "$tmp/a.json.kv"
cp "$tmp/saved.json" "$tmp/b.json"; cp "$tmp/saved.json.kv" "$tmp/b.json.kv"
rm -f "$CHATS"/*
start with "--resume '$tmp/a.json'" || exit 1
check "--resume: restored" "KV state $tmp/a\.json\.kv: $restored tokens restored in"
$T send-keys -t lc "Tom said thank you" Enter
check_answered "--resume: answered" "$restored"
quit with
with=$(last_reply "$(ls "$CHATS"/*.json | head -1)")
rm -f "$CHATS"/*
start without "--no-kv-file --resume '$tmp/b.json' --log-file '$tmp/without.log'" || exit 1
not_on_screen "--no-kv-file: no note" 'KV state'
$T send-keys -t lc "Tom said thank you" Enter
check_answered "--no-kv-file: answered" 0
quit without
without=$(last_reply "$(ls "$CHATS"/*.json | head -1)")
grep -q '^prompt pos=0 ' "$tmp/without.log" && ok "--no-kv-file: the whole chat read" || bad "--no-kv-file: the whole chat read: $(grep -m1 '^prompt' "$tmp/without.log")"
ls "$CHATS"/*.kv >/dev/null 2>&1 && bad "--no-kv-file: no KV state written" || ok "--no-kv-file: no KV state written"
if [ -n "$with" ] && [ "$with" = "$without" ]; then ok "the same reply with and without the state: '$with'"; else bad "replies differ: '$with' / '$without'"; fi

# 4. a damaged state file: refused with its note, the chat read as without it
cp "$tmp/saved.json" "$tmp/c.json"
python3 -c 'import sys; b=bytearray(open(sys.argv[1],"rb").read()); b[-50]^=1; open(sys.argv[2],"wb").write(b)' "$tmp/saved.json.kv" "$tmp/c.json.kv"
start damaged "--resume '$tmp/c.json'" || exit 1
check "damaged: the note" "KV state $tmp/c\.json\.kv not used: bad checksum \(the file is damaged\); the"
$T send-keys -t lc "Tom said thank you" Enter
check_answered "damaged: answered" 0
quit damaged

# 5. [chat] autosave = off: nothing in chats/, but last-chat.json gets its own KV state at exit
# (written as the engine quits), and --resume of it restores it
rm -f "$CHATS"/* "$LAST" "$LAST.kv"
printf '[chat]\nautosave = off\n' >>"$tmp/rc"
start noauto || exit 1
$T send-keys -t lc "Lily had a red ball" Enter
check "autosave off: answered" 'max tokens reached \(8\)'
n_noauto=$(ctx_now)
quit noauto
ls "$CHATS"/*.json >/dev/null 2>&1 && bad "autosave off: nothing in chats/" || ok "autosave off: nothing in chats/"
if [ -s "$LAST.kv" ] && head -c 8 "$LAST.kv" | grep -q '^LCKVSTAT$'; then
    ok "autosave off: last-chat.json.kv written at exit"
else
    bad "autosave off: last-chat.json.kv written at exit: $(ls -la "$LAST"* 2>&1)"
fi
start lastresume "--resume '$LAST'" || exit 1
check "--resume last-chat.json: restored" "KV state $LAST\.kv: $n_noauto tokens restored in"
quit lastresume

exit $fail
