#!/bin/sh
# test-quantize-files.sh - llamachat-quantize replaces its output safely (src/fileutil.c): onto
# a symlink it writes the link's target; a FIFO is refused and stays a FIFO; a 0600 output stays
# 0600; a --split-max-size run that fails leaves none of its parts behind.
set -u
B=${LC_BUILDDIR:-.}
S=${LC_SHARED:-../shared}
Q=$B/llamachat-quantize
SRC=$S/models/stories260K-ff192-f32.gguf
[ -f "$SRC" ] || { echo "SKIP: $SRC missing"; exit 77; }
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fail=0
ok() { echo "ok   $1"; }
bad() { echo "FAIL $1"; fail=1; }

# onto a symlink: the target is written, the link stays a link
: >"$T/real.gguf"
ln -s real.gguf "$T/link.gguf"
if "$Q" "$SRC" "$T/link.gguf" q8_0 >/dev/null 2>&1 && [ -L "$T/link.gguf" ] && [ -s "$T/real.gguf" ]; then
    ok "symlink: the target written, the link kept"
else
    bad "symlink: the target written, the link kept"; ls -l "$T"
fi
# over a 0600 file: the mode stays
chmod 600 "$T/real.gguf"
"$Q" "$SRC" "$T/real.gguf" q8_0 >/dev/null 2>&1
m=$(stat -c %a "$T/real.gguf")
if [ "$m" = 600 ]; then ok "0600 kept"; else bad "0600 kept (got $m)"; fi
# a FIFO: refused with a message, still a FIFO, nothing waits on it
mkfifo "$T/fifo.gguf"
out=$(timeout 20 "$Q" "$SRC" "$T/fifo.gguf" q8_0 2>&1 >/dev/null); rc=$?
if [ $rc = 1 ] && [ -p "$T/fifo.gguf" ] && echo "$out" | grep -q "fifo.gguf: a FIFO, not a regular file; not replaced"; then
    ok "FIFO refused and kept"
else
    bad "FIFO refused and kept (exit $rc: $out)"; ls -l "$T"
fi
# a split run failing at its second part (a directory there): no part left behind
mkdir "$T/ok"
"$Q" --split-max-size 200K "$SRC" "$T/ok/split.gguf" f32 >/dev/null 2>&1
n=$(ls "$T/ok" | grep -c '^split-')
[ "$n" -ge 3 ] || bad "split run made $n parts"
rm -rf "$T/ok"
mkdir "$T/split-00002-of-0000$n.gguf"
out=$("$Q" --split-max-size 200K "$SRC" "$T/split.gguf" f32 2>&1 >/dev/null); rc=$?
left=$(ls "$T" | grep -v "^split-00002-of" | grep -c '^split-\|\.tmp\.')
if [ $rc != 0 ] && [ "$left" = 0 ]; then
    ok "failed split: every part removed ($out)"
else
    bad "failed split: every part removed (exit $rc, $left left: $(ls "$T"))"
fi
exit $fail
