"""The errors of `context_cascade`: every one is a `CascadeError`."""

from __future__ import annotations


class CascadeError(Exception):
    """Base class of every error `context_cascade` raises."""

    def __init__(self, message: str, path: str = "$", problem: str = "") -> None:
        super().__init__(message)
        #: Where the problem is: a JSON path into the body (``$.messages[3].content``),
        #: ``$`` for the whole, or the option's name.
        self.path = path
        #: What was expected there.
        self.problem = problem or message


class ParseError(CascadeError, ValueError):
    """The body is not a request the cascade reads; `.path` is the JSON path of the problem."""


class UsageError(CascadeError, ValueError):
    """Options that cannot work together, or a config file that cannot be used."""


def from_native(error: BaseException) -> CascadeError:
    """The typed error for a `_native.NativeError` (args: kind, path, problem)."""
    kind, path, problem = error.args
    cls = ParseError if kind == "parse" else UsageError
    message = f"{path}: {problem}" if kind == "parse" else problem
    return cls(message, path, problem)
