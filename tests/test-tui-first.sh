#!/bin/sh
# test-tui-first.sh - the first hour in the chat (issue 14), driven in a detached tmux session as
# tests/test-tui.sh is (its own server socket, HOME and LLAMACHATRC in a temp dir, every wait
# polls the screen): a locale that is not UTF-8; a base model's conversation shown as the model
# reads it; the status bar after /clear, /load, /regen and Esc; paths; commands refused while
# the model writes keep the line; help; privacy; small ones.
set -u
. "$(dirname "$0")/tui-lib.sh"
tui_lib_paths
tui_lib_init lc-tui-first
# json_has FILE TEXT: FILE holds "content": "TEXT" (TEXT as json-c escapes it)
json_has() { grep -Fq "\"content\": \"$2\"" "$1"; }

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
history = off
RC

tui_lib_shell

# 1. a locale that is not UTF-8, on a vt100: ASCII lines, non-ASCII shown as ?, the typed
# text kept byte for byte (readline used to take é for Meta-C and drop it)
start c-locale LANG=C LC_ALL=C TERM=vt100 || exit 1
check "C locale: the note says why" 'is not UTF-8'
check "C locale: ASCII line under the transcript" '^-.*-----$'
check "C locale: ASCII pane border" '\| Parameters$'
not_on_screen "C locale: no alternate-charset letters for lines" 'qqqqq|^ +x Param'
$T send-keys -t lc "/system Be a pirate." Enter
$T send-keys -t lc "café ok"
check "C locale: typed é shown as one ?" '^> caf\? ok *$'
$T send-keys -t lc Enter
check "C locale: answered" '^ idle .*ctx [1-9]'
$T send-keys -t lc "/save $tmp/c.json" Enter
check "C locale: saved" "saved $tmp/c.json"
if json_has "$tmp/c.json" "café ok"; then ok "C locale: the message kept byte for byte"; else bad "C locale: the message kept byte for byte"; grep content "$tmp/c.json"; fi
quit c-locale

# 2. a base model (no chat template): the screen shows what the model reads.  The system
# prompt is its own paragraph (the model reads a blank line after it); the reply continues the
# user's text on the same line, even inside a word.
start plain "LLAMACHAT_LOG='$tmp/plain.log'" || exit 1
$T send-keys -t lc "/system You are a pirate." Enter
$T send-keys -t lc "Lily had a red ba" Enter
check "plain: answered" '^ idle .*ctx [1-9]'
$T send-keys -t lc "/save $tmp/plain.json" Enter
check "plain: saved" "saved $tmp/plain.json"
reply=$(sed -n 's/^ *"content": "\(.*\)",*$/\1/p' "$tmp/plain.json" | sed -n 3p)
[ -n "$reply" ] || bad "plain: a reply"
if grep -q '^prompt text: "<s> You are a pirate\.\\n\\nLily had a red ba"$' "$tmp/plain.log"; then
    ok "plain: the model reads the system prompt, a blank line, the text"
else bad "plain: what the model reads"; grep '^prompt text' "$tmp/plain.log"; fi
if screen | sed -n 1,2p | tr -d ' ' | tr '\n' '#' | grep -Fxq 'Youareapirate.│Parameters#│temp0.00#'; then
    ok "plain: system prompt on its own line, then a blank line"
else bad "plain: system prompt on its own line, then a blank line"; fi
first=$(printf '%s' "Lily had a red ba$reply" | cut -c1-40)
check "plain: the reply continues the text on its line" "^$first"
quit plain

# 3. the status bar tells the truth: the model's name; "max tokens reached"; after /clear and
# /load the context is not known until the model reads the conversation; /regen after a stop
# drops "stopped after"; Esc while the prompt is read gives the message back
start status || exit 1
check "status: speeds unknown before a turn" 'ctx 0/2048 \| pp - t/s \| gen - t/s'
$T send-keys -t lc "Once upon a time" Enter
check "status: max tokens reached" 'max tokens reached \(8\)'
check "status: the model's general.name" '^ idle \| llama 312K Q4_1 \| llama \| '
check "status: speeds of the turn" 'ctx [1-9][0-9]*/2048 \| pp [0-9.]+k? t/s \| gen [0-9.]+k? t/s'
$T send-keys -t lc "/save $tmp/s.json" Enter
check "status: saved" "saved $tmp/s.json"
$T send-keys -t lc "/clear" Enter
check "status: /clear forgets the context count" 'ctx -/2048 \| pp - t/s'
# without its KV state (/save wrote s.json.kv, which /load would restore: test-tui-resume.sh)
i=0; while [ ! -s "$tmp/s.json.kv" ] && [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done
rm -f "$tmp/s.json.kv"
$T send-keys -t lc "/load $tmp/s.json" Enter
check "status: loaded" 'loaded 2 messages'
check "status: /load forgets the context count" 'ctx -/2048 \| pp - t/s'
$T send-keys -t lc "/set max-tokens none" Enter "Tom went to the park" Enter
check "status: writing" '^ writing'
$T send-keys -t lc Escape
check "status: stopped" 'stopped after [0-9]+ tokens'
$T send-keys -t lc "/set max-tokens 4" Enter
$T send-keys -t lc "/regen" Enter
check "status: /regen answered" 'max tokens reached \(4\)'
not_on_screen "status: no stale 'stopped after' after /regen" 'stopped after'
# a long message (about 1500 tokens): Esc while it is read
long=$(i=0; while [ $i -lt 150 ]; do printf 'The cat sat on the mat and. '; i=$((i + 1)); done)
printf '%s' "$long" | $T load-buffer -b long -
$T paste-buffer -p -d -b long -t lc
check "status: long message in the input" 'The cat sat on the mat and\. *$'
$T send-keys -t lc Enter Escape
check "status: Esc while reading gives the message back" 'stopped before the reply: the message is back'
check "status: the message is in the input" '^.*mat and\. *$'
check "status: no speed for a turn that did not happen" 'pp - t/s \| gen - t/s'
$T send-keys -t lc C-e C-u "/save $tmp/s2.json" Enter
check "status: saved s2" "saved $tmp/s2.json"
if grep -q 'The cat sat' "$tmp/s2.json"; then bad "status: the stopped message is not in the conversation"; else ok "status: the stopped message is not in the conversation"; fi
# narrow: the context and the speeds stay
$T resize-window -t lc -x 60 -y 24
check "status: narrow keeps ctx and speeds" '^ idle \| .*ctx [-0-9]+/2048 \| pp [-0-9.]+k? t/s \| gen [-0-9.]+k? t/s'
# narrower: whole fields go (the prompt speed, then the generation speed), none is cut in half
$T resize-window -t lc -x 40 -y 24
check "status: 40 columns: pp dropped whole" '^ idle \| ctx [-0-9]+/2048 \| gen [-0-9.]+k? t/s *$'
$T resize-window -t lc -x 24 -y 24
check "status: 24 columns: the state and ctx" '^ idle \| ctx [-0-9]+/2048 *$'
$T resize-window -t lc -x 80 -y 24
quit status

# 4. paths: ~ and ~user in /save, /load and --resume; /save asks before replacing a file;
# Ctrl-S saves in the transcripts directory, not the current one
start paths || exit 1
$T send-keys -t lc "Once upon a time" Enter
check "paths: answered" 'max tokens reached'
$T send-keys -t lc "/save ~/a.json" Enter
check "paths: /save ~/a.json" "saved $tmp/home/a.json"
[ -s "$tmp/home/a.json" ] && ok "paths: ~ expanded" || bad "paths: ~ expanded"
me=$(id -un)
rel=$(realpath -m --relative-to="$(getent passwd "$me" | cut -d: -f6)" "$tmp/home/u.md")
$T send-keys -t lc "/save ~$me/$rel" Enter
check "paths: /save ~user/..." "saved .*/home/u\.md"
[ -s "$tmp/home/u.md" ] && ok "paths: ~user expanded" || bad "paths: ~user expanded"
$T send-keys -t lc "/save ~/a.json" Enter
check "paths: /save asks before replacing" "a\.json exists: Enter replaces it"
check "paths: the confirmation is in the input" '^> /save! ~/a\.json *$'
$T send-keys -t lc Enter
check "paths: Enter replaces" "saved $tmp/home/a.json"
$T send-keys -t lc "/load ~/a.json" Enter
check "paths: /load ~/a.json" "loaded 2 messages from ~/a.json"
$T send-keys -t lc "/load ~nosuchuser4711/a.json" Enter
check "paths: unknown user" "~nosuchuser4711: no such user"
check "paths: the /load line is back to correct" '^> /load ~nosuchuser4711/a\.json *$'
$T send-keys -t lc C-e C-u
$T send-keys -t lc C-s
check "paths: Ctrl-S" "saved $tmp/home/.local/share/llamachat/tr"
ls "$tmp/home/.local/share/llamachat/transcripts/"llamachat-*.md >/dev/null 2>&1 && ok "paths: Ctrl-S file in the transcripts directory" || bad "paths: Ctrl-S file in the transcripts directory"
ls "$tmp"/llamachat-*.md >/dev/null 2>&1 && bad "paths: nothing in the current directory" || ok "paths: nothing in the current directory"

# 5. commands refused while the model writes keep the typed line
$T send-keys -t lc "/set max-tokens none" Enter "Tom went to the park" Enter
check "busy: writing" '^ writing'
$T send-keys -t lc "/system Be a pirate." Enter
check "busy: /system refused" '/system: the model is writing'
check "busy: the line is kept" '^> /system Be a pirate\. *$'
$T send-keys -t lc Escape
check "busy: stopped" '^ idle'
$T send-keys -t lc C-e C-u
quit paths
# --resume ~/FILE
rm -f "$tmp/home/a.json.kv"   # the chat without its KV state (restored: test-tui-resume.sh)
$T send-keys -t lc "clear; env '$LC' --resume '~/a.json' 2>'$tmp/resume.err'; echo EXIT=\$?" Enter
check "paths: --resume ~/a.json" "^Once upon a time, there was"
wait_for '^ idle \|' 30 >/dev/null
check "resume: the context is not known until the model reads the chat" 'ctx -/2048 \| pp - t/s'
quit resume
# [ui] transcripts = ~/tr
sed 's/^history = off$/history = off\ntranscripts = ~\/tr/' "$tmp/rc" >"$tmp/rc.tr"
start tr "LLAMACHATRC='$tmp/rc.tr'" || exit 1
$T send-keys -t lc "Once" Enter
check "transcripts: answered" 'max tokens reached'
$T send-keys -t lc C-s
check "transcripts: Ctrl-S in [ui] transcripts" "saved $tmp/home/tr/llamachat-"
quit tr

# 7. privacy: with history = off (every run above) nothing is kept; with it on, the state
# directory is 0700 and its files 0600, also when an older version made them wider
if [ -e "$tmp/home/.local/state" ]; then bad "privacy: history = off writes nothing"; find "$tmp/home/.local/state"; else ok "privacy: history = off writes nothing"; fi
mkdir -p "$tmp/home/.local/state/llamachat"; chmod 755 "$tmp/home/.local/state/llamachat"
echo '{}' >"$tmp/home/.local/state/llamachat/last-chat.json"; chmod 644 "$tmp/home/.local/state/llamachat/last-chat.json"
sed 's/^history = off$/history = on/' "$tmp/rc" >"$tmp/rc.on"
start on "LLAMACHATRC='$tmp/rc.on'" || exit 1
$T send-keys -t lc "Once" Enter
check "privacy: answered" 'max tokens reached'
quit on
st="$tmp/home/.local/state/llamachat"
modes=$(cd "$st" && stat -c '%a %n' . chats history last-chat.json chats/*.json | tr '\n' ' ')
case $modes in
"700 . 700 chats 600 history 600 last-chat.json 600 chats/"*".json ") ok "privacy: 0700 directories, 0600 files" ;;
*) bad "privacy: 0700 directories, 0600 files: $modes" ;;
esac

# 6. help: complete and scrollable at 40x12; F2 too narrow says so; --help aligned
start help || exit 1
$T resize-window -t lc -x 40 -y 12
$T send-keys -t lc F1
check "help: shown at 40x12" 'llamachat keys'
seen="$tmp/help.seen"; screen >"$seen"
i=0; while [ $i -lt 60 ]; do $T send-keys -t lc Down; screen >>"$seen"; i=$((i + 1)); done
check "help: scrolls to its end" 'any other key closes it'
screen >>"$seen"
$T send-keys -t lc PPage; screen >>"$seen"
for k in 'Ctrl-L' 'Shift-Tab' '//text' 'Ctrl-S' 'Ctrl-R' 'Ctrl-Z' 'F2' 'Alt-Enter' 'PgUp/PgDn' \
         'temp top-k top-p min-p' 'repeat-penalty repeat-last-n' 'max-tokens seed' '/save! FILE' 'Enter         type a value' '/raw ' '/think '; do
    grep -Fq -- "$k" "$seen" && ok "help: has $k" || bad "help: has $k"
done
$T send-keys -t lc x
check "help: a key closes it" '^ idle'
$T send-keys -t lc F2 F2
check "help: F2 on a narrow terminal says so" 'pane needs 60 columns; try /params'
$T resize-window -t lc -x 80 -y 24
quit help
if "$LC" --help | awk '/^ +-/ { if (length($0) > 27 && !(substr($0, 27, 1) == " " && substr($0, 28, 1) != " ")) { print; bad = 1 } } END { exit bad }'; then
    ok "--help: descriptions aligned"
else bad "--help: descriptions aligned"; fi

# 8. small ones: a stepped value is saved without float noise; the pane takes a typed value
# (Enter); top-k steps on a scale; a long message is cut between words
start small || exit 1
$T send-keys -t lc Tab Down Down Down Down Right
check "small: repeat-penalty 1.05" 'repeat-penalty +1\.05'
$T send-keys -t lc Up Up Up Right
check "small: top-k steps to 50" 'top-k +50'
$T send-keys -t lc Enter
check "small: Enter edits the value" '^> /set top-k 50 *$'
$T send-keys -t lc BSpace BSpace "7" Enter
check "small: typed value set" 'top-k +7$|top-k +7 '
$T send-keys -t lc "Once" Enter
check "small: answered" 'max tokens reached'
$T send-keys -t lc "/save $tmp/small.json" Enter
check "small: saved" "saved $tmp/small.json"
if grep -q '"repeat_penalty": 1.05,' "$tmp/small.json"; then ok "small: saved as 1.05"; else bad "small: saved as 1.05"; grep repeat_penalty "$tmp/small.json"; fi
$T send-keys -t lc "/set warmth-of-the-sun-on-a-very-long-afternoon 3" Enter
check "small: long message cut between words, with an ellipsis" "unknown parameter 'warmth-of-the-sun-on-a-very-long-afternoon' \\(temp, …─"
quit small

# 9. editing and quitting keys pressed while the parameter pane has the focus go to the input
# line (as a typed character does): Ctrl-W, Backspace and Ctrl-D did nothing at all there, so
# Ctrl-D after changing a value seemed not to quit
start panekeys || exit 1
$T send-keys -t lc "hello big world" Tab Right
check "panekeys: the pane changed temp" 'temp +0\.05'
$T send-keys -t lc C-w
check "panekeys: Ctrl-W edits the message" '^> hello big *$'
$T send-keys -t lc Tab BSpace
check "panekeys: Backspace edits the message" '^> hello big$'
$T send-keys -t lc C-u Tab C-d
check "panekeys: Ctrl-D on an empty line quits" '^EXIT=0'
wait_for '^\$ *$' 10 >/dev/null

exit $fail
