#!/bin/sh
# test-man.sh - the manual pages render cleanly: groff -man -ww gives no warnings, and no
# font-alternation macro (.BR, .IR, ...) has two plain words in a row as arguments, which the
# macro glues together ("/save.Transcriptslargerthan": text run on after ".BR /save .").
set -u
command -v python3 >/dev/null 2>&1 || { echo "SKIP: python3 not installed"; exit 77; }
SRC=${srcdir:-.}
fail=0
for f in "$SRC"/man/llamachat.1 "$SRC"/man/llamachatrc.5 "$SRC"/man/llamachat-server.1 \
    "$SRC"/man/llamachat-imatrix.1 "$SRC"/man/llamachat-quantize.1; do
    if command -v groff >/dev/null 2>&1; then
        w=$(groff -man -Tutf8 -ww "$f" 2>&1 >/dev/null)
        if [ -n "$w" ]; then echo "FAIL $f: groff warnings:"; echo "$w" | head -10; fail=1
        else echo "ok   $f: no groff warnings"; fi
    fi
    bad=$(python3 - "$f" <<'PY'
import re, shlex, sys
f = sys.argv[1]
for n, line in enumerate(open(f, encoding="utf-8"), 1):
    m = re.match(r'^\.(BR|RB|IR|RI|BI|IB)\s+(.*)$', line.rstrip("\n"))
    if not m:
        continue
    try:
        args = shlex.split(m.group(2).replace("\\", "\\\\"), posix=False)
    except ValueError:
        print("%s:%d: unbalanced quotes" % (f, n)); continue
    word = [not a.startswith('"') and re.fullmatch(r"[A-Za-z][A-Za-z'-]*[,;.]?", a) is not None for a in args]
    if any(word[i] and word[i + 1] for i in range(len(args) - 1)):
        print("%s:%d: %s" % (f, n, line.rstrip()))
PY
)
    if [ -n "$bad" ]; then echo "FAIL $f: words glued by a font macro:"; echo "$bad"; fail=1
    else echo "ok   $f: no text run on after a font macro"; fi
done
exit $fail
