"""Issue 27: what exact counts cost a whole `cascade compact` process. Times the same request
body under its gpt-4o id (exact o200k counts) and under a Claude id (the prior), interleaved
run by run, and writes OUT/model_ratio.json. Standard library only.

    python3 bench/model_ratio.py --cascade target/release/cascade --inputs bench/out/inputs --out bench/out [--runs N]
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


def run(cascade, path, window):
    start = time.perf_counter()
    proc = subprocess.run([cascade, "compact", path, "--window", str(window), "-o", os.devnull],
                          capture_output=True)
    elapsed = (time.perf_counter() - start) * 1e3
    if proc.returncode not in (0, 1):
        raise SystemExit(f"{path}: exit {proc.returncode}: {proc.stderr.decode()[:300]}")
    return elapsed


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--cascade", required=True)
    p.add_argument("--inputs", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--runs", type=int, default=15)
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
            run(args.cascade, gpt, window), run(args.cascade, claude, window)  # warm the page cache
            g, c = [], []
            for _ in range(args.runs):
                g.append(run(args.cascade, gpt, window))
                c.append(run(args.cascade, claude, window))
            gm, cm = statistics.median(g), statistics.median(c)
            cases.append({"input": name, "window": window, "runs": args.runs,
                          "gpt_ms": gm, "claude_ms": cm, "ratio": gm / cm,
                          "gpt_min": min(g), "claude_min": min(c)})
            print(f"{name} {window}: gpt-4o {gm:.1f} ms, claude {cm:.1f} ms, {gm / cm:.2f}x")
    with open(os.path.join(args.out, "model_ratio.json"), "w") as f:
        json.dump({"cases": cases}, f, indent=1)


if __name__ == "__main__":
    main()
