"""Issue 27: what exact counts cost a whole `cascade compact` process. Times the same request
body under its gpt-4o id (exact o200k counts) and under a Claude id (the prior), interleaved
run by run, and writes OUT/model_ratio.json. Standard library only.

    python3 bench/model_ratio.py --cascade target/release/cascade --inputs bench/out/inputs --out bench/out [--runs N] [--round-trip target/release/round_trip]

With `--round-trip` it also times, run by run beside it, `cascade compact` of the ~4 MB
gpt-4o body (`scaled-1m`) at half its tokens against a bare serde_json round trip of the
same file as a process of its own (read, parse, serialize, write): the issue's "4 MB body
within 2× the bare serde round trip", whole process.

With `--before OTHER_CASCADE` (another build, e.g. main's) both binaries are timed in the same
loop, run by run, and each case prints both ratios and the gpt-4o time before ÷ after.
"""
import argparse
import json
import os
import statistics
import subprocess
import tempfile
import time

CASES = [("concat-1.3mb", 128_000), ("concat-1.3mb", 32_000),
         ("claude-code__spotter__4d5611e5-main", 128_000), ("scaled-1m", 128_000)]


def timed(argv):
    """Milliseconds of one run of `argv` (exit 1, "does not fit", is a result too)."""
    start = time.perf_counter()
    proc = subprocess.run(argv, capture_output=True)
    elapsed = (time.perf_counter() - start) * 1e3
    if proc.returncode not in (0, 1):
        raise SystemExit(f"{' '.join(argv[:3])}: exit {proc.returncode}: {proc.stderr.decode()[:300]}")
    return elapsed


def run(cascade, path, window):
    return timed([cascade, "compact", path, "--window", str(window), "-o", os.devnull])


# The ~4 MB body at half its ~1M tokens: the window of section 1's 1M row.
WHOLE_PROCESS_CASE = ("scaled-1m", 500_000)


def whole_process(cascade, round_trip, inputs, runs):
    """`cascade compact` of the 4 MB body ÷ a bare round trip process, per run."""
    name, window = WHOLE_PROCESS_CASE
    path = os.path.join(inputs, f"{name}.json")
    if not os.path.exists(path):
        return None
    with tempfile.TemporaryDirectory() as tmp:
        bare_out, cascade_out = os.path.join(tmp, "bare.json"), os.path.join(tmp, "cascade.json")
        bare_argv = [round_trip, path, bare_out]
        cascade_argv = [cascade, "compact", path, "--window", str(window), "-o", cascade_out]
        timed(bare_argv), timed(cascade_argv)  # warm the page cache
        bare, whole = [], []
        for _ in range(runs):
            bare.append(timed(bare_argv))
            whole.append(timed(cascade_argv))
    ratios = [w / b for w, b in zip(whole, bare)]
    result = {"input": name, "window": window, "runs": runs,
              "bare_ms": statistics.median(bare), "cascade_ms": statistics.median(whole),
              "ratio": statistics.median(ratios), "ratio_min": min(ratios), "ratio_max": max(ratios),
              "ratio_of_min": min(whole) / min(bare)}
    print(f"{name} {window} whole process: cascade {result['cascade_ms']:.1f} ms, bare round trip "
          f"{result['bare_ms']:.1f} ms, {result['ratio']:.2f}x (fastest {result['ratio_of_min']:.2f}x)")
    return result


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--cascade", required=True)
    p.add_argument("--inputs", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--runs", type=int, default=15)
    p.add_argument("--before", help="another cascade binary, timed in the same loop")
    p.add_argument("--round-trip", help="the round_trip binary (cascade-bench): whole-process 4 MB case")
    args = p.parse_args()
    cases = []
    with tempfile.TemporaryDirectory() as tmp:
        for name, window in CASES:
            gpt = os.path.join(args.inputs, f"{name}.json")
            if not os.path.exists(gpt):
                continue
            body = json.load(open(gpt))
            assert body.get("model") == "gpt-4o", f"{gpt}: model {body.get('model')}"
            body["model"] = "claude-sonnet-4-5"
            claude = os.path.join(tmp, f"{name}.claude.json")
            with open(claude, "w") as f:
                json.dump(body, f)
            binaries = [args.cascade] + ([args.before] if args.before else [])
            for cascade in binaries:  # warm the page cache
                run(cascade, gpt, window), run(cascade, claude, window)
            times = [([], []) for _ in binaries]
            for _ in range(args.runs):
                for cascade, (g, c) in zip(binaries, times):
                    g.append(run(cascade, gpt, window))
                    c.append(run(cascade, claude, window))
            (g, c) = times[0]
            gm, cm = statistics.median(g), statistics.median(c)
            case = {"input": name, "window": window, "runs": args.runs,
                    "gpt_ms": gm, "claude_ms": cm, "ratio": gm / cm,
                    "gpt_min": min(g), "claude_min": min(c)}
            line = f"{name} {window}: gpt-4o {gm:.1f} ms, claude {cm:.1f} ms, {gm / cm:.2f}x"
            if args.before:
                (bg, bc) = times[1]
                bgm, bcm = statistics.median(bg), statistics.median(bc)
                case["before"] = {"gpt_ms": bgm, "claude_ms": bcm, "ratio": bgm / bcm,
                                  "gpt_min": min(bg), "claude_min": min(bc)}
                line += (f" (fastest {min(g) / min(c):.2f}x); before: gpt-4o {bgm:.1f} ms, "
                         f"claude {bcm:.1f} ms, {bgm / bcm:.2f}x (fastest {min(bg) / min(bc):.2f}x); "
                         f"gpt-4o before / after {bgm / gm:.2f}x")
            cases.append(case)
            print(line)
    result = {"cases": cases}
    if args.round_trip:
        result["whole_process"] = whole_process(args.cascade, args.round_trip, args.inputs,
                                                max(args.runs, 5) * 2)
    with open(os.path.join(args.out, "model_ratio.json"), "w") as f:
        json.dump(result, f, indent=1)


if __name__ == "__main__":
    main()
