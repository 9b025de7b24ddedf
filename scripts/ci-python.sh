#!/usr/bin/env bash
# The Python wheel (issue 28), the way a user gets it: maturin builds the wheel into
# target/wheels, a FRESH virtualenv installs it (not the source tree) with the pinned test
# packages, then: `cascade --help`, `cascade compact` on the README's example, the proxy
# started from the wheel's `cascade` and stopped by Ctrl-C (SIGINT), `import context_cascade`,
# and pytest (python/tests: every fixture against the cargo-built CLI, the LangGraph hook
# and the langchain middleware in an agent loop, conversions, errors).
#
# Build venv: target/py-build (maturin, reused); test venv: made anew each run.
set -euo pipefail
cd "$(dirname "$0")/.."

maturin_version=1.16.0
test_packages=(pytest==9.2.0 langchain-core==1.8.3 langgraph==1.2.24 langchain==1.5.2)

build_venv=target/py-build
if [ ! -x "$build_venv/bin/maturin" ] || ! "$build_venv/bin/maturin" --version | grep -q "$maturin_version"; then
    python3 -m venv "$build_venv"
    "$build_venv/bin/pip" install --quiet --disable-pip-version-check "maturin==$maturin_version"
fi

echo "ci-python: building the wheel (cargo profile 'wheel')"
rm -rf target/wheels
start=$(date +%s)
"$build_venv/bin/maturin" build --quiet --out target/wheels
echo "ci-python: wheel built in $(( $(date +%s) - start )) s: $(ls target/wheels)"

# The CLI the fixtures are compared with: the cargo-built binary, not the wheel's copy.
cargo build --quiet -p cascade-cli --bin cascade

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
"$venv/bin/pip" install --quiet --disable-pip-version-check target/wheels/context_cascade-*.whl "${test_packages[@]}"

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

echo "ci-python: import context_cascade (from the installed wheel, not python/)"
(cd "$work" && "$venv/bin/python" -c 'import context_cascade, context_cascade.langchain; print(context_cascade.__file__)') | grep -q "$venv"

echo "ci-python: pytest"
# From $work with the tests copied there: `import context_cascade` must find the wheel.
repo="$PWD"
cp -r python/tests "$work/tests"
(cd "$work" && CASCADE_REPO="$repo" CASCADE_CLI="$repo/target/debug/cascade" \
    "$venv/bin/python" -m pytest -q -p no:cacheprovider tests)
