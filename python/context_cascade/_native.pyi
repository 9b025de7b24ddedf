"""Type stubs of the Rust extension `context_cascade._native` (crates/python)."""

from os import PathLike
from typing import Any, Callable, Dict, List, Optional, Tuple, Union

class NativeError(Exception):
    """args: (kind: "parse" | "usage", path: str, problem: str)."""

def compact(
    body: bytes,
    window: Optional[int] = None,
    model: Optional[str] = None,
    reserve: Optional[int] = None,
    config: Optional[Union[str, PathLike[str]]] = None,
    pretty: bool = False,
    summarizer: Optional[Callable[[Dict[str, Any]], str]] = None,
) -> Tuple[bytes, str]: ...
def compact_dict(
    body: Union[Dict[str, Any], List[Any]],
    window: Optional[int] = None,
    model: Optional[str] = None,
    reserve: Optional[int] = None,
    config: Optional[Union[str, PathLike[str]]] = None,
    summarizer: Optional[Callable[[Dict[str, Any]], str]] = None,
) -> Optional[Tuple[Any, str]]: ...
def estimate(body: bytes, model: Optional[str] = None) -> int: ...
def classify(error_body: str, status: Optional[int] = None) -> str: ...
def catalog() -> str: ...
def lookup(model: str) -> str: ...
def run(argv: List[str]) -> int: ...
def _bench_compact(body: bytes, runs: int, window: Optional[int] = None) -> List[float]: ...

class Manager:
    def __init__(
        self,
        window: Optional[int] = None,
        model: Optional[str] = None,
        reserve: Optional[int] = None,
        config: Optional[Union[str, PathLike[str]]] = None,
        summarizer: Optional[Callable[[Dict[str, Any]], str]] = None,
    ) -> None: ...
    def compact(self, body: bytes) -> Tuple[bytes, str]: ...
    def compact_dict(self, body: Union[Dict[str, Any], List[Any]]) -> Optional[Tuple[Any, str]]: ...
    def observe(self, body: bytes, prompt_tokens: int) -> None: ...
    def calibration(self) -> str: ...
