#!/usr/bin/env bash
# Real coding agents behind `cascade proxy`, end to end: Claude Code (print mode, Anthropic
# Messages, streaming) and Codex (`exec`, OpenAI Responses, streaming), each through the
# proxy with and without `--window`, to a scripted model (crates/proxy/examples/
# agent_upstream.rs) that enforces a context limit with the providers' real overflow
# errors, refuses unpaired tool calls or results, and makes every turn a tool call with a
# large output until the session is several times the limit.
#
# Each client is told the model's window (Claude Code CLAUDE_CODE_AUTO_COMPACT_WINDOW, Codex
# model_context_window) so that its own compaction can fire: Codex through the provider's
# remote compaction (`compaction_trigger`, answered by the scripted model as the API does).
# CASCADE_AGENT_GAUGES lists the proxy's `requests.gauge` settings to run (default: the
# default one); CASCADE_AGENT_MODES the proxy modes (`window no-window window-recall`;
# `window-recall` is `window` with `requests.recall = true`: the removed originals kept and
# the markers carrying handles, so that an agent is seen to finish its session with them).
#
# Fails (non-zero) when an agent does not finish its script, when an overflow error reaches
# the upstream with --window (more than one per session without it: the one that teaches
# the limit), or when an unpaired tool call reaches the upstream. Prints per client the
# requests, overflows, unpaired requests, the share of main requests that extend the
# previous one, the prompt tokens a provider's cache would serve and the rest (and their
# price at the provider's cached / uncached rates), and who compacted at which turn.
# Network: loopback, and the npm registry for the pinned packages.
set -euo pipefail
cd "$(dirname "$0")/.."
root="$PWD"

CLAUDE_VERSION="2.1.332"
CODEX_VERSION="0.171.0"
TURNS="${CASCADE_AGENT_TURNS:-20}"
# The limits, in the scripted model's tokens (body bytes / 3): Claude Code's system prompt
# and 25 tool definitions take about 29K of them, Codex's about 9K; each tool turn adds
# about 10K (Claude Code keeps 30,000 chars of a command's output) and 4K (Codex). Claude
# Code's auto-compact window is at least 100K (it raises a smaller CLAUDE_CODE_AUTO_COMPACT_
# WINDOW to that), so its limit is 100K for its own compaction to be able to fire; Codex
# compacts at 60% of its window (a turn adds 14% of it).
CLAUDE_LIMIT="${CASCADE_AGENT_CLAUDE_LIMIT:-100000}"
CODEX_LIMIT="${CASCADE_AGENT_CODEX_LIMIT:-30000}"
# Claude Code runs with its default model (whose requests carry `{"role": "system"}` entries
# inside `messages`) unless CASCADE_AGENT_CLAUDE_MODEL names another.
CLAUDE_MODEL="${CASCADE_AGENT_CLAUDE_MODEL:-}"
AGENT_TIMEOUT="${CASCADE_AGENT_TIMEOUT:-600}"
# One folder per pair of versions: runs pinned to other versions keep theirs.
npm_dir="${CASCADE_AGENT_NPM:-$HOME/.cache/context-cascade/npm-$CLAUDE_VERSION-$CODEX_VERSION}"

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

# run CLIENT MODE GAUGE: one agent session through a fresh proxy and upstream.
run() {
    local client="$1" mode="$2" gauge="$3" dir="$work/$1-$2-$3"
    mkdir -p "$dir/home" "$dir/project" ${CASCADE_AGENT_DUMP:+"$CASCADE_AGENT_DUMP/$client-$mode"}
    local up_port proxy_port LIMIT
    if [ "$client" = claude ]; then LIMIT="$CLAUDE_LIMIT"; else LIMIT="$CODEX_LIMIT"; fi
    up_port="$(free_port)"
    proxy_port="$(free_port)"
    "$root/target/debug/examples/agent_upstream" --port "$up_port" --limit "$LIMIT" ${CASCADE_AGENT_DUMP:+--dump "$CASCADE_AGENT_DUMP/$client-$mode"} \
        --turns "$TURNS" >"$dir/upstream.log" 2>&1 &
    pids+=("$!")
    local window=()
    if [ "$mode" != no-window ]; then window=(--window "$LIMIT"); fi
    printf '[requests]\ngauge = "%s"\n' "$gauge" >"$dir/cascade.toml"
    if [ "$mode" = window-recall ]; then echo 'recall = true' >>"$dir/cascade.toml"; fi
    RUST_LOG=${RUST_LOG:-info} "$root/target/debug/cascade" proxy --listen "127.0.0.1:$proxy_port" \
        --upstream "http://127.0.0.1:$up_port" "${window[@]}" --db "$dir/cascade.db" \
        --config "$dir/cascade.toml" >"$dir/proxy.log" 2>&1 &
    pids+=("$!")
    wait_up "http://127.0.0.1:$up_port/stats"
    wait_up "http://127.0.0.1:$proxy_port/healthz"
    local prompt="Run the command the tool asks for, every time, until you are told you are done."
    local rc=0
    case "$client" in
    claude)
        (cd "$dir/project" && env -i PATH="$PATH" HOME="$dir/home" IS_SANDBOX=1 \
            DISABLE_TELEMETRY=1 DISABLE_AUTOUPDATER=1 DISABLE_ERROR_REPORTING=1 \
            CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1 CLAUDE_CODE_AUTO_COMPACT_WINDOW="$LIMIT" \
            ANTHROPIC_BASE_URL="http://127.0.0.1:$proxy_port" ANTHROPIC_API_KEY=dummy-key \
            timeout "$AGENT_TIMEOUT" "$claude" -p "$prompt" ${CLAUDE_MODEL:+--model "$CLAUDE_MODEL"} \
            --dangerously-skip-permissions \
            </dev/null >"$dir/agent.out" 2>"$dir/agent.err") || rc=$?
        ;;
    codex)
        mkdir -p "$dir/codex"
        sed -e "s|@PROXY@|http://127.0.0.1:$proxy_port|" -e "s|@WINDOW@|$LIMIT|" \
            -e "s|@COMPACT_AT@|$((LIMIT * 6 / 10))|" "$root/tests/agents/codex-config.toml" \
            >"$dir/codex/config.toml"
        (cd "$dir/project" && env -i PATH="$PATH" HOME="$dir/home" CODEX_HOME="$dir/codex" \
            OPENAI_API_KEY=dummy-key \
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
    echo "== $client, $mode, gauge $gauge: agent exit $rc"
    echo "$stats"
    grep -E '^cascade_(learned_window_tokens|overflow_errors_total|upstream_calls_total|strategies_applied_total|window_source_total|fast_path_total)' <<<"$metrics" || true
    local protocol
    if [ "$client" = claude ]; then protocol=anthropic; else protocol=responses; fi
    local line
    local proxy_compactions
    proxy_compactions="$(awk '/^cascade_strategies_applied_total/ {n += $2} END {print n + 0}' <<<"$metrics")"
    line="$(STATS="$stats" PROTOCOL="$protocol" MODE="$mode" TURNS="$TURNS" \
        PROXY_STEPS="$proxy_compactions" python3 - <<'EOF'
import json, os
s = json.loads(os.environ["STATS"]).get(os.environ["PROTOCOL"], {})
# List prices per million prompt tokens, uncached and cached (cache reads): Claude Sonnet
# $3 / $0.30, GPT-5.1-Codex $1.25 / $0.125.
uncached_price, cached_price = (3.0, 0.30) if os.environ["PROTOCOL"] == "anthropic" else (1.25, 0.125)
turns = int(os.environ["TURNS"])
problems = []
if not s.get("finished"):
    problems.append(f"did not finish its script ({s.get('turns', 0)} of {turns + 1} turns)")
limit = 1 if os.environ["MODE"] == "no-window" else 0
if s.get("overflows", 0) > limit:
    problems.append(f"{s['overflows']} overflow errors reached the upstream (at most {limit})")
if s.get("unpaired", 0):
    problems.append(f"{s['unpaired']} unpaired tool calls or results reached the upstream")
main = s.get("main_answered", 0)
share = s.get("extends_previous", 0) / (main - 1) if main > 1 else 0.0
cached, uncached = s.get("cached_tokens", 0), s.get("uncached_tokens", 0)
cost = (cached * cached_price + uncached * uncached_price) / 1e6
print(f"requests={s.get('requests', 0)} overflows={s.get('overflows', 0)} "
      f"unpaired={s.get('unpaired', 0)} main={main} extends_previous={share:.0%} "
      f"largest_prompt={s.get('largest_prompt', 0)} cached={cached} uncached={uncached} "
      f"prompt_cost=${cost:.3f} client_compactions={s.get('client_compactions', [])} "
      f"provider_compactions={s.get('provider_compactions', [])} "
      f"proxy_strategy_steps={os.environ['PROXY_STEPS']}"
      + ("" if not problems else " PROBLEMS: " + "; ".join(problems)))
EOF
)"
    summary+=("$client $mode gauge=$gauge (limit $LIMIT): $line")
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
    for mode in ${CASCADE_AGENT_MODES:-window no-window window-recall}; do
        for gauge in ${CASCADE_AGENT_GAUGES:-upstream}; do
            run "$client" "$mode" "$gauge"
        done
    done
done

echo "== summary (limits: Claude Code $CLAUDE_LIMIT, Codex $CODEX_LIMIT tokens; $TURNS tool turns)"
printf '%s\n' "${summary[@]}"
if [ "$failures" -ne 0 ]; then
    echo "ci-agents: $failures failure(s)" >&2
    exit 1
fi
