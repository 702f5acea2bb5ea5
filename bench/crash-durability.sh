#!/bin/sh
# crash-durability.sh - kill -9 the chat at random moments and measure what survives.
#
# A scripted chat in a detached tmux session with the default model (1 thread, 4096 context,
# temp 0, replies of up to 1500 tokens: a few seconds each).  A first run gives the complete
# reply R to the message (greedy: the same every time after /clear).  Then ITER times: start
# with --continue (it must open the newest chats/ file and say so, with its message count),
# /clear, send the message, sleep a random 0 .. 5 s, kill -9.  After each kill the newest
# transcript must parse (python3 json) and hold the message; its reply must be R or a prefix
# of R; when it is a prefix, the reply was still being written and the time from the file's
# last write (mtime) to the kill is the reply time lost: it must stay about 1 s.
#
# Usage: bench/crash-durability.sh [ITER]   (default 100; LC_BUILDDIR, LC_SHARED as for tests)
set -u
ITER=${1:-100}
B=${LC_BUILDDIR:-.}
S=${LC_SHARED:-../shared}
LC="$B/llamachat"
case $LC in /*) ;; *) LC="$(pwd)/$LC" ;; esac
MODEL="$S/models/stories260K-ff192-q4_1.gguf"
case $MODEL in /*) ;; *) MODEL="$(pwd)/$MODEL" ;; esac
for c in tmux python3; do command -v $c >/dev/null || { echo "needs $c"; exit 77; }; done
[ -f "$MODEL" ] && [ -x "$LC" ] || { echo "needs $LC and $MODEL"; exit 1; }

tmp=$(mktemp -d "${TMPDIR:-/tmp}/lc-crash.XXXXXX") || exit 99
T="tmux -S $tmp/sock"
cleanup() { $T kill-server >/dev/null 2>&1; rm -rf "$tmp"; }
trap cleanup EXIT
trap 'exit 1' INT TERM HUP

screen() { $T capture-pane -t lc -p -J; }
wait_for() {
    limit=$(( ${2:-30} * 20 )); i=0
    while [ $i -lt $limit ]; do
        if screen | grep -Eq -- "$1"; then return 0; fi
        sleep 0.05; i=$((i + 1))
    done
    return 1
}
child_of() {
    for d in /proc/[0-9]*; do
        [ "$(cut -d' ' -f4 "$d/stat" 2>/dev/null)" = "$1" ] && echo "${d#/proc/}"
    done
}
home="$tmp/home"
chats="$home/.local/state/llamachat/chats"
mkdir -p "$home"
cat >"$tmp/rc" <<RC
[model]
path = $MODEL
threads = 1
context_size = 4096
[sampling]
temp = 0
max_tokens = 1500
[ui]
show_params = off
RC
MSG="Tom went to the park"
RUN="env HOME='$home' LLAMACHATRC='$tmp/rc' '$LC'"
$T -f /dev/null new-session -d -s lc -x 250 -y 40 "env LANG=C.UTF-8 LC_ALL=C.UTF-8 TERM=tmux-256color PS1='$ ' sh"
$T set-option -t lc status off >/dev/null
wait_for '^\$' 10 || { echo "no shell"; exit 1; }

# the reference reply, and how long it takes to write
$T send-keys -t lc "clear; $RUN 2>$tmp/err; echo EXIT=\$?" Enter
wait_for '^ idle \|' 30 || { echo "the chat did not start"; exit 1; }
t0=$(date +%s%N)
$T send-keys -t lc "$MSG" Enter
wait_for '^ writing' 10
wait_for '^ idle .*ctx [1-9]' 60 || { echo "no reply"; exit 1; }
t1=$(date +%s%N)
$T send-keys -t lc C-d
wait_for 'EXIT=0' 10
ref=$(ls -t "$chats"/*.json | head -1)
cp "$ref" "$tmp/ref.json"

: >"$tmp/log"
it=1
while [ $it -le "$ITER" ]; do
    newest=$(ls -t "$chats"/*.json | head -1)
    $T send-keys -t lc "clear; $RUN --continue 2>$tmp/err; echo EXIT=\$?" Enter
    if ! wait_for '^ idle \|' 30; then
        echo "$it start-failed" >>"$tmp/log"; sed 's/^/# /' "$tmp/err" >>"$tmp/log"
        $T send-keys -t lc C-d; sleep 1; it=$((it + 1)); continue
    fi
    nmsg=$(python3 -c 'import json,sys; print(len(json.load(open(sys.argv[1]))["messages"]))' "$newest" 2>/dev/null)
    if screen | grep -Fq -- "--continue: $nmsg messages from $newest"; then said=1; else said=0; fi
    $T send-keys -t lc "/clear" Enter
    wait_for 'conversation cleared' 10
    $T send-keys -t lc "$MSG" Enter
    ts=$(date +%s%N)
    sleep "$(python3 -c 'import random; print(round(random.uniform(0, 5), 3))')"
    pid=$(child_of "$($T list-panes -t lc -F '#{pane_pid}')" | head -1)
    tk=$(date +%s%N)
    kill -9 "$pid"
    wait_for 'EXIT=137' 10
    $T send-keys -t lc "stty sane; printf '\\033[?1049l\\033[?2004l'; clear" C-j
    wait_for '^\$ *$' 10
    f=$(ls -t "$chats"/*.json | head -1)
    echo "$it $said $tk $f $ts" >>"$tmp/log"
    it=$((it + 1))
done

python3 - "$tmp/ref.json" "$tmp/log" "$MSG" "$t0" "$t1" <<'PY'
import json, os, sys, statistics
ref, log, msg, t0, t1 = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5])
R = json.load(open(ref))["messages"][-1]["content"]
rate = len(R) / ((t1 - t0) / 1e9)
n = parse_bad = start_bad = not_said = wrong = complete = 0
gaps, partial_lens, unsaved = [], [], []
seen = set()
for line in open(log):
    parts = line.split()
    if parts[0] == "#":
        continue
    if parts[1] == "start-failed":
        start_bad += 1
        continue
    i, said, tk, f, ts = parts[0], int(parts[1]), int(parts[2]), parts[3], int(parts[4])
    n += 1
    not_said += said == 0
    try:
        m = json.load(open(f, encoding="utf-8"))["messages"]
    except Exception as e:
        parse_bad += 1
        print("does not parse:", f, e)
        continue
    if f in seen:   # killed before the new conversation's first save: lost since the send
        unsaved.append((tk - ts) / 1e9)
        continue
    if not m or m[0]["content"] != msg:
        wrong += 1
        print("message missing:", f)
        continue
    seen.add(f)
    reply = m[1]["content"] if len(m) > 1 else ""
    if reply == R:
        complete += 1
    elif R.startswith(reply):
        gaps.append((tk - os.stat(f).st_mtime_ns) / 1e9)
        partial_lens.append(len(reply))
    else:
        wrong += 1
        print("reply is not a prefix of the reference:", f)
gaps.sort()
print(f"kills: {n} (+{start_bad} restarts that failed); reference reply {len(R)} chars in "
      f"{(t1 - t0) / 1e9:.2f} s ({rate:.0f} chars/s)")
print(f"transcripts that do not parse: {parse_bad}; --continue did not name the newest file: {not_said}")
print(f"killed after the reply was complete and saved whole: {complete}")
if unsaved:
    print(f"killed before the message was saved: {len(unsaved)}, at most {max(unsaved):.3f} s after sending it")
print(f"killed while the reply was written: {len(gaps)}; message not saved / reply not a prefix: {wrong}")
if gaps:
    p = lambda q: gaps[min(len(gaps) - 1, int(q * len(gaps)))]
    print(f"reply time lost (kill - last save): median {p(0.5):.3f} s, p95 {p(0.95):.3f} s, "
          f"max {gaps[-1]:.3f} s (about {gaps[-1] * rate:.0f} chars at the mean rate)")
    print(f"partial replies saved: median {statistics.median(partial_lens) if partial_lens else 0:.0f} chars")
ok = parse_bad == 0 and start_bad == 0 and wrong == 0 and (not gaps or gaps[-1] < 1.25) and all(u < 1.25 for u in unsaved)
print("RESULT:", "ok" if ok else "FAILED")
sys.exit(0 if ok else 1)
PY
