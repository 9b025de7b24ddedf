"""LangChain and LangGraph: compact the message list before every model call.

* `pre_model_hook(...)` for ``langgraph.prebuilt.create_react_agent(..., pre_model_hook=)``;
* `CascadeMiddleware(...)` for ``langchain.agents.create_agent(..., middleware=[...])``
  (the ``AgentMiddleware.before_model`` interface of langchain 1.x).

Messages go to the engine in the OpenAI Chat Completions wire format and come back as the
very LangChain objects they were (ids, ``additional_kwargs``, ``response_metadata``, tool
calls, names, content lists kept): each wire message carries its position in
``x_langchain_index``, which the engine passes through; a message the engine shortened comes
back as a copy of the original with the new content; messages the engine wrote (a summary)
become new LangChain messages. Importing this module needs ``langchain-core``.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any, Callable, Dict, List, Optional, Sequence

from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    RemoveMessage,
    SystemMessage,
    ToolMessage,
)

from . import Result, Summarizer, compact

#: The wire key that ties a message to the LangChain message it came from.
INDEX_KEY = "x_langchain_index"

__all__ = [
    "to_openai",
    "from_openai",
    "compact_messages",
    "pre_model_hook",
    "CascadeMiddleware",
]


def _tool_call_to_wire(call: Dict[str, Any]) -> Dict[str, Any]:
    return {
        "id": call.get("id"),
        "type": "function",
        "function": {
            "name": call["name"],
            # Sorted keys would change what the model sees; keep the caller's order.
            "arguments": json.dumps(call.get("args", {}), ensure_ascii=False),
        },
    }


def _message_to_wire(message: BaseMessage) -> Dict[str, Any]:
    if isinstance(message, SystemMessage):
        wire: Dict[str, Any] = {"role": "system", "content": message.content}
    elif isinstance(message, HumanMessage):
        wire = {"role": "user", "content": message.content}
    elif isinstance(message, AIMessage):
        wire = {"role": "assistant", "content": message.content or None}
        if message.tool_calls:
            wire["tool_calls"] = [_tool_call_to_wire(c) for c in message.tool_calls]
            if wire["content"] == []:
                wire["content"] = None
    elif isinstance(message, ToolMessage):
        wire = {"role": "tool", "tool_call_id": message.tool_call_id, "content": message.content}
    else:
        # ChatMessage and friends: their role is theirs to say; the engine refuses unknown ones.
        wire = {"role": getattr(message, "role", message.type), "content": message.content}
    if message.name:
        wire["name"] = message.name
    return wire


def to_openai(messages: Sequence[BaseMessage]) -> List[Dict[str, Any]]:
    """LangChain messages as OpenAI Chat Completions messages (plain wire format)."""
    return [_message_to_wire(m) for m in messages]


def _tool_call_from_wire(call: Dict[str, Any]) -> Dict[str, Any]:
    function = call.get("function", {})
    arguments = function.get("arguments") or "{}"
    try:
        args = json.loads(arguments)
    except json.JSONDecodeError:
        args = {"arguments": arguments}
    return {"name": function.get("name", ""), "args": args, "id": call.get("id"), "type": "tool_call"}


def _message_from_wire(wire: Dict[str, Any]) -> BaseMessage:
    role = wire.get("role")
    content = wire.get("content")
    if content is None:
        content = ""
    extra: Dict[str, Any] = {}
    if wire.get("name"):
        extra["name"] = wire["name"]
    if role in ("system", "developer"):
        return SystemMessage(content=content, **extra)
    if role == "user":
        return HumanMessage(content=content, **extra)
    if role == "assistant":
        calls = [_tool_call_from_wire(c) for c in wire.get("tool_calls") or []]
        return AIMessage(content=content, tool_calls=calls, **extra)
    if role == "tool":
        return ToolMessage(content=content, tool_call_id=wire.get("tool_call_id", ""), **extra)
    raise ValueError(f"unknown role {role!r} in a compacted message")


def from_openai(messages: Sequence[Dict[str, Any]]) -> List[BaseMessage]:
    """OpenAI Chat Completions messages as LangChain messages."""
    return [_message_from_wire(m) for m in messages]


def _back(wire: Dict[str, Any], originals: Sequence[BaseMessage], sent: Sequence[Dict[str, Any]]) -> BaseMessage:
    index = wire.pop(INDEX_KEY, None)
    if not isinstance(index, int) or not 0 <= index < len(originals):
        return _message_from_wire(wire)
    original = originals[index]
    before = sent[index]
    if wire == before:
        return original
    update: Dict[str, Any] = {}
    if wire.get("content") != before.get("content"):
        update["content"] = wire.get("content") if wire.get("content") is not None else ""
    if isinstance(original, AIMessage) and wire.get("tool_calls") != before.get("tool_calls"):
        update["tool_calls"] = [_tool_call_from_wire(c) for c in wire.get("tool_calls") or []]
    return original.model_copy(update=update)


def compact_messages(
    messages: Sequence[BaseMessage],
    *,
    window: Optional[int] = None,
    model: Optional[str] = None,
    reserve: Optional[int] = None,
    summarizer: Optional[Summarizer] = None,
) -> tuple[List[BaseMessage], Result]:
    """Compacts a LangChain message list; returns the new list and the `Result`.

    `summarizer` as for `context_cascade.compact` (sync or async)."""
    sent = to_openai(messages)
    tagged = [dict(m, **{INDEX_KEY: i}) for i, m in enumerate(sent)]
    body: Dict[str, Any] = {"messages": tagged}
    if model:
        body["model"] = model
    result = compact(body, window=window, model=model, reserve=reserve, summarizer=summarizer)
    out = [_back(dict(w), messages, sent) for w in result.body["messages"]]
    return out, result


def pre_model_hook(
    *,
    window: Optional[int] = None,
    model: Optional[str] = None,
    reserve: Optional[int] = None,
    rewrite_history: bool = False,
    on_report: Optional[Callable[[Result], None]] = None,
    summarizer: Optional[Summarizer] = None,
) -> Callable[[Dict[str, Any]], Dict[str, Any]]:
    """A ``pre_model_hook`` for ``langgraph.prebuilt.create_react_agent``.

    By default it returns ``llm_input_messages``: the model sees the compacted list and the
    graph state keeps the full history. With ``rewrite_history=True`` it replaces the
    state's messages with the compacted ones. `on_report` gets each call's `Result`;
    `summarizer` writes the summaries (as for `context_cascade.compact`).
    """

    def hook(state: Dict[str, Any]) -> Dict[str, Any]:
        messages = state["messages"] if isinstance(state, dict) else state.messages
        compacted, result = compact_messages(
            messages, window=window, model=model, reserve=reserve, summarizer=summarizer
        )
        if on_report is not None:
            on_report(result)
        if rewrite_history:
            return {"messages": _replace_all(compacted)}
        return {"llm_input_messages": compacted}

    return hook


def _replace_all(messages: List[BaseMessage]) -> List[BaseMessage]:
    from langgraph.graph.message import REMOVE_ALL_MESSAGES

    return [RemoveMessage(id=REMOVE_ALL_MESSAGES), *messages]


def _middleware_base() -> Any:
    try:
        from langchain.agents.middleware import AgentMiddleware
    except ImportError:  # langchain 1.x not installed: the class still works as a plain hook
        return object
    return AgentMiddleware


class CascadeMiddleware(_middleware_base()):  # type: ignore[misc]
    """``langchain.agents`` middleware: compacts the state's messages before every model call.

    ``create_agent(model, tools, middleware=[CascadeMiddleware(window=32_000)])``. The
    compacted list replaces the state's messages (``before_model`` can only change the
    state), so the history stays inside the window for the rest of the run. Async agents
    (``ainvoke``, ``astream``) call ``abefore_model``, which compacts on a worker thread:
    the engine releases the GIL, so the event loop goes on meanwhile. `summarizer` writes
    the summaries (as for `context_cascade.compact`; an async one is awaited on its own
    loop in that thread).
    """

    def __init__(
        self,
        *,
        window: Optional[int] = None,
        model: Optional[str] = None,
        reserve: Optional[int] = None,
        on_report: Optional[Callable[[Result], None]] = None,
        summarizer: Optional[Summarizer] = None,
    ) -> None:
        super().__init__()
        self.window = window
        self.model = model
        self.reserve = reserve
        self.on_report = on_report
        self.summarizer = summarizer

    def before_model(self, state: Any, runtime: Any = None) -> Optional[Dict[str, Any]]:
        """Compacts ``state["messages"]``; returns nothing when no message changed."""
        messages = state["messages"]
        compacted, result = compact_messages(
            messages,
            window=self.window,
            model=self.model,
            reserve=self.reserve,
            summarizer=self.summarizer,
        )
        if self.on_report is not None:
            self.on_report(result)
        if not result.report.steps:
            return None
        return {"messages": _replace_all(compacted)}

    async def abefore_model(self, state: Any, runtime: Any = None) -> Optional[Dict[str, Any]]:
        """`before_model` for async agents, run on a worker thread (the GIL is released
        while the engine works, so other tasks of the event loop go on)."""
        return await asyncio.to_thread(self.before_model, state, runtime)
