"""A Python summarizer, sync or async, as the engine calls it: one dict in, the text out."""

from __future__ import annotations

import asyncio
import concurrent.futures
import inspect
from typing import Any, Callable, Dict, Optional

#: ``summarizer(request) -> str`` or ``async def summarizer(request) -> str``; `request` is
#: ``{"kind": "summarize", "messages": [...], "previous_summary", "max_tokens"}`` or
#: ``{"kind": "merge", "partials": [str, ...], "max_tokens"}``. Each message is
#: ``{"role", "content": its text}`` plus, when it has some, ``"tool_calls": [{"id", "name",
#: "arguments"}]`` (arguments as JSON text) and ``"tool_results": [{"tool_call_id", "name",
#: "content"}]`` (the output's text), the same for every wire format. The summary should use the
#: nine sections of docs (a merge joins partial summaries); an exception or a summary that is
#: not smaller than what it replaces makes the cascade fall back to the next strategy.
Summarizer = Callable[[Dict[str, Any]], Any]


def synchronous(summarizer: Optional[Summarizer]) -> Optional[Callable[[Dict[str, Any]], str]]:
    """`summarizer` as a plain function: a coroutine it returns is run to completion by
    asyncio on a worker thread (the calling thread may itself be inside an event loop)."""
    if summarizer is None:
        return None

    def call(request: Dict[str, Any]) -> str:
        answer = summarizer(request)
        if inspect.isawaitable(answer):
            with concurrent.futures.ThreadPoolExecutor(max_workers=1) as worker:
                answer = worker.submit(asyncio.run, _awaited(answer)).result()
        return answer

    call.__qualname__ = getattr(summarizer, "__qualname__", type(summarizer).__qualname__)
    return call


async def _awaited(awaitable: Any) -> Any:
    return await awaitable
