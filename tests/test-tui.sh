#!/bin/sh
# test-tui.sh - drive the real chat in a detached tmux session (its own server socket, a fixed
# window size, HOME and LLAMACHATRC in a temp dir) with send-keys, and assert on capture-pane:
# the panes are drawn; a prompt gets the same greedy continuation as the one-shot CLI; Esc stops
# a reply and the program stays up; /set changes the pane; /save then /load round-trips; a
# resize to 20x6 (and smaller) and back leaves a working screen; Ctrl-D exits and leaves the
# terminal as it found it.  Every wait polls the screen with a timeout (no fixed sleeps).
set -u
. "$(dirname "$0")/tui-lib.sh"
tui_lib_paths
tui_lib_init lc-tui

# wait_gone EXTENDED-REGEX [seconds]: poll until the screen no longer matches.
wait_gone() {
    limit=$(( ${2:-30} * 10 )); i=0
    while [ $i -lt $limit ]; do
        if ! screen | grep -Eq -- "$1"; then return 0; fi
        sleep 0.1; i=$((i + 1))
    done
    return 1
}
# pids whose parent is $1 (from /proc: pgrep may not be installed)
child_of() {
    for d in /proc/[0-9]*; do
        [ "$(cut -d' ' -f4 "$d/stat" 2>/dev/null)" = "$1" ] && echo "${d#/proc/}"
    done
}
# a JSON string body as json-c writes it (our texts have no control characters)
json_escape() { printf '%s' "$1" | sed -e 's/\\/\\\\/g' -e 's/"/\\"/g' -e 's|/|\\/|g'; }

N=24
PROMPT="Once upon a time"
want=$("$LC" -m "$MODEL" -p "$PROMPT" --temp 0 -n $N -t 1 2>/dev/null)
cont=${want#"$PROMPT"}
[ -n "$cont" ] && [ "$cont" != "$want" ] || { echo "FAIL: one-shot CLI gave no continuation: '$want'"; exit 1; }

mkdir -p "$tmp/home"
cat >"$tmp/rc" <<RC
[model]
path = $MODEL
threads = 1
[sampling]
temp = 0
max_tokens = $N
[ui]
show_params = on
history = on
RC

# A plain shell in the window; llamachat runs from it so that we can look at the shell after.
$T -f /dev/null new-session -d -s lc -x 100 -y 30 \
    "env HOME='$tmp/home' LLAMACHATRC='$tmp/rc' LANG=C.UTF-8 LC_ALL=C.UTF-8 TERM=tmux-256color PS1='$ ' sh"
$T set-option -t lc status off >/dev/null
wait_for '^\$' 10 || { echo "FAIL: no shell prompt"; exit 1; }
# One job (sh -c) so that Ctrl-Z stops and fg continues the whole line.
# stty_same NAME FILE: FILE (stty -g after the exit, written by the shell after the EXIT line:
# moved into place whole, waited for up to 5 s) equals the modes from before the chat
stty_same() {
    i=0
    while [ $i -lt 50 ] && [ ! -f "$2" ]; do sleep 0.1; i=$((i + 1)); done
    if [ -f "$2" ] && cmp -s "$tmp/stty.before" "$2"; then ok "$1"; else
        bad "$1"; echo "  before: $(cat "$tmp/stty.before")"; echo "  after:  $(cat "$2" 2>/dev/null)"
    fi
}
$T send-keys -t lc "sh -c \"stty -g >$tmp/stty.before; $LC 2>$tmp/stderr; echo EXIT=\\\$?; stty -g >$tmp/stty.after.tmp; mv $tmp/stty.after.tmp $tmp/stty.after\"" Enter

# 1. the panes
check "parameter pane" 'Parameters'
check "status bar idle with the model" '^ idle \| llama .*Q4_1'
check "pane shows temp 0.00" 'temp +0\.00'
check "input prompt" '^> *$'

# 2. a prompt, answered greedily as by the one-shot CLI
$T send-keys -t lc "$PROMPT" Enter
check "reply finished" '^ idle .*ctx [1-9][0-9]*/'
first=$(printf '%s' "$cont" | cut -c1-40)
if screen | grep -Fq -- "$first"; then ok "continuation on screen"; else bad "continuation on screen: '$first'"; screen; fi
$T send-keys -t lc "/save $tmp/a.json" Enter
check "saved" "saved $tmp/a.json"
if grep -Fq "\"content\": \"$(json_escape "$cont")\"" "$tmp/a.json"; then
    ok "reply equals the CLI's continuation"
else
    bad "reply equals the CLI's continuation"; echo "  want: $cont"; grep '"content"' "$tmp/a.json"
fi

# 3. Esc stops a long reply; the program stays up
$T send-keys -t lc "/set max-tokens -1" Enter
check "/set max-tokens" 'max-tokens +none'
$T send-keys -t lc "Tom went to the park" Enter
check "writing" '^ writing'
$T send-keys -t lc Escape
check "Esc stopped the reply" 'stopped after [0-9]+ tokens'
check "idle after stop" '^ idle'
check "the stopped reply says so" '\(stopped by you\)'
$T send-keys -t lc "/params" Enter
check "still responding" 'temp 0\.00, top-k 40'

# 4. /set changes the pane
$T send-keys -t lc "/set temp 0.5" Enter
check "/set temp 0.5 shows in the pane" 'temp +0\.50'
$T send-keys -t lc "/set warmth 3" Enter
check "/set unknown name" "unknown parameter 'warmth'"

# 5. /save then /load round-trips
$T send-keys -t lc "/save $tmp/b.json" Enter
check "saved b" "saved $tmp/b.json"
if grep -Fq '"end": "stopped"' "$tmp/b.json"; then ok "the stopped reply is saved as stopped"; else
    bad "the stopped reply is saved as stopped"; cat "$tmp/b.json"; fi
$T send-keys -t lc "/clear" Enter
check "cleared" 'conversation cleared'
if screen | grep -Fq -- "$first"; then bad "transcript empty after /clear"; else ok "transcript empty after /clear"; fi
$T send-keys -t lc "/load $tmp/b.json" Enter
check "loaded" "loaded 4 messages from $tmp/b.json"
check "the stopped reply still says so once loaded" '\(stopped by you\)'
check "loaded text on screen" "$first"
$T send-keys -t lc "/save $tmp/c.json" Enter
check "saved c" "saved $tmp/c.json"
if grep -v '"saved":' "$tmp/b.json" >"$tmp/b" && grep -v '"saved":' "$tmp/c.json" >"$tmp/c" && cmp -s "$tmp/b" "$tmp/c"; then
    ok "load + save gives the same transcript"
else
    bad "load + save gives the same transcript"; diff "$tmp/b" "$tmp/c"
fi
$T send-keys -t lc "/load $tmp/nope.json" Enter
check "load error shown" "load failed: $tmp/nope.json: cannot open"
check "load error: the line is back to correct" "^> /load $tmp/nope\\.json *\$"
$T send-keys -t lc C-e C-u

# 5b. what a model writes is never sent raw: control characters become visible placeholders;
# wide characters wrap by display width
cat >"$tmp/ctl.json" <<'JSON'
{ "format": "llamachat-transcript", "version": 1, "messages": [
  { "role": "user", "content": "show me" },
  { "role": "assistant", "content": "red \u001b[31mALERT\u001b[0m bell\u0007 end \u65e5\u672c\u8a9e\u65e5\u672c\u8a9e\u65e5\u672c\u8a9e\u65e5\u672c\u8a9e\u65e5\u672c\u8a9e\u65e5\u672c\u8a9e\u65e5\u672c\u8a9e\u65e5\u672c\u8a9e\u65e5\u672c\u8a9e\u65e5\u672c\u8a9e\u65e5\u672c\u8a9e\u65e5\u672c\u8a9e\u65e5\u672c\u8a9e\u65e5\u672c\u8a9e WIDE-END" } ] }
JSON
$T send-keys -t lc "/load $tmp/ctl.json" Enter
check "escape shown as a placeholder" 'red ␛\[31mALERT␛\[0m bell␇ end'
if $T capture-pane -t lc -p -e | grep -q "$(printf '\033')\[31mALERT"; then bad "raw escape reached the terminal"; else ok "no raw escape"; fi
# 42 wide characters (84 columns) after "end ": the word moves to its own line, 39 characters
# (78 columns) fill the 78-column transcript, the rest goes on the next line
check "wide characters wrapped by width" '^(日本語){13}│'
check "wide characters, second line" '^日本語 WIDE-END'
check "text before the long word" 'bell␇ end +│'

# 5c. multi-line input: Alt-Enter and a trailing backslash add lines
$T send-keys -t lc "/clear" Enter
check "cleared again" 'conversation cleared'
$T send-keys -t lc "/set max-tokens 2" Enter
$T send-keys -t lc "line one" M-Enter "line two\\" Enter "line three" 
check "input shows three lines" '^line three'
c0=$(ctx_now)
$T send-keys -t lc Enter
check_answered "multi-line message answered" "$c0"
$T send-keys -t lc "/save $tmp/m.json" Enter
check "saved m" "saved $tmp/m.json"
if grep -Fq '"content": "line one\nline two\nline three"' "$tmp/m.json"; then ok "message kept its newlines"; else bad "message kept its newlines"; grep content "$tmp/m.json"; fi

# bracketed paste keeps the pasted newline in one message
$T set-buffer -b lcpaste "pasted one
pasted two"
$T paste-buffer -p -d -b lcpaste -t lc
check "paste shows two lines" '^pasted two'
c0=$(ctx_now)
$T send-keys -t lc Enter
check_answered "pasted message answered" "$c0"
$T send-keys -t lc "/save $tmp/p.json" Enter
check "saved p" "saved $tmp/p.json"
if grep -Fq '"content": "pasted one\npasted two"' "$tmp/p.json"; then ok "paste kept its newline"; else bad "paste kept its newline"; grep content "$tmp/p.json"; fi

# Ctrl-Z suspends to the shell; fg comes back to a working chat
$T send-keys -t lc C-z
check "Ctrl-Z: shell job stopped" 'Stopped'
$T send-keys -t lc "fg" Enter
check "fg: chat back" 'Parameters'
$T send-keys -t lc "/set top-p 0.5" Enter
check "working after fg" 'top-p +0\.50'

# 5d. scrollback: PgUp leaves the end, End follows again
long=$(i=1; while [ $i -le 80 ]; do printf 'line %d\\n' $i; i=$((i + 1)); done)
printf '{"format": "llamachat-transcript", "version": 1, "messages": [{"role": "user", "content": "%s"}]}\n' \
    "$long" >"$tmp/long.json"
$T send-keys -t lc "/load $tmp/long.json" Enter
check "long transcript loaded, end shown" '^line 80 '
$T send-keys -t lc PPage
check "PgUp shows earlier lines" '^line 3[0-9] '
if screen | grep -q '^line 80 '; then bad "PgUp moved the view"; else ok "PgUp moved the view"; fi
check "PgUp: scrolled-back mark" 'scrolled back: End follows'
$T send-keys -t lc End
check "End follows again" '^line 80 '
if screen | grep -q 'scrolled back'; then bad "mark gone after End"; else ok "mark gone after End"; fi
$T send-keys -t lc "/load $tmp/b.json" Enter
check "reloaded b" "loaded 4 messages"

# 6. resize to 20x6, smaller, and back
$T resize-window -t lc -x 20 -y 6
check "20x6: input and status" '^ idle \|'
$T resize-window -t lc -x 12 -y 3
check "12x3: too small" 'terminal too'
# keys typed on a screen too small to show them go to the input line, unseen: nothing is lost;
# Enter there is held (nothing is sent blindly): the next text starts a new line of the message
$T send-keys -t lc "blind words" Enter
$T resize-window -t lc -x 30 -y 4
check "30x4: too small, it says to enlarge" '^30x4: enlarge it'
$T send-keys -t lc "more" Enter
$T resize-window -t lc -x 100 -y 30
check "back to 100x30" 'Parameters'
check "typed while too small: kept in the input line" '^> blind words *$'
check "typed while too small: Enter began a new line" '^more *$'
check "typed while too small: Enter held, said so" 'too small: the message was kept, not sent'
n=$(screen | grep -c 'blind words')
if [ "$n" = 1 ]; then ok "typed while too small: nothing sent"; else bad "typed while too small: nothing sent ($n lines)"; screen | sed 's/^/  | /'; fi
if grep -q 'blind words' "$tmp/home/.local/state/llamachat/history" 2>/dev/null; then
    bad "typed while too small: not in the history (not sent)"
else
    ok "typed while too small: not in the history (not sent)"
fi
$T send-keys -t lc C-a C-k
check "input cleared" '^> *$'
$T send-keys -t lc "/set top-k 7" Enter
check "working after resize" 'top-k +7$|top-k +7 '
# typing while the parameter pane has the focus: the text goes to the input, nothing changes
$T send-keys -t lc Tab
$T send-keys -t lc "lovely"
check "typing in the pane goes to the input" '^> lovely'
if screen | grep -Eq 'temp +0\.50'; then ok "typing in the pane changes no parameter"; else bad "typing in the pane changes no parameter"; screen | sed 's/^/  | /'; fi
$T send-keys -t lc C-u

# 7. help
$T send-keys -t lc F1
check "F1 shows the help" 'llamachat keys'
$T send-keys -t lc x
if wait_gone 'llamachat keys' 30; then ok "a key closes the help"; else bad "a key closes the help"; fi
check "chat screen after help" 'Parameters'
if screen | grep -q '^> x'; then bad "the closing key is not typed"; else ok "the closing key is not typed"; fi

# 8. Ctrl-D quits; the terminal is as before
$T send-keys -t lc C-d
check "exit status 0" '^EXIT=0'
# type only once the shell shows its prompt again (keys typed while it resets the terminal
# can be discarded), and once more if the first line was lost anyway
wait_for '^\$ *$' 10 >/dev/null
$T send-keys -t lc 'echo RESTORED-$((40+2))' Enter
if ! wait_for '^RESTORED-42' 10 >/dev/null; then
    $T send-keys -t lc 'echo RESTORED-$((40+2))' Enter
fi
check "shell prompt usable" '^RESTORED-42'
stty_same "terminal modes restored (stty -g)" "$tmp/stty.after"
# the only line on stderr: where the conversation is kept (quitting by mistake loses nothing)
# (its autosaved file is the newest in chats/, so --continue reopens it: that is the hint)
kept="$tmp/home/.local/state/llamachat/last-chat.json"
auto=$(sed -n 's/^llamachat: conversation kept in \(.*\) (llamachat --continue continues it)$/\1/p' "$tmp/stderr")
if [ -f "$auto" ] && [ "$(dirname "$auto")" = "$tmp/home/.local/state/llamachat/chats" ] &&
    [ "$(cat "$tmp/stderr")" = "llamachat: conversation kept in $auto (llamachat --continue continues it)" ]; then
    ok "stderr: only where the conversation is kept, and llamachat --continue"
else
    bad "stderr: only where the conversation is kept"; sed 's/^/  | /' "$tmp/stderr" | head -40
fi
if grep -q '"format": "llamachat-transcript"' "$kept" 2>/dev/null && grep -Fq "$PROMPT" "$kept"; then
    ok "conversation kept as a JSON transcript"
else
    bad "conversation kept as a JSON transcript"
fi
if grep -Fxq "$PROMPT" "$tmp/home/.local/state/llamachat/history" 2>/dev/null; then
    ok "history saved"
else
    bad "history saved"
fi
if grep -Fxq "$(printf 'line one\rline two\rline three')" "$tmp/home/.local/state/llamachat/history"; then
    ok "multi-line message is one history entry"
else
    bad "multi-line message is one history entry"
fi
# 9. SIGTERM, SIGINT (while idle) and a fatal signal also restore the terminal
# the history comes back in a new session, multi-line entries whole
$T send-keys -t lc "clear; $LC 2>$tmp/stderr.hist" Enter
wait_for '^ idle \|' 30
$T send-keys -t lc C-r "line tw"
check "Ctrl-R finds the multi-line entry" "reverse-i-search.*line tw.*: line one"
check "recalled with its lines" '^line three *$'
$T send-keys -t lc C-g
wait_for '^> *$' 10 >/dev/null
$T send-keys -t lc C-d
wait_for '^\$ *$' 10 >/dev/null

for sig in TERM INT SEGV; do
    $T send-keys -t lc "clear; '$LC' 2>'$tmp/stderr.$sig'; echo EXIT=\$?; stty -g >'$tmp/stty.$sig.tmp'; mv '$tmp/stty.$sig.tmp' '$tmp/stty.$sig'" Enter
    wait_for '^ idle \|' 30 || { bad "restart for SIG$sig"; continue; }
    shell=$($T list-panes -t lc -F '#{pane_pid}')
    pid=$(child_of "$shell" | head -1)
    kill -"$sig" "$pid"
    case $sig in
    TERM) check "SIGTERM: exit 143" '^EXIT=143' ;;
    INT) check "SIGINT while idle: exit 130" '^EXIT=130' ;;
    SEGV) check "SIGSEGV: exit 139" '^EXIT=139' ;;
    esac
    stty_same "SIG$sig: terminal modes restored" "$tmp/stty.$sig"
    if screen | grep -q 'Parameters'; then bad "SIG$sig: left the chat screen"; else ok "SIG$sig: left the chat screen"; fi
done

# 10. a model that cannot be loaded: the screen closes, the reason on stderr, exit status 1
head -c 5000 "$MODEL" >"$tmp/truncated.gguf"
$T send-keys -t lc "clear; '$LC' -m '$tmp/truncated.gguf' 2>'$tmp/stderr.bad'; echo EXIT=\$?; stty -g >'$tmp/stty.bad.tmp'; mv '$tmp/stty.bad.tmp' '$tmp/stty.bad'" Enter
check "unloadable model: exit 1" '^EXIT=1 *$'
if grep -q "^llamachat: $tmp/truncated.gguf: .*truncated" "$tmp/stderr.bad"; then
    ok "unloadable model: the reason on stderr"
else
    bad "unloadable model: the reason on stderr"; sed 's/^/  | /' "$tmp/stderr.bad"
fi
stty_same "unloadable model: terminal modes restored" "$tmp/stty.bad"
exit $fail
