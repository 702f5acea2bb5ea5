#!/bin/sh
# Speculative decoding through the one-shot CLI (--spec lookup): llama.cpp's greedy references
# (every model of ../shared/reference/greedy, two prompts each, several lengths) give the same
# ids as without it; a prompt that repeats itself accepts drafts (stderr figures); bad values
# and a temperature are refused or noted with their messages.
set -u
B=${LC_BUILDDIR:-.}
S=${LC_SHARED:-../shared}
LC="$B/llamachat"
fail=0
check() { # name, got, want
    if [ "$2" = "$3" ]; then echo "ok   $1"; else echo "FAIL $1"; echo "  got:  $2"; echo "  want: $3"; fail=1; fi
}
field() { sed -n "s/^$1: //p" "$2"; }
[ -f "$S/models/stories260K-ff192-q4_1.gguf" ] || { echo "SKIP: no models"; exit 77; }
ERR="$B/wt-spec-cli.$$.err"
trap 'rm -f "$ERR"' EXIT

for ref in "$S"/reference/greedy/*.p0.txt "$S"/reference/greedy/*.p1.txt; do
    model=$(field model "$ref")
    [ -f "$S/models/$model" ] || continue
    prompt=$(field prompt "$ref")
    n=$(field n_predict "$ref")
    want=$(field gen_ids "$ref")
    got=$("$LC" -m "$S/models/$model" -p "$prompt" -n "$n" --temp 0 --print-token-ids -t 2 \
        --spec lookup 2>/dev/null)
    check "spec gen_ids $(basename "$ref")" "$got" "$want"
    # shorter replies: the draft limit at the end of the reply
    for k in 1 2 5; do
        got=$("$LC" -m "$S/models/$model" -p "$prompt" -n "$k" --temp 0 --print-token-ids -t 2 \
            --spec lookup --draft-max 3 2>/dev/null)
        check "spec gen_ids $(basename "$ref") -n $k" "$got" "$(echo "$want" | cut -d' ' -f1-"$k")"
    done
done

# A prompt that repeats: the same ids as plain decoding, and drafts accepted.
P="One two three four five six. One two three four five six. One two three four five six. One two three"
M="$S/models/stories260K-ff192-q4_1.gguf"
for n in 7 64 300; do
    want=$("$LC" -m "$M" -p "$P" -n "$n" --temp 0 --print-token-ids -t 2 2>/dev/null)
    got=$("$LC" -m "$M" -p "$P" -n "$n" --temp 0 --print-token-ids -t 2 --spec lookup 2>"$ERR")
    check "repetitive -n $n: same ids" "$got" "$want"
done
acc=$(sed -n 's/^llamachat: speculative (lookup): 300 tokens in .* \([0-9]*\) accepted .*/\1/p' "$ERR")
check "repetitive: drafts accepted" "$([ "${acc:-0}" -gt 50 ] && echo yes || echo "no: ${acc:-none}")" "yes"

# --spec with a temperature: a note, one token at a time, no figures
"$LC" -m "$M" -p "Hi" -n 4 --temp 0.8 --seed 3 --spec lookup >/dev/null 2>"$ERR"
check "temp note" "$(grep -c '^llamachat: note: --spec lookup is used with --temp 0 only; decoding one token at a time$' "$ERR")" "1"
check "temp: no figures" "$(grep -c 'speculative (lookup)' "$ERR")" "0"
# bad values
got=$("$LC" -m "$M" -p "Hi" --spec ngram 2>&1 >/dev/null)
check "bad --spec" "$got" "llamachat: --spec: bad value 'ngram' for speculative: expected lookup or off"
got=$("$LC" -m "$M" -p "Hi" --draft-max 0 2>&1 >/dev/null)
check "bad --draft-max" "$got" "llamachat: --draft-max: bad value '0' for draft_max: expected an integer from 1 to 64"
exit $fail
