#!/usr/bin/env bash
# Real coding agents behind `cascade proxy`, end to end: Claude Code (print mode, Anthropic
# Messages, streaming) and Codex (`exec`, OpenAI Responses, streaming), each through the
# proxy with and without `--window`, to a scripted model (crates/proxy/examples/
# agent_upstream.rs) that enforces a context limit with the providers' real overflow
# errors, refuses unpaired tool calls or results, and makes every turn a tool call with a
# large output until the session is several times the limit.
#
# Fails (non-zero) when an agent does not finish its script, when an overflow error reaches
# the upstream with --window (more than one per session without it: the one that teaches
# the limit), or when an unpaired tool call reaches the upstream. Prints per client the
# requests, overflows, unpaired requests and the share of main requests that extend the
# previous one. Network: loopback, and the npm registry for the pinned packages.
set -euo pipefail
cd "$(dirname "$0")/.."
root="$PWD"

CLAUDE_VERSION="2.1.328"
CODEX_VERSION="0.169.0"
TURNS="${CASCADE_AGENT_TURNS:-20}"
# The limits, in the scripted model's tokens (body bytes / 3): Claude Code's system prompt
# and 25 tool definitions take about 42K of them, Codex's about 8K; each tool turn adds
# about 10K (Claude Code keeps 30,000 chars of a command's output) and 5K (Codex).
CLAUDE_LIMIT="${CASCADE_AGENT_CLAUDE_LIMIT:-60000}"
CODEX_LIMIT="${CASCADE_AGENT_CODEX_LIMIT:-30000}"
# Claude Code runs with its default model (whose requests carry `{"role": "system"}` entries
# inside `messages`) unless CASCADE_AGENT_CLAUDE_MODEL names another.
CLAUDE_MODEL="${CASCADE_AGENT_CLAUDE_MODEL:-}"
AGENT_TIMEOUT="${CASCADE_AGENT_TIMEOUT:-600}"
npm_dir="${CASCADE_AGENT_NPM:-$HOME/.cache/context-cascade/npm}"

# The agents, installed once at pinned versions into a cache folder.
installed_version() {
    node -e "console.log(require('$npm_dir/node_modules/$1/package.json').version)" 2>/dev/null || true
}
if [ "$(installed_version @anthropic-ai/claude-code)" != "$CLAUDE_VERSION" ] ||
    [ "$(installed_version @openai/codex)" != "$CODEX_VERSION" ]; then
    mkdir -p "$npm_dir"
    timeout 600 npm install --no-audit --no-fund --prefix "$npm_dir" \
        "@anthropic-ai/claude-code@$CLAUDE_VERSION" "@openai/codex@$CODEX_VERSION"
fi
claude="$npm_dir/node_modules/.bin/claude"
codex="$npm_dir/node_modules/.bin/codex"
"$claude" --version
"$codex" --version

cargo build --quiet -p cascade-proxy --example agent_upstream
cargo build --quiet -p cascade-cli --bin cascade

script_name=ci-agents
work="$(mktemp -d)"
# shellcheck source=scripts/lib/servers.sh
. scripts/lib/servers.sh
# CASCADE_AGENT_KEEP=1 keeps the logs (agents, proxy, upstream) for a look after the run.
trap 'stop_servers; if [ -z "${CASCADE_AGENT_KEEP:-}" ]; then rm -rf "$work"; else echo "ci-agents: logs kept in $work"; fi' EXIT

failures=0
summary=()
fail() {
    echo "ci-agents: FAIL: $*" >&2
    failures=$((failures + 1))
}

# run CLIENT MODE: one agent session through a fresh proxy and upstream.
run() {
    local client="$1" mode="$2" dir="$work/$1-$2"
    mkdir -p "$dir/home" "$dir/project" ${CASCADE_AGENT_DUMP:+"$CASCADE_AGENT_DUMP/$client-$mode"}
    local up_port proxy_port LIMIT
    if [ "$client" = claude ]; then LIMIT="$CLAUDE_LIMIT"; else LIMIT="$CODEX_LIMIT"; fi
    up_port="$(free_port)"
    proxy_port="$(free_port)"
    "$root/target/debug/examples/agent_upstream" --port "$up_port" --limit "$LIMIT" ${CASCADE_AGENT_DUMP:+--dump "$CASCADE_AGENT_DUMP/$client-$mode"} \
        --turns "$TURNS" >"$dir/upstream.log" 2>&1 &
    pids+=("$!")
    local window=()
    if [ "$mode" = window ]; then window=(--window "$LIMIT"); fi
    RUST_LOG=${RUST_LOG:-info} "$root/target/debug/cascade" proxy --listen "127.0.0.1:$proxy_port" \
        --upstream "http://127.0.0.1:$up_port" "${window[@]}" --db "$dir/cascade.db" \
        >"$dir/proxy.log" 2>&1 &
    pids+=("$!")
    wait_up "http://127.0.0.1:$up_port/stats"
    wait_up "http://127.0.0.1:$proxy_port/healthz"
    local prompt="Run the command the tool asks for, every time, until you are told you are done."
    local rc=0
    case "$client" in
    claude)
        (cd "$dir/project" && env -i PATH="$PATH" HOME="$dir/home" IS_SANDBOX=1 \
            DISABLE_TELEMETRY=1 DISABLE_AUTOUPDATER=1 DISABLE_ERROR_REPORTING=1 \
            CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1 \
            ANTHROPIC_BASE_URL="http://127.0.0.1:$proxy_port" ANTHROPIC_API_KEY=dummy-key \
            timeout "$AGENT_TIMEOUT" "$claude" -p "$prompt" ${CLAUDE_MODEL:+--model "$CLAUDE_MODEL"} \
            --dangerously-skip-permissions \
            </dev/null >"$dir/agent.out" 2>"$dir/agent.err") || rc=$?
        ;;
    codex)
        mkdir -p "$dir/codex"
        sed "s|@PROXY@|http://127.0.0.1:$proxy_port|" "$root/tests/agents/codex-config.toml" \
            >"$dir/codex/config.toml"
        (cd "$dir/project" && env -i PATH="$PATH" HOME="$dir/home" CODEX_HOME="$dir/codex" \
            CASCADE_AGENT_KEY=dummy-key \
            timeout "$AGENT_TIMEOUT" "$codex" exec --skip-git-repo-check \
            --dangerously-bypass-approvals-and-sandbox "$prompt" \
            </dev/null >"$dir/agent.out" 2>"$dir/agent.err") || rc=$?
        ;;
    esac
    local stats
    stats="$(curl -fsS "http://127.0.0.1:$up_port/stats")"
    local metrics
    metrics="$(curl -fsS "http://127.0.0.1:$proxy_port/metrics")"
    stop_servers
    echo "== $client, $mode: agent exit $rc"
    echo "$stats"
    grep -E '^cascade_(learned_window_tokens|overflow_errors_total|upstream_calls_total|strategies_applied_total|window_source_total|fast_path_total)' <<<"$metrics" || true
    local protocol
    if [ "$client" = claude ]; then protocol=anthropic; else protocol=responses; fi
    local line
    line="$(STATS="$stats" PROTOCOL="$protocol" MODE="$mode" TURNS="$TURNS" python3 - <<'EOF'
import json, os
s = json.loads(os.environ["STATS"]).get(os.environ["PROTOCOL"], {})
turns = int(os.environ["TURNS"])
problems = []
if not s.get("finished"):
    problems.append(f"did not finish its script ({s.get('turns', 0)} of {turns + 1} turns)")
limit = 0 if os.environ["MODE"] == "window" else 1
if s.get("overflows", 0) > limit:
    problems.append(f"{s['overflows']} overflow errors reached the upstream (at most {limit})")
if s.get("unpaired", 0):
    problems.append(f"{s['unpaired']} unpaired tool calls or results reached the upstream")
main = s.get("main_answered", 0)
share = s.get("extends_previous", 0) / (main - 1) if main > 1 else 0.0
print(f"requests={s.get('requests', 0)} overflows={s.get('overflows', 0)} "
      f"unpaired={s.get('unpaired', 0)} main={main} extends_previous={share:.0%} "
      f"largest_prompt={s.get('largest_prompt', 0)}"
      + ("" if not problems else " PROBLEMS: " + "; ".join(problems)))
EOF
)"
    summary+=("$client $mode (limit $LIMIT): $line")
    if [ "$rc" -ne 0 ]; then
        fail "$client ($mode) exited $rc"
        tail -n 20 "$dir/agent.err" "$dir/agent.out" >&2 || true
        tail -n 30 "$dir/proxy.log" "$dir/upstream.log" >&2 || true
    elif ! grep -q CASCADE-AGENT-SCRIPT-DONE "$dir/agent.out"; then
        fail "$client ($mode) did not print the final answer"
        tail -n 20 "$dir/agent.out" >&2 || true
    fi
    case "$line" in *PROBLEMS*) fail "$client ($mode): $line" ;; esac
}

for client in ${CASCADE_AGENT_CLIENTS:-claude codex}; do
    for mode in window no-window; do
        run "$client" "$mode"
    done
done

echo "== summary (limits: Claude Code $CLAUDE_LIMIT, Codex $CODEX_LIMIT tokens; $TURNS tool turns)"
printf '%s\n' "${summary[@]}"
if [ "$failures" -ne 0 ]; then
    echo "ci-agents: $failures failure(s)" >&2
    exit 1
fi
