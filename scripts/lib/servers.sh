# shellcheck shell=bash
# Servers on loopback for the CI scripts that start them (ci-agents, ci-proxy-sdk,
# ci-status-page): one copy of finding a free port, remembering what was started, waiting
# for it to answer and stopping it, so that every script stops its servers the same way.
#
# Source it from the repository root after setting `script_name` (the prefix of messages)
# and `work` (the folder whose *.log files are printed when a server does not come up).
# Every server started in the background is added with `pids+=("$!")`.

pids=()

# A port on 127.0.0.1 that nothing listens on now.
free_port() {
    python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# Stops every server in `pids` and waits for it, then forgets them.
stop_servers() {
    local pid
    for pid in "${pids[@]}"; do
        kill "$pid" 2>/dev/null || true
        wait "$pid" 2>/dev/null || true
    done
    pids=()
}

# wait_up URL: returns once URL answers with a success status (10 s at most); otherwise
# prints the logs in $work and fails.
wait_up() {
    local _
    for _ in $(seq 1 100); do
        if python3 -c 'import sys, urllib.request; urllib.request.urlopen(sys.argv[1], timeout=1)' "$1" 2>/dev/null; then
            return 0
        fi
        sleep 0.1
    done
    echo "$script_name: $1 did not come up" >&2
    cat "$work"/*.log >&2 || true
    return 1
}
