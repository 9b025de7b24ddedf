"""`compact` from Python against the CLI on every fixture, and the other functions."""

from __future__ import annotations

import json
import subprocess

import pytest

import context_cascade as cc
from conftest import FIXTURES, request_fixtures

WINDOWS = [None, 32_000, 8_000, 4_000]


def run_cli(cli: str, path, window):
    args = [cli, "compact", str(path)]
    if window is not None:
        args += ["--window", str(window)]
    return subprocess.run(args, capture_output=True, timeout=120)


@pytest.mark.parametrize("window", WINDOWS, ids=lambda w: f"window={w}")
@pytest.mark.parametrize("path", request_fixtures(), ids=lambda p: p.name)
def test_same_bytes_as_the_cli(cli, path, window):
    cli_run = run_cli(cli, path, window)
    data = path.read_bytes()
    if cli_run.returncode == 2:
        with pytest.raises(cc.CascadeError):
            cc.compact(data, window=window)
        return
    result = cc.compact(data, window=window)
    # The CLI ends its output with a newline; the body itself is the same bytes.
    assert cli_run.stdout == result.body + b"\n"
    assert result.fits == (cli_run.returncode == 0)
    assert isinstance(result.report, cc.Report)
    # The str and dict forms give the same request back in their own form.
    as_text = cc.compact(data.decode("utf-8"), window=window)
    assert isinstance(as_text.body, str) and as_text.body.encode("utf-8") == result.body
    as_dict = cc.compact(json.loads(data), window=window)
    assert as_dict.body == json.loads(result.body)


def test_report_fields_are_typed():
    path = FIXTURES / "transcripts" / "swe-agent-demo__marshmallow-1867.json"
    report = cc.compact(path.read_bytes(), window=4_000).report
    assert report.tokens_after < report.tokens_before
    assert report.window == 4_000
    assert report.steps and all(isinstance(s, cc.Step) for s in report.steps)
    assert report.steps[0].strategy
    assert report.format == "openai"


def test_parse_error_names_the_json_path():
    body = {"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}, {"role": 7}]}
    with pytest.raises(cc.ParseError) as caught:
        cc.compact(body)
    assert caught.value.path.startswith("$.messages[1]")
    assert isinstance(caught.value, cc.CascadeError)


def test_invalid_json_and_wrong_types_are_parse_errors():
    with pytest.raises(cc.ParseError):
        cc.compact(b'{"messages": [')
    with pytest.raises(cc.ParseError):
        cc.compact(42)  # type: ignore[arg-type]


def test_bad_config_is_a_usage_error(tmp_path):
    missing = tmp_path / "nope.toml"
    with pytest.raises(cc.UsageError):
        cc.compact({"messages": [{"role": "user", "content": "hi"}]}, config=str(missing))


def test_estimate_grows_with_the_body():
    small = {"model": "gpt-4o", "messages": [{"role": "user", "content": "hello"}]}
    large = {"model": "gpt-4o", "messages": [{"role": "user", "content": "hello " * 2000}]}
    assert 0 < cc.estimate(small) < cc.estimate(large)


def test_classify_every_error_fixture():
    cases = json.loads((FIXTURES / "overflow-errors.json").read_text())
    for case in cases:
        verdict = cc.classify(case["body"], case.get("http_status"))
        assert verdict.overflow == case["is_overflow"], case["provider"]


def test_catalog_and_lookup():
    entries = cc.catalog()
    assert len(entries) > 5 and all("id" in e for e in entries)
    found = cc.lookup(entries[0]["id"])
    assert found
