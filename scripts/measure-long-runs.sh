#!/usr/bin/env bash
# Token counting on text with no break (issue 23, item 8): `cascade compact` on a request
# whose tool result is one spaceless string of 1, 10 and 50 MB, under an OpenAI model
# (exact counts: o200k_base) and a Claude model (the calibrated prior), timed with
# /usr/bin/time -v. Prints one line per run: model, size, kind, wall seconds, peak RSS, the
# report's tokens before and after and its `estimated_messages` (absent: 0).
#
# Usage: scripts/measure-long-runs.sh [path/to/cascade]   (default: target/release/cascade)
# Environment: CASCADE_SIZES_MB (default "1 10 50"), CASCADE_KINDS (default "letters same"):
#   letters  pseudo-random lowercase letters (one pre-tokenizer piece, many distinct merges)
#   same     one letter repeated
set -euo pipefail
cd "$(dirname "$0")/.."
bin="${1:-target/release/cascade}"
sizes="${CASCADE_SIZES_MB:-1 10 50}"
kinds="${CASCADE_KINDS:-letters same}"
models="gpt-4o claude-sonnet-4-5"
[ -x "$bin" ] || { echo "no executable at $bin (cargo build --release -p cascade-cli)" >&2; exit 2; }
[ -x /usr/bin/time ] || { echo "needs /usr/bin/time (GNU time)" >&2; exit 2; }

tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT

# A coding-agent request: the long string is what a tool returned.
body() { # model size_mb kind out
    python3 - "$@" <<'EOF'
import json, random, sys
model, mb, kind, out = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
n = mb * 1024 * 1024
if kind == "same":
    text = "a" * n
else:
    rng = random.Random(23)
    text = "".join(rng.choices("abcdefghijklmnopqrstuvwxyz", k=n))
body = {"model": model, "messages": [
    {"role": "system", "content": "You are a coding agent."},
    {"role": "user", "content": "Print the file."},
    {"role": "assistant", "content": None, "tool_calls": [{"id": "c1", "type": "function",
        "function": {"name": "read_file", "arguments": "{\"path\": \"blob.txt\"}"}}]},
    {"role": "tool", "tool_call_id": "c1", "content": text},
    {"role": "user", "content": "What is in it?"},
]}
with open(out, "w") as f:
    json.dump(body, f)
EOF
}

printf '%-18s %5s %-8s %8s %9s %12s %10s %9s\n' model MB kind seconds peak_MB tokens_before tokens_after estimated
for mb in $sizes; do
    for kind in $kinds; do
        for model in $models; do
            body "$model" "$mb" "$kind" "$tmp/body.json"
            rm -f "$tmp/report.json"
            status=0
            /usr/bin/time -v "$bin" compact "$tmp/body.json" --window 128000 \
                -o /dev/null --report "$tmp/report.json" 2> "$tmp/time" || status=$?
            if [ "$status" -gt 1 ]; then
                echo "cascade exited $status:" >&2; cat "$tmp/time" >&2; exit 1
            fi
            seconds=$(awk -F': ' '/Elapsed \(wall clock\)/ {
                n = split($2, t, ":"); s = 0; for (i = 1; i <= n; i++) s = s * 60 + t[i]; print s }' "$tmp/time")
            peak_kb=$(awk -F': ' '/Maximum resident set size/ {print $2}' "$tmp/time")
            read -r before after estimated < <(python3 -c '
import json, sys
r = json.load(open(sys.argv[1]))
print(r["tokens_before"], r["tokens_after"], r.get("estimated_messages", 0))' "$tmp/report.json")
            printf '%-18s %5s %-8s %8.2f %9.0f %12s %10s %9s\n' "$model" "$mb" "$kind" "$seconds" \
                "$(echo "$peak_kb / 1024" | bc -l)" "$before" "$after" "$estimated"
        done
    done
done
