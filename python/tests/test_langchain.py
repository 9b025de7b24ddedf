"""The LangChain conversion, the LangGraph pre_model_hook and the langchain 1.x middleware."""

from __future__ import annotations

import asyncio
import json

from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.tools import tool

import context_cascade as cc
from context_cascade.langchain import (
    CascadeMiddleware,
    compact_messages,
    from_openai,
    pre_model_hook,
    to_openai,
)
from conftest import FIXTURES
from scripted_model import AsyncScriptedChatModel, ScriptedChatModel

WINDOW = 3_000


def fixture_results() -> list[str]:
    """The tool results of a real SWE-agent session: what the scripted agent's tool returns."""
    path = FIXTURES / "transcripts" / "swe-agent-demo__marshmallow-1867.json"
    messages = json.loads(path.read_text())["messages"]
    return [m["content"] for m in messages if m["role"] == "tool" and m["content"]]


def rich_history() -> list:
    return [
        SystemMessage(content="You are terse.", id="s1"),
        HumanMessage(
            content=[{"type": "text", "text": "look"}, {"type": "text", "text": "twice"}],
            id="h1",
            name="ann",
            additional_kwargs={"trace": 7},
        ),
        AIMessage(
            content="",
            id="a1",
            tool_calls=[{"name": "read", "args": {"path": "x.py", "n": 2}, "id": "call_1"}],
            additional_kwargs={"reasoning": "r"},
            response_metadata={"model": "m"},
        ),
        ToolMessage(content="file body", tool_call_id="call_1", id="t1", name="read"),
        AIMessage(content="done", id="a2"),
    ]


def test_round_trip_keeps_every_field():
    history = rich_history()
    compacted, result = compact_messages(history, window=100_000)
    assert not result.report.steps
    assert compacted == history
    assert [m.id for m in compacted] == ["s1", "h1", "a1", "t1", "a2"]
    assert compacted[1].additional_kwargs == {"trace": 7} and compacted[1].name == "ann"
    assert compacted[2].tool_calls[0]["args"] == {"path": "x.py", "n": 2}


def test_wire_format_both_ways():
    wire = to_openai(rich_history())
    assert wire[2]["tool_calls"][0]["function"] == {
        "name": "read",
        "arguments": json.dumps({"path": "x.py", "n": 2}),
    }
    assert wire[3] == {"role": "tool", "tool_call_id": "call_1", "content": "file body", "name": "read"}
    back = from_openai(wire)
    assert [type(m) for m in back] == [type(m) for m in rich_history()]
    assert back[2].tool_calls[0]["id"] == "call_1"
    assert back[2].tool_calls[0]["args"] == {"path": "x.py", "n": 2}
    assert back[1].content == rich_history()[1].content


def test_compacted_messages_keep_their_identity():
    results = fixture_results()
    history = [SystemMessage(content="sys", id="s"), HumanMessage(content="fix it", id="u")]
    for i, text in enumerate(results):
        call = f"call_{i}"
        history.append(AIMessage(content="", id=f"a{i}", tool_calls=[{"name": "sh", "args": {"i": i}, "id": call}]))
        history.append(ToolMessage(content=text, tool_call_id=call, id=f"t{i}"))
    compacted, result = compact_messages(history, window=WINDOW)
    assert result.report.steps and result.fits
    by_id = {m.id: m for m in history}
    for message in compacted:
        if message.id in by_id and message.id is not None:
            assert type(message) is type(by_id[message.id])
    assert_paired(compacted)


def assert_paired(messages) -> None:
    """Every tool result answers a call made before it; every call before the last turn is answered."""
    calls, answered = set(), set()
    for message in messages:
        if isinstance(message, AIMessage):
            calls.update(c["id"] for c in message.tool_calls)
        if isinstance(message, ToolMessage):
            assert message.tool_call_id in calls, f"orphan result {message.tool_call_id}"
            answered.add(message.tool_call_id)
    last = messages[-1]
    pending = {c["id"] for c in last.tool_calls} if isinstance(last, AIMessage) else set()
    assert calls - answered <= pending, f"unanswered calls {calls - answered - pending}"


def script_for(results: list[str]) -> list[AIMessage]:
    script = [
        AIMessage(content="", tool_calls=[{"name": "shell", "args": {"step": i}, "id": f"call_{i}"}])
        for i in range(len(results))
    ]
    return script + [AIMessage(content="All done.")]


def make_tool(results: list[str]):
    @tool
    def shell(step: int) -> str:
        """Runs one step of the session and returns its output."""
        return results[step]

    return shell


def check_loop(model: ScriptedChatModel, results: list[str]) -> None:
    assert len(model.seen) == len(results) + 1
    unbounded = sum(len(r) for r in results) // 4
    assert unbounded > WINDOW, "the loop must need compaction to mean anything"
    for sent in model.seen:
        tokens = cc.estimate({"messages": to_openai(sent)})
        assert tokens <= WINDOW, f"a model call got {tokens} tokens, over {WINDOW}"
        assert_paired(sent)


def test_langgraph_pre_model_hook_keeps_the_agent_inside_the_window():
    from langgraph.prebuilt import create_react_agent

    results = fixture_results()
    model = ScriptedChatModel(script=script_for(results), seen=[])
    reports = []
    agent = create_react_agent(
        model,
        [make_tool(results)],
        pre_model_hook=pre_model_hook(window=WINDOW, on_report=reports.append),
    )
    final = agent.invoke({"messages": [HumanMessage(content="Fix the bug.")]}, {"recursion_limit": 200})
    assert final["messages"][-1].content == "All done."
    check_loop(model, results)
    assert any(r.report.steps for r in reports)
    # The state kept the whole history: the hook only changed what the model saw.
    assert len(final["messages"]) == 2 * len(results) + 2


def test_langchain_middleware_keeps_the_agent_inside_the_window():
    from langchain.agents import create_agent

    results = fixture_results()
    model = ScriptedChatModel(script=script_for(results), seen=[])
    agent = create_agent(model, [make_tool(results)], middleware=[CascadeMiddleware(window=WINDOW)])
    final = agent.invoke({"messages": [HumanMessage(content="Fix the bug.")]}, {"recursion_limit": 200})
    assert final["messages"][-1].content == "All done."
    check_loop(model, results)
    # before_model rewrote the state: its tool results are shorter than what the tool said.
    kept = sum(len(m.content) for m in final["messages"] if isinstance(m, ToolMessage))
    assert kept < sum(len(r) for r in results)


class CountingMiddleware(CascadeMiddleware):
    """Counts the async hook's calls (the sync one is what it delegates to on a thread)."""

    async_calls = 0

    async def abefore_model(self, state, runtime=None):
        type(self).async_calls += 1
        return await super().abefore_model(state, runtime)


def test_langchain_middleware_in_an_async_agent():
    from langchain.agents import create_agent

    results = fixture_results()
    model = AsyncScriptedChatModel(script=script_for(results), seen=[])
    reports = []
    middleware = CountingMiddleware(window=WINDOW, on_report=reports.append)
    agent = create_agent(model, [make_tool(results)], middleware=[middleware])
    final = asyncio.run(
        agent.ainvoke({"messages": [HumanMessage(content="Fix the bug.")]}, {"recursion_limit": 200})
    )
    assert final["messages"][-1].content == "All done."
    check_loop(model, results)
    # Every model call was awaited, each after the async hook compacted the state.
    assert model.async_calls == len(model.seen) == len(results) + 1
    assert CountingMiddleware.async_calls == len(model.seen)
    assert len(reports) == len(model.seen) and any(r.report.steps for r in reports)
