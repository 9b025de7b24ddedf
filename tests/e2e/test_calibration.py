"""③ The calibration against a real tokenizer. SmolLM2's tokenizer is not the one the
prior is fitted on; with SPEC's EMA (the default, pinned: `prior_tokens = 0`), after a few
turns the proxy's calibrated estimate (scale × prior, the scale read from /metrics, the prior
from `cascade inspect` of the same body) must be within 10% of the prompt_tokens llama-server
reports for the next request. The size-weighted rule (`prior_tokens = 32000`) lets a request move the scale
in proportion to its size against 32,000 tokens of prior weight: on these small requests
(113 to ~3,000 tokens) it moves less per turn, and must get closer every turn.

n_ctx 4096 and requests under 90% of it: the cascade leaves them untouched, so the body
`cascade inspect` sees is the body the proxy calibrated on.
"""

import re

from helpers import MODEL, metric, metrics, openai_body, parse_report_header, post_json
from helpers import calibration_config, session_messages, spec_ema_config, uncalibrated_prior

# Growing prefixes of the session (user, assistant + tool calls, tool results): 113 to
# ~3,000 SmolLM2 tokens.
PREFIXES = [1, 3, 5, 6]
TOLERANCE = 0.10


def calibration_errors(proxy, tmp_path):
    """Per turn after the first: (calibrated estimate / prompt_tokens − 1); and the
    uncalibrated prior's error on every turn."""
    messages = session_messages()
    errors = []
    uncalibrated_errors = []
    for i, k in enumerate(PREFIXES):
        body = openai_body(messages[:k])
        prior = uncalibrated_prior(body, tmp_path)
        scale = metric(metrics(proxy.url), "cascade_token_scale", model=MODEL)
        status, headers, answer = post_json(f"{proxy.url}/v1/chat/completions", body)
        assert status == 200, answer
        assert not parse_report_header(headers.get("x-context-cascade")), (
            "the cascade changed the request: the prior would not be the proxy's"
        )
        real = answer["usage"]["prompt_tokens"]
        uncalibrated_errors.append(round(prior * 1.1 / real - 1, 4))
        if i == 0:
            assert scale == 0, "a fresh proxy already has a scale"
            continue
        error = scale * prior / real - 1
        errors.append(round(error, 4))
    return errors, uncalibrated_errors


def test_calibrated_estimate_within_ten_percent(llama_4096, start_proxy, tmp_path, figures):
    proxy = start_proxy(llama_4096.url, *spec_ema_config(tmp_path))
    errors, uncalibrated_errors = calibration_errors(proxy, tmp_path)
    final = metric(metrics(proxy.url), "cascade_token_scale", model=MODEL)
    figures["calibration"] = {
        "turns": len(PREFIXES),
        "relative_error_per_turn_after_first": errors,
        "uncalibrated_relative_error_per_turn": uncalibrated_errors,
        "final_scale": round(final, 4),
    }
    assert abs(errors[-1]) <= TOLERANCE, (
        f"after {len(PREFIXES) - 1} observed turns the calibrated estimate is off by "
        f"{errors[-1]:+.1%} (per turn: {errors})"
    )


def test_size_weighted_rule_gets_closer_every_turn(llama_4096, start_proxy, tmp_path, figures):
    proxy = start_proxy(llama_4096.url, *calibration_config(tmp_path, 32000))
    errors, _ = calibration_errors(proxy, tmp_path)
    figures["calibration_size_weighted"] = {"relative_error_per_turn_after_first": errors}
    assert all(abs(b) < abs(a) for a, b in zip(errors, errors[1:])), (
        f"the size-weighted scale did not get closer every turn: {errors}"
    )


def test_first_request_counted_by_the_llama_cpp_tokenizer(llama_4096, start_proxy, figures):
    """A model llama-server serves (found by window discovery) has its first request counted by
    the server itself (/apply-template, then /tokenize) before the cascade decides: that count is
    the prompt_tokens the server then bills, and the later requests need no count."""
    proxy = start_proxy(llama_4096.url)
    messages = session_messages()
    counts = []
    for k in PREFIXES[2:]:
        status, _, answer = post_json(f"{proxy.url}/v1/chat/completions", openai_body(messages[:k]))
        assert status == 200, answer
        counts.append(answer["usage"]["prompt_tokens"])
    logged = re.findall(r"first request counted by llama\.cpp.*?tokens=(\d+)", proxy.log_text())
    assert [int(n) for n in logged] == counts[:1], proxy.log_text()
    assert metric(metrics(proxy.url), "cascade_llama_cpp_counts_total") == 1
    figures["llama_cpp_first_count"] = {"counted": int(logged[0]), "billed": counts[0]}
