"""① A real tool-using session replayed turn by turn through `cascade proxy` in front of
llama-server (n_ctx 2048, window learned from /props), with the OpenAI and Anthropic SDKs,
plain and streaming. Each turn sends the real history up to that assistant answer (not
SmolLM2's answers), so the history grows far past the 2048-token window: every turn must
still get a 200 with text, and the report header and /metrics show what the cascade did.
"""

import time

import anthropic
import openai
import pytest

from helpers import MAX_TOKENS, MODEL, anthropic_body, assistant_turns, metric, metric_family
from helpers import metrics, parse_report_header, session_messages

PLAIN_TURNS = 8
STREAM_TURNS = 5


def openai_turn(client, history):
    raw = client.chat.completions.with_raw_response.create(
        model=MODEL, messages=history, max_tokens=MAX_TOKENS, temperature=0
    )
    completion = raw.parse()
    return raw.status_code, raw.headers.get("x-context-cascade"), completion.choices[0].message.content


def openai_stream_turn(client, history):
    raw = client.chat.completions.with_raw_response.create(
        model=MODEL,
        messages=history,
        max_tokens=MAX_TOKENS,
        temperature=0,
        stream=True,
        stream_options={"include_usage": True},
    )
    text = ""
    usage = None
    for chunk in raw.parse():
        usage = chunk.usage or usage
        for choice in chunk.choices:
            text += choice.delta.content or ""
    assert usage is not None and usage.prompt_tokens > 0, "the stream carried no usage"
    return raw.status_code, raw.headers.get("x-context-cascade"), text


def sdk_anthropic_body(history):
    """The Anthropic SDK in use has no `temperature` argument: it goes in extra_body."""
    body = anthropic_body(history)
    body["extra_body"] = {"temperature": body.pop("temperature")}
    return body


def anthropic_turn(client, history):
    body = sdk_anthropic_body(history)
    raw = client.messages.with_raw_response.create(**body)
    message = raw.parse()
    text = "".join(block.text for block in message.content if block.type == "text")
    return raw.status_code, raw.headers.get("x-context-cascade"), text


def anthropic_stream_turn(client, history):
    body = sdk_anthropic_body(history)
    with client.messages.stream(**body) as stream:
        status = stream.response.status_code
        header = stream.response.headers.get("x-context-cascade")
        text = "".join(stream.text_stream)
        final = stream.get_final_message()
    assert final.usage.input_tokens + (final.usage.cache_read_input_tokens or 0) > 0
    return status, header, text


VARIANTS = {
    "openai-plain": ("/v1/chat/completions", openai_turn, PLAIN_TURNS),
    "openai-stream": ("/v1/chat/completions", openai_stream_turn, STREAM_TURNS),
    "anthropic-plain": ("/v1/messages", anthropic_turn, PLAIN_TURNS),
    "anthropic-stream": ("/v1/messages", anthropic_stream_turn, STREAM_TURNS),
}


@pytest.mark.parametrize("variant", list(VARIANTS))
def test_session_replayed_past_the_window(variant, llama_2048, start_proxy, figures):
    route, send, turns = VARIANTS[variant]
    proxy = start_proxy(llama_2048.url)
    if route == "/v1/messages":
        client = anthropic.Anthropic(base_url=proxy.url, api_key="e2e", max_retries=0, timeout=600)
    else:
        client = openai.OpenAI(base_url=f"{proxy.url}/v1", api_key="e2e", max_retries=0, timeout=600)
    messages = session_messages()
    ks = assistant_turns(messages)
    # Streaming replays the first turns only (time): from the third one on, the history is
    # over the window. (A fresh proxy at a later turn is covered by
    # test_overflow_regressions.py.)
    ks = ks[:turns]
    seen = {}
    fired_turns = 0
    chars = []
    started = time.monotonic()
    for k in ks:
        history = messages[:k]
        chars.append(sum(len(str(m.get("content") or "")) for m in history))
        status, header, text = send(client, history)
        assert status == 200, f"turn {k}: status {status}"
        assert isinstance(text, str) and text.strip(), f"turn {k}: no text in the answer"
        steps = parse_report_header(header)
        if steps:
            fired_turns += 1
        for name in steps:
            seen[name] = seen.get(name, 0) + 1
    elapsed = time.monotonic() - started
    # The history outgrew the server's window, so the cascade had to act on some turns.
    assert max(chars) > 2048 * 4, "the replay never went past the window"
    assert fired_turns >= 1, "no turn's x-context-cascade header shows a strategy"

    samples = metrics(proxy.url)
    by_status = {
        dict(labels)["status"]: value
        for (name, labels), value in samples.items()
        if name == "cascade_requests_total" and dict(labels)["route"] == route
    }
    assert by_status == {"200": float(len(ks))}, f"requests by status: {by_status}"
    applied = metric_family(samples, "cascade_strategies_applied_total", "strategy")
    for name, responses in seen.items():
        # One step per strategy use; a response names each strategy once.
        assert applied.get(name, 0) >= responses, f"{name}: metrics {applied}, headers {seen}"
    assert set(applied) == set(seen), f"metrics {applied} vs headers {seen}"
    assert metric(samples, "cascade_overflow_exhausted_total") == 0
    window_sources = metric_family(samples, "cascade_window_source_total", "source")
    assert window_sources == {"upstream": float(len(ks))}, window_sources

    figures[f"replay_{variant}"] = {
        "turns": len(ks),
        "turns_with_strategies": fired_turns,
        "strategies_in_headers": seen,
        "strategy_steps_in_metrics": {k: int(v) for k, v in applied.items()},
        "history_chars_max": max(chars),
        "overflow_errors": int(metric(samples, "cascade_overflow_errors_total")),
        "overflow_recoveries": int(metric(samples, "cascade_overflow_recoveries_total")),
        "tokens_saved": int(metric(samples, "cascade_tokens_saved_total")),
        "seconds": round(elapsed, 1),
    }
