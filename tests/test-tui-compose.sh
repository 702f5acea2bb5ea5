#!/bin/sh
# test-tui-compose.sh - writing a message (issue 14, Input), driven in a detached tmux session as
# tests/test-tui-first.sh is: Tab completes command names, /set names (config.c's table) and
# file names, and still moves to the parameter pane on a line that is not a command; Ctrl-X
# Ctrl-E and Ctrl-G edit the message in $EDITOR (a 0600 file; the screen comes back whole; the
# text is put back, not sent; a failing editor changes nothing); /read FILE puts a text file in
# the input (~ expanded; too large, binary, non-UTF-8 and FIFOs refused with a note).
set -u
. "$(dirname "$0")/tui-lib.sh"
tui_lib_paths
tui_lib_init lc-tui-compose

mkdir -p "$tmp/home/notes" "$tmp/cwd/sub dir"
cat >"$tmp/rc" <<RC
[model]
path = $MODEL
threads = 1
[sampling]
temp = 0
max_tokens = 4
[ui]
show_params = on
history = off
read_limit = 1
RC
printf 'Once upon a time\r\nthere was a cat.\r\n' >"$tmp/home/notes/story.txt"
: >"$tmp/cwd/sub dir/chat-one.json"
: >"$tmp/cwd/sub dir/chat-two.json"

$T -f /dev/null new-session -d -s lc -x 100 -y 30 -c "$tmp/cwd" \
    "env HOME='$tmp/home' LLAMACHATRC='$tmp/rc' TMPDIR='$tmp' LANG=C.UTF-8 LC_ALL=C.UTF-8 TERM=tmux-256color PS1='$ ' sh"
$T set-option -t lc status off >/dev/null
wait_for '^\$' 10 >/dev/null || { echo "FAIL: no shell prompt"; exit 1; }

# 1. Tab completion
start tab || exit 1
$T send-keys -t lc "/he" Tab
check "Tab: a command name" '^> /help *$' 10
$T send-keys -t lc C-u "/s" Tab
check "Tab: the choices on the message line" '5 matches: save save! set show system' 10
check "Tab: the common part inserted" '^> /s *$' 10
$T send-keys -t lc "et rep" Tab
check "Tab: /set names from the option table" '2 matches: repeat-last-n repeat-penalty' 10
check "Tab: /set common part" '^> /set repeat- *$' 10
$T send-keys -t lc "p" Tab "1.1" Enter
check "Tab: completed /set works" 'repeat-penalty = 1\.1' 10
$T send-keys -t lc "/set max" Tab
check "Tab: max-tokens" '^> /set max-tokens *$' 10
$T send-keys -t lc C-u "/load su" Tab
check "Tab: a directory (with a space) gets /" '^> /load sub dir/ *$' 10
$T send-keys -t lc "chat-t" Tab
check "Tab: a file name in it" '^> /load sub dir/chat-two\.json *$' 10
$T send-keys -t lc C-u "/copy c" Tab
check "Tab: /copy's argument" '^> /copy code *$' 10
$T send-keys -t lc C-u "/" Tab
check "Tab: many matches: as many as fit, and how to see the rest" '25 matches: chats .* \.\.\. \(Tab: more\)' 10
$T send-keys -t lc Tab
check "Tab again: the rest" '25 matches \(from [0-9]+\): models' 10
$T send-keys -t lc C-u "/read ~/no" Tab
check "Tab: ~ in a file name" '^> /read ~/notes/ *$' 10
$T send-keys -t lc "s" Tab
check "Tab: the file under ~" '^> /read ~/notes/story\.txt *$' 10
# 2. /read: the text goes into the input (CRLF as LF, the final newline dropped), not sent
$T send-keys -t lc Enter
check "/read: the text in the input" '^> Once upon a time *$' 10
check "/read: the second line" '^there was a cat\. *$' 10
check "/read: the message line says so" 'read 33 bytes from ~/notes/story\.txt into the input' 10
not_on_screen "/read: nothing sent" '^ (reading|writing)'
# a line that is not a command: Tab still goes to the parameter pane
$T send-keys -t lc C-u "hello" Tab Down Right
check "Tab on a message: the pane (top-k 50)" 'top-k +50' 10
$T send-keys -t lc Escape
check "Tab on a message: Esc back to the input" 'Parameters *$' 10
$T send-keys -t lc "X"
check "Tab on a message: the text kept" '^> helloX *$' 10
quit tab

# 4. a message of several lines: Up and Down move between its lines (same column, in screen
# columns: a wide character counts 2), Home and End to the start and end of the line; Up on
# its first line (Down on its last) is readline's history.  Up used to replace the message
# with the previous history line at once, Home to jump to the start of the whole message.
start lines || exit 1
$T send-keys -t lc "/params" Enter
$T send-keys -t lc "abcdef" M-Enter "$(printf '\346\227\245\346\234\254xyz')" M-Enter "12"
check "lines: three lines typed" '^12 *$' 10
$T send-keys -t lc Up "A"
check "lines: Up goes to the line above, same column (after 2 columns of a wide char)" "$(printf '^\346\227\245A\346\234\254xyz *$')" 10
$T send-keys -t lc Up "B"
check "lines: Up again: the first line, column 3" '^> abcBdef *$' 10
$T send-keys -t lc Down Down "C"
check "lines: Down Down: the last line, at its end" '^12C *$' 10
$T send-keys -t lc Up Home "D"
check "lines: Home: the start of the line" "$(printf '^D\346\227\245A\346\234\254xyz *$')" 10
$T send-keys -t lc End "E"
check "lines: End: the end of the line" "$(printf '^D\346\227\245A\346\234\254xyzE *$')" 10
check "lines: the first line is untouched" '^> abcBdef *$' 10
$T send-keys -t lc Up Up
check "lines: Up on the first line: the history" '^> /params *$' 10
$T send-keys -t lc Down
check "lines: Down: the message is back" '^> abcBdef *$' 10
check "lines: Down: all of it" '^12C *$' 10
# a tab (pasted: the Tab key completes) is shown as the transcript shows it, four spaces, not
# as a control picture (it was "x\342\220\211y" in the input line, "x    y" once sent)
$T send-keys -t lc C-a C-k
printf 'x\ty' | $T load-buffer -b tab -
$T paste-buffer -p -d -b tab -t lc
check "lines: a pasted tab as four spaces" '^> x    y *$' 10
$T send-keys -t lc Left Left "Q"
check "lines: the cursor steps over it whole" '^> xQ    y *$' 10
# /edit of a message of several lines: moving in it does not cancel the edit
$T send-keys -t lc C-a C-k "one" M-Enter "two" Enter
check "lines: a message of two lines answered" '^ idle .*ctx [1-9]' 10
$T send-keys -t lc "/edit" Enter
check "lines: /edit" 'editing your last message' 10
$T send-keys -t lc Up "X" Enter
check "lines: Up in the edited message keeps the edit" '^oneX +│' 10
not_on_screen "lines: the exchange replaced" '^one +│'
not_on_screen "lines: no 'edit cancelled'" 'edit cancelled'
quit lines

# /read refusals: each with a note, the input untouched
head -c 1500 /dev/zero | tr '\0' 'a' >"$tmp/big.txt"
printf 'a\000b' >"$tmp/bin.txt"
printf 'caf\351\n' >"$tmp/latin1.txt"
mkfifo "$tmp/fifo"
start read || exit 1
$T send-keys -t lc "/read $tmp/big.txt" Enter
check "/read: too large refused" "/read $tmp/big.txt: larger than 1 KiB; not read \(\[ui\]" 10
$T send-keys -t lc "/read $tmp/bin.txt" Enter
check "/read: binary refused" "/read $tmp/bin.txt: a binary file \(NUL bytes\); not read" 10
$T send-keys -t lc "/read $tmp/latin1.txt" Enter
check "/read: not UTF-8 refused" "/read $tmp/latin1.txt: not UTF-8 text; not read" 10
$T send-keys -t lc "/read $tmp/fifo" Enter
check "/read: a FIFO refused at once" "/read $tmp/fifo: not a regular file; not read" 10
$T send-keys -t lc "/read $tmp/none.txt" Enter
check "/read: a missing file" "/read $tmp/none.txt: cannot open: No such file or directory" 10
check "/read: the input is empty after refusals" '^> *$' 10
quit read

# 3. $EDITOR: a script that draws on the screen, records its file's mode and appends a line
cat >"$tmp/ed.sh" <<ED
#!/bin/sh
printf '\033[2J\033[HEDITOR SCREEN\n'
stat -c %a "\$1" >"$tmp/ed.mode"
cp "\$1" "$tmp/ed.before"
printf 'and a dog.\n' >>"\$1"
sleep 0.3
ED
printf '#!/bin/sh\nexit 3\n' >"$tmp/ed-fail.sh"
chmod +x "$tmp/ed.sh" "$tmp/ed-fail.sh"
start editor "EDITOR='$tmp/ed.sh'" "VISUAL=" || exit 1
$T send-keys -t lc "Hi" Enter
check "editor: a first turn" '^ idle .*ctx [1-9]' 10
$T send-keys -t lc "Once there was a cat" C-x C-e
check "editor: the text is back in the input" '^> Once there was a cat *$' 10
check "editor: with the editor's line" '^and a dog\. *$' 10
check "editor: the message line" 'message edited in .*ed\.sh: Enter sends it' 10
check "editor: the screen is whole again (transcript)" '^Hi' 10
check "editor: the status bar" '^ idle \|' 10
check "editor: the pane" 'Parameters' 10
not_on_screen "editor: nothing of the editor's screen left" 'EDITOR SCREEN'
got=$(cat "$tmp/ed.mode" 2>/dev/null)
[ "$got" = 600 ] && ok "editor: the file is 0600" || bad "editor: the file is 0600 (got '$got')"
got=$(od -An -c "$tmp/ed.before" 2>/dev/null | tr -s ' \n' ' ')
[ "$got" = " O n c e t h e r e w a s a c a t \\n " ] && ok "editor: the file held the message" || bad "editor: the file held the message (got '$got')"
if ls "$tmp"/llamachat-message-* >/dev/null 2>&1; then bad "editor: the file removed"; else ok "editor: the file removed"; fi
not_on_screen "editor: not sent" '^ (reading|writing)'
# Ctrl-G does the same (the script adds its line again); then Enter sends the edited message
$T send-keys -t lc C-g
# (the screen had an "and a dog." line before Ctrl-G: wait for the editor's copy of the file,
# which holds that line once, then for the second line on the screen)
i=0; while [ "$(grep -c 'and a dog' "$tmp/ed.before" 2>/dev/null)" != 1 ] && [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done
[ "$(grep -c 'and a dog' "$tmp/ed.before")" = 1 ] && ok "editor: Ctrl-G got the edited text" || bad "editor: Ctrl-G got the edited text"
i=0; while [ "$(screen | grep -c '^and a dog\.$')" != 2 ] && [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done
[ "$(screen | grep -c '^and a dog\.$')" = 2 ] && ok "editor: Ctrl-G" || { bad "editor: Ctrl-G"; screen | sed 's/^/  | /'; }
$T send-keys -t lc Enter
check "editor: the edited message sent" '^ idle .*ctx [3-9][0-9]' 10
$T send-keys -t lc "/save $tmp/ed.json" Enter
check "editor: saved" "saved $tmp/ed.json" 10
if grep -Fq '"content": "Once there was a cat\nand a dog.\nand a dog."' "$tmp/ed.json"; then ok "editor: the message as edited, byte for byte"
else bad "editor: the message as edited, byte for byte"; grep content "$tmp/ed.json"; fi
quit editor
# Ctrl-G inside Ctrl-R search is readline's abort, not the editor
start editor-search "EDITOR='$tmp/ed.sh'" "VISUAL=" || exit 1
$T send-keys -t lc "/params" Enter
$T send-keys -t lc C-r "par"
check "editor: Ctrl-R search" "^\(reverse-i-search\)\`par': /params" 10
rm -f "$tmp/ed.mode"
$T send-keys -t lc C-g
check "editor: Ctrl-G ends the search" '^> *$' 10
[ -e "$tmp/ed.mode" ] && bad "editor: Ctrl-G in search runs no editor" || ok "editor: Ctrl-G in search runs no editor"
quit editor-search
# Ctrl-Z in the editor (as vi does: SIGTSTP to the process group) stops the whole job; fg
# brings the editor back, then the chat with the edited text
cat >"$tmp/ed-stop.sh" <<ED
#!/bin/sh
kill -TSTP 0
printf 'after fg\n' >>"\$1"
ED
chmod +x "$tmp/ed-stop.sh"
start editor-stop "EDITOR='$tmp/ed-stop.sh'" "VISUAL=" || exit 1
$T send-keys -t lc "before" C-g
check "editor: Ctrl-Z in the editor stops the job" 'Stopped' 10
$T send-keys -t lc "fg" Enter
check "editor: fg: the chat back with the edited text" '^after fg *$' 10
check "editor: fg: the status bar" '^ idle \|' 10
check "editor: fg: the input" '^> before *$' 10
# (the shell ran "echo EXIT" when the job stopped: wait for the chat's end instead)
$T send-keys -t lc C-e C-u C-d
check "editor-stop: the chat ends" '^\$ *$' 10
if grep -q 'AddressSanitizer\|runtime error' "$tmp/editor-stop.err"; then
    bad "editor-stop: no sanitizer report"; sed 's/^/  | /' "$tmp/editor-stop.err" | head -30
fi
start editor-fail "EDITOR='$tmp/ed-fail.sh'" "VISUAL=" || exit 1
$T send-keys -t lc "keep me" C-g
check "editor: a failing editor says so" 'ed-fail\.sh exited with status 3; the message is unchanged' 10
check "editor: a failing editor keeps the message" '^> keep me *$' 10
$T send-keys -t lc C-u
quit editor-fail
start editor-none "EDITOR=/nonexistent/editor" "VISUAL=" || exit 1
$T send-keys -t lc "still here" C-g
check "editor: a missing editor says so" '/nonexistent/editor: not found \(set VISUAL or EDITOR\); the message is unchanged' 10
check "editor: a missing editor keeps the message" '^> still here *$' 10
$T send-keys -t lc C-u
quit editor-none

exit $fail
