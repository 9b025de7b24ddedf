"""A LangGraph agent whose every model call is compacted to fit a small window.

    pip install .  langgraph==1.2.24 langchain-core==1.8.3   # from a clone
    python examples/python_agent.py

The "model" is scripted (a real LangChain BaseChatModel that replays tool calls), so the
example runs offline; swap in `ChatOpenAI(...)` or any chat model to use it for real. The
tool returns the outputs of the SWE-agent session in fixtures/, which together are larger
than the 3,000-token window: without the hook the last calls would overflow.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, List, Optional

from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.tools import tool
from langgraph.prebuilt import create_react_agent

import context_cascade as cc
from context_cascade.langchain import pre_model_hook, to_openai

WINDOW = 3_000
SESSION = Path(__file__).resolve().parent.parent / "fixtures/transcripts/swe-agent-demo__marshmallow-1867.json"
OUTPUTS = [m["content"] for m in json.loads(SESSION.read_text())["messages"] if m["role"] == "tool" and m["content"]]


class ScriptedModel(BaseChatModel):
    """Calls the tool once per recorded output, then answers; prints what each call got."""

    calls: int = 0

    @property
    def _llm_type(self) -> str:
        return "scripted"

    def bind_tools(self, tools: Any, **kwargs: Any) -> "ScriptedModel":
        return self

    def _generate(self, messages: List[BaseMessage], stop: Optional[List[str]] = None, run_manager: Any = None, **kwargs: Any) -> ChatResult:
        tokens = cc.estimate({"messages": to_openai(messages)})
        print(f"model call {self.calls + 1:2}: {len(messages):2} messages, {tokens:5} tokens (window {WINDOW})")
        step = self.calls
        self.calls += 1
        if step < len(OUTPUTS):
            answer = AIMessage(content="", tool_calls=[{"name": "shell", "args": {"step": step}, "id": f"call_{step}"}])
        else:
            answer = AIMessage(content="The bug is fixed.")
        return ChatResult(generations=[ChatGeneration(message=answer)])


@tool
def shell(step: int) -> str:
    """Runs the next command of the session and returns its output."""
    return OUTPUTS[step]


def main() -> None:
    hook = pre_model_hook(window=WINDOW, on_report=lambda r: r.report.steps and print("   cascade:", ", ".join(s.strategy for s in r.report.steps)))
    agent = create_react_agent(ScriptedModel(), [shell], pre_model_hook=hook)
    final = agent.invoke({"messages": [HumanMessage(content="Fix the marshmallow bug.")]}, {"recursion_limit": 100})
    print(f"done: {final['messages'][-1].content} ({len(final['messages'])} messages in the state)")


if __name__ == "__main__":
    main()
