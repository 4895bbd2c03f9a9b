#!/usr/bin/env bash
# The llama.cpp reference oracle for the engine's conformance tests
# (engine/conformance, docs/oracle.md): llama.cpp's shared libraries from the
# npm package @node-llama-cpp/linux-x64@3.22.1 (pinned with its integrity
# hash in tools/llamaref/npm/package-lock.json) in .cache/llamacpp, the
# symlinks yzma opens, and the tools/llamaref binary beside them.
# Idempotent; quiet when everything is in place. Linux x86-64 only.
set -euo pipefail
cd "$(dirname "$0")/../.."

dir=.cache/llamacpp
pkg=node_modules/@node-llama-cpp/linux-x64
libs=$dir/$pkg/bins/linux-x64

if [ "$(uname -s)/$(uname -m)" != Linux/x86_64 ]; then
  echo "setup: llama.cpp oracle: only Linux x86-64 is supported here; engine/conformance tests will fail" >&2
  exit 0
fi

mkdir -p "$dir"
if ! cmp -s tools/llamaref/npm/package-lock.json "$dir/package-lock.json" || [ ! -f "$libs/libllama.v0.5.0.so" ]; then
  echo "setup: installing llama.cpp (npm @node-llama-cpp/linux-x64@3.22.1) into $dir"
  cp tools/llamaref/npm/package.json tools/llamaref/npm/package-lock.json "$dir/"
  (cd "$dir" && npm ci --silent --no-audit --no-fund >/dev/null)
fi
# yzma opens libllama.so and libggml.so; the package names them with the
# node-llama-cpp variant suffix (their NEEDED entries use the suffixed
# names, and RUNPATH=$ORIGIN finds them).
[ "$(readlink "$libs/libllama.so" 2>/dev/null)" = libllama.v0.5.0.so ] || ln -sfn libllama.v0.5.0.so "$libs/libllama.so"
[ "$(readlink "$libs/libggml.so" 2>/dev/null)" = libggml.v0.5.0.so ] || ln -sfn libggml.v0.5.0.so "$libs/libggml.so"

bin=$dir/llamaref
if [ ! -x "$bin" ] || [ -n "$(find tools/llamaref -name '*.go' -newer "$bin" -o -name go.mod -newer "$bin" -o -name go.sum -newer "$bin")" ]; then
  echo "setup: building tools/llamaref"
  (cd tools/llamaref && CGO_ENABLED=0 go build -trimpath -o "../../$bin" .)
fi
