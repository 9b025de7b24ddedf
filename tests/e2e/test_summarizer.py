"""⑤ The LLM summarizer for real: SmolLM2 on the same llama-server writes the summaries.
Its output is validated (SPEC.md); when it is unusable the cascade degrades (⑤) instead of
writing it into the history. Either way the client gets an answer, never a 5xx.
⑥ `cascade compact --summarizer URL` on a fixture against the same server.
"""

import json
import time

from helpers import MODEL, metric, metrics, openai_body, parse_report_header, post_json
from helpers import run_cascade, session_messages

# 19 messages, ~25,000 characters: the history before the recent messages has to be
# summarized (or degraded) to fit 2048 tokens.
HISTORY = 19


def outcome(steps):
    if "summarize" in steps:
        return "summarized"
    if "degrade" in steps:
        return "degraded"
    return "neither"


def test_proxy_with_llm_summarizer(llama_2048, start_proxy, figures):
    proxy = start_proxy(
        llama_2048.url,
        "--window", 2048,
        "--summarizer", llama_2048.url,
        "--summarizer-model", MODEL,
    )
    body = openai_body(session_messages()[:HISTORY])
    offset = llama_2048.log_size()
    started = time.monotonic()
    status, headers, answer = post_json(f"{proxy.url}/v1/chat/completions", body)
    latency = time.monotonic() - started
    # Every task but the last is a summarizer call (the last one is the answer).
    summarizer_calls = llama_2048.timings_since(offset)[:-1]
    assert status < 500, answer
    assert status == 200, answer
    assert answer["choices"][0]["message"]["content"].strip()
    steps = parse_report_header(headers.get("x-context-cascade"))
    result = outcome(steps)
    assert result != "neither", f"neither summarize nor degrade fired: {steps}"
    samples = metrics(proxy.url)
    # The LLM was asked (a cache miss is a summary computed by the summarizer).
    assert metric(samples, "cascade_summary_cache_misses_total") >= 1, proxy.log_text()
    figures["summarizer_proxy"] = {
        "outcome": result,
        "strategies": steps,
        "summaries_computed": int(metric(samples, "cascade_summary_cache_misses_total")),
        "request_seconds_including_summary": round(latency, 1),
        "summarizer_calls": summarizer_calls,
        "prompt_tokens_sent": answer["usage"]["prompt_tokens"],
        "log_warnings": [
            line.strip()[:300] for line in proxy.log_text().splitlines() if "WARN" in line
        ],
    }


def test_cli_compact_with_llm_summarizer(llama_2048, tmp_path, figures):
    body_path = tmp_path / "body.json"
    body_path.write_text(json.dumps(openai_body(session_messages()[:HISTORY])))
    report_path = tmp_path / "report.json"
    offset = llama_2048.log_size()
    out_path = tmp_path / "compacted.json"
    started = time.monotonic()
    done = run_cascade(
        "compact", body_path,
        "--window", 2048,
        "--summarizer", llama_2048.url,
        "--summarizer-model", MODEL,
        "--report", report_path,
        "-o", out_path,
    )
    latency = time.monotonic() - started
    assert done.returncode == 0, done.stderr
    report = json.loads(report_path.read_text())
    strategies = [step["strategy"] for step in report["steps"]]
    assert "summarize" in strategies or "degrade" in strategies, report
    compacted = json.loads(out_path.read_text())
    assert compacted["messages"], compacted
    assert report["fits"], report
    figures["summarizer_cli_compact"] = {
        "outcome": "summarized" if "summarize" in strategies else "degraded",
        "strategies": strategies,
        "tokens_before": report["tokens_before"],
        "tokens_after": report["tokens_after"],
        "seconds": round(latency, 1),
        "summarizer_calls": llama_2048.timings_since(offset),
        "stderr_tail": done.stderr.strip().splitlines()[-3:],
    }
