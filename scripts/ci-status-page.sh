#!/usr/bin/env bash
# The status page (GET /) in a real browser: `cascade proxy` on 127.0.0.1 in front of the
# scripted upstream (crates/proxy/examples/scripted_upstream.rs), a long fixture replayed
# through it turn by turn at a window that compacts, then headless Chromium dumps the
# page's DOM and takes a screenshot. The DOM must list the conversation, its compactions
# with their strategy names and the chart's points, and none of the fixture's content.
#
# Installs Debian's chromium when it is missing (apt-get; run as root, as CI does).
# The screenshot goes to target/status-page.png, or to $STATUS_PAGE_SCREENSHOT (the
# README's docs/status-page.png is made with STATUS_PAGE_SCREENSHOT=docs/status-page.png).
set -euo pipefail
cd "$(dirname "$0")/.."

fixture="fixtures/transcripts/openhands__llama-4-maverick__ponyc-4588.json"
window=12000
screenshot="${STATUS_PAGE_SCREENSHOT:-target/status-page.png}"

if ! command -v chromium >/dev/null 2>&1; then
    echo "ci-status-page: installing chromium" >&2
    apt-get update
    DEBIAN_FRONTEND=noninteractive apt-get install -y chromium
fi

cargo build --quiet -p cascade-proxy --example scripted_upstream
cargo build --quiet -p cascade-cli --bin cascade

script_name=ci-status-page
work="$(mktemp -d)"
# shellcheck source=scripts/lib/servers.sh
. scripts/lib/servers.sh
trap 'stop_servers; rm -rf "$work"' EXIT
upstream_port="$(free_port)"
proxy_port="$(free_port)"

target/debug/examples/scripted_upstream --port "$upstream_port" --limit 100000000 >"$work/upstream.log" 2>&1 &
pids+=("$!")
target/debug/cascade proxy --listen "127.0.0.1:$proxy_port" \
    --upstream "http://127.0.0.1:$upstream_port" --window "$window" \
    --db "$work/cascade.db" >"$work/proxy.log" 2>&1 &
pids+=("$!")
proxy="http://127.0.0.1:$proxy_port"

wait_up "$proxy/healthz"

# The agent loop: at every call point (the end of each run of non-assistant messages, the
# rule of context_cascade::replay) the whole history so far is sent.
python3 - "$proxy" "$fixture" >"$work/replay.txt" <<'EOF'
import json, sys, urllib.request
proxy, fixture = sys.argv[1], sys.argv[2]
messages = json.load(open(fixture))["messages"]
points, waiting = [], False
for i, m in enumerate(messages):
    if m["role"] == "assistant":
        if waiting:
            points.append(i)
        waiting = False
    else:
        waiting = True
if waiting:
    points.append(len(messages))
compacted = 0
for end in points:
    body = json.dumps({"model": "gpt-4o", "max_tokens": 1024, "messages": messages[:end]}).encode()
    request = urllib.request.Request(proxy + "/v1/chat/completions", data=body,
                                     headers={"content-type": "application/json",
                                              "authorization": "Bearer sk-status-page"})
    with urllib.request.urlopen(request, timeout=60) as response:
        assert response.status == 200, response.status
        compacted += response.headers.get("x-context-cascade") is not None
print(len(points), compacted)
EOF
read -r calls compacted <"$work/replay.txt"
echo "ci-status-page: replayed $fixture: $calls calls, $compacted compacted at window $window"
if [ "$compacted" -eq 0 ]; then
    echo "ci-status-page: the window did not force any compaction" >&2
    exit 1
fi

chrome=(chromium --headless --no-sandbox --disable-gpu --disable-dev-shm-usage
    --user-data-dir="$work/chromium" --hide-scrollbars)
timeout 120 "${chrome[@]}" --dump-dom "$proxy/" >"$work/dom.html" 2>"$work/chromium.log" || {
    cat "$work/chromium.log" >&2
    exit 1
}
mkdir -p "$(dirname "$screenshot")"
timeout 120 "${chrome[@]}" --screenshot="$screenshot" --window-size=1200,1600 "$proxy/" \
    2>>"$work/chromium.log" || {
    cat "$work/chromium.log" >&2
    exit 1
}

python3 - "$work/dom.html" "$fixture" "$calls" <<'EOF'
import json, re, sys
dom = open(sys.argv[1]).read()
messages = json.load(open(sys.argv[2]))["messages"]
calls = int(sys.argv[3])
failures = []
def check(ok, what):
    print(("ok   " if ok else "FAIL ") + what)
    if not ok:
        failures.append(what)
check(len(re.findall(r'<tr class="conversation"', dom)) == 1, "the conversation is listed once")
check('class="compactions"' in dom, "its compactions are listed")
strategies = re.findall(r'<td class="l strategy">([a-z_]+)', dom)
known = {"truncate_tool_result", "compact_tool_results", "prune_history", "summarize", "degrade"}
check(bool(strategies) and set(strategies) <= known, f"with strategy names: {sorted(set(strategies))}")
points = re.search(r'<polyline class="sent" points="([^"]*)"', dom)
n = len(points.group(1).split()) if points else 0
check("<svg" in dom and n == min(calls, 200), f"the chart's <svg> has one point per request ({n} of {calls})")
check('<circle class="fired"' in dom, "the chart marks the requests where a strategy ran")
# No content: no 24-character run of any message's text, no file path of a tool call.
snippets = set()
def texts(value):
    if isinstance(value, str):
        yield value
    elif isinstance(value, list):
        for v in value:
            yield from texts(v)
    elif isinstance(value, dict):
        for k, v in value.items():
            if k not in ("role", "type", "id", "tool_call_id", "name"):
                yield from texts(v)
for m in messages:
    for text in texts(m.get("content")):
        for line in text.splitlines():
            line = line.strip()
            if len(line) >= 24:
                snippets.add(line[:24])
    for call in m.get("tool_calls") or []:
        snippets.update(re.findall(r'/[\w./-]{12,}', call.get("function", {}).get("arguments", "")))
leaked = sorted(s for s in snippets if s in dom)
check(not leaked, f"none of {len(snippets)} content snippets appears" + (f": {leaked[:3]}" if leaked else ""))
if failures:
    sys.exit(1)
EOF
bytes="$(python3 -c "import urllib.request; print(len(urllib.request.urlopen('$proxy/').read()))")"
echo "ci-status-page: the page is $bytes bytes; screenshot in $screenshot"
