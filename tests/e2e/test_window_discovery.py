"""② The window learned by discovery: no --window, so the proxy asks llama-server's
GET /props for n_ctx (2048). The built-in catalog says 8192 for `smollm2`; only the
discovered 2048 makes the proxy compact this ~2,400-token request before sending it, so
that llama-server never refuses it.
"""

from helpers import metric, metric_family, metrics, openai_body, parse_report_header, post_json
from helpers import session_messages


def test_window_discovered_from_props(llama_2048, start_proxy, figures):
    proxy = start_proxy(llama_2048.url)
    messages = session_messages()

    # Under 2048 tokens but over 90% of the window: with the catalog's 8192 the proxy would
    # send it untouched; with the discovered 2048 it compacts it, before the first call.
    near = openai_body(messages[:5])
    status, headers, answer = post_json(f"{proxy.url}/v1/chat/completions", near)
    assert status == 200, answer
    assert answer["choices"][0]["message"]["content"].strip()
    near_steps = parse_report_header(headers.get("x-context-cascade"))
    assert near_steps, "not compacted: the proxy did not use the discovered 2048 window"
    samples = metrics(proxy.url)
    assert metric(samples, "cascade_overflow_errors_total") == 0
    assert metric(samples, "cascade_upstream_calls_total") == 1

    # Over 2048 tokens: sent as is, llama-server refuses it; through the proxy it succeeds.
    over = openai_body(messages[:6])
    status, _, direct = post_json(f"{llama_2048.url}/v1/chat/completions", over)
    assert status == 400, direct
    assert direct["error"]["type"] == "exceed_context_size_error", direct
    real_tokens = direct["error"]["n_prompt_tokens"]
    assert real_tokens > 2048
    status, headers, answer = post_json(f"{proxy.url}/v1/chat/completions", over)
    assert status == 200, answer
    assert answer["choices"][0]["message"]["content"].strip()
    assert answer["usage"]["prompt_tokens"] < 2048
    over_steps = parse_report_header(headers.get("x-context-cascade"))
    assert over_steps

    samples = metrics(proxy.url)
    assert metric_family(samples, "cascade_window_source_total", "source") == {"upstream": 2.0}
    assert metric(samples, "cascade_overflow_exhausted_total") == 0
    figures["window_discovery"] = {
        "near_window_strategies": near_steps,
        "over_window_request_tokens": real_tokens,
        "over_window_sent_prompt_tokens": answer["usage"]["prompt_tokens"],
        "over_window_strategies": over_steps,
        "overflow_errors": int(metric(samples, "cascade_overflow_errors_total")),
    }
