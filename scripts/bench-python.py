#!/usr/bin/env python3
"""Python's `context_cascade.compact` against the CLI's in-process time, side by side.

Baseline: `_native._bench_compact`, the Rust code `cascade compact` runs (parse, duplicate-key
check, window resolution, cascade, writer, report to JSON), timed inside Rust with no
process start and no file I/O. Then `compact` from Python with the body as bytes, str and
dict (dict in, dict out: the dict walked in Rust, the answer rebuilt around the caller's
unchanged messages), and "dict via json" -- the dict path before issue 28's second round,
json.dumps/json.loads in C around the bytes path -- side by side. Runs are interleaved so
that load on the machine hits every variant alike. Prints medians and ratios of wall time
and of the process's CPU time (which load from other processes disturbs less).

    python scripts/bench-python.py [--runs 15] [--window 32000] [FIXTURE]

Needs the wheel installed in the running Python (scripts/ci-python.sh builds it).
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

import context_cascade as cc
from context_cascade import _native

LARGEST = Path(__file__).resolve().parent.parent / "fixtures/transcripts/claude-code__spotter__4d5611e5-main.json"


def via_json(body: dict, window: int) -> dict:
    """The dict path as it was: json.dumps (ASCII escapes, the faster), bytes in, json.loads."""
    data = json.dumps(body, separators=(",", ":")).encode("ascii")
    return json.loads(cc.compact(data, window=window).body)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("fixture", nargs="?", type=Path, default=LARGEST)
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--window", type=int, default=32_000)
    args = parser.parse_args()

    data = args.fixture.read_bytes()
    text = data.decode("utf-8")
    forms = {"bytes": data, "str": text, "dict": json.loads(data)}
    variants = {name: (lambda body=body: cc.compact(body, window=args.window)) for name, body in forms.items()}
    variants["dict via json"] = lambda body=forms["dict"]: via_json(body, args.window)
    variants["rust in-process"] = lambda: _native._bench_compact(data, 1, args.window)
    names = ["rust in-process", *forms, "dict via json"]
    wall: dict[str, list[float]] = {name: [] for name in names}
    cpu: dict[str, list[float]] = {name: [] for name in names}
    # One untimed round: first-touch costs (catalog tables, allocator) out of the figures.
    for run in variants.values():
        run()
    for _ in range(args.runs):
        for name in names:
            rust = name == "rust in-process"
            start, start_cpu = time.perf_counter(), time.process_time()
            inside = variants[name]()
            cpu[name].append(time.process_time() - start_cpu)
            # The baseline's wall time is Rust's own clock around the work alone.
            wall[name].append(inside[0] if rust else time.perf_counter() - start)

    print(f"{args.fixture.name}: {len(data) / 1e6:.2f} MB, window {args.window}, {args.runs} runs each")
    # CPU time (this process's) is what load on a shared machine disturbs least.
    print(f"{'variant':<18}{'median ms':>10}{'ratio':>8}{'cpu ms':>9}{'cpu ratio':>10}")
    base = statistics.median(wall["rust in-process"])
    base_cpu = statistics.median(cpu["rust in-process"])
    for name in names:
        median, median_cpu = statistics.median(wall[name]), statistics.median(cpu[name])
        print(
            f"{name:<18}{median * 1e3:>10.1f}{median / base:>7.2f}x"
            f"{median_cpu * 1e3:>9.1f}{median_cpu / base_cpu:>9.2f}x"
        )

if __name__ == "__main__":
    main()
