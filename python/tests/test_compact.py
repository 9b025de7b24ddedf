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


def _containers(value, found):
    """Every dict and list inside `value`, by id."""
    if isinstance(value, dict):
        found[id(value)] = value
        for item in value.values():
            _containers(item, found)
    elif isinstance(value, list):
        found[id(value)] = value
        for item in value:
            _containers(item, found)
    return found


@pytest.mark.parametrize("window", [32_000, 8_000, 4_000], ids=lambda w: f"window={w}")
@pytest.mark.parametrize("path", request_fixtures(), ids=lambda p: p.name)
def test_a_dict_answer_shares_only_the_unchanged_messages(path, window):
    data = path.read_bytes()
    try:
        expected = json.loads(cc.compact(data, window=window).body)
    except cc.CascadeError:
        return
    body = json.loads(data)
    key = None if isinstance(body, list) else ("messages" if "messages" in body else "input")
    given = body if key is None else body[key]
    result = cc.compact(body, window=window)
    assert result.body == expected
    assert result.body is not body
    out = result.body if key is None else result.body[key]
    if not isinstance(given, list):
        return
    assert out is not given
    inside = _containers(body, {})
    by_id = {id(m) for m in given}
    for message, wanted in zip(out, expected if key is None else expected[key]):
        if id(message) in by_id:
            continue
        # A message the cascade wrote anew holds nothing of the caller's.
        assert not set(_containers(message, {})) & set(inside), message
        assert message == wanted
    shared = [m for m in out if id(m) in by_id]
    # Whatever the cascade left alone comes back as the caller's object, not a copy.
    unchanged = [m for m in out if any(m == g for g in given)]
    assert len(shared) == len(unchanged)


def test_a_dict_answer_is_the_callers_message_objects():
    body = {
        "model": "gpt-4o",
        "tools": [{"type": "function", "function": {"name": "read", "parameters": {}}}],
        "messages": [
            {"role": "system", "content": "You are terse."},
            {"role": "user", "content": "read the log"},
            {"role": "assistant", "content": None, "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "read", "arguments": "{}"}}]},
            {"role": "tool", "tool_call_id": "c1", "content": "log line\n" * 4000},
            {"role": "user", "content": "and now?"},
        ],
    }
    result = cc.compact(body, window=2_000)
    assert result.report.steps, "the tool output must be shortened for this test to mean anything"
    out = result.body["messages"]
    assert result.body["tools"] is body["tools"]
    assert out[0] is body["messages"][0] and out[1] is body["messages"][1]
    assert out[-1] is body["messages"][-1]
    shortened = [m for m in out if m.get("role") == "tool"]
    assert shortened and shortened[0] is not body["messages"][3]
    assert len(shortened[0]["content"]) < len(body["messages"][3]["content"])
    # The new top-level dict and list are the caller's to change.
    out.append({"role": "user", "content": "more"})
    result.body["model"] = "other"
    assert len(body["messages"]) == 5 and body["model"] == "gpt-4o"


def test_dicts_only_json_dumps_converts_keep_their_old_behaviour():
    # Non-str keys, a float subclass, NaN: left to json.dumps, as before.
    with_int_key = {"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}], 7: "x"}
    assert cc.compact(with_int_key).body["7"] == "x"
    with pytest.raises(cc.ParseError):
        cc.compact({"messages": [{"role": "user", "content": "hi"}], "temperature": float("nan")})
    with pytest.raises(TypeError):
        cc.compact({"messages": [{"role": "user", "content": object()}]})
    # A tuple is a JSON array (a list in the answer), big ints and floats keep their value.
    body = {"messages": ({"role": "user", "content": "hi"},), "seed": 2**70, "top_p": 0.1}
    out = cc.compact(body).body
    assert out["seed"] == 2**70 and out["top_p"] == 0.1
    assert out["messages"] == [{"role": "user", "content": "hi"}]
    # A cycle is json.dumps's ValueError, not a crash.
    loop: dict = {"role": "user", "content": "hi"}
    loop["self"] = loop
    with pytest.raises(ValueError):
        cc.compact({"messages": [loop]})
    # Escapes: control characters, quotes, non-ASCII, a lone surrogate (refused as before).
    text = 'tab\t nul\x00 quote" back\\ é 漢 🦀 \u2028'
    assert cc.compact([{"role": "user", "content": text}]).body[0]["content"] == text
    with pytest.raises(cc.ParseError):
        cc.compact([{"role": "user", "content": "\ud800"}])
