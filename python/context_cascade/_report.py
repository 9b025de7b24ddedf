"""The typed report of a compaction (the JSON `cascade compact --report` writes)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional


@dataclass(frozen=True)
class Step:
    """One strategy the cascade applied."""

    strategy: str
    messages_affected: int
    messages_removed: int
    messages_added: int
    chars_removed: int
    chars_added: int
    tokens_before: int
    tokens_after: int
    tokens_freed: int
    target_tokens: int
    detail: str
    attempt: Optional[int] = None
    level: Optional[int] = None
    trail: Optional[Dict[str, Any]] = None
    inside_current_turn: bool = False


@dataclass(frozen=True)
class Report:
    """What `compact` did: tokens and messages before and after, the steps, whether it fits."""

    format: str
    window: int
    reserve: int
    tokens_before: int
    tokens_after: int
    messages_before: int
    messages_after: int
    steps: List[Step]
    fits: bool
    degraded: bool
    calls: int
    overflows: int
    token_scale: float
    uncached_tokens: int
    first_changed: Optional[int] = None
    reason: Optional[str] = None
    estimated_messages: int = 0
    #: Fields a newer engine reports that this class does not name yet.
    extra: Dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_dict(cls, data: Dict[str, Any]) -> "Report":
        """Builds the report from the engine's JSON (as parsed by `json.loads`)."""
        data = dict(data)
        data["steps"] = [_step(s) for s in data.get("steps", [])]
        return _build(cls, data)


def _step(data: Dict[str, Any]) -> Step:
    step = _build(Step, data)
    return step


def _build(cls: Any, data: Dict[str, Any]) -> Any:
    names = {f.name for f in dataclasses.fields(cls)}
    known = {k: v for k, v in data.items() if k in names}
    if "extra" in names:
        known["extra"] = {k: v for k, v in data.items() if k not in names}
    return cls(**known)
