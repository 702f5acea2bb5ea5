#!/bin/sh
# Our Jinja renderer against Python's jinja2 (python3-jinja2), byte for byte: every template of
# tests/data/templates, of ../shared/reference/chat-templates/cases.json and of the GGUF files
# in ../shared/models/arch, for dozens of conversations (tests/jinja-oracle.py); the renderer
# (tests/jinja-render) also checks the provenance of every byte and the span invariant.
# Skipped (77) without python3 or jinja2.
set -u
B=${LC_BUILDDIR:-.}
S=${LC_SHARED:-../shared}
SRC=${LC_SRCDIR:-$(dirname "$0")/..}
command -v python3 >/dev/null 2>&1 || { echo "python3 is missing: skipped"; exit 77; }
python3 -c 'import jinja2' 2>/dev/null || { echo "python3-jinja2 is missing: skipped"; exit 77; }
exec python3 "$SRC/tests/jinja-oracle.py" "$B/tests/jinja-render" "$SRC" "$S"
