#!/usr/bin/env bash
# The real OpenAI (Chat Completions and Responses) and Anthropic Python SDKs against
# `cascade proxy` in front of the scripted upstream
# (crates/proxy/examples/scripted_upstream.rs), plain and streaming; then the same SDKs
# against a proxy with recall on in front of a scripted model that calls the recall tool
# (crates/proxy/examples/recall_upstream.rs): they must read every answer and stream and
# never see the tool.
#
# Makes a venv (target/sdk-venv, or $CASCADE_SDK_VENV), installs openai, anthropic and
# pytest, builds, starts both servers on free loopback ports, runs
# crates/proxy/tests/sdk/test_sdk.py and test_sdk_recall.py, and stops the servers whatever
# happens.
set -euo pipefail
cd "$(dirname "$0")/.."

venv="${CASCADE_SDK_VENV:-target/sdk-venv}"
if [ ! -x "$venv/bin/python" ]; then
    python3 -m venv "$venv"
fi
"$venv/bin/pip" install --quiet --disable-pip-version-check openai anthropic pytest

cargo build --quiet -p cascade-proxy --example scripted_upstream --example recall_upstream
cargo build --quiet -p cascade-cli --bin cascade

script_name=ci-proxy-sdk
work="$(mktemp -d)"
# shellcheck source=scripts/lib/servers.sh
. scripts/lib/servers.sh
trap 'stop_servers; rm -rf "$work"' EXIT
upstream_port="$(free_port)"
proxy_port="$(free_port)"

target/debug/examples/scripted_upstream --port "$upstream_port" --limit 6000 >"$work/upstream.log" 2>&1 &
pids+=("$!")
if target/debug/cascade proxy --help >/dev/null 2>&1; then
    target/debug/cascade proxy --listen "127.0.0.1:$proxy_port" \
        --upstream "http://127.0.0.1:$upstream_port" --window 128000 \
        --db "$work/cascade.db" >"$work/proxy.log" 2>&1 &
    pids+=("$!")
else
    echo "ci-proxy-sdk: 'cascade proxy' is not available; running the proxy in-process in the example" >&2
    stop_servers
    target/debug/examples/scripted_upstream --port "$upstream_port" --limit 6000 \
        --proxy-port "$proxy_port" --window 128000 >"$work/upstream.log" 2>&1 &
    pids+=("$!")
fi

wait_up "http://127.0.0.1:$proxy_port/healthz"

CASCADE_PROXY_URL="http://127.0.0.1:$proxy_port" "$venv/bin/python" -m pytest -q crates/proxy/tests/sdk/test_sdk.py

recall_upstream_port="$(free_port)"
recall_proxy_port="$(free_port)"
target/debug/examples/recall_upstream --port "$recall_upstream_port" \
    --proxy-port "$recall_proxy_port" >"$work/recall.log" 2>&1 &
pids+=("$!")
wait_up "http://127.0.0.1:$recall_proxy_port/healthz"

CASCADE_RECALL_PROXY_URL="http://127.0.0.1:$recall_proxy_port" "$venv/bin/python" -m pytest -q \
    crates/proxy/tests/sdk/test_sdk_recall.py
