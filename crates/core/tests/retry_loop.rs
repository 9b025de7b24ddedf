//! The retry loop (`ContextManager::call`) against scripted LLMs: overflows k times with and
//! without quoted counts, an upstream that enforces a real token limit, calibration from
//! what providers count, an overflow no strategy can fix, errors that are not overflows,
//! and a provider that quotes a smaller window than ours.

#![allow(clippy::unwrap_used, clippy::expect_used, unreachable_pub)] // test code: a failure is a test failure

mod common;

use common::scripted::{
    PROVIDERS, Provider, ScriptedLlm, count_of, enforcing_upstream, overflow_with_counts,
    overflow_without_counts, overflowing_upstream,
};
use common::sessions::{
    EVERY_RECOVERY, LIMIT, MODEL, PROVIDER_SCALE, check_requests, manager_with_summaries,
    manager_with_summaries_and_spec_ema, overflowing_session, overflowing_session_in, session,
    steps,
};
use context_cascade::LlmError;
use context_cascade::SUMMARY_PREFIX;
use context_cascade::format::{self, WriteOptions};
use context_cascade::{Budget, CallError, Conversation, Strategy};
use serde_json::json;

/// The body of the three `overflow_k_times_*` tests.
#[allow(clippy::unwrap_used)]
fn overflow_k_times(k: usize, provider: Provider, quoted: bool, anthropic: bool) {
    let what = format!("k = {k}, {provider:?}, counts quoted: {quoted}, anthropic: {anthropic}");
    let manager = manager_with_summaries();
    let original = overflowing_session_in(anthropic);
    let llm = overflowing_upstream(k, provider, quoted, PROVIDER_SCALE, LIMIT);
    let mut conversation = original.clone();
    let result = pollster::block_on(manager.call(&llm, &mut conversation, Budget::new(LIMIT, 0)));
    let received = llm.received();
    assert!(received.len() <= 5, "{what}: {} calls", received.len());
    check_requests(&manager, &original, &received);
    if let Some(last) = received.get(4) {
        // After attempt 4 only system, first user, summary, the notice and current are left.
        let first_user = &original.messages[original.first_user_index().unwrap()];
        for message in &last.messages {
            let text = message.text_content();
            assert!(
                message.role().is_system()
                    || message == first_user
                    || message == original.messages.last().unwrap()
                    || text.starts_with(SUMMARY_PREFIX)
                    || text.lines().next().is_some_and(
                        |l| l.ends_with("earlier messages removed; summary unavailable]")
                    ),
                "{what}: {text:?} left after attempt 4"
            );
        }
        assert!(
            last.messages
                .iter()
                .any(|m| m.text_content().starts_with(SUMMARY_PREFIX))
        );
    }
    match result {
        Ok(called) => {
            assert!(k <= 4, "{what}: succeeded");
            assert_eq!(called.report.calls, k + 1, "{what}");
            assert_eq!(received.len(), k + 1, "{what}");
            assert_eq!(called.report.overflows, k, "{what}");
            assert_eq!(steps(&called.report), EVERY_RECOVERY[..k], "{what}");
            assert_eq!(&conversation, received.last().unwrap(), "{what}");
            assert_eq!(called.report.degraded, k == 4, "{what}");
        }
        Err(CallError::Exhausted { report }) => {
            assert!(k >= 5, "{what}: exhausted: {report:?}");
            assert_eq!(report.calls, 5, "{what}");
            assert_eq!(report.overflows, 5, "{what}");
            assert_eq!(received.len(), 5, "{what}");
            assert_eq!(steps(&report), EVERY_RECOVERY, "{what}");
            assert_eq!(&conversation, received.last().unwrap(), "{what}");
            assert!(report.degraded, "{what}");
            let reason = report.reason.as_deref().unwrap_or("");
            assert!(reason.contains("5 calls"), "{what}: {reason}");
        }
        Err(other) => panic!("{what}: {other:?}"),
    }
    // Quoted counts calibrate the estimate; without them only the final usage does.
    let observations = manager
        .calibration()
        .get(MODEL)
        .map_or(0, |s| s.observations);
    let expected = if quoted { k.min(5) } else { 0 } + usize::from(k <= 4);
    assert_eq!(observations, expected as u64, "{what}");
}

#[test]
fn overflow_k_times_with_quoted_counts() {
    for provider in PROVIDERS {
        for k in 1..=6 {
            overflow_k_times(k, provider, true, false);
        }
    }
}

#[test]
fn overflow_k_times_in_anthropic_form() {
    for quoted in [true, false] {
        for k in 1..=6 {
            overflow_k_times(k, Provider::Anthropic, quoted, true);
        }
    }
}

#[test]
fn overflow_k_times_without_quoted_counts() {
    for provider in PROVIDERS {
        for k in 1..=6 {
            overflow_k_times(k, provider, false, false);
        }
    }
}

#[test]
fn an_upstream_enforcing_its_limit_is_met_and_teaches_the_scale() {
    for provider in PROVIDERS {
        let manager = manager_with_summaries_and_spec_ema();
        let original = overflowing_session();
        let llm = enforcing_upstream(provider, PROVIDER_SCALE, LIMIT, true);
        let mut conversation = original.clone();
        let called =
            pollster::block_on(manager.call(&llm, &mut conversation, Budget::new(LIMIT, 0)))
                .unwrap_or_else(|e| panic!("{provider:?}: {e}"));
        let received = llm.received();
        check_requests(&manager, &original, &received);
        assert_eq!(called.report.calls, received.len());
        assert!(received.len() >= 2 && received.len() <= 5);
        assert!(count_of(received.last().unwrap(), PROVIDER_SCALE) <= LIMIT);
        let multiplier = manager.estimator(MODEL).multiplier;
        assert!(
            (multiplier / PROVIDER_SCALE - 1.0).abs() < 0.10,
            "{provider:?}: learnt {multiplier}"
        );
        // Every call was observed: the overflows by their quoted count, the success by usage.
        let scale = manager.calibration().get(MODEL).unwrap();
        assert_eq!(scale.observations, received.len() as u64);
        assert!(!called.report.degraded);
    }
}

#[test]
fn quoted_counts_alone_calibrate_the_estimate() {
    let manager = manager_with_summaries_and_spec_ema();
    let llm = enforcing_upstream(Provider::Anthropic, PROVIDER_SCALE, LIMIT, false);
    let mut conversation = overflowing_session();
    let called =
        pollster::block_on(manager.call(&llm, &mut conversation, Budget::new(LIMIT, 0))).unwrap();
    assert_eq!(called.report.calls, 2);
    let scale = manager.calibration().get(MODEL).unwrap();
    assert_eq!(scale.observations, 1, "only the overflow quoted a count");
    assert!((scale.scale - PROVIDER_SCALE).abs() < 0.01, "{scale:?}");
    // The recovery after the overflow already used the learnt scale: one retry was enough.
    assert_eq!(
        steps(&called.report),
        [(Strategy::PruneHistory, Some(1), None)]
    );
}

#[test]
fn the_ema_converges_over_an_agent_loop() {
    // The manager starts calibrated at 1.0 and the provider counts 1.3×: every count it
    // quotes in an overflow or reports as usage moves the scale by α = 0.3 towards 1.3.
    let manager = manager_with_summaries_and_spec_ema();
    manager.observe(MODEL, 1000.0, 1000);
    let llm = enforcing_upstream(Provider::OpenAi, PROVIDER_SCALE, LIMIT, true);
    let mut conversation = overflowing_session();
    let mut observations = 1;
    for turn in 0..10 {
        let called =
            pollster::block_on(manager.call(&llm, &mut conversation, Budget::new(LIMIT, 0)))
                .unwrap_or_else(|e| panic!("turn {turn}: {e}"));
        if turn == 0 {
            // Underestimated by the 1.0 scale: the first call overflowed.
            assert_eq!(called.report.overflows, 1);
        }
        observations += called.report.calls as u64;
        let expected = PROVIDER_SCALE - 0.3 * 0.7f64.powi(observations as i32 - 1);
        let scale = manager.calibration().get(MODEL).unwrap();
        assert_eq!(scale.observations, observations);
        assert!(
            (scale.scale - expected).abs() < 0.005,
            "turn {turn}: {} vs {expected}",
            scale.scale
        );
        // The agent carries the conversation forward: an answer, a new request.
        let grown = session(2 + turn, 900, &format!("turn {turn}: continue"));
        conversation.messages.pop();
        conversation
            .messages
            .extend(grown.messages[grown.messages.len() - 3..].iter().cloned());
    }
    assert!((manager.estimator(MODEL).multiplier - PROVIDER_SCALE).abs() < 0.01);
}

#[test]
fn an_overflow_no_strategy_can_fix_ends_with_the_reason() {
    // The current message alone is larger than the window: nothing may remove it.
    let huge = "Please review this design document carefully. ".repeat(1_200);
    let original = session(6, 400, &huge);
    for provider in PROVIDERS {
        let manager = manager_with_summaries();
        let llm = enforcing_upstream(provider, PROVIDER_SCALE, LIMIT, true);
        let mut conversation = original.clone();
        let result =
            pollster::block_on(manager.call(&llm, &mut conversation, Budget::new(LIMIT, 0)));
        let Err(CallError::Exhausted { report }) = result else {
            panic!("{provider:?}: {result:?}");
        };
        assert!(llm.calls() <= 5 && llm.calls() >= 1);
        assert_eq!(report.calls, llm.calls());
        assert_eq!(report.overflows, llm.calls());
        assert!(!report.fits);
        let reason = report.reason.as_deref().unwrap();
        assert!(
            reason.contains("no strategy may remove"),
            "{provider:?}: {reason}"
        );
        assert_eq!(conversation.messages.last(), original.messages.last());
        let error = CallError::Exhausted { report };
        assert!(error.to_string().contains("no strategy may remove"));
    }
}

#[test]
fn errors_that_are_not_overflows_pass_through_untouched_after_one_call() {
    let rate_limit = LlmError::Status {
        status: 429,
        headers: vec![
            ("retry-after".into(), "10".into()),
            ("x-ratelimit-remaining-tokens".into(), "1446".into()),
        ],
        body: "openai.error.RateLimitError: Rate limit reached for gpt-4 in organization org-uVqpjtJiKqvVJMVfvpaounIh on tokens per min (TPM): Limit 10000, Used 8554, Requested 3082. Please try again in 9.816s. Visit https://platform.openai.com/account/rate-limits to learn more.".into(),
    };
    // A TPM answer sent without the 429 status is still no overflow.
    let tpm_without_status = LlmError::status(
        413,
        "Request too large for gpt-4o in organization org-vyUrKHsIdLcZGKR3zqCqllrS on tokens per min (TPM): Limit 30000, Requested 61337. The input or output tokens must be reduced in order to run successfully.",
    );
    let unauthorized = LlmError::Status {
        status: 401,
        headers: vec![("www-authenticate".into(), "Bearer".into())],
        body: r#"{"error":{"message":"Incorrect API key provided: sk-abc***xyz. You can find your API key at https://platform.openai.com/account/api-keys.","type":"invalid_request_error","param":null,"code":"invalid_api_key"}}"#.into(),
    };
    let errors = [
        rate_limit,
        tpm_without_status,
        unauthorized,
        LlmError::Transport("connection reset by peer".into()),
        LlmError::Timeout,
    ];
    // Large enough that prepare has work to do (① cuts the log, the preemptive check fires).
    let mut body =
        format::to_value(&session(20, 900, "what failed?"), WriteOptions::default()).unwrap();
    let messages = body["messages"].as_array_mut().unwrap();
    let last = messages.pop().unwrap();
    messages.push(json!({"role": "assistant", "content": null, "tool_calls": [
        {"id": "log", "type": "function", "function": {"name": "bash", "arguments": "{\"command\":\"cat ci.log\"}"}}]}));
    messages.push(json!({"role": "tool", "tool_call_id": "log", "content": "error: test parser::nested failed\n".repeat(1_000)}));
    messages.push(last);
    let original = format::parse(body.to_string().as_bytes(), None).unwrap();
    for error in errors {
        assert!(error.overflow().is_none(), "{error:?}");
        let manager = manager_with_summaries();
        let answer = error.clone();
        let llm = ScriptedLlm::new(move |_, _: &Conversation| Err(answer.clone()));
        let mut conversation = original.clone();
        let result =
            pollster::block_on(manager.call(&llm, &mut conversation, Budget::new(LIMIT, 0)));
        let Err(CallError::Llm { error: got, report }) = result else {
            panic!("{error:?}: {result:?}");
        };
        assert_eq!(got, error);
        assert_eq!(llm.calls(), 1);
        assert_eq!(report.calls, 1);
        assert_eq!(report.overflows, 0);
        // What prepare did, and nothing more.
        let mut prepared = original.clone();
        let prepare_report = pollster::block_on(
            manager_with_summaries().prepare(&mut prepared, Budget::new(LIMIT, 0)),
        );
        assert!(!prepare_report.steps.is_empty());
        assert_eq!(conversation, prepared, "{error:?}");
        assert_eq!(llm.received()[0], prepared);
        assert_eq!(steps(&report), steps(&prepare_report));
        assert!(manager.calibration().get(MODEL).is_none());
    }
}

#[test]
fn a_smaller_quoted_limit_shrinks_the_budget() {
    // We were told 16K; the provider enforces 8K and says so.
    let original = overflowing_session();
    for provider in PROVIDERS {
        let manager = manager_with_summaries();
        let llm = enforcing_upstream(provider, PROVIDER_SCALE, LIMIT, true);
        let mut conversation = original.clone();
        let called =
            pollster::block_on(manager.call(&llm, &mut conversation, Budget::new(16_000, 0)))
                .unwrap_or_else(|e| panic!("{provider:?}: {e}"));
        assert_eq!(called.report.window, LIMIT, "{provider:?}");
        assert!(called.report.fits);
        assert_eq!(called.report.calls, 2, "{provider:?}");
        assert!(count_of(&conversation, PROVIDER_SCALE) <= LIMIT);
        // The recovery aimed at 0.75 of the quoted window, not of ours.
        let target = called.report.steps[0].target_tokens;
        assert_eq!(target, Budget::new(LIMIT, 0).share(0.75), "{provider:?}");
    }
}

#[test]
fn a_larger_quoted_limit_does_not_grow_the_budget() {
    let original = overflowing_session();
    let manager = manager_with_summaries();
    let llm = overflowing_upstream(1, Provider::Anthropic, true, PROVIDER_SCALE, 200_000);
    let mut conversation = original.clone();
    let called =
        pollster::block_on(manager.call(&llm, &mut conversation, Budget::new(LIMIT, 0))).unwrap();
    assert_eq!(called.report.window, LIMIT);
}

#[test]
fn the_scripted_bodies_are_the_providers_own() {
    // The doubles answer with the providers' real wording; the counts are read back.
    let openai = r#"{"error":{"message":"This model's maximum context length is 8192 tokens. However, your messages resulted in 9000 tokens.","type":"invalid_request_error","code":"context_length_exceeded"}}"#;
    assert_eq!(
        overflow_with_counts(Provider::OpenAi, 9_000, 8_192),
        LlmError::status(400, openai)
    );
    for provider in PROVIDERS {
        let overflow = overflow_with_counts(provider, 9_000, 8_192)
            .overflow()
            .unwrap_or_else(|| panic!("{provider:?}"));
        assert_eq!(overflow.observed_tokens, Some(9_000), "{provider:?}");
        assert_eq!(overflow.limit_tokens, Some(8_192), "{provider:?}");
        let bare = overflow_without_counts(provider).overflow();
        assert!(
            bare.as_ref()
                .is_some_and(|o| o.observed_tokens.is_none() && o.limit_tokens.is_none()),
            "{provider:?}: {bare:?}"
        );
    }
}
