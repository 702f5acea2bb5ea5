# tui-lib.sh - what the tmux-driven chat tests share (sourced, not run): the paths of the build
# and the model, a temp dir with its own tmux server, ok/bad bookkeeping, polling of the screen
# (no fixed sleeps), starting and quitting the chat.
#   tui_lib_paths [MODEL]
# skips (77) without tmux or the model (MODEL under $LC_SHARED/models, default the stories260K
# Q4_1 file) and fails without the build; sets B, S, LC and MODEL (LC and MODEL absolute).
#   tui_lib_init NAME [CAPTURE-FLAGS]
# sets tmp (removed at exit with the tmux server), T ("tmux -S $tmp/sock"), fail=0, and defines
# ok NAME, bad NAME, screen, wait_for REGEX [SECONDS], check NAME REGEX [SECONDS], ctx_now,
# check_answered NAME OLD-CTX [SECONDS].
tui_lib_init() {
    tmp=$(mktemp -d "${TMPDIR:-/tmp}/$1.XXXXXX") || exit 99
    T="tmux -S $tmp/sock"
    tui_capture_flags=${2:-}
    trap 'tui_cleanup' EXIT
    trap 'exit 1' INT TERM HUP
    fail=0
}
tui_cleanup() { $T kill-server >/dev/null 2>&1; rm -rf "$tmp"; }
ok() { echo "ok   $1"; }
bad() { echo "FAIL $1"; fail=1; }
# shellcheck disable=SC2086
screen() { $T capture-pane -t lc -p $tui_capture_flags; }
# wait_for EXTENDED-REGEX [seconds]: poll the screen until it matches; show it when it never does
wait_for() {
    limit=$(( ${2:-30} * 10 )); i=0
    while [ $i -lt $limit ]; do
        if screen | grep -Eq -- "$1"; then return 0; fi
        sleep 0.1; i=$((i + 1))
    done
    echo "  timed out waiting for /$1/; the screen was:"; screen | sed 's/^/  | /'
    return 1
}
check() { if wait_for "$2" "${3:-30}"; then ok "$1"; else bad "$1"; fi; }
# ctx_now: the context count the status bar shows now (0 when it shows none); "ctx N/SIZE", or
# "ctx N" when the size is not known (a remote server)
ctx_now() {
    n=$(screen | sed -n 's/.*| ctx \([0-9][0-9]*\)\([/ ].*\)\{0,1\}$/\1/p' | tail -1)
    echo "${n:-0}"
}
# check_answered NAME OLD-CTX [SECONDS]: the chat is idle again with a context count above
# OLD-CTX (read with ctx_now before sending), so the message was read and answered; an "idle"
# left over from the previous turn does not count
check_answered() {
    limit=$(( ${3:-30} * 10 )); i=0
    while [ $i -lt $limit ]; do
        n=$(screen | sed -n 's/^ idle .*| ctx \([0-9][0-9]*\)\([/ ].*\)\{0,1\}$/\1/p' | tail -1)
        if [ -n "$n" ] && [ "$n" -gt "$2" ]; then ok "$1"; return 0; fi
        sleep 0.1; i=$((i + 1))
    done
    echo "  timed out waiting for idle with ctx above $2; the screen was:"; screen | sed 's/^/  | /'
    bad "$1"; return 1
}

tui_lib_paths() {
    command -v tmux >/dev/null 2>&1 || { echo "SKIP: tmux not installed"; exit 77; }
    B=${LC_BUILDDIR:-.}
    S=${LC_SHARED:-../shared}
    LC="$B/llamachat"
    case $LC in /*) ;; *) LC="$(pwd)/$LC" ;; esac
    MODEL="$S/models/${1:-stories260K-ff192-q4_1.gguf}"
    case $MODEL in /*) ;; *) MODEL="$(pwd)/$MODEL" ;; esac
    [ -f "$MODEL" ] || { echo "SKIP: $MODEL missing"; exit 77; }
    [ -x "$LC" ] || { echo "FAIL: $LC not built"; exit 1; }
}
# not_on_screen NAME EXTENDED-REGEX: the screen, as it is now, does not match
not_on_screen() {
    if screen | grep -Eq -- "$2"; then bad "$1"; screen | sed 's/^/  | /'; else ok "$1"; fi
}
# start NAME ENV...: llamachat in the window's shell, stderr to $tmp/NAME.err (a test may
# define its own after sourcing this file)
start() {
    name=$1; shift
    $T send-keys -t lc "clear; env $* '$LC' 2>'$tmp/$name.err'; echo EXIT=\$?" Enter
    wait_for '^ idle \|' 30 >/dev/null || { bad "$name: chat started"; tui_show_err "$name"; return 1; }
}
# tui_show_err NAME: what llamachat wrote to $tmp/NAME.err (a sanitizer report, a message), indented
tui_show_err() { sed 's/^/  | /' "$tmp/$1.err" 2>/dev/null | head -30; }
# tui_lib_shell: the window "lc" (80x24) with a shell whose HOME is $tmp/home and whose rc file
# is $tmp/rc, in UTF-8, the tmux status line off; exits the test when no prompt comes
tui_lib_shell() {
    mkdir -p "$tmp/home"
    $T -f /dev/null new-session -d -s lc -x 80 -y 24 \
        "env HOME='$tmp/home' LLAMACHATRC='$tmp/rc' LANG=C.UTF-8 LC_ALL=C.UTF-8 TERM=tmux-256color PS1='$ ' sh"
    $T set-option -t lc status off >/dev/null
    wait_for '^\$' 10 >/dev/null || { echo "FAIL: no shell prompt"; exit 1; }
}
# quit NAME: an empty line, Ctrl-D; the exit status line must appear, and no sanitizer report
quit() {
    $T send-keys -t lc C-e C-u C-d
    check "$1: exits with status 0" '^EXIT=0'
    if grep -q 'AddressSanitizer\|runtime error' "$tmp/$1.err"; then
        bad "$1: no sanitizer report"; sed 's/^/  | /' "$tmp/$1.err" | head -30
    fi
    wait_for '^\$ *$' 10 >/dev/null
}
