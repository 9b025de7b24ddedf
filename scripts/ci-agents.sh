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
# default one); CASCADE_AGENT_MODES the modes (`window no-window window-recall` by default,
# and `direct`): `window-recall` is `window` with `requests.recall = true` (the removed
# originals kept, the markers carrying handles, the `context_recall` tool offered), where
# the scripted model calls the tool by a marker's handle now and then: the run fails unless
# each client whose content the proxy removed ran recall rounds that brought the removed
# text back, and unless the tool's name stays out of the agent's output and session files.
# `direct` is the agent talking to the scripted model with no proxy: each client's own rate
# of requests that extend the previous one, without us. CASCADE_AGENT_CODEX_COMPACT is when
# Codex compacts, in percent of its window (60), or `default` for Codex's own rule
# (model_auto_compact_token_limit unset: 90% of model_context_window).
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
CODEX_COMPACT="${CASCADE_AGENT_CODEX_COMPACT:-60}"
case "$CODEX_COMPACT" in
default | [1-9] | [1-9][0-9]) ;;
*)
    echo "ci-agents: CASCADE_AGENT_CODEX_COMPACT must be a percent (1-99) or default, not '$CODEX_COMPACT'" >&2
    exit 2
    ;;
esac
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
    local client="$1" mode="$2" gauge="$3" dir="$work/$1-$2-$3-$CODEX_COMPACT-$CODEX_LIMIT"
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
    # What the agent talks to: the proxy, or (direct) the scripted model itself.
    local base="http://127.0.0.1:$proxy_port"
    wait_up "http://127.0.0.1:$up_port/stats"
    if [ "$mode" = direct ]; then
        base="http://127.0.0.1:$up_port"
    else
        printf '[requests]\ngauge = "%s"\n' "$gauge" >"$dir/cascade.toml"
        # Each mode says whether recall is on, whatever the default.
        if [ "$mode" = window-recall ]; then
            echo 'recall = true' >>"$dir/cascade.toml"
        else
            echo 'recall = false' >>"$dir/cascade.toml"
        fi
        RUST_LOG=${RUST_LOG:-info} "$root/target/debug/cascade" proxy --listen "127.0.0.1:$proxy_port" \
            --upstream "http://127.0.0.1:$up_port" "${window[@]}" --db "$dir/cascade.db" \
            --config "$dir/cascade.toml" >"$dir/proxy.log" 2>&1 &
        pids+=("$!")
        wait_up "http://127.0.0.1:$proxy_port/healthz"
    fi
    local prompt="Run the command the tool asks for, every time, until you are told you are done."
    local rc=0
    case "$client" in
    claude)
        (cd "$dir/project" && env -i PATH="$PATH" HOME="$dir/home" IS_SANDBOX=1 \
            DISABLE_TELEMETRY=1 DISABLE_AUTOUPDATER=1 DISABLE_ERROR_REPORTING=1 \
            CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1 CLAUDE_CODE_AUTO_COMPACT_WINDOW="$LIMIT" \
            ANTHROPIC_BASE_URL="$base" ANTHROPIC_API_KEY=dummy-key \
            timeout "$AGENT_TIMEOUT" "$claude" -p "$prompt" ${CLAUDE_MODEL:+--model "$CLAUDE_MODEL"} \
            --dangerously-skip-permissions \
            </dev/null >"$dir/agent.out" 2>"$dir/agent.err") || rc=$?
        ;;
    codex)
        mkdir -p "$dir/codex"
        local compact=(-e "/@COMPACT_AT@/d")
        if [ "$CODEX_COMPACT" != default ]; then
            compact=(-e "s|@COMPACT_AT@|$((LIMIT * CODEX_COMPACT / 100))|")
        fi
        sed -e "s|@PROXY@|$base|" -e "s|@WINDOW@|$LIMIT|" "${compact[@]}" \
            "$root/tests/agents/codex-config.toml" >"$dir/codex/config.toml"
        (cd "$dir/project" && env -i PATH="$PATH" HOME="$dir/home" CODEX_HOME="$dir/codex" \
            OPENAI_API_KEY=dummy-key \
            timeout "$AGENT_TIMEOUT" "$codex" exec --skip-git-repo-check \
            --dangerously-bypass-approvals-and-sandbox "$prompt" \
            </dev/null >"$dir/agent.out" 2>"$dir/agent.err") || rc=$?
        ;;
    esac
    local stats
    stats="$(curl -fsS "http://127.0.0.1:$up_port/stats")"
    local metrics=""
    if [ "$mode" != direct ]; then metrics="$(curl -fsS "http://127.0.0.1:$proxy_port/metrics")"; fi
    stop_servers
    echo "== $client, $mode, gauge $gauge: agent exit $rc"
    echo "$stats"
    grep -E '^cascade_(learned_window_tokens|overflow_errors_total|upstream_calls_total|strategies_applied_total|window_source_total|fast_path_total)' <<<"$metrics" || true
    local protocol
    if [ "$client" = claude ]; then protocol=anthropic; else protocol=responses; fi
    local line
    local proxy_compactions
    proxy_compactions="$(awk '/^cascade_strategies_applied_total/ {n += $2} END {print n + 0}' <<<"$metrics")"
    # The client must never see the recall tool: not in what it printed, not in the session
    # it saved (Claude Code's under $HOME/.claude, Codex's under $CODEX_HOME/sessions).
    local leaked
    leaked="$(grep -rl context_recall "$dir/agent.out" "$dir/agent.err" "$dir/home" \
        "$dir/codex" 2>/dev/null | sed "s|$dir/||" | tr '\n' ' ' || true)"
    line="$(STATS="$stats" PROTOCOL="$protocol" MODE="$mode" TURNS="$TURNS" \
        PROXY_STEPS="$proxy_compactions" LEAKED="$leaked" python3 - <<'EOF'
import json, os
s = json.loads(os.environ["STATS"]).get(os.environ["PROTOCOL"], {})
# List prices per million prompt tokens, uncached and cached (cache reads): Claude Sonnet
# $3 / $0.30, GPT-5.1-Codex $1.25 / $0.125.
uncached_price, cached_price = (3.0, 0.30) if os.environ["PROTOCOL"] == "anthropic" else (1.25, 0.125)
turns = int(os.environ["TURNS"])
problems = []
if not s.get("finished"):
    problems.append(f"did not finish its script ({s.get('turns', 0)} of {turns + 1} turns)")
# Without --window the first overflow teaches the proxy the limit; direct, nothing stops them.
limit = {"no-window": 1, "direct": None}.get(os.environ["MODE"], 0)
if limit is not None and s.get("overflows", 0) > limit:
    problems.append(f"{s['overflows']} overflow errors reached the upstream (at most {limit})")
if s.get("unpaired", 0):
    problems.append(f"{s['unpaired']} unpaired tool calls or results reached the upstream")
rounds, hits = s.get("recall_rounds", 0), s.get("recall_hits", 0)
if os.environ["MODE"] == "window-recall":
    # Recall rounds are owed where the proxy removed something (a marker with a handle).
    if int(os.environ["PROXY_STEPS"]) > 0 and rounds < 1:
        problems.append("the proxy removed content but no recall round ran")
    # Each call by a handle ends in the removed text: at once, or after following the
    # handles of markers the recalled text held (recall_followed).
    calls, followed = len(s.get("recall_calls", [])), s.get("recall_followed", 0)
    if hits != calls or rounds != calls + followed:
        problems.append(f"{calls} recall calls, {followed} followed, {rounds} rounds back, "
                        f"but {hits} brought the removed text back")
elif rounds:
    problems.append(f"{rounds} recall rounds without recall on")
if os.environ["LEAKED"].strip():
    problems.append("the client saw the recall tool: " + os.environ["LEAKED"].strip())
main = s.get("main_answered", 0)
share = s.get("extends_previous", 0) / (main - 1) if main > 1 else 0.0
cached, uncached = s.get("cached_tokens", 0), s.get("uncached_tokens", 0)
cost = (cached * cached_price + uncached * uncached_price) / 1e6
print(f"requests={s.get('requests', 0)} overflows={s.get('overflows', 0)} "
      f"unpaired={s.get('unpaired', 0)} main={main} extends_previous={share:.0%} "
      f"largest_prompt={s.get('largest_prompt', 0)} cached={cached} uncached={uncached} "
      f"prompt_cost=${cost:.3f} client_compactions={s.get('client_compactions', [])} "
      f"provider_compactions={s.get('provider_compactions', [])} "
      f"recall_calls={s.get('recall_calls', [])} recall_rounds={rounds} recall_hits={hits} "
      f"recall_followed={s.get('recall_followed', 0)} "
      f"proxy_strategy_steps={os.environ['PROXY_STEPS'] if os.environ['MODE'] != 'direct' else '-'}"
      + ("" if not problems else " PROBLEMS: " + "; ".join(problems)))
EOF
)"
    local compacting=""
    if [ "$client" = codex ]; then compacting=" compact=$CODEX_COMPACT"; fi
    summary+=("$client $mode gauge=$gauge (limit $LIMIT$compacting): $line")
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
        for gauge in ${CASCADE_AGENT_GAUGES:-auto}; do
            run "$client" "$mode" "$gauge"
        done
    done
done
# Codex's own compaction at 60% of a 30,000 window leaves the proxy nothing to remove, so
# no recall round runs in its sessions above: one more session at Codex's own rule (90%)
# over a 60,000 window, where the proxy removes content and the model recalls it, with the
# default gauge, which on the Responses route lets Codex's compaction see the size it sent
# (with `upstream`, a recall round's summed usage makes it compact a history longer than
# the window: docs/proxy.md, "The client's gauge"). CASCADE_AGENT_CODEX_RECALL=0 leaves it out.
if [[ " ${CASCADE_AGENT_CLIENTS:-claude codex} " == *" codex "* ]] &&
    [[ " ${CASCADE_AGENT_MODES:-window no-window window-recall} " == *" window-recall "* ]] &&
    [ "${CASCADE_AGENT_CODEX_RECALL:-1}" != 0 ]; then
    CODEX_COMPACT=default CODEX_LIMIT=60000 run codex window-recall auto
fi

echo "== summary (limits: Claude Code $CLAUDE_LIMIT, Codex $CODEX_LIMIT tokens; $TURNS tool turns)"
printf '%s\n' "${summary[@]}"
if [ "$failures" -ne 0 ]; then
    echo "ci-agents: $failures failure(s)" >&2
    exit 1
fi
