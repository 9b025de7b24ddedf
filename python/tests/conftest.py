"""Shared paths: the repository's fixtures and the CLI the Python results are compared with."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

# ci-python.sh runs a copy of the tests outside the repository: it says where the repository is.
REPO = Path(os.environ.get("CASCADE_REPO") or Path(__file__).resolve().parents[2])
FIXTURES = REPO / "fixtures"


def request_fixtures() -> list[Path]:
    """Every request body in fixtures/ (transcripts and Responses bodies)."""
    return sorted((FIXTURES / "transcripts").glob("*.json")) + sorted(
        (FIXTURES / "responses").glob("*.json")
    )


@pytest.fixture(scope="session")
def cli() -> str:
    """The CLI: $CASCADE_CLI (ci-python.sh gives the cargo-built binary), else `cascade`."""
    path = os.environ.get("CASCADE_CLI") or shutil.which("cascade")
    if not path:
        pytest.fail("no CLI: set CASCADE_CLI or install the wheel (its `cascade`)")
    return path
