#!/usr/bin/env bash
# One hostile client against the built `cascade proxy` (in front of the scripted upstream,
# crates/proxy/examples/scripted_upstream.rs): HEADS connections (300 by default) from one
# process, each sending the start of a request head and never finishing it; while they are
# open, /healthz and one chat request must answer within WAIT seconds (5 by default). The
# proxy is started with a connection limit below HEADS, so without the per-client cap on
# unfinished heads the limit fills and both would wait for the header timeout. Prints the
# figures (scripts/lib/half_open_heads.py); docs/benchmarks.md has the full-size run.
#
#   HEADS=1100 WAIT=60 bash scripts/ci-connections.sh     # the issue's repro, full size
#   CASCADE=path/to/cascade bash scripts/ci-connections.sh  # another build (e.g. an older one)
set -euo pipefail
cd "$(dirname "$0")/.."

heads="${HEADS:-300}"
wait_secs="${WAIT:-5}"
# Below HEADS so that the hostile heads alone could fill it; the default with HEADS=1100.
max_connections="${MAX_CONNECTIONS:-$((heads < 1100 ? heads / 2 : 1024))}"

cargo build --quiet -p cascade-proxy --example scripted_upstream
if [ -z "${CASCADE:-}" ]; then
    cargo build --quiet -p cascade-cli --bin cascade
fi
target_dir="${CARGO_TARGET_DIR:-target}"
cascade="${CASCADE:-$target_dir/debug/cascade}"

script_name=ci-connections
work="$(mktemp -d)"
# shellcheck source=scripts/lib/servers.sh
. scripts/lib/servers.sh
trap 'stop_servers; rm -rf "$work"' EXIT
upstream_port="$(free_port)"
proxy_port="$(free_port)"

printf '[limits]\nmax_connections = %s\n' "$max_connections" >"$work/cascade.toml"
"$target_dir/debug/examples/scripted_upstream" --port "$upstream_port" --limit 6000 \
    >"$work/upstream.log" 2>&1 &
pids+=("$!")
"$cascade" proxy --listen "127.0.0.1:$proxy_port" --config "$work/cascade.toml" \
    --upstream "http://127.0.0.1:$upstream_port" --window 128000 --db "$work/cascade.db" \
    >"$work/proxy.log" 2>&1 &
pids+=("$!")
wait_up "http://127.0.0.1:$proxy_port/healthz"

echo "ci-connections: $heads half-open heads from one process, limits.max_connections = $max_connections"
if ! python3 scripts/lib/half_open_heads.py --proxy "127.0.0.1:$proxy_port" \
    --heads "$heads" --wait "$wait_secs"; then
    echo "ci-connections: /healthz or the request did not answer within ${wait_secs}s while one client held half-open heads" >&2
    cat "$work/proxy.log" >&2
    exit 1
fi
python3 -c 'import sys, urllib.request; print(urllib.request.urlopen(sys.argv[1]).read().decode())' \
    "http://127.0.0.1:$proxy_port/metrics" | grep '^cascade_connections_closed_total' || true
echo "ci-connections: ok"
