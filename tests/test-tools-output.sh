#!/bin/sh
# test-tools-output.sh - the tools' outputs that cannot be written: results printed to a full
# disk are an error (exit 1, said on stderr), not a success with the figures lost; an imatrix
# output that is a FIFO or a device is refused before the work instead of being replaced by a
# regular file (as root, `-o /dev/full` replaced the device node), and a failed --save-text
# removes only a regular file of its own (not the link or device it was given).
set -u
B=${LC_BUILDDIR:-.}
S=${LC_SHARED:-../shared}
M=$S/models
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fail=0
bad() { echo "FAIL: $*"; fail=1; }
ok() { echo "ok   $*"; }

full() { # name, expected stderr substring, command...: stdout to a full disk
    name=$1; want=$2; shift 2
    out=$("$@" 2>&1 >/dev/full); rc=$?
    case "$out" in
        *"$want"*) [ $rc -eq 1 ] && ok "$name" || bad "$name: exit $rc" ;;
        *) bad "$name: exit $rc: '$(printf '%s' "$out" | tail -n 2)'" ;;
    esac
}
if [ -c /dev/full ]; then
    full "perplexity: results to a full disk" \
        "llamachat-perplexity: cannot write to standard output: No space left on device" \
        "$B/llamachat-perplexity" -m "$M/stories260K-ff192-q4_1.gguf" -f "$S/text/tales.txt" \
        -c 128 --chunks 2 -t 1
    full "bench: the table to a full disk" "llamachat-bench: cannot write to standard output" \
        "$B/llamachat-bench" -m "$M/stories260K-ff192-q4_1.gguf" -p 8 -n 2 -r 1 -t 1
    full "quantize --stats to a full disk" \
        "llamachat-quantize: cannot write to standard output: No space left on device" \
        "$B/llamachat-quantize" --stats "$M/stories260K-ff192-f32.gguf" -t 1
    full "imatrix --help to a full disk" "llamachat-imatrix: cannot write to standard output" \
        "$B/llamachat-imatrix" --help
fi
out=$("$B/llamachat-perplexity" -m "$M/stories260K-ff192-q4_1.gguf" -f "$S/text/tales.txt" \
    -c 128 --chunks 2 -t 1 2>/dev/null); rc=$?
case "$out" in
    *"Final estimate: PPL"*) [ $rc -eq 0 ] && ok "perplexity to a pipe" || bad "perplexity: exit $rc" ;;
    *) bad "perplexity to a pipe: '$out'" ;;
esac

# a directory as the text: said so (it was "read error")
out=$("$B/llamachat-perplexity" -m "$M/stories260K-ff192-q4_1.gguf" -f "$T" -c 128 2>&1); rc=$?
case "$out" in
    *"$T: a directory, not a file"*) [ $rc -eq 1 ] && ok "perplexity -f DIR" || bad "perplexity -f DIR: exit $rc" ;;
    *) bad "perplexity -f DIR: exit $rc: '$out'" ;;
esac

# imatrix -o a FIFO: refused at once, the FIFO left as it was
mkfifo "$T/fifo"
out=$("$B/llamachat-imatrix" -m "$M/stories260K-ff192-f32.gguf" --generate 32 -c 32 -t 1 \
    -o "$T/fifo" 2>&1); rc=$?
case "$out" in
    *"$T/fifo: a FIFO, not a regular file; not replaced"*) [ $rc -eq 1 ] && ok "imatrix -o FIFO refused" \
        || bad "imatrix -o FIFO: exit $rc" ;;
    *) bad "imatrix -o FIFO: exit $rc: '$(printf '%s' "$out" | tail -n 2)'" ;;
esac
[ -p "$T/fifo" ] && ok "imatrix -o FIFO: still a FIFO" || bad "imatrix -o FIFO: replaced by $(ls -l "$T/fifo")"
ls "$T" | grep -q 'tmp' && bad "imatrix -o FIFO: a temporary file left: $(ls "$T")"

# imatrix -o a symlink: the file it points to is written, the link stays
: >"$T/target.dat"
ln -s target.dat "$T/link.dat"
"$B/llamachat-imatrix" -m "$M/stories260K-ff192-f32.gguf" --generate 32 -c 32 -t 1 \
    -o "$T/link.dat" >/dev/null 2>&1 || bad "imatrix -o a symlink: exit $?"
[ -L "$T/link.dat" ] && [ -s "$T/target.dat" ] && ok "imatrix -o symlink: the target written" \
    || bad "imatrix -o symlink: $(ls -l "$T")"

# --save-text to a link to a full device: the write error is said, the link is not removed
if [ -c /dev/full ]; then
    ln -s /dev/full "$T/full"
    out=$("$B/llamachat-imatrix" -m "$M/stories260K-ff192-f32.gguf" --generate 32 -c 32 -t 1 \
        --save-text "$T/full" -o "$T/st.dat" 2>&1); rc=$?
    case "$out" in
        *"$T/full: write error"*) [ $rc -eq 1 ] && ok "--save-text full: write error" \
            || bad "--save-text full: exit $rc" ;;
        *) bad "--save-text full: exit $rc: '$(printf '%s' "$out" | tail -n 2)'" ;;
    esac
    [ -L "$T/full" ] && ok "--save-text full: the link kept" || bad "--save-text full: the link was removed"
    [ -c /dev/full ] || bad "/dev/full is no longer a device"
fi
exit $fail
