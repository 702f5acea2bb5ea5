#!/bin/sh
# test-tui-models.sh - models and saved chats in the running chat (issue 14), driven in tmux as
# test-tui-first.sh is (private HOME and rc, every wait polls the screen or the token log):
# /models lists the GGUF files of [model] dirs and $LLAMACHAT_MODELS (a private directory of
# symlinks to the shared models, a broken file, a ChatML model made by markov-gguf.py);
# /model N switches model with the conversation kept and read again under the new model's
# template; a file that is not a model leaves the old one in place; /show; /chats lists and
# opens the autosaved chats; /rename; /delete asks, then deletes.
set -u
command -v tmux >/dev/null 2>&1 || { echo "SKIP: tmux not installed"; exit 77; }
command -v python3 >/dev/null 2>&1 || { echo "SKIP: python3 not installed"; exit 77; }
B=${LC_BUILDDIR:-.}
S=${LC_SHARED:-../shared}
SRC=$(cd "$(dirname "$0")/.." && pwd)
LC="$B/llamachat"
case $LC in /*) ;; *) LC="$(pwd)/$LC" ;; esac
case $S in /*) ;; *) S="$(pwd)/$S" ;; esac
MODEL="$S/models/stories260K-ff192-q4_1.gguf"
SPM="$S/reference/tokenizer/ggml-vocab-llama-spm.gguf"
for f in "$MODEL" "$SPM" "$S/models/stories260K.gguf" "$S/models/arch/qwen2-q8_0.gguf"; do
    [ -f "$f" ] || { echo "SKIP: $f missing"; exit 77; }
done
[ -x "$LC" ] || { echo "FAIL: $LC not built"; exit 1; }

. "$(dirname "$0")/tui-lib.sh"
tui_lib_init lc-tui-models
# wait_log FILE REGEX: poll FILE until a line matches (10 s)
wait_log() {
    i=0
    while [ $i -lt 100 ]; do
        grep -Eq -- "$2" "$1" 2>/dev/null && return 0
        sleep 0.1; i=$((i + 1))
    done
    return 1
}
quit() {
    $T send-keys -t lc C-e C-u C-d
    check "$1: exits with status 0" '^EXIT=0'
    if grep -q 'AddressSanitizer\|runtime error\|LeakSanitizer' "$tmp/$1.err"; then
        bad "$1: no sanitizer report"; sed 's/^/  | /' "$tmp/$1.err" | head -30
    fi
    wait_for '^\$ *$' 10 >/dev/null
}

# the model directories: one from the rc (with a subdirectory), one from LLAMACHAT_MODELS
H="$tmp/home"
mkdir -p "$H/models/sub" "$tmp/more"
ln -s "$S/models/stories260K.gguf" "$H/models/stories260K.gguf"
ln -s "$S/models/arch/qwen2-q8_0.gguf" "$H/models/sub/qwen2-q8_0.gguf"
printf 'not a model\n' >"$H/models/broken.gguf"
printf 'x' >"$H/models/notes.txt"
TM='{% for message in messages %}{{'"'"'<|im_start|>'"'"' + message['"'"'role'"'"'] + '"'"'\n'"'"' + message['"'"'content'"'"'] + '"'"'<|im_end|>'"'"' + '"'"'\n'"'"'}}{% endfor %}{% if add_generation_prompt %}{{ '"'"'<|im_start|>assistant\n'"'"' }}{% endif %}'
CFG=$(python3 -c 'import json,sys; print(json.dumps({"trans": {}, "default": 32001, "name": "chatml-markov", "extra": [["<|im_start|>", 3], ["<|im_end|>", 4]], "kv": {"tokenizer.chat_template": [8, sys.argv[1]]}}))' "$TM")
python3 "$SRC/tests/markov-gguf.py" "$tmp/more/chatml.gguf" "$SPM" "$CFG" >/dev/null || { echo "FAIL: markov-gguf.py"; exit 1; }

cat >"$tmp/rc" <<RC
[model]
path = $MODEL
threads = 1
dirs = ~/models:~/missing
[sampling]
temp = 0
max_tokens = 6
[ui]
show_params = off
RC

$T -f /dev/null new-session -d -s lc -x 100 -y 30 \
    "env HOME='$H' LLAMACHATRC='$tmp/rc' LLAMACHAT_MODELS='$tmp/more' LANG=C.UTF-8 LC_ALL=C.UTF-8 TERM=tmux-256color PS1='$ ' sh"
$T set-option -t lc status off >/dev/null
wait_for '^\$' 10 >/dev/null || { echo "FAIL: no shell prompt"; exit 1; }

# 1. /models: numbered, sorted by path per directory, with size, architecture, main type, name
start models "LLAMACHAT_LOG='$tmp/m.log'" || exit 1
$T send-keys -t lc "/models" Enter
check "/models: heading names the directories and the missing one" \
    "^models in $H/models, $tmp/more \(/model N opens"
check "/models: a file that is not a model says why" '^ 1\. broken\.gguf  not usable'
check "/models: stories260K (F32)" '^ 2\. stories260K\.gguf  1\.1 MiB  llama F32  llama$'
check "/models: in a subdirectory, Q8_0, general.name" '^ 3\. sub/qwen2-q8_0\.gguf  2\.8 MiB  qwen2 Q8_0  synthetic Qwen2 test model$'
check "/models: LLAMACHAT_MODELS" '^ 4\. chatml\.gguf  [0-9.]+ [KM]iB  llama F32  chatml-markov$'
not_on_screen "/models: only .gguf files" 'notes\.txt'
check "/models: count on the message line" ' 4 found '

# 2. a conversation on the default model, then /model 4: kept, read again under ChatML
$T send-keys -t lc "Once upon a time" Enter
check "default model answered" 'max tokens reached \(6\)'
$T send-keys -t lc "/model 9" Enter
check "/model N out of range" '/model 9: no such entry in the last /models \(1 to 4\)'
$T send-keys -t lc "/model ~/nope.gguf" Enter
check "/model: a missing file, ~ expanded" "/model: $H/nope.gguf: No such file or directory"
$T send-keys -t lc "/model 1" Enter
check "/model: a broken file keeps the old model" 'the model was not changed: still using llama'
check "/model: the old model still in the status bar" '^ idle \| llama 312K Q4_1 \| llama \|'
n0=$(wc -l <"$tmp/m.log")
$T send-keys -t lc "/model 4" Enter
check "/model 4: switched, the model's Jinja template" 'now using chatml-markov \(llama 4M F32, jinja chat template\)'
check "/model 4: status bar names the new model" '^ idle \| .* \| chatml-markov \|'
check "/model 4: the conversation is still on screen" '^Once upon a time'
$T send-keys -t lc "Hi" Enter
check "/model 4: answered" 'max tokens reached|^ idle .*ctx [1-9]'
# the whole conversation read again from position 0, each message in ChatML:
# <|im_start|> (32000) for user, assistant, user and the new assistant turn
after() { tail -n "+$((n0 + 1))" "$tmp/m.log"; }
i=0; while [ $i -lt 100 ] && ! after | grep -q '^prompt pos='; do sleep 0.1; i=$((i + 1)); done
if after | grep '^prompt pos=' | head -1 | grep -q '^prompt pos=0 ' &&
   [ "$(after | grep '^prompt pos=0 ' | head -1 | sed 's/.*://' | tr ' ' '\n' | grep -cx 32000)" = 4 ]; then
    ok "/model 4: the KV cache recomputed, the conversation in the new template"
else bad "/model 4: the conversation in the new template"; after | grep '^prompt' | head -3; fi
if after | grep -q '^prompt text: "<s><|im_start|> user\\nOnce upon a time<|im_end|> \\n<|im_start|> assistant\\n'; then
    ok "/model 4: the earlier turn rendered as ChatML"
else bad "/model 4: the earlier turn rendered as ChatML"; after | grep '^prompt text' | head -2; fi

# 3. /show: the facts of the model in use
$T send-keys -t lc "/show" Enter
check "/show: name and file" "^model: chatml-markov \(llama .*\)$"
check "/show: file" "^file: $tmp/more/chatml\.gguf \([0-9.]+ MiB\)"
check "/show: architecture, parameters" '^architecture: llama, [0-9]+ parameters, 1 layers, embedding 64, vocabulary 32002$'
check "/show: tensor types" '^tensors: 12 \(f32 10, f16 2\)$'
check "/show: context" '^context: [0-9]+ tokens in use, [0-9]+ trained$'
check "/show: template and its source" "^template: jinja \(from the model's tokenizer\.chat_template\)$"
check "/show: special tokens" "^special tokens: bos 1 '<s>', eos 2 '</s>', eot 32001 '<\|im_end\|>'"
# /models marks the model in use (the same file, found through LLAMACHAT_MODELS)
$T send-keys -t lc "/models" Enter
check "/models: the model in use is marked" '^ 4\. chatml\.gguf \(in use\)  [0-9.]+ [KM]iB  llama F32  chatml-markov$'
not_on_screen "/models: only that one" '^ [1-3]\. .*\(in use\)'
# back to a base model by path (~ expanded)
$T send-keys -t lc "/model ~/models/stories260K.gguf" Enter
check "/model PATH: switched back to a base model" 'now using llama \(llama [0-9]+K F32, plain chat template\)'
quit models

# 4. saved chats: /rename, /chats, /chats N, /delete N, /delete (the chats of part 1 removed)
rm -rf "$H/.local/state/llamachat/chats"
start chats || exit 1
$T send-keys -t lc "Lily had a red ball" Enter
check "chat 1 answered" 'max tokens reached \(6\)'
$T send-keys -t lc "/rename Pirate tales" Enter
check "/rename: the title" 'renamed: Pirate tales'
$T send-keys -t lc "/clear" Enter
check "/clear" 'conversation cleared'
$T send-keys -t lc "Tom went to the park" Enter
check "chat 2 answered" 'max tokens reached \(6\)'
$T send-keys -t lc "/chats" Enter
check "/chats: heading" "^saved chats in $H/.local/state/llamachat/chats \(/chats N opens one,"
check "/chats: the newest first, marked" '^ 1\. [0-9]{4}-[0-9]{2}-[0-9]{2} [0-9]{2}:[0-9]{2} llama: Tom went to the park \(this one\)$'
check "/chats: the renamed one by its title" '^ 2\. [0-9]{4}-[0-9]{2}-[0-9]{2} [0-9]{2}:[0-9]{2} llama: Pirate tales$'
f1=$(grep -l '"title": "Pirate tales"' "$H"/.local/state/llamachat/chats/*.json 2>/dev/null)
[ -n "$f1" ] && ok "/rename: the title is in the JSON" || bad "/rename: the title is in the JSON"
$T send-keys -t lc "/chats 2" Enter
check "/chats 2: opened" "opened 2 messages from "
check "/chats 2: its messages on screen" '^Lily had a red ball'
not_on_screen "/chats 2: the other chat is gone from the screen" '^Tom went to the park'
$T send-keys -t lc "and a blue kite" Enter
check "/chats 2: continued" 'max tokens reached \(6\)'
if wait_log "$f1" 'and a blue kite'; then ok "/chats 2: kept on in its own file"; else bad "/chats 2: kept on in its own file"; fi
n_files() { ls "$H"/.local/state/llamachat/chats/*.json 2>/dev/null | wc -l; }
[ "$(n_files)" = 2 ] && ok "two chat files" || bad "two chat files: $(n_files)"
$T send-keys -t lc "/chats" Enter
check "/chats: the opened one is now the newest" '^ 1\. .* llama: Pirate tales \(this one\)$'
$T send-keys -t lc "/delete 2" Enter
check "/delete 2: asks first" 'delete chat 2\? Enter confirms \(/delete! 2\): '
check "/delete 2: the confirmation is in the input" '^> /delete! 2 *$'
[ "$(n_files)" = 2 ] && ok "/delete 2: nothing deleted before Enter" || bad "/delete 2: nothing deleted before Enter"
$T send-keys -t lc Enter
check "/delete! 2: deleted" 'deleted .*/chats/.*\.json'
[ "$(n_files)" = 1 ] && ok "/delete! 2: one file left" || bad "/delete! 2: one file left: $(n_files)"
[ -f "$f1" ] && ok "/delete! 2: the current chat's file kept" || bad "/delete! 2: the current chat's file kept"
$T send-keys -t lc "/delete" Enter
check "/delete: asks first" 'delete this chat\? Enter confirms \(/delete!\): '
$T send-keys -t lc Enter
check "/delete!: deleted, a new conversation" 'this is a new conversation; deleted '
[ "$(n_files)" = 0 ] && ok "/delete!: no file left" || bad "/delete!: no file left: $(n_files)"
not_on_screen "/delete!: the screen is cleared" '^Lily had a red ball'
$T send-keys -t lc "/chats" Enter
check "/chats: none left" "^no saved chats in $H/.local/state/llamachat/chats yet"
quit chats

exit $fail
