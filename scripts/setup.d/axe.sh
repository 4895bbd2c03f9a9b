#!/usr/bin/env bash
# Installs axe-core (pinned in tests/page/axe/package-lock.json, 4.14.1,
# MPL-2.0) into tests/page/axe/node_modules (gitignored): the page tests
# run it in Chromium on every view, light and dark, and fail on a
# serious or critical accessibility violation. For the tests only: the
# page never loads it. Idempotent and quiet when the tree matches the lock.
set -euo pipefail
cd "$(dirname "$0")/../../tests/page/axe"

stamp=node_modules/.npuchat-lock.sha256
want="$(sha256sum package-lock.json | cut -d' ' -f1)"
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ] && [ -f node_modules/axe-core/axe.min.js ]; then
  exit 0
fi
command -v npm >/dev/null || { echo "setup: npm is needed for the page's accessibility tests; apt-get install npm" >&2; exit 1; }
echo "setup: installing axe-core for the page tests (npm ci in tests/page/axe)"
npm ci --no-audit --no-fund --loglevel=error >/dev/null
echo "$want" >"$stamp"
