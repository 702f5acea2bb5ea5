#!/bin/sh
# test-remote-errors.sh - the remote client against tests/fake-openai.py (401, 429, 500, 404,
# a stall, a cut stream, recorded streams replayed over HTTP, connection refused): see
# tests/test-remote.c.
set -u
B=${LC_BUILDDIR:-.}
S=${LC_SRCDIR:-.}
command -v python3 >/dev/null || { echo "no python3: skipped"; exit 77; }
dir=$(mktemp -d)
python3 "$S/tests/fake-openai.py" "$dir/port" "$S/tests/data/sse" & fake=$!
trap 'kill $fake 2>/dev/null; rm -rf "$dir"' EXIT INT TERM
for _ in $(seq 50); do [ -f "$dir/port" ] && break; sleep 0.1; done
[ -f "$dir/port" ] || { echo "the fake server did not start"; exit 1; }
# a port nobody listens on: the fake's, after it is gone, is not certain; take a fresh one
closed=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
"$B/tests/test-remote" "http://127.0.0.1:$(cat "$dir/port")" "$dir/port.requests" "$closed"
