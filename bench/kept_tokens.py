"""Issue 27: what `cascade compact` keeps of each gpt-4o request under two binaries (before
and after a change), side by side: the exact tokens sent, the messages sent and the output
bytes, per input and window. Standard library only.

    python3 bench/kept_tokens.py --before /tmp/main-cascade/cascade --after target/release/cascade \
        --inputs bench/out/inputs [--windows 128000,32000]
"""
import argparse
import glob
import json
import os
import subprocess
import tempfile


def compact(cascade, path, window, tmp):
    out, report = os.path.join(tmp, "out.json"), os.path.join(tmp, "report.json")
    proc = subprocess.run([cascade, "compact", path, "--window", str(window), "-o", out,
                           "--report", report], capture_output=True)
    if proc.returncode not in (0, 1):
        raise SystemExit(f"{path}: exit {proc.returncode}: {proc.stderr.decode()[:300]}")
    with open(report) as f:
        r = json.load(f)
    return {"tokens": r["tokens_after"], "messages": r["messages_after"], "fits": r["fits"],
            "bytes": os.path.getsize(out), "planned": r.get("estimated_messages", 0) > 0}


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--before", required=True)
    p.add_argument("--after", required=True)
    p.add_argument("--inputs", required=True)
    p.add_argument("--windows", default="128000,32000")
    args = p.parse_args()
    windows = [int(w) for w in args.windows.split(",")]
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for path in sorted(glob.glob(os.path.join(args.inputs, "*.json"))):
            name = os.path.basename(path)[:-5]
            for window in windows:
                b = compact(args.before, path, window, tmp)
                a = compact(args.after, path, window, tmp)
                rows.append((name, window, b, a))
    print("| input | window | tokens sent before → after | Δ | messages | bytes | planned with the prior |")
    print("|---|---|---|---|---|---|---|")
    for name, window, b, a in rows:
        delta = a["tokens"] - b["tokens"]
        pct = 100.0 * delta / b["tokens"] if b["tokens"] else 0.0
        fits = "" if a["fits"] and b["fits"] else f" (fits {b['fits']} → {a['fits']})"
        print(f"| {name} | {window // 1000}K | {b['tokens']:,} → {a['tokens']:,}{fits} | "
              f"{delta:+,} ({pct:+.1f}%) | {b['messages']} → {a['messages']} | "
              f"{b['bytes']:,} → {a['bytes']:,} | {'yes' if a['planned'] else 'no'} |")


if __name__ == "__main__":
    main()
