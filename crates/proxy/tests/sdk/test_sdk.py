"""The real OpenAI and Anthropic Python SDKs as clients of the proxy.

Run by scripts/ci-proxy-sdk.sh, which starts the scripted upstream (limit 6000 of its
tokens, about 18 kB of request body) and `cascade proxy --window 128000` in front of it,
and sets CASCADE_PROXY_URL. The conversations below are over the upstream's limit, so each
request only succeeds if the proxy recovers from the overflow; the answers must arrive
intact, plain and streaming.
"""

import os

import anthropic
import openai
import pytest

PROXY = os.environ.get("CASCADE_PROXY_URL", "http://127.0.0.1:9102")
LAST = "Now fix the parser and tell me what changed."
SYSTEM = "You are a careful coding agent."


def prose(n, chars=600):
    base = f"Message {n}: the build of module {n} failed because the parser rejected an input. "
    return (base * (chars // len(base) + 1))[:chars]


def history(turns=20):
    messages = []
    for i in range(turns):
        messages.append({"role": "user", "content": prose(2 * i)})
        messages.append({"role": "assistant", "content": prose(2 * i + 1)})
    messages.append({"role": "user", "content": LAST})
    return messages


def openai_client():
    return openai.OpenAI(base_url=f"{PROXY}/v1", api_key="sk-sdk-test", max_retries=0)


def anthropic_client():
    return anthropic.Anthropic(base_url=PROXY, api_key="ant-sdk-test", max_retries=0)


def test_history_is_over_the_upstream_limit():
    # 6000 tokens at 3 bytes each: the history alone must not fit, or nothing is tested.
    import json

    assert len(json.dumps(history())) > 6000 * 3


def test_openai_plain():
    raw = openai_client().chat.completions.with_raw_response.create(
        model="gpt-4o",
        messages=[{"role": "system", "content": SYSTEM}] + history(),
    )
    assert "prune_history" in raw.headers.get("x-context-cascade", "")
    completion = raw.parse()
    text = completion.choices[0].message.content
    assert text.startswith("scripted reply to ")
    assert LAST in text
    assert completion.usage.prompt_tokens > 0
    assert completion.choices[0].finish_reason == "stop"


def test_openai_streaming():
    stream = openai_client().chat.completions.create(
        model="gpt-4o",
        messages=[{"role": "system", "content": SYSTEM}] + history(),
        stream=True,
        stream_options={"include_usage": True},
    )
    text = ""
    usage = None
    finish = None
    for chunk in stream:
        if chunk.usage is not None:
            usage = chunk.usage
        for choice in chunk.choices:
            text += choice.delta.content or ""
            finish = choice.finish_reason or finish
    assert text.startswith("scripted reply to ")
    assert LAST in text
    assert finish == "stop"
    assert usage is not None and usage.prompt_tokens > 0


def test_anthropic_plain():
    raw = anthropic_client().messages.with_raw_response.create(
        model="claude-sonnet-4-5",
        max_tokens=256,
        system=SYSTEM,
        messages=history(),
    )
    assert "prune_history" in raw.headers.get("x-context-cascade", "")
    message = raw.parse()
    assert message.stop_reason == "end_turn"
    text = message.content[0].text
    assert text.startswith("scripted reply to ")
    assert LAST in text
    assert message.usage.input_tokens > 0


def test_anthropic_streaming():
    with anthropic_client().messages.stream(
        model="claude-sonnet-4-5",
        max_tokens=256,
        system=SYSTEM,
        messages=history(),
    ) as stream:
        text = "".join(stream.text_stream)
        final = stream.get_final_message()
    assert text.startswith("scripted reply to ")
    assert LAST in text
    assert final.stop_reason == "end_turn"
    assert final.usage.input_tokens > 0


def test_openai_bad_request_is_a_readable_sdk_error():
    with pytest.raises(openai.BadRequestError) as error:
        openai_client().chat.completions.create(
            model="gpt-4o", messages=[{"role": "wizard", "content": "hi"}]
        )
    assert "$.messages[0].role" in str(error.value)


def test_anthropic_bad_request_is_a_readable_sdk_error():
    with pytest.raises(anthropic.BadRequestError) as error:
        anthropic_client().messages.create(
            model="claude-sonnet-4-5",
            max_tokens=16,
            messages=[{"role": "user", "content": 42}],
        )
    assert "$.messages[0].content" in str(error.value)


def responses_input():
    return [
        {"type": "message", "role": m["role"], "content": m["content"]} for m in history()
    ]


def test_openai_responses_plain():
    raw = openai_client().responses.with_raw_response.create(
        model="gpt-4o",
        instructions=SYSTEM,
        input=responses_input(),
        max_output_tokens=256,
    )
    assert "prune_history" in raw.headers.get("x-context-cascade", "")
    response = raw.parse()
    assert response.status == "completed"
    assert response.output_text.startswith("scripted reply to ")
    assert LAST in response.output_text
    assert response.usage.input_tokens > 0


def test_openai_responses_streaming():
    # The scripted upstream fails an over-limit stream with `response.failed`: the proxy
    # must retry before the client sees any event, so the SDK sees one clean response.
    stream = openai_client().responses.create(
        model="gpt-4o",
        instructions=SYSTEM,
        input=responses_input(),
        stream=True,
    )
    kinds = []
    text = ""
    final = None
    for event in stream:
        kinds.append(event.type)
        if event.type == "response.output_text.delta":
            text += event.delta
        if event.type == "response.completed":
            final = event.response
    assert "response.failed" not in kinds
    assert kinds.count("response.created") == 1
    assert text.startswith("scripted reply to ")
    assert LAST in text
    assert final is not None and final.usage.input_tokens > 0


def test_openai_responses_with_history_upstream_is_forwarded():
    raw = openai_client().responses.with_raw_response.create(
        model="gpt-4o", input="and then?", previous_response_id="resp_0"
    )
    assert raw.headers.get("x-context-cascade", "").startswith("history-upstream")
    assert raw.parse().output_text.startswith("scripted reply to ")


def test_openai_cut_stream_is_an_sdk_error_after_the_received_events():
    stream = openai_client().chat.completions.create(
        model="cut", messages=[{"role": "user", "content": "hi"}], stream=True
    )
    text = ""
    with pytest.raises(openai.APIError) as error:
        for chunk in stream:
            for choice in chunk.choices:
                text += choice.delta.content or ""
    assert text == "partial "
    assert "broke" in str(error.value)


def test_anthropic_cut_stream_is_an_sdk_error_after_the_received_events():
    events = []
    with pytest.raises(anthropic.APIError) as error:
        with anthropic_client().messages.stream(
            model="cut", max_tokens=16, messages=[{"role": "user", "content": "hi"}]
        ) as stream:
            for event in stream:
                events.append(event.type)
    assert events[:1] == ["message_start"]
    assert "broke" in str(error.value)
