#!/bin/sh
# test-tui-ux.sh - faults a demanding new user met, driven in a detached tmux session as
# tests/test-tui-first.sh is (tests/tui-lib.sh: private HOME and rc, every wait polls the
# screen): the parameter pane shows every value whole (a seed or top-k wider than its row is
# not cut to its first digits).
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

$T -f /dev/null new-session -d -s lc -x 80 -y 24 \
    "env HOME='$tmp/home' LLAMACHATRC='$tmp/rc' LANG=C.UTF-8 LC_ALL=C.UTF-8 TERM=tmux-256color PS1='$ ' sh"
$T set-option -t lc status off >/dev/null
wait_for '^\$' 10 >/dev/null || { echo "FAIL: no shell prompt"; exit 1; }

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

exit $fail
