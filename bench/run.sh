#!/usr/bin/env bash
# Every benchmark of issue 5 in one command, then docs/benchmarks.md:
#   (1) preparation cost, (3) estimator accuracy, (4) cost curves,
#   (12) cost per session                                          - Rust, bench_report (crates/bench)
#   (2) LiteLLM / LangChain trim_messages vs the cascade          - Python, bench/py_trim.py
#   (2b) a gpt-4o body (exact counts) against the same as Claude,
#        and the 4 MB one against a bare serde round trip process  - bench/model_ratio.py
#   (5) peak RSS of `cascade compact` on the ~1M-token request     - bench/rss.py
# Needs cargo and python3 (with venv); the venv (bench/.venv) is created once and reused.
# Set QUICK=1 for a shorter smoke run (fewer repetitions, one Python case).
set -euo pipefail
cd "$(dirname "$0")/.."
START=$(date +%s)
OUT=bench/out
mkdir -p "$OUT/inputs"
PHASES="$OUT/phases.tsv"
: > "$PHASES"
# Logs a phase start and records its offset (seconds since START) for docs/benchmarks.md.
log() {
  echo "[bench +$(($(date +%s) - START))s] $*" >&2
  printf '%s\t%s\n' "$(($(date +%s) - START))" "$*" >> "$PHASES"
}
BIN="${CARGO_TARGET_DIR:-target}/release"
# The fixture transcripts are vendored in fixtures/ (override with CASCADE_FIXTURES).
FIXTURES="${CASCADE_FIXTURES:-fixtures/transcripts}"
if [ ! -d "$FIXTURES" ]; then
  echo "bench/run.sh: no fixture transcripts at $FIXTURES (set CASCADE_FIXTURES to their folder)" >&2
  exit 2
fi
CASCADE_FIXTURES="$(cd "$FIXTURES" && pwd)"
export CASCADE_FIXTURES
QUICK_FLAG=()
if [ "${QUICK:-0}" = 1 ]; then QUICK_FLAG=(--quick); fi

log "building release binaries"
# One invocation, so the core library is compiled once (with `exact`, which cascade-bench
# turns on) for all of them.
cargo build --release -p cascade-cli -p cascade-bench \
  --bin cascade --bin bench_report --bin compact_file --bin round_trip

if ! bench/.venv/bin/python -c "import litellm, langchain_core" 2>/dev/null; then
  log "creating bench/.venv and installing LiteLLM and LangChain (once)"
  python3 -m venv bench/.venv
  bench/.venv/bin/pip install -q --upgrade pip
  bench/.venv/bin/pip install -q -r bench/requirements.txt
fi

log "(1) preparation cost, (3) estimator accuracy, (4) cost curves"
"$BIN"/bench_report --out "$OUT" "${QUICK_FLAG[@]}" > /dev/null

# The longest phase (4 min of CPU: summaries prepared ahead replay ~80 prepares per call);
# SKIP_COST=1 keeps the section of the current docs/benchmarks.md instead.
if [ "${SKIP_COST:-0}" != 1 ]; then
  log "(12) cost per session"
  "$BIN"/bench_report --out "$OUT" --cost > /dev/null
fi

log "(2) LiteLLM and LangChain trim_messages vs the cascade"
bench/.venv/bin/python bench/py_trim.py --inputs "$OUT/inputs" --out "$OUT" \
  --cascade "$BIN"/cascade --compact-file "$BIN"/compact_file --round-trip "$BIN"/round_trip \
  "${QUICK_FLAG[@]}" > /dev/null

log "(2b) cascade compact on a gpt-4o body (exact counts) against the same body under a Claude id"
python3 bench/model_ratio.py --cascade "$BIN"/cascade --inputs "$OUT/inputs" --out "$OUT" \
  --round-trip "$BIN"/round_trip --runs "$([ "${QUICK:-0}" = 1 ] && echo 3 || echo 15)" > /dev/null

log "(5) peak RSS on the ~1M-token request"
{
  if [ -x "$BIN"/cascade ] && "$BIN"/cascade compact --help > /dev/null 2>&1; then
    python3 bench/rss.py "cascade compact --window 128000" -- \
      "$BIN"/cascade compact "$OUT/inputs/scaled-1m.json" --window 128000 -o "$OUT/compacted-1m.tmp"
  fi
  python3 bench/rss.py "compact_file (cascade-bench), Layers 1-2 in process" -- \
    "$BIN"/compact_file "$OUT/inputs/scaled-1m.json" --window 128000 --runs 1 --sync -o "$OUT/compacted-1m.tmp"
} > "$OUT/rss.jsonl"
rm -f "$OUT/compacted-1m.tmp"

ELAPSED=$(($(date +%s) - START))
log "writing docs/benchmarks.md (${ELAPSED}s so far)"
# Sections 6 and later come from their own commands: carried over from the current file.
python3 bench/make_report.py --out "$OUT" --seconds "$ELAPSED" --keep docs/benchmarks.md > "$OUT/benchmarks.md"
mv "$OUT/benchmarks.md" docs/benchmarks.md
log "done in $(($(date +%s) - START))s: docs/benchmarks.md, $OUT/"
