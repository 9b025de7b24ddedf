#!/usr/bin/env bash
# Fuzzes the three parsers (Chat, Messages, Responses), the overflow classifier, the whole
# preparation, and the proxy's request admission (its router over a scripted upstream on
# 127.0.0.1) with cargo-fuzz (libFuzzer; needs the nightly toolchain, which this machine has).
#
#   bash scripts/fuzz.sh [SECONDS] [TARGET...]
#
# SECONDS (default 120) is split evenly between the targets (default: all six of
# fuzz/Cargo.toml), each in one process on one core. Installs cargo-fuzz when missing.
# Seeds come from fuzz/seeds/<target> (small bodies cut from the fixtures, the overflow error bodies;
# `python3 scripts/fuzz-seeds.py` writes the ones made from fixtures); the corpus goes to
# fuzz/corpus/<target> and any crash to fuzz/artifacts/<target> (both ignored by git).
# Prints one line per target: executions, corpus size, and whether it found anything. A
# finding fails the run (exit 1): fix it, then copy the input into fuzz/regressions/<target>/,
# where crates/core/tests/fuzz_regressions.rs (crates/proxy/tests/fuzz_regressions.rs for
# `admission`) checks it with the same property on every test run.
set -euo pipefail
cd "$(dirname "$0")/.."

total="${1:-120}"
shift || true
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
    targets=(parse_openai parse_anthropic parse_responses classify prepare admission)
fi
if ! cargo +nightly fuzz --version >/dev/null 2>&1; then
    cargo +nightly install cargo-fuzz --locked
fi
per=$((total / ${#targets[@]}))
[ "$per" -ge 1 ] || per=1

cd fuzz
# Its own target directory: the fuzz build's flags (sanitizer coverage) differ from the
# workspace's, and sharing one would rebuild everything each time.
export CARGO_TARGET_DIR="${FUZZ_TARGET_DIR:-$PWD/target}"
cargo +nightly fuzz build --release
found=0
for t in "${targets[@]}"; do
    mkdir -p "corpus/$t" "artifacts/$t"
    log="artifacts/$t/last-run.log"
    started=$SECONDS
    touch "artifacts/$t/.started"
    set +e
    # No leak detection: the process-wide state (tokenizer tables, the admission target's
    # runtime) makes LeakSanitizer scan hundreds of MB after inputs (2 exec/s instead of 20);
    # a leak in safe Rust is not what these targets look for.
    cargo +nightly fuzz run --release "$t" "corpus/$t" "seeds/$t" -- \
        -max_total_time="$per" -max_len=65536 -timeout=20 -rss_limit_mb=4096 -detect_leaks=0 \
        -print_final_stats=1 >"$log" 2>&1
    status=$?
    set -e
    runs="$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' | tail -1)"
    corpus="$(find "corpus/$t" -type f | wc -l)"
    # Findings of this run only (an earlier run's artifacts may still lie there).
    crashes="$(find "artifacts/$t" -type f ! -name 'last-run.log' ! -name '.*' -newer "artifacts/$t/.started" | wc -l)"
    # The time it really ran: a finding stops the target before its share is up.
    echo "fuzz $t: ${runs:-?} executions in $((SECONDS - started))s of ${per}s, corpus $corpus, findings $crashes (exit $status)"
    if [ "$status" -ne 0 ] || [ "$crashes" -ne 0 ]; then
        found=1
        grep -m5 -E 'panicked|ERROR|SUMMARY' "$log" || true
    fi
done
exit "$found"
