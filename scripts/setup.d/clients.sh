#!/usr/bin/env bash
# The openai npm package for tests/clients (pinned in package-lock.json).
set -euo pipefail
cd "$(dirname "$0")/../../tests/clients/node"
if [ ! -f node_modules/openai/package.json ] || [ package-lock.json -nt node_modules/.package-lock.json ]; then
  npm ci --no-audit --no-fund --loglevel=error >/dev/null
fi
(cd .. && go mod download)
