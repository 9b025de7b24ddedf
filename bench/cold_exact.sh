#!/usr/bin/env bash
# docs/benchmarks.md §11, "Cold cost of exact counts": section 2's `cascade compact` rows (whole
# process, model gpt-4o, so exact counts where the cascade needs them) for two or more
# binaries side by side, interleaved run by run; prints min / median / max per binary and
# the ratio of medians to the first binary; then each binary's peak RSS on the ~1M-token
# request at 128K (section 5's row; median of RUNS, kernel high-water mark via bench/rss.py).
#   bench/cold_exact.sh RUNS BIN_A BIN_B [BIN_C ...]
# Inputs: section 2's request bodies from bench/out/inputs (written by bench/run.sh), else
# built here from fixtures/transcripts the same way (crates/bench inputs.rs) into a temp dir.
set -euo pipefail
cd "$(dirname "$0")/.."
RUNS=$1; shift
BINS=("$@")
INPUTS=bench/out/inputs
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
if [ ! -f "$INPUTS/concat-1.3mb.json" ]; then
  INPUTS="$TMP/inputs"; mkdir -p "$INPUTS"
  python3 - "$INPUTS" <<'PY'
import json, os, sys
out = sys.argv[1]
src = "fixtures/transcripts"
fixtures = {f[:-5]: json.load(open(os.path.join(src, f)))["messages"]
            for f in sorted(os.listdir(src)) if f.endswith(".json")}
def save(name, messages):
    with open(os.path.join(out, name + ".json"), "w") as f:
        json.dump({"model": "gpt-4o", "messages": messages}, f, separators=(",", ":"), ensure_ascii=False)
for name, messages in fixtures.items():
    save(name, messages)
# The two largest Claude Code main sessions, in name order, without a trailing open tool
# call, tool-call ids of the second copy suffixed.
mains = [n for n in fixtures if n.startswith("claude-code") and n.endswith("-main")]
mains.sort(key=lambda n: -sum(len(json.dumps(m, separators=(",", ":"))) for m in fixtures[n]))
concat = []
for copy, name in enumerate(sorted(mains[:2])):
    messages = fixtures[name]
    while messages and messages[-1].get("role") == "assistant" and messages[-1].get("tool_calls"):
        messages = messages[:-1]
    for m in json.loads(json.dumps(messages)):
        if copy:
            if isinstance(m.get("tool_call_id"), str): m["tool_call_id"] += f"-{copy}"
            for c in m.get("tool_calls") or []:
                if isinstance(c.get("id"), str): c["id"] += f"-{copy}"
        concat.append(m)
save("concat-1.3mb", concat)
# A ~1M-token request for peak RSS (section 5 uses scaled-1m.json): the fixtures cycled in
# name order to 3.8 MB, one system message, ids suffixed per copy.
out_messages, size, has_system = [], 0, False
for copy in range(1000):
    messages = list(fixtures.values())[copy % len(fixtures)]
    while messages and messages[-1].get("role") == "assistant" and messages[-1].get("tool_calls"):
        messages = messages[:-1]
    for m in json.loads(json.dumps(messages)):
        if m.get("role") == "system":
            if has_system: continue
            has_system = True
        if isinstance(m.get("tool_call_id"), str): m["tool_call_id"] += f"-{copy}"
        for c in m.get("tool_calls") or []:
            if isinstance(c.get("id"), str): c["id"] += f"-{copy}"
        out_messages.append(m)
        size += len(json.dumps(m))
    if size > 3.8e6: break
save("scaled-1m", out_messages)
PY
fi
CASES=(concat-1.3mb claude-code__spotter__4d5611e5-main claude-code__spotter__6c2214d7-subagent-afc096d
       openhands__llama-4-maverick__ponyc-4588 swe-agent-demo__marshmallow-1867)
now() { date +%s%N; }
printf '| input | window |'; for b in "${BINS[@]}"; do printf ' %s (ms) |' "$(basename "$b")"; done
for b in "${BINS[@]:1}"; do printf ' %s ÷ %s |' "$(basename "$b")" "$(basename "${BINS[0]}")"; done; echo
printf '|---|---|'; for _ in "${BINS[@]}" "${BINS[@]:1}"; do printf -- '---|'; done; echo
for c in "${CASES[@]}"; do
  for w in 128000 32000; do
    declare -A T=()
    for ((r = 0; r < RUNS; r++)); do
      for ((k = 0; k < ${#BINS[@]}; k++)); do
        i=$(( (r + k) % ${#BINS[@]} ))
        s=$(now)
        "${BINS[$i]}" compact "$INPUTS/$c.json" --window "$w" -o "$TMP/out.json" 2> /dev/null || true
        T[$i]+="$(( ($(now) - s) / 1000 )) "
      done
    done
    printf '| %s | %s |' "$c" "$((w / 1000))K"
    meds=()
    for ((i = 0; i < ${#BINS[@]}; i++)); do
      read -r lo med hi < <(tr ' ' '\n' <<< "${T[$i]}" | grep . | sort -n | awk '{a[NR]=$1} END {printf "%.1f %.1f %.1f\n", a[1]/1000, a[int((NR+1)/2)]/1000, a[NR]/1000}')
      meds+=("$med"); printf ' %s / **%s** / %s |' "$lo" "$med" "$hi"
    done
    for ((i = 1; i < ${#BINS[@]}; i++)); do printf ' %s× |' "$(awk -v a="${meds[$i]}" -v b="${meds[0]}" 'BEGIN {printf "%.2f", a / b}')"; done
    echo
    unset T
  done
done
echo
printf '| ~1M-token request → 128K (section 5) |'
for b in "${BINS[@]}"; do
  runs=$(for ((r = 0; r < RUNS; r++)); do
    python3 bench/rss.py rss -- "$b" compact "$INPUTS/scaled-1m.json" --window 128000 -o "$TMP/out.json" \
      | python3 -c 'import json, sys; r = json.load(sys.stdin); print(r["peak_rss_mb"], r["seconds"] * 1e3)'
  done)
  med() { sort -n | awk '{a[NR]=$1} END {printf "%.1f", a[int((NR+1)/2)]}'; }
  printf ' %s: peak RSS %s MB, %s ms |' "$(basename "$b")" "$(cut -d' ' -f1 <<< "$runs" | med)" \
    "$(cut -d' ' -f2 <<< "$runs" | med)"
done
echo
