"""(2) Against the tools a Python user would pick: LiteLLM's and LangChain's `trim_messages`,
timed side by side in one run with the Rust cascade on the same requests and budgets, and
what each output keeps.

Run by bench/run.sh inside bench/.venv:
    python bench/py_trim.py --inputs bench/out/inputs --out bench/out \
        --cascade target/release/cascade --compact-file target/release/compact_file

Timings: Python functions are timed in process on an already-loaded message list (JSON
reading excluded; LangChain's conversion to message objects excluded too, since a LangChain
user holds message objects already). The Rust side is timed twice: in process by the
`compact_file` binary of crates/bench (parse -> compaction -> serialize, from bytes in memory), and as the
whole `cascade compact` process (spawn, file read and write included) - the honest end-to-end
figure; the bare process-spawn cost is measured separately (`cascade --version`). With
`--round-trip`, a bare serde_json round trip of the same file as a process of its own (spawn,
read, parse, serialize, write; trimming nothing) is timed beside it: the least any whole
process must spend, so LangChain's time ÷ that is the most a whole process can be faster.
"""

import argparse
import copy
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

# LiteLLM fetches its model cost map from the network at import unless told not to; its
# bundled tokenizer files also serve tiktoken offline (it sets TIKTOKEN_CACHE_DIR).
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

import litellm  # noqa: E402
from litellm.utils import trim_messages as litellm_trim  # noqa: E402
from langchain_core.messages import convert_to_messages, convert_to_openai_messages  # noqa: E402
from langchain_core.messages import trim_messages as langchain_trim  # noqa: E402
from langchain_core.messages.utils import count_tokens_approximately  # noqa: E402

litellm.suppress_debug_info = True
# o200k_base from LiteLLM's own tokenizer files (tiktoken alone would download it).
from litellm.rust_bridge.tokenizer import get_encoding  # noqa: E402

ENC = get_encoding("o200k_base")

# The inputs: the ~1.3 MB, ~640-message request of issue 5's reference measurement, and
# fixtures from each agent family, large to small. LiteLLM needs tens of seconds per trim
# of a large request, so the list is kept short enough for run.sh's 15-minute budget.
CASES = [
    "concat-1.3mb",
    "claude-code__spotter__4d5611e5-main",
    "claude-code__spotter__6c2214d7-subagent-afc096d",
    "openhands__llama-4-maverick__ponyc-4588",
    "swe-agent-demo__marshmallow-1867",
]
BUDGETS = [128_000, 32_000]
LC_APPROX = "langchain, approximate counter (trim only)"
LC_O200K = "langchain, o200k counter (trim only)"
LC_BYTES = "langchain, approximate counter (bytes → bytes)"


def text_of(content):
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for part in content:
            if isinstance(part, dict) and isinstance(part.get("text"), str):
                parts.append(part["text"])
            else:
                parts.append(json.dumps(part))
        return "\n".join(parts)
    return json.dumps(content)


def o200k_tokens(messages):
    """Exact o200k_base tokens of what a request carries (content, tool-call names and
    arguments), plus 4 per message: the yardstick the Rust report uses."""
    total = 0
    for m in messages:
        total += 4 + len(ENC.encode(text_of(m.get("content")), disallowed_special=()))
        for call in m.get("tool_calls") or []:
            fn = call.get("function") or {}
            total += len(ENC.encode(fn.get("name") or "", disallowed_special=()))
            total += len(ENC.encode(fn.get("arguments") or "", disallowed_special=()))
    return total


def langchain_o200k_counter(messages):
    """A LangChain token counter over o200k_base (what a user wanting exact budgets writes)."""
    return o200k_tokens(convert_to_openai_messages(messages))


def pairing(messages):
    """(orphan results, unanswered calls): a result must answer a call of the assistant message
    just before it, every call needs a result before the next non-tool message (OpenAI's rule;
    a trailing call counts too)."""
    pending = set()
    orphans = unanswered = 0
    for m in messages:
        role = m.get("role")
        if role == "tool":
            cid = m.get("tool_call_id")
            if cid in pending:
                pending.discard(cid)
            else:
                orphans += 1
            continue
        unanswered += len(pending)
        pending = set()
        # Ids are only required to be unique within one assistant turn (SWE-agent reuses them).
        pending = {call.get("id") for call in m.get("tool_calls") or []}
    unanswered += len(pending)
    return orphans, unanswered


def first_user(messages):
    for m in messages:
        if m.get("role") == "user":
            return text_of(m.get("content"))
    return None


def describe(output, original, budget):
    orphans, unanswered = pairing(output)
    first = first_user(original)
    tokens = o200k_tokens(output)
    return {
        "messages": len(output),
        "tokens": tokens,
        "fits": tokens <= budget,
        "orphan_results": orphans,
        "unanswered_calls": unanswered,
        "pairs_valid": orphans == 0 and unanswered == 0,
        "unchanged": output == original,
        "first_user_kept": first is not None
        and any(m.get("role") == "user" and text_of(m.get("content")) == first for m in output),
        "system_kept": all(
            any(o.get("role") == "system" and o.get("content") == m.get("content") for o in output)
            for m in original
            if m.get("role") == "system"
        ),
    }


def spread(samples):
    s = sorted(samples)
    return {"min": s[0], "median": statistics.median(s), "max": s[-1], "n": len(s)}


def repeat(fn, max_runs=5, budget_s=6.0):
    """Runs fn at least once, then again while under max_runs and budget_s seconds in all."""
    times, out, spent = [], None, 0.0
    while True:
        start = time.perf_counter()
        out = fn()
        elapsed = time.perf_counter() - start
        times.append(elapsed * 1e3)
        spent += elapsed
        if len(times) >= max_runs or spent + elapsed > budget_s:
            return out, spread(times)


def run_process(argv, runs=5):
    times, proc = [], None
    for _ in range(runs):
        start = time.perf_counter()
        proc = subprocess.run(argv, capture_output=True)
        times.append((time.perf_counter() - start) * 1e3)
    return proc, spread(times)


def run_interleaved(argvs, runs=5):
    """Each command once per round, `runs` rounds: [(last process, spread of times)] per argv."""
    times = [[] for _ in argvs]
    procs = [None for _ in argvs]
    for _ in range(runs):
        for i, argv in enumerate(argvs):
            start = time.perf_counter()
            procs[i] = subprocess.run(argv, capture_output=True)
            times[i].append((time.perf_counter() - start) * 1e3)
    return [(proc, spread(t)) for proc, t in zip(procs, times)]


def case(path, budget, args, spawn_ms):
    with open(path, "rb") as f:
        body = json.load(f)
    messages = body["messages"]
    result = {
        "file": os.path.basename(path),
        "bytes": os.path.getsize(path),
        "budget": budget,
        "input": describe(messages, messages, budget),
        "tools": {},
    }
    tools = result["tools"]

    def litellm_run():
        return litellm_trim(copy.deepcopy(messages), model="gpt-4o", max_tokens=budget)

    # A large trim takes LiteLLM 15-50 s: a second run only when it fits the time budget.
    out, t = repeat(litellm_run, max_runs=3, budget_s=30.0)
    tools["litellm"] = {"ms": t, **describe(out, messages, budget)}

    lc_messages = convert_to_messages(messages)
    lc_kwargs = dict(max_tokens=budget, strategy="last", start_on="human", include_system=True,
                     allow_partial=False)
    for name, counter in [(LC_APPROX, count_tokens_approximately), (LC_O200K, langchain_o200k_counter)]:
        def lc_run(counter=counter):
            return langchain_trim(lc_messages, token_counter=counter, **lc_kwargs)
        try:
            out, t = repeat(lc_run, max_runs=5, budget_s=5.0)
            tools[name] = {"ms": t, **describe(convert_to_openai_messages(out), messages, budget)}
        except Exception as e:  # report, never hide, a tool's failure
            tools[name] = {"error": f"{type(e).__name__}: {e}"}

    # The same work the cascade's in-process figure includes: bytes in, bytes out.
    with open(path, "rb") as f:
        raw = f.read()

    def lc_bytes():
        msgs = convert_to_messages(json.loads(raw)["messages"])
        kept = langchain_trim(msgs, token_counter=count_tokens_approximately, **lc_kwargs)
        return json.dumps({"model": body.get("model"), "messages": convert_to_openai_messages(kept)})

    out, t = repeat(lc_bytes, max_runs=5, budget_s=5.0)
    tools[LC_BYTES] = {"ms": t, **describe(json.loads(out)["messages"], messages, budget)}

    with tempfile.TemporaryDirectory() as tmp:
        target = os.path.join(tmp, "out.json")
        proc, t = run_process([args.compact_file, path, "--window", str(budget), "--runs", "10",
                               "--bare", "-o", target], runs=1)
        if proc.returncode == 0:
            inproc = json.loads(proc.stdout)
            with open(target) as f:
                out = json.load(f)["messages"]
            tools["cascade (in process)"] = {"ms": {**inproc["ms"], "n": inproc["runs"]},
                                             **describe(out, messages, budget)}
            if inproc.get("bare_ms"):
                # Not a trimmer: what reading and writing these bytes costs at least.
                result["bare_ms"] = {**inproc["bare_ms"], "n": inproc["runs"]}
        else:
            tools["cascade (in process)"] = {"error": proc.stderr.decode(errors="replace").strip()}
        if args.cascade and os.path.exists(args.cascade):
            argv = [args.cascade, "compact", path, "--window", str(budget), "-o", target]
            label = "cascade compact (whole process)"
        else:
            argv = [args.compact_file, path, "--window", str(budget), "--runs", "1", "-o", target]
            label = "compact_file (whole process; cascade CLI missing)"
        if args.round_trip:
            # Run by run beside it (11 rounds of ~10-50 ms): the host's speed moves by 2x
            # from minute to minute.
            (proc, t), (bare, bare_t) = run_interleaved(
                [argv, [args.round_trip, path, target + ".bare"]], runs=11)
            if bare.returncode == 0:
                result["bare_process_ms"] = bare_t
        else:
            proc, t = run_process(argv, runs=11)
        if proc.returncode in (0, 1) and os.path.exists(target):
            with open(target) as f:
                out = json.load(f)["messages"]
            tools[label] = {"ms": t, "exit": proc.returncode, **describe(out, messages, budget)}
        else:
            tools[label] = {"error": proc.stderr.decode(errors="replace").strip()[:300]}
    return result


def ratio_cell(x):
    return "-" if not x else (f"{x:.0f}×" if x >= 10 else f"{x:.2f}×")


def fmt_ms(t):
    return f"{t['min']:.1f} / {t['median']:.1f} / {t['max']:.1f} (n={t['n']})"


def markdown(report):
    out = ["## 2. Against LiteLLM and LangChain `trim_messages`\n"]
    v = report["versions"]
    out.append(
        f"LiteLLM {v['litellm']}, langchain-core {v['langchain_core']}, Python {v['python']}. "
        "Same request, same budget (the window; LiteLLM `max_tokens=`, LangChain `max_tokens=` "
        "with `strategy=\"last\", start_on=\"human\", include_system=True`; cascade `--window`, "
        "reserve 0). Times in ms, min / median / max (n runs; slow tools run fewer times). "
        "Python tools are timed in process on an already-loaded list (LangChain's conversion to "
        "message objects excluded); *cascade (in process)* is parse → `compact_with_summary` "
        "(offline summarizer) → serialize from bytes in memory; the whole-process row includes "
        f"spawning, reading and writing files (a bare spawn of the binary costs "
        f"{report['spawn_ms']['median']:.1f} ms). Tokens: exact o200k of the output. "
        "*pairs*: every tool result follows its call and every call has its result.\n")
    for c in report["cases"]:
        out.append(f"\n### `{c['file']}` ({c['bytes'] / 1e6:.2f} MB, {c['input']['messages']} messages, "
                   f"{c['input']['tokens']} tokens) → {c['budget'] // 1000}K\n")
        out.append("| tool | time (ms) | × cascade in process | messages kept | tokens | fits | pairs valid | first user kept |")
        out.append("|---|---|---|---|---|---|---|---|")
        base = c["tools"].get("cascade (in process)", {}).get("ms", {}).get("median")
        if c.get("bare_ms"):
            b = c["bare_ms"]
            out.append(f"| *serde_json parse + serialize alone, no trimming (a floor)* | {fmt_ms(b)} | "
                       f"{ratio_cell(b['median'] / base) if base else '-'} | | | | | |")
        if c.get("bare_process_ms"):
            b = c["bare_process_ms"]
            out.append(f"| *the same as a whole process (spawn, read, write; a floor)* | {fmt_ms(b)} | "
                       f"{ratio_cell(b['median'] / base) if base else '-'} | | | | | |")
        for name, r in c["tools"].items():
            if "error" in r:
                out.append(f"| {name} | error: {r['error'][:120]} | | | | | | |")
                continue
            ratio = ratio_cell(r['ms']['median'] / base) if base else "-"
            pairs = "yes" if r["pairs_valid"] else f"no ({r['orphan_results']} orphan results, {r['unanswered_calls']} unanswered calls)"
            out.append(f"| {name} | {fmt_ms(r['ms'])} | {ratio} | {r['messages']} | {r['tokens']} | "
                       f"{'yes' if r['fits'] else 'NO'} | {pairs} | {'yes' if r['first_user_kept'] else 'no'} |")
    s = report["summary"]
    out.append("\n### Speed ratios (median time of the Python tool ÷ median time of the cascade)\n")
    out.append("| case | LiteLLM ÷ cascade in process | LiteLLM ÷ whole `cascade` process | LangChain approx., trim only ÷ cascade | LangChain approx., bytes → bytes ÷ cascade | LangChain o200k ÷ cascade | LangChain o200k ÷ whole `cascade` process | LangChain o200k ÷ bare round-trip process (the most a process reaches) |")
    out.append("|---|---|---|---|---|---|---|---|")

    cell = ratio_cell
    keys = SUMMARY_KEYS
    for row in s["rows"]:
        mark = "" if row["trims"] else " (already fits)"
        out.append(f"| {row['case']}{mark} | " + " | ".join(cell(row[k]) for k in keys) + " |")
    out.append("| **geometric mean, requests that need trimming** | "
               + " | ".join(f"**{cell(s['geo_trimming'][k])}**" for k in keys) + " |")
    out.append("| worst case, requests that need trimming | "
               + " | ".join(cell(s["min_trimming"][k]) for k in keys) + " |")
    out.append("| geometric mean, requests that already fit | "
               + " | ".join(cell(s["geo_fitting"][k]) for k in keys) + " |")
    out.append("| geometric mean, all | " + " | ".join(cell(s["geo"][k]) for k in keys) + " |")
    return "\n".join(out)


# The ratios summarized per case: each tool's median ÷ the cascade's (in process, or the whole
# `cascade compact` process, or a bare serde_json round trip process: the ceiling of the last).
SUMMARY_KEYS = ["litellm_inproc", "litellm_process", "lc_trim_inproc", "lc_bytes_inproc",
                "lc_o200k_inproc", "lc_o200k_process", "lc_o200k_bare_process"]


def geo(xs):
    xs = [x for x in xs if x and x > 0]
    if not xs:
        return 0.0
    prod = 1.0
    for x in xs:
        prod *= x
    return prod ** (1 / len(xs))


def summarize(cases):
    rows = []
    for c in cases:
        t = c["tools"]

        def median(name):
            return t.get(name, {}).get("ms", {}).get("median")

        inproc = median("cascade (in process)")
        proc = next((r["ms"]["median"] for k, r in t.items() if "whole process" in k and "ms" in r), None)
        if not inproc or not proc:
            continue
        row = {"case": f"{c['file']} → {c['budget'] // 1000}K",
               "trims": c["input"]["tokens"] > c["budget"]}
        bare = c.get("bare_process_ms", {}).get("median")
        for key, name, base in [("litellm_inproc", "litellm", inproc), ("litellm_process", "litellm", proc),
                                ("lc_trim_inproc", LC_APPROX, inproc), ("lc_bytes_inproc", LC_BYTES, inproc),
                                ("lc_o200k_inproc", LC_O200K, inproc), ("lc_o200k_process", LC_O200K, proc),
                                ("lc_o200k_bare_process", LC_O200K, bare)]:
            m = median(name)
            row[key] = m / base if m and base else None
        rows.append(row)
    keys = SUMMARY_KEYS
    trims = [r for r in rows if r["trims"]]
    fits = [r for r in rows if not r["trims"]]
    return {"rows": rows,
            "geo": {k: geo([r[k] for r in rows]) for k in keys},
            "min": {k: min((r[k] for r in rows if r[k]), default=0.0) for k in keys},
            "geo_trimming": {k: geo([r[k] for r in trims]) for k in keys},
            "min_trimming": {k: min((r[k] for r in trims if r[k]), default=0.0) for k in keys},
            "geo_fitting": {k: geo([r[k] for r in fits]) for k in keys}}


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--inputs", default="bench/out/inputs")
    p.add_argument("--out", default="bench/out")
    p.add_argument("--cascade", default="target/release/cascade")
    p.add_argument("--compact-file", default="target/release/compact_file")
    p.add_argument("--round-trip", help="the round_trip binary (cascade-bench): a bare round trip process per case")
    p.add_argument("--quick", action="store_true", help="only the 1.3 MB request")
    args = p.parse_args()
    started = time.perf_counter()
    spawn_bin = args.cascade if os.path.exists(args.cascade) else args.compact_file
    _, spawn = run_process([spawn_bin, "--version"] if spawn_bin == args.cascade else [spawn_bin], runs=5)
    from importlib.metadata import version
    report = {
        "versions": {"litellm": version("litellm"), "langchain_core": version("langchain-core"),
                     "python": sys.version.split()[0]},
        "spawn_ms": spawn,
        "cases": [],
    }
    for name in CASES[:1] if args.quick else CASES:
        path = os.path.join(args.inputs, f"{name}.json")
        for budget in BUDGETS:
            t0 = time.perf_counter()
            report["cases"].append(case(path, budget, args, spawn))
            print(f"  {name} @ {budget // 1000}K: {time.perf_counter() - t0:.1f}s", file=sys.stderr, flush=True)
    report["summary"] = summarize(report["cases"])
    report["seconds"] = time.perf_counter() - started
    with open(os.path.join(args.out, "python.json"), "w") as f:
        json.dump(report, f, indent=1)
    md = markdown(report)
    with open(os.path.join(args.out, "python.md"), "w") as f:
        f.write(md + "\n")
    print(md)


if __name__ == "__main__":
    main()
