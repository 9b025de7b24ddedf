"""A real LangChain chat model that answers from a script and records what it was sent."""

from __future__ import annotations

from typing import Any, List, Optional

from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult


class ScriptedChatModel(BaseChatModel):
    """Returns `script`'s answers in order; `seen` holds each call's input messages."""

    script: List[AIMessage]
    seen: List[List[BaseMessage]] = []

    @property
    def _llm_type(self) -> str:
        return "scripted"

    def bind_tools(self, tools: Any, **kwargs: Any) -> "ScriptedChatModel":
        return self

    def _generate(
        self,
        messages: List[BaseMessage],
        stop: Optional[List[str]] = None,
        run_manager: Optional[CallbackManagerForLLMRun] = None,
        **kwargs: Any,
    ) -> ChatResult:
        self.seen.append(list(messages))
        answer = self.script[len(self.seen) - 1]
        return ChatResult(generations=[ChatGeneration(message=answer)])


class AsyncScriptedChatModel(ScriptedChatModel):
    """`ScriptedChatModel` with a native async path: `async_calls` counts the awaited calls
    (an async agent must not fall back to the sync one on an executor)."""

    async_calls: int = 0

    async def _agenerate(
        self,
        messages: List[BaseMessage],
        stop: Optional[List[str]] = None,
        run_manager: Any = None,
        **kwargs: Any,
    ) -> ChatResult:
        self.async_calls += 1
        return self._generate(messages, stop=stop)
