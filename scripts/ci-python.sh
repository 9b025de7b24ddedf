#!/usr/bin/env bash
# The Python wheel (issue 28), the way a user gets it: `pip wheel .` builds it through
# pyproject.toml (PEP 517: pip fetches the pinned maturin into an isolated build
# environment, as `pip install .` from a clone does) into target/wheels; a FRESH virtualenv
# installs it (not the source tree) with the pinned test packages, then: `cascade --help`,
# `cascade compact` on the README's example, the proxy started from the wheel's `cascade`
# and stopped by Ctrl-C (SIGINT), `uvx --from <wheel> cascade` and `pipx run --spec <wheel>
# context-cascade` (pinned uv and pipx from PyPI; nothing else is fetched), `import
# context_cascade`, and pytest (python/tests: every fixture against the cargo-built CLI, the
# dict path's shared messages, the LangGraph hook and the langchain middleware in sync and
# async agent loops, summarizers, conversions, errors).
#
# One wheel build per run; the test venv is made anew each run.
set -euo pipefail
cd "$(dirname "$0")/.."

test_packages=(pytest==9.2.0 langchain-core==1.8.3 langgraph==1.2.24 langchain==1.5.2)
# What `uvx context-cascade` / `pipx run context-cascade` users run the wheel with.
runner_packages=(uv==0.13.9 pipx==1.18.4)

work="$(mktemp -d)"
pids=()
cleanup() {
    local pid
    for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
    rm -rf "$work"
}
trap cleanup EXIT

venv="$work/venv"
python3 -m venv "$venv"

echo "ci-python: building the wheel with pip (PEP 517, maturin as pinned in pyproject.toml)"
rm -rf target/wheels
start=$(date +%s)
"$venv/bin/pip" wheel --quiet --disable-pip-version-check --no-deps --wheel-dir target/wheels .
echo "ci-python: wheel built in $(( $(date +%s) - start )) s: $(ls target/wheels)"
wheel="$(ls "$PWD"/target/wheels/context_cascade-*.whl)"

# The CLI the fixtures are compared with: the cargo-built binary, not the wheel's copy.
cargo build --quiet -p cascade-cli --bin cascade

"$venv/bin/pip" install --quiet --disable-pip-version-check "$wheel" "${test_packages[@]}" "${runner_packages[@]}"

echo "ci-python: cascade --help from the wheel"
"$venv/bin/cascade" --help | grep -q "Compact a request"
# What `uvx context-cascade` / `pipx run context-cascade` run: the command named after the package.
"$venv/bin/context-cascade" --version | grep -q "^cascade "
echo "ci-python: cascade compact on the README example"
example='{"model":"gpt-4o","messages":[{"role":"user","content":"hello"}]}'
out="$(printf '%s' "$example" | "$venv/bin/cascade" compact 2>/dev/null)"
[ "$out" = "$example" ] || { echo "ci-python: compact changed a request that fits: $out" >&2; exit 1; }

echo "ci-python: cascade proxy from the wheel stops on Ctrl-C"
port="$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
"$venv/bin/cascade" proxy --listen "127.0.0.1:$port" --upstream http://127.0.0.1:9 \
    --db "$work/cascade.db" 2>"$work/proxy.log" &
proxy=$!
pids+=("$proxy")
for _ in $(seq 100); do
    grep -q "listening" "$work/proxy.log" && break
    sleep 0.1
done
grep -q "listening" "$work/proxy.log" || { cat "$work/proxy.log" >&2; exit 1; }
curl -fsS "http://127.0.0.1:$port/healthz" >/dev/null
kill -INT "$proxy"
for _ in $(seq 100); do
    kill -0 "$proxy" 2>/dev/null || break
    sleep 0.1
done
if kill -0 "$proxy" 2>/dev/null; then
    echo "ci-python: the proxy ignored Ctrl-C" >&2
    exit 1
fi
wait "$proxy" || { echo "ci-python: the proxy exited $? on Ctrl-C" >&2; cat "$work/proxy.log" >&2; exit 1; }

echo "ci-python: uvx --from <wheel> cascade --help (offline: the wheel needs nothing else)"
UV_CACHE_DIR="$work/uv-cache" UV_TOOL_DIR="$work/uv-tools" UV_PYTHON_DOWNLOADS=never \
    "$venv/bin/uvx" --offline --python "$venv/bin/python" --from "$wheel" cascade --help \
    | grep -q "Compact a request"
echo "ci-python: pipx run --spec <wheel> context-cascade --help"
PIPX_HOME="$work/pipx" PIPX_BIN_DIR="$work/pipx/bin" PIPX_MAN_DIR="$work/pipx/man" \
    "$venv/bin/pipx" run --python "$venv/bin/python" --spec "$wheel" context-cascade --help \
    | grep -q "Compact a request"

echo "ci-python: import context_cascade (from the installed wheel, not python/)"
(cd "$work" && "$venv/bin/python" -c 'import context_cascade, context_cascade.langchain; print(context_cascade.__file__)') | grep -q "$venv"

echo "ci-python: pytest"
# From $work with the tests copied there: `import context_cascade` must find the wheel.
repo="$PWD"
cp -r python/tests "$work/tests"
(cd "$work" && CASCADE_REPO="$repo" CASCADE_CLI="$repo/target/debug/cascade" \
    "$venv/bin/python" -m pytest -q -p no:cacheprovider tests)
