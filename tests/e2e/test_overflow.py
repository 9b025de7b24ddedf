"""④ The overflow path for real: the proxy is told --window 8192 in front of a llama-server
with n_ctx 2048, so it sends a ~4,000-token request as is; llama-server's own
`exceed_context_size_error` must be classified as an overflow, recovered from (the client
gets a 200), counted in /metrics, and its quoted n_prompt_tokens must feed the calibration.
"""

from helpers import MODEL, anthropic_body, metric, metrics, openai_body, parse_report_header
from helpers import post_json, session_messages, spec_ema_config, uncalibrated_prior

# user, assistant + tool call, tool result, assistant, 2 tool results: ~2,900 SmolLM2 tokens
# (over 2048), well under 90% of 8192 (so the proxy sends it untouched the first time).
HISTORY = 6


def overflow_quote(server_url, body, path="/v1/chat/completions"):
    status, _, error = post_json(f"{server_url}{path}", body)
    assert status == 400, error
    assert error["error"]["type"] == "exceed_context_size_error", error
    return error["error"]["n_prompt_tokens"]


def test_openai_stream_overflow_recovered_and_calibrates(llama_2048, start_proxy, tmp_path, figures):
    # SPEC's rule: the arithmetic below is its (first quote as is, then α 0.3).
    proxy = start_proxy(llama_2048.url, "--window", 8192, *spec_ema_config(tmp_path))
    # Streaming without stream_options: the answer carries no usage, so the only thing that
    # can calibrate the scale is the overflow's quoted n_prompt_tokens.
    body = openai_body(session_messages()[:HISTORY], stream=True)
    quoted = overflow_quote(llama_2048.url, body)
    prior = uncalibrated_prior(body, tmp_path)
    before = metrics(proxy.url)
    assert metric(before, "cascade_token_scale", model=MODEL) == 0

    status, headers, stream = post_json(f"{proxy.url}/v1/chat/completions", body, stream=True)
    header = headers.get("x-context-cascade")
    assert status == 200, stream
    assert "data: [DONE]" in stream
    assert '"content":"' in stream, stream[-500:]
    # No usage reached the proxy: whatever scale it has now came from the overflow quotes.
    assert '"usage"' not in stream, stream[-500:]
    steps = parse_report_header(header)
    assert steps, "recovered without any strategy?"

    after = metrics(proxy.url)
    overflows = metric(after, "cascade_overflow_errors_total")
    assert overflows >= 1
    assert metric(after, "cascade_overflow_recoveries_total") == 1
    assert metric(after, "cascade_overflow_exhausted_total") == 0
    scale = metric(after, "cascade_token_scale", model=MODEL)
    expected = quoted / prior
    if overflows == 1:
        # One observation, the first one, taken as is: n_prompt_tokens / prior.
        assert abs(scale / expected - 1) < 0.01, (scale, expected)
    else:
        # The first quote taken as is, then folded with α = 0.3 (the default): the second
        # quote's implied ratio must be a plausible SmolLM2/prior ratio (1.13-1.34 measured).
        second = (scale - 0.7 * expected) / 0.3
        assert 0.8 < second < 1.6, (scale, expected, second)
    figures["overflow_openai_stream"] = {
        "n_prompt_tokens_quoted": quoted,
        "n_ctx": 2048,
        "prior": round(prior, 1),
        "scale_after": round(scale, 4),
        "scale_expected_from_quote": round(expected, 4),
        "overflow_errors": int(overflows),
        "strategies": steps,
    }


def test_anthropic_overflow_recovered(llama_2048, start_proxy, figures):
    proxy = start_proxy(llama_2048.url, "--window", 8192)
    body = anthropic_body(session_messages()[:HISTORY])
    # llama-server answers /v1/messages overflows with its OpenAI-style error body.
    quoted = overflow_quote(llama_2048.url, body, "/v1/messages")
    status, headers, answer = post_json(f"{proxy.url}/v1/messages", body)
    assert status == 200, answer
    text = "".join(b.get("text", "") for b in answer["content"] if b["type"] == "text")
    assert text.strip(), answer
    samples = metrics(proxy.url)
    assert metric(samples, "cascade_overflow_errors_total") >= 1
    assert metric(samples, "cascade_overflow_recoveries_total") == 1
    assert metric(samples, "cascade_token_scale", model=MODEL) > 0
    figures["overflow_anthropic"] = {
        "n_prompt_tokens_quoted": quoted,
        "overflow_errors": int(metric(samples, "cascade_overflow_errors_total")),
        "strategies": parse_report_header(headers.get("x-context-cascade")),
        "sent_input_tokens": answer["usage"]["input_tokens"]
        + answer["usage"].get("cache_read_input_tokens", 0),
    }
