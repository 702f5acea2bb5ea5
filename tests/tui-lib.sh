# tui-lib.sh - what the tmux-driven chat tests share (sourced, not run): a temp dir with its own
# tmux server, ok/bad bookkeeping, and polling of the screen (no fixed sleeps).
#   tui_lib_init NAME [CAPTURE-FLAGS]
# sets tmp (removed at exit with the tmux server), T ("tmux -S $tmp/sock"), fail=0, and defines
# ok NAME, bad NAME, screen, wait_for REGEX [SECONDS], check NAME REGEX [SECONDS].
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
