"""Python summarizers (sync, async, failing) and the ContextManager's calibration."""

from __future__ import annotations

import asyncio
import json

import context_cascade as cc
from conftest import FIXTURES

BIG = FIXTURES / "transcripts" / "openhands__llama-4-maverick__ponyc-4593.json"
# At 4,000 tokens the cascade reaches strategy 4 (summarize) on this session.
WINDOW = 4_000


def summary_of(request) -> str:
    if request["kind"] == "merge":
        return "PYTHON-SUMMARY merged " + str(len(request["partials"]))
    roles = {m["role"] for m in request["messages"]}
    return f"PYTHON-SUMMARY of {len(request['messages'])} messages ({', '.join(sorted(roles))})"


def summarized(result) -> bool:
    body = result.body if isinstance(result.body, bytes) else json.dumps(result.body).encode()
    return b"PYTHON-SUMMARY" in body


def test_a_sync_summarizer_writes_the_summary():
    calls = []

    def summarizer(request):
        calls.append(request)
        assert request["max_tokens"] > 0
        return summary_of(request)

    result = cc.compact(json.loads(BIG.read_bytes()), window=WINDOW, summarizer=summarizer)
    assert calls, "the cascade never asked for a summary"
    assert summarized(result) and result.fits and not result.report.degraded


def test_an_async_summarizer_is_awaited():
    async def summarizer(request):
        await asyncio.sleep(0)
        return summary_of(request)

    result = cc.compact(BIG.read_bytes(), window=WINDOW, summarizer=summarizer)
    assert summarized(result) and result.fits


def test_an_async_summarizer_from_inside_a_running_loop():
    async def summarizer(request):
        return summary_of(request)

    async def main():
        return cc.compact(BIG.read_bytes(), window=WINDOW, summarizer=summarizer)

    assert summarized(asyncio.run(main()))


def test_a_failing_summarizer_degrades_instead_of_raising():
    def summarizer(request):
        raise RuntimeError("model down")

    result = cc.compact(BIG.read_bytes(), window=WINDOW, summarizer=summarizer)
    assert not summarized(result)
    assert result.report.degraded


def test_the_manager_keeps_its_calibration_across_calls():
    body = json.loads(BIG.read_bytes())
    manager = cc.ContextManager(window=WINDOW)
    before = manager.compact(body).report
    assert manager.calibration().get("models", {}) == {}
    # The provider counted 40% more than the engine's prior: the scale moves up.
    manager.observe(body, int(before.tokens_before * 1.4))
    learnt = manager.calibration()["models"]
    assert learnt, "observe learnt nothing"
    again = manager.compact(body).report
    assert again.token_scale > before.token_scale
    assert manager.calibration()["models"] == learnt


def test_the_manager_shares_unchanged_messages_of_a_dict_body():
    data = BIG.read_bytes()
    body = json.loads(data)
    manager = cc.ContextManager(window=WINDOW)
    result = manager.compact(body)
    assert result.body == json.loads(cc.compact(data, window=WINDOW).body)
    given = {id(m) for m in body["messages"]}
    shared = [m for m in result.body["messages"] if id(m) in given]
    assert shared and len(shared) < len(result.body["messages"])


def test_a_summarizer_sees_tool_calls_and_their_outputs():
    requests = []

    def record(request):
        requests.append(request)
        return summary_of(request)

    cc.compact(BIG.read_bytes(), window=WINDOW, summarizer=record)
    messages = [m for r in requests if r["kind"] == "summarize" for m in r["messages"]]
    assert messages, "the cascade must reach strategy 4 for this test to mean anything"
    calls = [c for m in messages for c in m.get("tool_calls", [])]
    outputs = [t for m in messages for t in m.get("tool_results", [])]
    assert calls and all(c["id"] and c["name"] and isinstance(c["arguments"], str) for c in calls)
    assert outputs and all(t["tool_call_id"] for t in outputs)
    assert any(t["content"] for t in outputs)
    # Each output answers a call the summarizer was shown or that came before its slice.
    assert {t["tool_call_id"] for t in outputs} & {c["id"] for c in calls}
