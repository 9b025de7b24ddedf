#!/usr/bin/env bash
# End-to-end tests against a REAL model server: llama.cpp's llama-server with SmolLM2-135M
# behind `cascade proxy`, driven by the openai and anthropic Python SDKs (tests/e2e).
#
#   bash scripts/ci-e2e-llm.sh [extra pytest args]
#
# 1. builds the `cascade` binary (debug);
# 2. runs scripts/ci-local-llm.sh: installs llama-server + the model into the cache when
#    missing (a fresh machine pays a ~10-35 min build once) and smoke-tests the server;
# 3. makes or reuses the venv (target/sdk-venv, or $CASCADE_SDK_VENV) with openai,
#    anthropic and pytest;
# 4. runs `pytest tests/e2e -x -q`; the tests start their own servers on free loopback
#    ports and stop them; this script also stops any llama-server the run left behind;
# 5. prints the figures the tests measured (turns replayed, strategies fired, calibration
#    error, summarizer outcome and latency).
#
# Fixtures: the repository's fixtures/ folder, or $CASCADE_FIXTURES.
# A server that cannot be installed or started fails the run; nothing is skipped.
set -euo pipefail
cd "$(dirname "$0")/.."
started=$SECONDS

# ggml's OpenMP threads spin-wait by default, which on 2 shared cores makes generation
# ~20x slower (notes in scripts/local-llm.sh).
export OMP_WAIT_POLICY="${OMP_WAIT_POLICY:-passive}"
# No __pycache__ folders left in the checkout.
export PYTHONDONTWRITEBYTECODE=1

echo "== cargo build -p cascade-cli" >&2
cargo build --quiet -p cascade-cli --bin cascade

echo "== llama-server (install when missing, smoke test)" >&2
bash scripts/ci-local-llm.sh

venv="${CASCADE_SDK_VENV:-target/sdk-venv}"
if [ ! -x "$venv/bin/python" ]; then
    python3 -m venv "$venv"
fi
"$venv/bin/pip" install --quiet --disable-pip-version-check openai anthropic pytest

work="$(mktemp -d)"
# Every pid file the tests' servers write lands here, so that cleanup can stop exactly
# those servers even when pytest is killed.
mkdir -p "$work/pytest-tmp"
export CASCADE_E2E_FIGURES="$work/figures.json"
cascade_bin="$(readlink -f target/debug/cascade)"
# shellcheck disable=SC2329 # invoked by the EXIT trap
cleanup() {
    local f pid
    # Proxies the tests started (normally already stopped by their fixtures): only a live
    # process that is still our cascade binary is signalled.
    while IFS= read -r f; do
        pid="$(cat "$f" 2>/dev/null || true)"
        if [[ "$pid" =~ ^[0-9]+$ ]] && [ "$(readlink "/proc/$pid/exe" 2>/dev/null || true)" = "$cascade_bin" ]; then
            kill "$pid" 2>/dev/null || true
        fi
    done < <(find "$work" -name proxy.pid 2>/dev/null)
    # llama-servers: local-llm.sh stops a pid only if it is still its llama-server.
    while IFS= read -r f; do
        bash scripts/local-llm.sh stop --pid-file "$f" || true
    done < <(find "$work" -name 'llama-*.pid' 2>/dev/null)
    rm -rf "$work"
}
trap cleanup EXIT

echo "== pytest tests/e2e" >&2
status=0
"$venv/bin/python" -m pytest tests/e2e -x -q -p no:cacheprovider \
    --basetemp "$work/pytest-tmp/run" "$@" || status=$?

if [ -s "$CASCADE_E2E_FIGURES" ]; then
    echo "== figures (SmolLM2-135M Q4_1 on llama-server, $(nproc) cores)"
    "$venv/bin/python" - "$CASCADE_E2E_FIGURES" <<'PY'
import json, sys
figures = json.load(open(sys.argv[1]))
replays = {k: v for k, v in figures.items() if k.startswith("replay_")}
if replays:
    turns = sum(v["turns"] for v in replays.values())
    fired = sum(v["turns_with_strategies"] for v in replays.values())
    print(f"replayed turns: {turns} ({fired} with strategies), all answered 200")
    for name, v in sorted(replays.items()):
        print(f"  {name[7:]}: {v['turns']} turns, up to {v['history_chars_max']} chars, "
              f"strategies {v['strategies_in_headers']}, overflows {v['overflow_errors']} "
              f"(recovered {v['overflow_recoveries']}), {v['seconds']} s")
if "calibration" in figures:
    c = figures["calibration"]
    print(f"calibration: error per turn {c['relative_error_per_turn_after_first']} "
          f"(uncalibrated x1.1: {c['uncalibrated_relative_error_per_turn']}), scale {c['final_scale']}")
for key in ("window_discovery", "overflow_openai_stream", "overflow_anthropic"):
    if key in figures:
        print(f"{key}: {json.dumps(figures[key])}")
for key in ("summarizer_proxy", "summarizer_cli_compact"):
    if key in figures:
        v = figures[key]
        seconds = v.get("request_seconds_including_summary", v.get("seconds"))
        print(f"{key}: {v['outcome']} ({v['strategies']}), {seconds} s")
PY
fi
echo "ci-e2e-llm: pytest exit $status, total $((SECONDS - started)) s" >&2
exit "$status"
