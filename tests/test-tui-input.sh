#!/bin/sh
# test-tui-input.sh - the chat's reliability in front of bad input and bad files (issue 11),
# driven in a detached tmux session as tests/test-tui.sh is: a bracketed paste with a Latin-1
# byte, an invalid lead byte before valid text, a burst of invalid bytes (valid bytes are kept,
# bad ones become U+FFFD, the UI never freezes); Esc never edits the message (emacs), and is
# vi's command mode with "editing-mode vi".
set -u
. "$(dirname "$0")/tui-lib.sh"
tui_lib_paths
tui_lib_init lc-tui-input
# quit: Ctrl-E Ctrl-U (an empty line), Ctrl-D; the exit status line must appear
quit() {
    $T send-keys -t lc C-e C-u C-d
    check "$1: exits with status 0" '^EXIT=0'
    if grep -q 'AddressSanitizer\|runtime error' "$tmp/$1.err"; then
        bad "$1: no sanitizer report"; sed 's/^/  | /' "$tmp/$1.err" | head -30
    fi
}

mkdir -p "$tmp/home" "$tmp/cwd"
: >"$tmp/cwd/config"       # a file for readline to complete "conf" to
cat >"$tmp/rc" <<RC
[model]
path = $MODEL
threads = 1
[sampling]
temp = 0
max_tokens = 4
[ui]
show_params = off
history = off
RC
cat >"$tmp/vi.inputrc" <<'RC'
set editing-mode vi
RC

$T -f /dev/null new-session -d -s lc -x 100 -y 30 -c "$tmp/cwd" \
    "env HOME='$tmp/home' LLAMACHATRC='$tmp/rc' LANG=C.UTF-8 LC_ALL=C.UTF-8 TERM=tmux-256color PS1='$ ' sh"
$T set-option -t lc status off >/dev/null
wait_for '^\$' 10 >/dev/null || { echo "FAIL: no shell prompt"; exit 1; }

# 1. a bracketed paste holding a Latin-1 byte: U+FFFD in the line, the UI keeps going
start paste || exit 1
printf 'caf\351' | $T load-buffer -b bad -
$T paste-buffer -p -d -b bad -t lc
check "paste: Latin-1 byte shown as U+FFFD" '^> caf� *$' 10
check "paste: the bad byte is reported" 'invalid UTF-8 byte sequence replaced with U\+FFFD' 10
$T send-keys -t lc " ok"
check "paste: typing goes on after it" '^> caf� ok *$' 10
$T send-keys -t lc C-u "/params" Enter
check "paste: commands still work" 'temp 0\.00, top-k 40' 10
quit paste

# 2. an invalid lead byte then a valid '(' (tmux send-keys -H c3 28): the '(' is kept
start lead || exit 1
$T send-keys -t lc "x"
$T send-keys -t lc -H c3 28
$T send-keys -t lc "y"
check "c3 28: the valid byte is kept" '^> x�\(y *$' 10
# 3. a burst of invalid bytes does not swallow the text after it
$T send-keys -t lc C-u
$T send-keys -t lc -H ff fe 80 80 41 42 43
check "burst: valid text after invalid bytes kept" '^> ����ABC *$' 10
# a character cut short at the end of the input becomes U+FFFD once input pauses
$T send-keys -t lc C-u "z"
$T send-keys -t lc -H e6 97
check "cut-short character shown as U+FFFD" '^> z� *$' 10
# /set gives the message of the command line and the file (one definition per option)
$T send-keys -t lc C-u "/set temp abc" Enter
check "/set: the shared message" "bad value 'abc' for temp: expected a number from 0 to 100" 10
$T send-keys -t lc "/set temp 1e-40" Enter
check "/set temp 1e-40 accepted" "temp = 1e-40" 10
quit lead

# 4. Esc never edits the message: "conf" + Esc x4 stays "conf" (not completed to "config")
start esc || exit 1
$T send-keys -t lc "conf" Escape Escape Escape Escape
sleep 0.3
$T send-keys -t lc "X"
check "Esc x4 leaves the message alone" '^> confX *$' 10
if screen | grep -q '^> config'; then bad "Esc completed a file name"; fi
# Esc then a key quickly is still Alt-key: Alt-b moves back a word
$T send-keys -t lc C-u "one two" M-b "X"
check "Alt-b is still readline's" '^> one Xtwo *$' 10
quit esc

# 5. with "editing-mode vi", Esc is vi's command mode: Esc 0 i X gives "Xhello"
start vi "INPUTRC='$tmp/vi.inputrc'" || exit 1
$T send-keys -t lc "hello"
check "vi: typed" '^> hello *$' 10
$T send-keys -t lc Escape
sleep 0.3
$T send-keys -t lc "0iX"
check "vi: Esc is command mode" '^> Xhello *$' 10
$T send-keys -t lc Escape
sleep 0.3
$T send-keys -t lc "cc"
check "vi: cc empties the line" '^> *$' 10
quit vi

# 6. /load of a FIFO is refused at once; the chat keeps responding
start fifo || exit 1
mkfifo "$tmp/chat.json"
$T send-keys -t lc "/load $tmp/chat.json" Enter
check "/load FIFO refused" "load failed: $tmp/chat.json: not a regular file; not loaded" 10
check "/load FIFO: the line is back to correct" "^> /load $tmp/chat\\.json *\$" 10
$T send-keys -t lc C-e C-u
$T send-keys -t lc "/params" Enter
check "/load FIFO: still responding" 'temp 0\.00, top-k 40' 10
quit fifo

# 8. combining marks stay on the character before them in the transcript, as in the input
# line: "e" + U+0301 after a space was drawn as " \u0301e" (the mark on the space, one column
# early) and one at the start of a row was lost; a wide character keeps its mark too
start combining || exit 1
$T send-keys -t lc -l "$(printf 'x e\314\201 \344\270\255\314\201 a\314\201\314\202 z')"
check "combining: the input line shows e+U+0301, two marks on a" "$(printf '^> x e\314\201 \344\270\255\314\201 a\314\201\314\202 z *$')" 10
$T send-keys -t lc Enter
check "combining: the transcript shows them on the same characters" "$(printf '^x e\314\201 \344\270\255\314\201 a\314\201\314\202 z')" 10
# a mark as a message's first character was not drawn at all: now on a no-break space
$T send-keys -t lc -l "$(printf '\314\201q')"
$T send-keys -t lc Enter
check "combining: a mark first in a message is shown, on a no-break space" "$(printf '\302\240\314\201q')" 10
quit combining

# 7. SIGTERM right after a bad paste ends the chat (it is not frozen)
start term || exit 1
printf 'caf\351' | $T load-buffer -b bad -
$T paste-buffer -p -d -b bad -t lc
wait_for '^> caf' 10 >/dev/null
# the chat is the shell's child (env execs it); pgrep could pick another test's llamachat
shell=$($T list-panes -t lc -F '#{pane_pid}')
pid=""
for d in /proc/[0-9]*; do
    [ "$(cut -d' ' -f4 "$d/stat" 2>/dev/null)" = "$shell" ] && pid=${d#/proc/}
done
[ -n "$pid" ] && kill -TERM "$pid"
check "SIGTERM after a bad paste: exit 143" '^EXIT=143' 10

exit $fail
