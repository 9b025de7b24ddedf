"""context-cascade in process: keep long LLM agent conversations inside the context window.

The same engine as the `cascade` command (also installed by this wheel) and the proxy:
``compact`` gives, byte for byte, what ``cascade compact`` writes. Requests may be OpenAI
Chat Completions, Anthropic Messages, OpenAI Responses bodies or a bare message array, as a
dict, JSON text or JSON bytes; the result comes back in the same form. The Rust work runs
with the GIL released.

>>> import context_cascade
>>> result = context_cascade.compact(body, window=32_000)
>>> result.body, result.report.tokens_after
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Union

from . import _native
from ._errors import CascadeError, ParseError, UsageError, from_native
from ._report import Report, Step
from ._summarizer import Summarizer, synchronous

__all__ = [
    "CascadeError",
    "ParseError",
    "UsageError",
    "Report",
    "Step",
    "Result",
    "Overflow",
    "ContextManager",
    "Summarizer",
    "compact",
    "estimate",
    "classify",
    "catalog",
    "lookup",
]

Body = Union[Dict[str, Any], List[Any], str, bytes, bytearray, memoryview]


@dataclass(frozen=True)
class Result:
    """A compacted request (`body`, in the form it was given) and the `report`."""

    body: Any
    report: Report

    @property
    def fits(self) -> bool:
        """Whether the request now fits the window (else it is compacted as far as it goes)."""
        return self.report.fits


@dataclass(frozen=True)
class Overflow:
    """`classify`'s verdict on a provider's error body."""

    overflow: bool
    observed_tokens: Optional[int]
    limit_tokens: Optional[int]
    provider: Optional[str]


def _to_bytes(body: Body) -> bytes:
    if isinstance(body, bytes):
        return body
    if isinstance(body, (bytearray, memoryview)):
        return bytes(body)
    if isinstance(body, str):
        return body.encode("utf-8")
    if isinstance(body, (dict, list)):
        # For `estimate`, and for bodies `_native.compact_dict` leaves to json.dumps (values
        # that only it converts, NaN, cycles). The C encoder, keys in their order. ASCII escapes (the default) encode twice as fast
        # as raw UTF-8 here (2.1 vs 4.4 ms on the 0.68 MB fixture); the engine reads them
        # back as the same strings and writes UTF-8, so the dict that comes back is the same.
        return json.dumps(body, separators=(",", ":")).encode("ascii")
    raise ParseError(
        f"$: expected a dict, a list or JSON text/bytes, found {type(body).__name__}",
        "$",
        f"expected a dict, a list or JSON text/bytes, found {type(body).__name__}",
    )


def _like(original: Body, out: bytes) -> Any:
    if isinstance(original, (bytes, bytearray, memoryview)):
        return out
    if isinstance(original, str):
        return out.decode("utf-8")
    return json.loads(out)


def compact(
    body: Body,
    *,
    window: Optional[int] = None,
    model: Optional[str] = None,
    reserve: Optional[int] = None,
    summarizer: Optional[Summarizer] = None,
    config: Optional[str] = None,
    pretty: bool = False,
) -> Result:
    """Compacts `body` to fit the context window, as ``cascade compact`` does.

    `window` is the context window in tokens (else the catalog entry of `model` or of the
    body's ``model``); `reserve` the tokens kept for the answer (else the body's
    ``max_tokens``); `config` the proxy's TOML file. `summarizer` (a callable, sync or
    async, see `Summarizer`) writes the summaries of strategy 4; else the offline one. A
    body that cannot fit comes back compacted as far as it goes with ``result.fits`` false.
    Raises `ParseError` (with `.path`) on a bad body.

    A dict (or list) body comes back as a new dict (list) whose unchanged parts are the
    caller's own objects, as a shallow copy shares them: every top-level field and every
    message the cascade left as it was is the very object given (changing it in one changes
    it in the other); what the cascade wrote anew (a shortened message, a summary) is a new
    object that shares nothing with the input. Either way it equals ``json.loads`` of what
    ``cascade compact`` writes.
    """
    summarize = synchronous(summarizer)
    try:
        if isinstance(body, (dict, list)):
            done = _native.compact_dict(body, window, model, reserve, config, summarize)
            if done is not None:
                return Result(done[0], Report.from_dict(json.loads(done[1])))
        out, report = _native.compact(
            _to_bytes(body), window, model, reserve, config, pretty, summarize
        )
    except _native.NativeError as error:
        raise from_native(error) from None
    return Result(_like(body, out), Report.from_dict(json.loads(report)))


def estimate(body: Body, model: Optional[str] = None) -> int:
    """The engine's token estimate of a request (for `model`, else the body's ``model``)."""
    try:
        return int(_native.estimate(_to_bytes(body), model))
    except _native.NativeError as error:
        raise from_native(error) from None


def classify(error_body: Union[str, bytes, Dict[str, Any]], status: Optional[int] = None) -> Overflow:
    """Whether a provider's error body (JSON, an SDK message, a log line) is a context overflow.

    A 429 `status` is never an overflow.
    """
    if isinstance(error_body, dict):
        text = json.dumps(error_body)
    elif isinstance(error_body, (bytes, bytearray)):
        text = bytes(error_body).decode("utf-8", errors="replace")
    else:
        text = error_body
    return Overflow(**json.loads(_native.classify(text, status)))


def catalog() -> List[Dict[str, Any]]:
    """The built-in model catalog: one dict per entry (``cascade models --json``)."""
    return json.loads(_native.catalog())


def lookup(model: str) -> Dict[str, Any]:
    """The catalog's entry for a model id and how it matched (exact, prefix, default)."""
    return json.loads(_native.lookup(model))


class ContextManager:
    """A cascade with fixed options that keeps its calibration across calls.

    `compact` as the module function; `observe(body, prompt_tokens)` folds in the prompt
    tokens the provider reported for a request (its ``usage``), so that later estimates for
    that model use the learnt token scale. `summarizer` as for `compact`.
    """

    def __init__(
        self,
        *,
        window: Optional[int] = None,
        model: Optional[str] = None,
        reserve: Optional[int] = None,
        summarizer: Optional[Summarizer] = None,
        config: Optional[str] = None,
    ) -> None:
        self._native = _native.Manager(window, model, reserve, config, synchronous(summarizer))

    def compact(self, body: Body) -> Result:
        """Compacts `body` with this manager's options and calibration (a dict body: see
        `compact` for what the answer shares with it)."""
        try:
            if isinstance(body, (dict, list)):
                done = self._native.compact_dict(body)
                if done is not None:
                    return Result(done[0], Report.from_dict(json.loads(done[1])))
            out, report = self._native.compact(_to_bytes(body))
        except _native.NativeError as error:
            raise from_native(error) from None
        return Result(_like(body, out), Report.from_dict(json.loads(report)))

    def observe(self, body: Body, prompt_tokens: int) -> None:
        """Learns from the provider's count of `body`'s prompt tokens."""
        try:
            self._native.observe(_to_bytes(body), prompt_tokens)
        except _native.NativeError as error:
            raise from_native(error) from None

    def calibration(self) -> Dict[str, Any]:
        """Every model's learnt token scale (the form the proxy persists)."""
        return json.loads(self._native.calibration())
