#!/bin/sh
# The one-shot CLI against llama.cpp's references, and its errors.
set -u
B=${LC_BUILDDIR:-.}
S=${LC_SHARED:-../shared}
LC="$B/llamachat"
fail=0
check() { # name, got, want
    if [ "$2" = "$3" ]; then echo "ok   $1"; else echo "FAIL $1"; echo "  got:  $2"; echo "  want: $3"; fail=1; fi
}
field() { sed -n "s/^$1: //p" "$2"; }

# Greedy ids through the real binary, for each stories reference.
for ref in "$S"/reference/greedy/stories260K*.p0.txt "$S"/reference/greedy/stories260K-ff192-q4_1.p*.txt; do
    model=$(field model "$ref")
    prompt=$(field prompt "$ref")
    n=$(field n_predict "$ref")
    want=$(field gen_ids "$ref")
    got=$("$LC" -m "$S/models/$model" -p "$prompt" -n "$n" --temp 0 --print-token-ids -t 2 2>/dev/null)
    check "gen_ids $(basename "$ref")" "$got" "$want"
    got=$("$LC" -m "$S/models/$model" -p "$prompt" --tokenize)
    check "tokenize $(basename "$ref")" "$got" "$(field prompt_ids "$ref")"
done

# Text output: prompt + the reference text (the file's gen_text runs to the end of the file).
ref="$S/reference/greedy/stories260K-ff192-q4_1.p0.txt"
want=$(printf '%s' "$(field prompt "$ref")"; sed -n '/^gen_text: /,$p' "$ref" | sed '1s/^gen_text: //')
got=$("$LC" -m "$S/models/stories260K-ff192-q4_1.gguf" -p "$(field prompt "$ref")" -n 128 --temp 0 2>/dev/null)
check "text p0" "$got" "$want"

# Not enough memory for the repacked copy (AVX-512): the weights stay in the file's layout, a
# note says so on stderr, and the tokens are the same.
got=$(LLAMACHAT_MEM_AVAILABLE_MIB=1 "$LC" -m "$S/models/stories260K-ff192-q4_1.gguf" -p "$(field prompt "$ref")" \
    -n "$(field n_predict "$ref")" --temp 0 --print-token-ids -t 2 2>"$B/cli-mem.err")
check "low memory: gen_ids" "$got" "$(field gen_ids "$ref")"
if "$LC" --version 2>/dev/null | grep -q 'kernels: avx512'; then
    got=$(grep -c "^llamachat: note: weights kept in the file's layout (decoding is slower): repacking them needs 256 MiB and 1 MiB of memory are available$" "$B/cli-mem.err")
    check "low memory: note" "$got" "1"
fi
rm -f "$B/cli-mem.err"

# The default model is used when none is given.
got=$("$LC" -p "Once upon a time" -n 128 --temp 0 --print-token-ids 2>/dev/null)
check "default model" "$got" "$(field gen_ids "$ref")"

# Vocab-only file: --tokenize works without tensors ("Hello world" -> 15043 3186 in llama-spm).
got=$("$LC" -m "$S/reference/tokenizer/ggml-vocab-llama-spm.gguf" -p "Hello world" --tokenize)
check "vocab-only tokenize" "$got" "1 15043 3186"
got=$("$LC" -m "$S/reference/tokenizer/ggml-vocab-llama-spm.gguf" -p "Hello world" --tokenize --no-bos)
check "vocab-only tokenize --no-bos" "$got" "15043 3186"

# Same seed, same text; context limit stops cleanly.
a=$("$LC" -p "Once" -n 40 --temp 1 --seed 42 --print-token-ids 2>/dev/null)
b=$("$LC" -p "Once" -n 40 --temp 1 --seed 42 --print-token-ids 2>/dev/null)
check "seeded sampling repeats" "$a" "$b"
# The seed in use is reported on stderr; a random one, given back with --seed, repeats the text.
"$LC" -p "Once" -n 40 --temp 1 --print-token-ids >"$B/cli-seed.out" 2>"$B/cli-seed.err"
seed=$(sed -n 's/^llamachat: seed \([0-9]*\) (random; --seed \([0-9]*\) repeats this text)$/\1 \2/p' "$B/cli-seed.err")
set -- $seed
check "random seed reported" "${1:-none} ${2:-none}" "${1:-none} ${1:-none}"
if [ -n "${1:-}" ]; then
    got=$("$LC" -p "Once" -n 40 --temp 1 --seed "$1" --print-token-ids 2>/dev/null)
    check "reported seed repeats the text" "$got" "$(cat "$B/cli-seed.out")"
fi
got=$("$LC" -p "Once" -n 4 --temp 1 --seed 42 2>&1 >/dev/null | grep '^llamachat: seed')
check "given seed reported" "$got" "llamachat: seed 42"
rm -f "$B/cli-seed.out" "$B/cli-seed.err"
out=$("$LC" -p "Once upon a time" -c 16 --temp 0 --print-token-ids 2>&1 >/dev/null)
case "$out" in *"context full"*) echo "ok   context limit";; *) echo "FAIL context limit: $out"; fail=1;; esac
got=$("$LC" -p "Once upon a time" -c 16 --temp 0 --print-token-ids 2>/dev/null | wc -w)
check "context limit token count" "$got" "12"

# Untrusted text: to a pipe the exact bytes; to a terminal (tmux) the visible form, so an ESC
# in the prompt echo or the reply shows as U+241B instead of clearing the screen.
got=$("$LC" -p "$(printf 'a\033[2Jb\177')" -n 0 --temp 0 2>/dev/null | od -An -tx1 | tr -s ' \n' ' ')
check "pipe keeps exact bytes" "$got" " 61 1b 5b 32 4a 62 7f 0a "
if command -v tmux >/dev/null 2>&1; then
    TS=lccli$$
    TSOCK=$(mktemp -u "${TMPDIR:-/tmp}/lc-cli-tmux.XXXXXX")   # our own server, not the user's
    tmux -S "$TSOCK" new-session -d -s $TS -x 80 -y 10 "sh -c 'echo BEFORE; \"$LC\" -p \"\$(printf \"a\\033[2Jb\\033]0;T\\007c\\302\\233d\")\" -n 0 2>/dev/null; echo AFTER; sleep 30'"
    i=0
    while [ $i -lt 300 ] && ! tmux -S "$TSOCK" capture-pane -p -t $TS | grep -q '^AFTER'; do
        sleep 0.1; i=$((i + 1))
    done
    scr=$(tmux -S "$TSOCK" capture-pane -p -t $TS | grep -v '^ *$')
    tmux -S "$TSOCK" kill-server 2>/dev/null
    rm -f "$TSOCK"
    check "terminal gets the visible form" "$scr" "$(printf 'BEFORE\na\342\220\233[2Jb\342\220\233]0;T\342\220\207c\357\277\275d\nAFTER')"
else
    echo "skip terminal output (no tmux)"
fi

# The prompt from standard input (-p -) and from a file (-f): one final newline is dropped, as
# llama.cpp's -f does, so a file ending in two newlines keeps one.
got=$(printf 'Hello world\n' | "$LC" -m "$S/reference/tokenizer/ggml-vocab-llama-spm.gguf" -p - --tokenize)
check "-p -: stdin, final newline dropped" "$got" "1 15043 3186"
# An empty prompt, -p - with nothing on stdin or -p "": the model reads BOS alone, and the summary
# counts it as the prompt (a batch of one token is not "generated"); the same text either way.
# With --no-bos there is nothing to read: refused, and the message says why.
Q41="$S/models/stories260K-ff192-q4_1.gguf"
got=$("$LC" -m "$Q41" -p - -n 5 --temp 0 --seed 1 -t 2 </dev/null 2>"$B/cli-empty.err")
want=$("$LC" -m "$Q41" -p "" -n 5 --temp 0 --seed 1 -t 2 </dev/null 2>"$B/cli-empty2.err")
check "-p - (empty stdin): the text of -p \"\"" "$got" "$want"
check "-p - (empty stdin): prompt 1 token (BOS), 4 evaluated one by one" \
    "$(sed -n 's/^llamachat: prompt \([0-9]*\) tokens in .*generated \([0-9]*\) tokens (\([0-9]*\) evaluated.*/\1 \2 \3/p' "$B/cli-empty.err")" "1 5 4"
check "-p \"\": prompt 1 token (BOS), 4 evaluated one by one" \
    "$(sed -n 's/^llamachat: prompt \([0-9]*\) tokens in .*generated \([0-9]*\) tokens (\([0-9]*\) evaluated.*/\1 \2 \3/p' "$B/cli-empty2.err")" "1 5 4"
"$LC" -m "$Q41" -p "" --no-bos -n 5 </dev/null >/dev/null 2>"$B/cli-empty.err"
check "-p \"\" --no-bos: refused, exit" "$?" "1"
check "-p \"\" --no-bos: says why" "$(cat "$B/cli-empty.err")" \
    "llamachat: the prompt is empty and --no-bos adds no BOS token: nothing for the model to read"
rm -f "$B/cli-empty.err" "$B/cli-empty2.err"
ref="$S/reference/greedy/stories260K-ff192-q4_1.p0.txt"
printf '%s\n' "$(field prompt "$ref")" >"$B/cli-prompt.txt"
got=$("$LC" -f "$B/cli-prompt.txt" -n "$(field n_predict "$ref")" --temp 0 --print-token-ids -t 2 2>/dev/null)
check "-f FILE: gen_ids" "$got" "$(field gen_ids "$ref")"
got=$("$LC" -f "$B/cli-prompt.txt" --tokenize)
check "-f FILE: prompt_ids" "$got" "$(field prompt_ids "$ref")"

# --chat: one user turn in the chat template, only the reply printed.  On the default (base)
# model the template is "plain": the reply is the continuation -p prints after its echo.
want=$("$LC" -p "Once upon a time" -n 16 --temp 0 2>/dev/null)
got=$("$LC" --chat -p "Once upon a time" -n 16 --temp 0 2>/dev/null)
check "--chat plain: the continuation alone" "Once upon a time$got" "$want"
check "--chat plain: exact text" "$got" ", there was a little girl named Lily. She loved to play"
# ChatML with --system: the model reads exactly the template's rendering (token log), and
# writes what -p gives for that rendering (its ids, its bytes).
chatml=$(printf '<|im_start|>system\nBe kind.<|im_end|>\n<|im_start|>user\nOnce upon a time<|im_end|>\n<|im_start|>assistant\n')
printf '%s\n\n' "$chatml" >"$B/cli-chatml.txt"   # -f drops one newline: the rendering's own stays
"$LC" --chat --chat-template chatml --system "Be kind." -p "Once upon a time" -n 16 --temp 0 \
    --log-file "$B/cli-chat.log" >"$B/cli-chat.out" 2>"$B/cli-chat.err"
check "--chat chatml: exit 0" "$?" "0"
got=$(sed -n 's/^prompt pos=0 n=[0-9]*: //p' "$B/cli-chat.log")
check "--chat chatml: prompt ids = the rendering's" "$got" "$("$LC" -f "$B/cli-chatml.txt" --tokenize)"
check "--chat chatml: prompt ids" "$got" "1 410 504 506 288 98 356 295 413 506 505 419 422 356 411 423 13 445 411 409 417 264 426 504 506 288 98 367 506 505 13 504 506 288 98 356 295 413 506 505 425 419 285 13 441 416 331 407 261 378 504 506 288 98 367 506 505 13 504 506 288 98 356 295 413 506 505 412 419 419 293 413 303 413 13"
got=$(sed -n 's/^reply pos=[0-9]* n=1: //p' "$B/cli-chat.log" | tr '\n' ' ')
want=$("$LC" -f "$B/cli-chatml.txt" -n 16 --temp 0 --print-token-ids 2>/dev/null)
check "--chat chatml: reply ids = -p's for the rendering" "$got${want##* }" "$want"
check "--chat chatml: reply ids" "$want" "436 440 411 276 432 436 336 410 454 412 340 426 313 442 413 439"
got=$(od -An -tx1 "$B/cli-chat.out" | tr -s ' \n' ' ')
check "--chat chatml: reply bytes" "$got" " 22 48 65 72 65 2c 22 20 73 61 69 64 20 4a 61 63 6b 2e 20 22 49 74 27 0a "
got=$(grep -c '^llamachat: .*chatml chat template; stopped: max tokens (-n)$' "$B/cli-chat.err")
check "--chat chatml: figures on stderr" "$got" "1"
# the same message from standard input
got=$(printf 'Once upon a time\n' | "$LC" --chat --chat-template chatml --system "Be kind." -p - -n 16 --temp 0 2>/dev/null | od -An -tx1 | tr -s ' \n' ' ')
check "--chat -p -: same reply" "$got" " 22 48 65 72 65 2c 22 20 73 61 69 64 20 4a 61 63 6b 2e 20 22 49 74 27 0a "
rm -f "$B/cli-prompt.txt" "$B/cli-chatml.txt" "$B/cli-chat.log" "$B/cli-chat.out" "$B/cli-chat.err"
# --chat on a model with its own ChatML template and control tokens (<|im_start|> 32000,
# <|im_end|> 32001; tests/markov-gguf.py: greedy output follows a table): only the template's
# text makes control tokens (the ones in --system and the message stay text, as in the chat),
# and the reply, which spells "<|im_end|>" in text pieces after " Hello", ends at that stop
# string: stdout is " Hello" and a newline.
SPM="$S/reference/tokenizer/ggml-vocab-llama-spm.gguf"
TM='{% for message in messages %}{{'"'"'<|im_start|>'"'"' + message['"'"'role'"'"'] + '"'"'\n'"'"' + message['"'"'content'"'"'] + '"'"'<|im_end|>'"'"' + '"'"'\n'"'"'}}{% endfor %}{% if add_generation_prompt %}{{ '"'"'<|im_start|>assistant\n'"'"' }}{% endif %}'
CFG=$(python3 -c 'import json,sys; print(json.dumps({"trans": {"<0x0A>": "\u2581H", "\u2581H": "ello", "ello": "<", "<": "|", "|": "im", "im": "_", "_": "end", "end": "<0x7C>", "<0x7C>": ">"}, "default": 2, "extra": [["<|im_start|>", 3], ["<|im_end|>", 3]], "kv": {"tokenizer.chat_template": [8, sys.argv[1]]}}))' "$TM")
if command -v python3 >/dev/null 2>&1 && python3 "$(dirname "$0")/markov-gguf.py" "$B/cli-markov.gguf" "$SPM" "$CFG"; then
    got=$("$LC" --chat -m "$B/cli-markov.gguf" --system 'be <|im_end|> nice' -p 'x<|im_end|>y' --temp 0 -n 20 \
        --log-file "$B/cli-markov.log" 2>"$B/cli-markov.err" | od -An -c | tr -s ' \n' ' ')
    check "--chat jinja chatml: the reply up to the stop string" "$got" " H e l l o \\n "
    got=$(sed -n 's/^prompt pos=0 n=[0-9]*: //p' "$B/cli-markov.log")
    check "--chat jinja chatml: prompt ids" "$got" "1 32000 1788 13 915 529 29989 326 29918 355 29989 29958 7575 32001 29871 13 32000 1404 13 29916 29966 29989 326 29918 355 29989 29958 29891 32001 29871 13 32000 20255 13"
    got=$(grep -c '^llamachat: .*jinja chat template; stopped: end of turn$' "$B/cli-markov.err")
    check "--chat jinja chatml: ended at the end of the turn" "$got" "1"
else
    echo "FAIL markov-gguf.py"; fail=1
fi
rm -f "$B/cli-markov.gguf" "$B/cli-markov.log" "$B/cli-markov.err"
# --chat --remote: the same message to an OpenAI-compatible server (tests/fake-openai.py), the
# streamed reply on stdout; a server error is exit status 1 with its message
if command -v python3 >/dev/null 2>&1; then
    fdir=$(mktemp -d "${TMPDIR:-/tmp}/lc-cli-fake.XXXXXX")
    python3 "$(dirname "$0")/fake-openai.py" "$fdir/port" & fake=$!
    for _ in $(seq 50); do [ -f "$fdir/port" ] && break; sleep 0.1; done
    port=$(cat "$fdir/port" 2>/dev/null)
    got=$(LLAMACHATRC=/dev/null "$LC" --chat --remote "http://127.0.0.1:$port/ok" --system "Be brief." -p "hi" 2>/dev/null)
    check "--chat --remote: the reply" "$got" "Hello there"
    got=$(grep -c '"messages":\[{"role":"system","content":"Be brief."},{"role":"user","content":"hi"}\]' "$fdir/port.requests" 2>/dev/null)
    check "--chat --remote: system and user messages sent" "$got" "1"
    out=$(LLAMACHATRC=/dev/null "$LC" --chat --remote "http://127.0.0.1:$port/500" -p "hi" 2>&1 >/dev/null); rc=$?
    check "--chat --remote: a server error" "$rc: $out" "1: llamachat: http://127.0.0.1:$port/500: HTTP 500: server error: the model crashed"
    kill $fake 2>/dev/null
    rm -rf "$fdir"
fi

# Errors: one line, non-zero exit.
err() { # name, expected substring, command...
    name=$1; want=$2; shift 2
    out=$("$@" 2>&1 >/dev/null); rc=$?
    case "$out" in
        *"$want"*) [ $rc -ne 0 ] && echo "ok   $name" || { echo "FAIL $name: exit 0"; fail=1; } ;;
        *) echo "FAIL $name: '$out'"; fail=1 ;;
    esac
}
err "missing model" "No such file" "$LC" -m /nonexistent.gguf -p hi
err "--remote without a host" "llamachat: remote URL 'http://' has no host" "$LC" --remote http:// --chat -p hi
err "--remote without a host (path)" "remote URL 'https:///v1' has no host" "$LC" --remote https:///v1 --chat -p hi
rm -f "$B/cli-fifo.gguf"; mkfifo "$B/cli-fifo.gguf"   # opening it must not wait for a writer
err "model is a FIFO" "cli-fifo.gguf: not a regular file" timeout 20 "$LC" -m "$B/cli-fifo.gguf" -p hi
rm -f "$B/cli-fifo.gguf"
err "not a gguf" "magic" "$LC" -m "$S/text/tales.txt" -p hi
err "bad option" "unknown option --bogus" "$LC" --bogus
err "bad number" "--temp: bad value 'abc' for temp: expected a number from 0 to 100" "$LC" --temp abc -p hi
# one definition per option (issue 10 item 7): a subnormal temperature, seed -1, threads 0
for a in "--temp 1e-40" "--seed -1" "-t 0" "--chat --chat-template chatml"; do
    if "$LC" -p "Once" -n 2 $a >/dev/null 2>&1; then echo "ok   accepted: $a"; else echo "FAIL accepted: $a"; fail=1; fi
done
err "unknown template lists the names" "--chat-template: bad value 'nope' for template: expected one of plain, chatml, llama2," "$LC" --chat-template nope -p hi
err "missing value" "needs a value" "$LC" -p
err "-f: missing file" "llamachat: -f /nonexistent.txt: No such file or directory" "$LC" -f /nonexistent.txt
printf 'a\000b' >"$B/cli-nul.txt"
err "-f: binary file" "has a NUL byte (a binary file?); not read" "$LC" -f "$B/cli-nul.txt"
rm -f "$B/cli-nul.txt"
err "--chat without a prompt" "llamachat: --chat needs a prompt: -p TEXT, -p - (standard input) or -f FILE" "$LC" --chat
err "--chat --print-token-ids" "--chat prints text: --log-file FILE records the token ids" "$LC" --chat -p hi --print-token-ids
err "--chat: missing model" "No such file" "$LC" --chat -m /nonexistent.gguf -p hi
out=$("$LC" --chat -p "Once upon a time there was a big dog and a cat and" -c 16 2>&1 >/dev/null); rc=$?
check "--chat: prompt too long" "$rc: $out" "1: llamachat: message not sent: with it the prompt is 16 tokens, and 2 more are kept for the reply; the context holds 16 (-c)"
err "-p with --continue" "llamachat: --continue opens a saved chat in the full-screen chat: leave out -p, -f and --tokenize" "$LC" -p hi --continue
err "--resume with --tokenize" "llamachat: --resume opens a saved chat in the full-screen chat: leave out -p, -f and --tokenize" "$LC" --resume x.json --tokenize -p hi
# A context too large for memory: a clear error (with ASan the allocator is made to return NULL
# for blocks over 512 MiB; otherwise the address space is limited to 4 GiB)
big() {
    if ldd "$LC" 2>/dev/null | grep -q libasan; then
        ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}allocator_may_return_null=1:max_allocation_size_mb=512" "$@"
    else
        (ulimit -v 4194304 && "$@")
    fi
}
err "context too large for memory" "llamachat: out of memory allocating a context of 16777216 tokens (KV cache 10240.0 MiB)" \
    big "$LC" -m "$S/models/stories260K-ff192-q4_1.gguf" -c 16777216 -p hi -n 1
err "bad isa" "LLAMACHAT_ISA" env LLAMACHAT_ISA=sparc "$LC" --version
# --log-file in the plain one-shot mode: it was ignored (no file, exit 0 with a path that cannot
# be opened); now every decode is logged as in the chat and --chat, and a bad path is an error
rm -f "$B/cli-oneshot.log" "$B/cli-chat.log"
"$LC" -p "Once upon" -n 4 --temp 0 --log-file "$B/cli-oneshot.log" >/dev/null 2>&1
check "--log-file -p: every decode" "$(cat "$B/cli-oneshot.log" 2>/dev/null)" 'prompt pos=0 n=3: 1 403 407
prompt text: "<s> Once upon"
reply pos=3 n=1: 261
reply text: " a"
reply pos=4 n=1: 378
reply text: " time"
reply pos=5 n=1: 432
reply text: ","'
"$LC" --chat -p "Once upon" -n 4 --temp 0 --log-file "$B/cli-chat.log" >/dev/null 2>&1
check "--log-file -p: the same as --chat's" "$(cat "$B/cli-oneshot.log" 2>/dev/null)" "$(cat "$B/cli-chat.log" 2>/dev/null)"
LLAMACHAT_LOG="$B/cli-oneshot.log" "$LC" -p "Once" -n 1 --temp 0 >/dev/null 2>&1
check "LLAMACHAT_LOG -p" "$(head -1 "$B/cli-oneshot.log" 2>/dev/null)" "prompt pos=0 n=2: 1 403"
rm -f "$B/cli-oneshot.log" "$B/cli-chat.log"
err "--log-file -p: a path that cannot be opened" "llamachat: cannot open the token log /nonexistent/dir/x.log: No such file or directory" \
    "$LC" -p hi -n 1 --log-file /nonexistent/dir/x.log
# --system, --chat-template(-file) with -p (no --chat) were ignored without a word: an error now;
# the rc file's system prompt is for the chat and does not stop -p
err "-p with --system" "llamachat: --system applies to the chat and --chat; -p and --tokenize read the prompt as it is (add --chat for one message in the chat template)" \
    "$LC" -p hi -n 1 --system "Be brief."
err "-p with --chat-template" "llamachat: --chat-template applies to the chat and --chat" "$LC" -p hi -n 1 --chat-template chatml
printf '{{ messages[0].content }}' >"$B/cli-tmpl.jinja"
err "--tokenize with --chat-template-file" "llamachat: --chat-template-file applies to the chat and --chat" \
    "$LC" -p hi --tokenize --chat-template-file "$B/cli-tmpl.jinja"
# A --chat-template-file that cannot render the conversation: the built-in family renders it,
# and a note says so (the summary's "jinja chat template" alone would hide it); an empty file
# is refused (it would drop every message: the model read BOS alone).
printf '{{ raise_exception("no system messages") }}' >"$B/cli-raise.jinja"
printf '{%% for m in messages %%}{{ m.content | nosuchfilter }}{%% endfor %%}' >"$B/cli-filter.jinja"
printf ' \n' >"$B/cli-empty.jinja"
got=$("$LC" --chat -p hi -n 1 --temp 0 --chat-template-file "$B/cli-raise.jinja" 2>&1 >/dev/null | grep 'note: chat template')
check "--chat-template-file raising: a note" "$got" \
    "llamachat: note: chat template: line 1, column 4: raise_exception: no system messages; this prompt is in the built-in 'chatml' format"
got=$("$LC" --chat -p hi -n 1 --temp 0 --chat-template-file "$B/cli-filter.jinja" 2>&1 >/dev/null | grep -c 'unknown filter .nosuchfilter.; this prompt is in the built-in .chatml. format')
check "--chat-template-file with an unknown filter: a note" "$got" "1"
got=$("$LC" --chat -p hi -n 1 --temp 0 --chat-template-file "$B/cli-tmpl.jinja" 2>&1 >/dev/null | grep -c 'note: chat template')
check "--chat-template-file that renders: no note" "$got" "0"
err "--chat-template-file empty" "llamachat: --chat-template-file $B/cli-empty.jinja: empty; no template in it" \
    "$LC" --chat -p hi -n 1 --chat-template-file "$B/cli-empty.jinja"
rm -f "$B/cli-raise.jinja" "$B/cli-filter.jinja" "$B/cli-empty.jinja"
rm -f "$B/cli-tmpl.jinja"
printf '[chat]\nsystem_prompt = Be brief.\n' >"$B/cli-sys.rc"
got=$(LLAMACHATRC="$B/cli-sys.rc" "$LC" -p "Once" --tokenize 2>/dev/null)
check "-p with the rc file's system prompt: the prompt as it is" "$got" "1 403"
rm -f "$B/cli-sys.rc"
# Output that cannot be written (a full disk) is an error, not a success with the text lost.
if [ -w /dev/full ]; then
    M="$S/models/stories260K-ff192-q4_1.gguf"
    for args in "-p Once -n 8" "-p Once -n 8 --print-token-ids" "-p Once --tokenize" \
                "--chat -p Once -n 8" "--help" "--version"; do
        # shellcheck disable=SC2086
        out=$("$LC" -m "$M" $args 2>&1 >/dev/full); rc=$?
        case "$out" in
            *"llamachat: cannot write to standard output: No space left on device"*)
                check "stdout full: $args: exit 1" "$rc" "1" ;;
            *) echo "FAIL stdout full: $args: '$out' (exit $rc)"; fail=1 ;;
        esac
    done
fi
# --log-file on a full disk: the text is printed, the lost log is said and the exit status is 1
if [ -w /dev/full ]; then
    out=$("$LC" -m "$S/models/stories260K-ff192-q4_1.gguf" -p Once -n 3 --log-file /dev/full 2>&1 >/dev/null); rc=$?
    case "$out" in
        *"llamachat: cannot write the token log: No space left on device"*) check "-p --log-file full: exit" "$rc" 1 ;;
        *) echo "FAIL -p --log-file full: '$out' (exit $rc)"; fail=1 ;;
    esac
    out=$("$LC" -m "$S/models/stories260K-ff192-q4_1.gguf" --chat -p Once -n 3 --log-file /dev/full 2>&1 >/dev/null); rc=$?
    case "$out" in
        *"llamachat: note: cannot write the token log: No space left on device; no more is logged"*)
            check "--chat --log-file full: exit" "$rc" 1 ;;
        *) echo "FAIL --chat --log-file full: '$out' (exit $rc)"; fail=1 ;;
    esac
fi
"$LC" --help | grep -q -- "--print-token-ids" && echo "ok   help" || { echo "FAIL help"; fail=1; }
"$LC" --version | grep -q "^llamachat " && echo "ok   version" || { echo "FAIL version"; fail=1; }
exit $fail
