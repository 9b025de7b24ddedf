"""Proxy failures seen against the real llama-server, reproduced minimally.

Both are marked xfail(strict=True): they fail today, and the day the engine is fixed they
XPASS, which fails the run until the marker is removed. Nothing is skipped.

Root cause (both): after an overflow, the calibrated estimate still says the request fits.
The EMA folds the quoted n_prompt_tokens in with α = 0.3, so the scale lags the real
count; the recovery ladder (crates/core/src/retry.rs `recover_enough`, steps in
crates/core/src/engine.rs `recover`) measures "freed" and targets with that estimate, so
every attempt frees 0 (or truncates to exactly E by the lagging estimate), and the request
ends `Exhausted` with a 400 although max_calls (5) is not reached.
"""

import pytest

from helpers import load_messages, openai_body, post_json

FIXTURE = "claude-code__spotter__6c2214d7-subagent-afc096d.json"

LAGGING_SCALE = (
    "engine: after an overflow the lagging EMA estimate says the request fits, every recovery "
    "attempt frees 0 tokens and the proxy answers 400 context_length_exceeded"
)


@pytest.mark.xfail(strict=True, reason=LAGGING_SCALE)
def test_overflow_by_a_few_tokens_after_a_summary_is_recovered(llama_2048, start_proxy):
    # Calibrated on two streamed turns (scale 0.98), the third turn is summarized to an
    # estimated 1848 tokens; llama-server counts 2066 (> 2048). Observed: scale → 1.03,
    # estimate still 1848 < E = 2036, attempts 1-4 free 0, 400 after 1 call.
    proxy = start_proxy(llama_2048.url)
    messages = load_messages(FIXTURE)
    for k in (11, 15, 19):
        body = openai_body(messages[:k], stream=True, stream_options={"include_usage": True})
        status, _, answer = post_json(f"{proxy.url}/v1/chat/completions", body, stream=True)
        assert status == 200, f"messages[:{k}]: {status} {answer}"


@pytest.mark.xfail(strict=True, reason=LAGGING_SCALE)
def test_first_request_far_over_the_window_is_recovered(llama_2048, start_proxy):
    # A fresh proxy (no calibration) gets 7 messages, ~4,000 SmolLM2 tokens. Observed: call 1
    # quoted 2931 tokens (scale → 1.27), attempts 1-3 free 0, attempt 4 truncates the tool
    # results to the lagging estimate; call 2 is quoted 2053 tokens (> 2048); no attempt is
    # left: 400 after 2 calls.
    proxy = start_proxy(llama_2048.url)
    body = openai_body(load_messages(FIXTURE)[:7])
    status, _, answer = post_json(f"{proxy.url}/v1/chat/completions", body)
    assert status == 200, answer
