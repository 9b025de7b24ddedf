"""Helpers for the end-to-end tests: fixtures as requests, raw HTTP, metrics, the CLI.

Nothing here talks to anything but loopback servers the tests started themselves.
"""

import json
import os
import re
import subprocess
import urllib.error
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
CASCADE = Path(os.environ.get("CASCADE_BIN", REPO / "target" / "debug" / "cascade"))
FIXTURES = Path(
    os.environ.get("CASCADE_FIXTURES", REPO / "fixtures")
) / "transcripts"

# The request's `model`: llama-server ignores it, the proxy keys its calibration by it.
MODEL = "smollm2"
# Answers are kept short: generation is the slow part on 2 cores, and only "an answer
# with text" matters here. Temperature 0 makes a run reproducible.
MAX_TOKENS = 12


def load_messages(name):
    """The OpenAI-format messages of a transcript fixture."""
    path = FIXTURES / name
    if not path.is_file():
        raise FileNotFoundError(
            f"fixture {path} is missing (set CASCADE_FIXTURES to the fixtures folder)"
        )
    return json.loads(path.read_text())["messages"]


# The session every end-to-end test replays, a Claude Code subagent: small at first, then
# tool results (file reads, greps) push it to ~40,000 characters (~13,000 SmolLM2 tokens)
# by its 8th assistant turn.
SESSION = "claude-code__spotter__6c2214d7-subagent-afc096d.json"


def session_messages():
    """The OpenAI-format messages of SESSION."""
    return load_messages(SESSION)


def assistant_turns(messages):
    """The indices k where messages[k] is an assistant answer: each replayed turn sends
    messages[:k], the real history up to that answer."""
    return [k for k, m in enumerate(messages) if m["role"] == "assistant" and k > 0]


def openai_body(messages, **extra):
    body = {"model": MODEL, "messages": messages, "max_tokens": MAX_TOKENS, "temperature": 0}
    body.update(extra)
    return body


def _tool_input(arguments):
    """An OpenAI tool call's `arguments` (a JSON string) as an Anthropic `input` object."""
    if isinstance(arguments, dict):
        return arguments
    try:
        value = json.loads(arguments or "{}")
    except json.JSONDecodeError:
        return {"arguments": arguments}
    return value if isinstance(value, dict) else {"value": value}


def _text_of(content):
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    return "\n".join(part.get("text", "") for part in content if isinstance(part, dict))


def to_anthropic(messages):
    """OpenAI chat messages → (system, Anthropic messages): assistant `tool_calls` become
    `tool_use` blocks, `tool` messages `tool_result` blocks in a user message; consecutive
    same-role messages are merged, as the Messages API wants them to alternate."""
    system = []
    out = []

    def push(role, blocks):
        if out and out[-1]["role"] == role:
            out[-1]["content"].extend(blocks)
        else:
            out.append({"role": role, "content": blocks})

    for m in messages:
        role = m["role"]
        text = _text_of(m.get("content"))
        if role == "system":
            system.append(text)
        elif role == "user":
            push("user", [{"type": "text", "text": text or "(empty)"}])
        elif role == "assistant":
            blocks = [{"type": "text", "text": text}] if text.strip() else []
            for call in m.get("tool_calls") or []:
                fn = call.get("function", {})
                blocks.append(
                    {
                        "type": "tool_use",
                        "id": call["id"],
                        "name": fn.get("name", "tool"),
                        "input": _tool_input(fn.get("arguments")),
                    }
                )
            push("assistant", blocks or [{"type": "text", "text": "(no text)"}])
        elif role == "tool":
            push(
                "user",
                [
                    {
                        "type": "tool_result",
                        "tool_use_id": m["tool_call_id"],
                        "content": text or "(empty)",
                    }
                ],
            )
        else:
            raise ValueError(f"unexpected role {role!r} in a fixture")
    return "\n\n".join(system), out


def anthropic_body(messages, **extra):
    system, converted = to_anthropic(messages)
    body = {"model": MODEL, "max_tokens": MAX_TOKENS, "messages": converted, "temperature": 0}
    if system:
        body["system"] = system
    body.update(extra)
    return body


def post_json(url, body, timeout=600, stream=False):
    """POST a JSON body; returns (status, headers, parsed JSON body). Never raises on 4xx/5xx.
    With `stream`, a 200 answer is an event stream: its raw text is returned instead."""
    request = urllib.request.Request(
        url,
        data=json.dumps(body).encode(),
        headers={"content-type": "application/json"},
        method="POST",
    )
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            raw = response.read()
            if stream:
                return response.status, response.headers, raw.decode()
            return response.status, response.headers, json.loads(raw)
    except urllib.error.HTTPError as error:
        raw = error.read()
        try:
            parsed = json.loads(raw)
        except json.JSONDecodeError:
            parsed = {"raw": raw.decode(errors="replace")}
        return error.code, error.headers, parsed


def get_text(url, timeout=30):
    with urllib.request.urlopen(url, timeout=timeout) as response:
        return response.read().decode()


_SAMPLE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})?\s+(\S+)$")
_LABEL = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)"')


def metrics(proxy_url):
    """GET /metrics parsed: {(name, ((label, value), ...)): float}."""
    samples = {}
    for line in get_text(f"{proxy_url}/metrics").splitlines():
        if not line or line.startswith("#"):
            continue
        match = _SAMPLE.match(line)
        if not match:
            raise AssertionError(f"unparseable metrics line: {line!r}")
        labels = tuple(sorted(_LABEL.findall(match.group(2) or "")))
        samples[(match.group(1), labels)] = float(match.group(3))
    return samples


def metric(samples, name, **labels):
    """One sample's value, 0 when absent (Prometheus counters start absent)."""
    return samples.get((name, tuple(sorted(labels.items()))), 0.0)


def metric_family(samples, name, label):
    """{label value: sample} for every sample of `name`."""
    out = {}
    for (sample_name, labels), value in samples.items():
        if sample_name == name:
            out[dict(labels)[label]] = value
    return out


def parse_report_header(value):
    """`x-context-cascade: prune_history=3; degrade=1` → {"prune_history": 3, "degrade": 1}."""
    out = {}
    for part in (value or "").split(";"):
        part = part.strip()
        if not part:
            continue
        name, _, count = part.partition("=")
        out[name.strip()] = int(count) if count.strip().isdigit() else 1
    return out


def run_cascade(*args, stdin=None, timeout=900):
    """Runs the `cascade` binary; returns the CompletedProcess (the caller checks it)."""
    return subprocess.run(
        [str(CASCADE), *map(str, args)],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


_ESTIMATE = re.compile(r"^estimate ([\d,]+) tokens", re.M)
_MULTIPLIER = re.compile(r"^prior ×([\d.]+)", re.M)


def calibration_config(tmp_path, prior_tokens):
    """A proxy config file that pins the calibration rule: `prior_tokens = 0` is SPEC's (the
    first observation is the scale, later ones an EMA with α 0.3, the default), above 0 the
    size-weighted rule. Returns `--config PATH` as arguments for `start_proxy`."""
    path = tmp_path / f"calibration-{prior_tokens}.toml"
    path.write_text(f"[cascade.calibration]\nprior_tokens = {prior_tokens}\n")
    return ["--config", str(path)]


def spec_ema_config(tmp_path):
    """SPEC's rule, pinned for the tests whose arithmetic is SPEC's."""
    return calibration_config(tmp_path, 0)


def uncalibrated_prior(body, tmp_path):
    """The engine's prior (before any calibration) for a request body, from `cascade inspect`:
    it prints the estimate = ceil(prior × multiplier) and the multiplier it applied."""
    path = tmp_path / f"inspect-{os.getpid()}-{id(body)}.json"
    path.write_text(json.dumps(body))
    done = run_cascade("inspect", path)
    assert done.returncode == 0, f"cascade inspect failed: {done.stderr}"
    estimate = int(_ESTIMATE.search(done.stdout).group(1).replace(",", ""))
    multiplier = float(_MULTIPLIER.search(done.stdout).group(1))
    return estimate / multiplier


_PROMPT_TIMING = re.compile(r"task (\d+) \| prompt eval time =\s*([\d.]+) ms /\s*(\d+) tokens")
_EVAL_TIMING = re.compile(r"task (\d+) \|\s+eval time =\s*([\d.]+) ms /\s*(\d+) tokens")


def parse_timings(log_text):
    """llama-server's `print_timing` lines → one dict per finished task, in order."""
    tasks = {}
    for match in _PROMPT_TIMING.finditer(log_text):
        tasks.setdefault(match.group(1), {}).update(
            prompt_ms=float(match.group(2)), prompt_tokens=int(match.group(3))
        )
    for match in _EVAL_TIMING.finditer(log_text):
        tasks.setdefault(match.group(1), {}).update(
            generation_ms=float(match.group(2)), generated_tokens=int(match.group(3))
        )
    return [tasks[k] for k in sorted(tasks, key=int)]
