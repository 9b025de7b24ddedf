"""The real OpenAI (Chat Completions, Responses) and Anthropic Python SDKs against the proxy
with recall on, in front of a scripted model that calls `context_recall` when the request
offers it (crates/proxy/examples/recall_upstream.rs, window 8,000 tokens).

Run by scripts/ci-proxy-sdk.sh, which sets CASCADE_RECALL_PROXY_URL. The conversation
holds a 33 kB build log whose last line is the fact asked for: the proxy cuts the log, the
model recalls it, and the SDK must read one clean answer or stream, with the line and
without the tool, its call or its result anywhere.
"""

import json
import os

import anthropic
import openai

PROXY = os.environ.get("CASCADE_RECALL_PROXY_URL", "http://127.0.0.1:9104")
SECRET = "error[E0425]: cannot find value `swordfish_budget` in this scope"
TOOL = "context_recall"
LOG = "".join(f"compiling unit {i} ok\n" for i in range(1500)) + SECRET + "\n"


def openai_client():
    return openai.OpenAI(base_url=f"{PROXY}/v1", api_key="sk-recall-sdk", max_retries=0)


def anthropic_client():
    return anthropic.Anthropic(base_url=PROXY, api_key="ant-recall-sdk", max_retries=0)


def unseen(*objects):
    """Asserts no object the SDK returned mentions the recall tool."""
    for o in objects:
        # warnings=False: pydantic warns serializing the parsed Responses union, not our concern.
        dumped = o.model_dump_json(warnings=False) if hasattr(o, "model_dump_json") else json.dumps(o)
        assert TOOL not in dumped, dumped


CHAT_MESSAGES = [
    {"role": "user", "content": "build it"},
    {"role": "assistant", "content": None, "tool_calls": [{"id": "b1", "type": "function",
        "function": {"name": "bash", "arguments": "{\"command\": \"cargo build\"}"}}]},
    {"role": "tool", "tool_call_id": "b1", "content": LOG},
    {"role": "assistant", "content": "It ran."},
    {"role": "user", "content": "why did it fail?"},
]
CHAT_TOOLS = [{"type": "function", "function": {"name": "bash",
    "parameters": {"type": "object", "properties": {"command": {"type": "string"}}}}}]


def test_chat_plain():
    raw = openai_client().chat.completions.with_raw_response.create(
        model="gpt-4o", messages=CHAT_MESSAGES, tools=CHAT_TOOLS
    )
    assert TOOL not in raw.http_response.text
    completion = raw.parse()
    unseen(completion)
    choice = completion.choices[0]
    assert SECRET in choice.message.content
    assert not choice.message.tool_calls
    assert choice.finish_reason == "stop"
    assert completion.usage.prompt_tokens == 200  # two rounds, summed


def test_chat_streaming():
    with openai_client().chat.completions.stream(
        model="gpt-4o", messages=CHAT_MESSAGES, tools=CHAT_TOOLS,
        stream_options={"include_usage": True},
    ) as stream:
        events = list(stream)
        final = stream.get_final_completion()
    unseen(final, *events)
    assert len(final.choices) == 1
    message = final.choices[0].message
    assert message.content == "Looking." + SECRET
    assert message.role == "assistant"
    assert not message.tool_calls
    assert final.choices[0].finish_reason == "stop"
    assert final.usage.prompt_tokens == 200


# Not Chat's model: the scripted usage (100 tokens a round) teaches the proxy's calibration,
# per model, that requests count little; kept apart, each API's first request is cut alike.
RESPONSES_MODEL = "gpt-4.1"
RESPONSES_INPUT = [
    {"role": "user", "content": "build it"},
    {"type": "function_call", "call_id": "b1", "name": "bash",
     "arguments": "{\"command\": \"cargo build\"}"},
    {"type": "function_call_output", "call_id": "b1", "output": LOG},
    {"role": "assistant", "content": "It ran."},
    {"role": "user", "content": "why did it fail?"},
]
RESPONSES_TOOLS = [{"type": "function", "name": "bash",
    "parameters": {"type": "object", "properties": {"command": {"type": "string"}}}}]


def test_responses_plain():
    response = openai_client().responses.create(
        model=RESPONSES_MODEL, input=RESPONSES_INPUT, tools=RESPONSES_TOOLS
    )
    unseen(response)
    assert SECRET in response.output_text
    assert all(item.type == "message" for item in response.output)
    assert response.usage.input_tokens == 200


def test_responses_streaming():
    with openai_client().responses.stream(
        model=RESPONSES_MODEL, input=RESPONSES_INPUT, tools=RESPONSES_TOOLS
    ) as stream:
        events = list(stream)
        final = stream.get_final_response()
    unseen(final, *events)
    kinds = [e.type for e in events]
    assert kinds.count("response.created") == 1 and kinds.count("response.completed") == 1
    assert final.output_text == "Looking." + SECRET
    assert [item.type for item in final.output] == ["message", "message"]
    assert final.usage.input_tokens == 200


ANTHROPIC_MESSAGES = [
    {"role": "user", "content": "build it"},
    {"role": "assistant", "content": [{"type": "tool_use", "id": "b1", "name": "bash",
        "input": {"command": "cargo build"}}]},
    {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "b1", "content": LOG}]},
    {"role": "assistant", "content": "It ran."},
    {"role": "user", "content": "why did it fail?"},
]
ANTHROPIC_TOOLS = [{"name": "bash",
    "input_schema": {"type": "object", "properties": {"command": {"type": "string"}}}}]


def test_anthropic_plain():
    message = anthropic_client().messages.create(
        model="claude-sonnet-4-5", max_tokens=256, messages=ANTHROPIC_MESSAGES,
        tools=ANTHROPIC_TOOLS,
    )
    unseen(message)
    assert [block.type for block in message.content] == ["text"]
    assert message.content[0].text == SECRET
    assert message.stop_reason == "end_turn"
    assert message.usage.input_tokens == 200


def test_anthropic_streaming():
    with anthropic_client().messages.stream(
        model="claude-sonnet-4-5", max_tokens=256, messages=ANTHROPIC_MESSAGES,
        tools=ANTHROPIC_TOOLS,
    ) as stream:
        events = list(stream)
        final = stream.get_final_message()
    unseen(final, *events)
    assert [e.type for e in events].count("message_start") == 1
    assert [block.type for block in final.content] == ["text", "text"]
    assert "".join(block.text for block in final.content) == "Looking." + SECRET
    assert final.stop_reason == "end_turn"
    assert final.usage.input_tokens == 200
    assert final.usage.output_tokens == 20
