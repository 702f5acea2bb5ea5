#!/bin/sh
# test-man.sh - the manual pages render cleanly: groff -man -ww gives no warnings, and no
# font-alternation macro (.BR, .IR, ...) has two plain words in a row as arguments, which the
# macro glues together ("/save.Transcriptslargerthan": text run on after ".BR /save .").
# Then each program's --help against its page: every option --help names is in the page's
# SYNOPSIS or OPTIONS, and every option named there is in --help (a long spelling left out of
# either, a page missing an option, fails).
set -u
command -v python3 >/dev/null 2>&1 || { echo "SKIP: python3 not installed"; exit 77; }
SRC=${srcdir:-.}
fail=0
for f in "$SRC"/man/llamachat.1 "$SRC"/man/llamachatrc.5 "$SRC"/man/llamachat-server.1 \
    "$SRC"/man/llamachat-imatrix.1 "$SRC"/man/llamachat-quantize.1 \
    "$SRC"/man/llamachat-perplexity.1 "$SRC"/man/llamachat-bench.1; do
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

# help_vs_man PROGRAM PAGE: the options of PROGRAM --help (from the build) and of PAGE's SYNOPSIS
# and OPTIONS sections, both ways.  An option written after another program's name on the same
# line ("for llamachat-quantize --method gptq", "curl -N") is that program's, not compared.
B=${LC_BUILDDIR:-.}
help_vs_man() {
    if [ ! -x "$B/$1" ]; then echo "FAIL $1: not built in $B"; fail=1; return; fi
    "$B/$1" --help >"$tmp_help" 2>&1 || { echo "FAIL $1 --help: exit $?"; fail=1; return; }
    out=$(python3 - "$1" "$tmp_help" "$2" <<'PY'
import re, sys
prog, help_path, page = sys.argv[1:]
OPT = r'(?<![\w\\/-])(--?[A-Za-z][A-Za-z0-9-]*)|/(--?[A-Za-z][A-Za-z0-9-]*)'
OTHER = re.compile(r'(?<![\w-])(llamachat(?:-[a-z]+)?|curl|code|set|llama-[a-z]+|ssh|git)(?![\w-])')
def options(text):
    found = set()
    for line in text.splitlines():
        # cut the line at the name of another program: what follows is its options
        for m in OTHER.finditer(line):
            if m.group(1) != prog:
                line = line[:m.start()]
                break
        for a, b in re.findall(OPT, line):
            found.add(a or b)
    return found
def man_text(path):
    keep, on = [], False
    for line in open(path, encoding="utf-8"):
        if line.startswith(".SH"):
            on = any(s in line for s in ("SYNOPSIS", "OPTIONS"))
            continue
        if on:
            keep.append(line)
    t = "".join(keep)
    t = re.sub(r'\\f[BIRP]', '', t).replace('\\-', '-').replace('\\(em', ' ').replace('\\ ', ' ')
    return re.sub(r'^\.[A-Z]+ ?', '', t, flags=re.M)
h = options(open(help_path, encoding="utf-8").read())
m = options(man_text(page))
for o in sorted(h - m):
    print("in --help, not in the page's SYNOPSIS/OPTIONS: %s" % o)
for o in sorted(m - h):
    print("in the page's SYNOPSIS/OPTIONS, not in --help: %s" % o)
PY
)
    if [ -n "$out" ]; then echo "FAIL $1 --help vs $2:"; echo "$out" | sed 's/^/  /'; fail=1
    else echo "ok   $1 --help and $(basename "$2") name the same options"; fi
}
tmp_help=$(mktemp) || exit 99
trap 'rm -f "$tmp_help"' EXIT
help_vs_man llamachat "$SRC"/man/llamachat.1
help_vs_man llamachat-server "$SRC"/man/llamachat-server.1
help_vs_man llamachat-imatrix "$SRC"/man/llamachat-imatrix.1
help_vs_man llamachat-quantize "$SRC"/man/llamachat-quantize.1
help_vs_man llamachat-perplexity "$SRC"/man/llamachat-perplexity.1
help_vs_man llamachat-bench "$SRC"/man/llamachat-bench.1
exit $fail
