#!/usr/bin/env bash
# The real OpenAI (Chat Completions and Responses) and Anthropic Python SDKs against
# `cascade proxy` in front of the scripted upstream
# (crates/proxy/examples/scripted_upstream.rs), plain and streaming.
#
# Makes a venv (target/sdk-venv, or $CASCADE_SDK_VENV), installs openai, anthropic and
# pytest, builds, starts both servers on free loopback ports, runs
# crates/proxy/tests/sdk/test_sdk.py, and stops the servers whatever happens.
set -euo pipefail
cd "$(dirname "$0")/.."

venv="${CASCADE_SDK_VENV:-target/sdk-venv}"
if [ ! -x "$venv/bin/python" ]; then
    python3 -m venv "$venv"
fi
"$venv/bin/pip" install --quiet --disable-pip-version-check openai anthropic pytest

cargo build --quiet -p cascade-proxy --example scripted_upstream
cargo build --quiet -p cascade-cli --bin cascade

free_port() {
    "$venv/bin/python" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}
upstream_port="$(free_port)"
proxy_port="$(free_port)"
work="$(mktemp -d)"
pids=()
cleanup() {
    for pid in "${pids[@]}"; do
        kill "$pid" 2>/dev/null || true
        wait "$pid" 2>/dev/null || true
    done
    rm -rf "$work"
}
trap cleanup EXIT

target/debug/examples/scripted_upstream --port "$upstream_port" --limit 6000 >"$work/upstream.log" 2>&1 &
pids+=("$!")
if target/debug/cascade proxy --help >/dev/null 2>&1; then
    target/debug/cascade proxy --listen "127.0.0.1:$proxy_port" \
        --upstream "http://127.0.0.1:$upstream_port" --window 128000 \
        --db "$work/cascade.db" >"$work/proxy.log" 2>&1 &
    pids+=("$!")
else
    echo "ci-proxy-sdk: 'cascade proxy' is not available; running the proxy in-process in the example" >&2
    kill "${pids[0]}" 2>/dev/null || true
    wait "${pids[0]}" 2>/dev/null || true
    pids=()
    target/debug/examples/scripted_upstream --port "$upstream_port" --limit 6000 \
        --proxy-port "$proxy_port" --window 128000 >"$work/upstream.log" 2>&1 &
    pids+=("$!")
fi

ready=""
for _ in $(seq 1 100); do
    if "$venv/bin/python" -c "import urllib.request, sys; urllib.request.urlopen('http://127.0.0.1:$proxy_port/healthz', timeout=1)" 2>/dev/null; then
        ready=yes
        break
    fi
    sleep 0.1
done
if [ -z "$ready" ]; then
    echo "ci-proxy-sdk: the proxy did not come up" >&2
    cat "$work"/*.log >&2
    exit 1
fi

CASCADE_PROXY_URL="http://127.0.0.1:$proxy_port" "$venv/bin/python" -m pytest -q crates/proxy/tests/sdk/test_sdk.py
