//! The retry loop (`ContextManager::call`) against scripted LLMs: overflows k times with and
//! without quoted counts, an upstream that enforces a real token limit, an overflow no
//! strategy can fix, errors that are not overflows, steps that free too little, and a
//! provider that quotes a smaller window than ours.

mod common;

use std::sync::Arc;

use common::invariants;
use common::scripted::{
    PROVIDERS, Provider, ScriptedLlm, ScriptedSummarizer, count_of, enforcing_upstream,
    nine_sections, overflow_with_counts, overflow_without_counts, overflowing_upstream,
};
use context_cascade::format::{self, WriteOptions};
use context_cascade::llm::LlmError;
use context_cascade::markers::{COMPACTED, SUMMARY_PREFIX};
use context_cascade::summarizer::SummaryError;
use context_cascade::{
    Budget, CallError, CascadeConfig, ContextManager, Conversation, Message, OldResults, Recovery,
    Report, Role, Strategy, Tail,
};
use serde_json::json;

const MODEL: &str = "gpt-4o";
/// The window every provider double enforces (and quotes).
const LIMIT: u64 = 8_192;
/// How many more tokens the provider doubles count than the prior: a tokenizer the
/// estimate has to learn.
const PROVIDER_SCALE: f64 = 1.3;

/// A coding-agent session: system, the first request, `turns` exchanges of about `chars`
/// characters per message (some through a tool the cascade may not compact), and the
/// current request.
fn session(turns: usize, chars: usize, current: &str) -> Conversation {
    session_in(turns, chars, current, false)
}

/// [`session`] in OpenAI form, or in Anthropic form (for the same model, so that both
/// forms are estimated alike).
fn session_in(turns: usize, chars: usize, current: &str, anthropic: bool) -> Conversation {
    let mut messages = vec![
        json!({"role": "system", "content": "You are a careful coding agent. Explain before you edit."}),
        json!({"role": "user", "content": "The CI is red: fix the failing test in src/parser.rs without changing the public API."}),
    ];
    for turn in 0..turns {
        let filler = |who: &str| {
            let line = format!(
                "{who} {turn}: looked at src/module_{turn}.rs, line {}, and the parser state. ",
                turn * 7
            );
            line.repeat(chars / line.len() + 1)[..chars].to_owned()
        };
        if turn % 4 == 3 {
            let id = format!("call_{turn}");
            messages.push(json!({"role": "assistant", "content": filler("plan"), "tool_calls": [
                {"id": id, "type": "function", "function": {"name": "lookup_ticket", "arguments": format!("{{\"ticket\": {turn}}}")}}]}));
            messages.push(json!({"role": "tool", "tool_call_id": id, "content": filler("ticket")}));
        } else {
            messages.push(json!({"role": "assistant", "content": filler("assistant")}));
            messages.push(json!({"role": "user", "content": filler("user")}));
        }
    }
    messages.push(json!({"role": "user", "content": current}));
    let body = if anthropic {
        let mut body = common::to_anthropic(&messages);
        body["model"] = json!(MODEL);
        body
    } else {
        json!({"model": MODEL, "messages": messages})
    };
    format::parse(body.to_string().as_bytes(), None).unwrap()
}

/// The session the overflow tests send: the manager's uncalibrated estimate (prior × 1.1)
/// stays under the preemptive threshold of LIMIT, so the first call goes out unchanged,
/// while the provider (prior × 1.3) counts more than LIMIT.
fn overflowing_session() -> Conversation {
    overflowing_session_in(false)
}

fn overflowing_session_in(anthropic: bool) -> Conversation {
    let current = "Now run the whole suite and tell me what is still red.";
    let conversation = (1..)
        .map(|turns| session_in(turns, 600, current, anthropic))
        .find(|c| count_of(c, PROVIDER_SCALE) > LIMIT)
        .unwrap();
    let manager = ContextManager::new(CascadeConfig::default());
    assert!(!manager.should_preemptive_compact(&conversation, Budget::new(LIMIT, 0)));
    assert!(count_of(&conversation, PROVIDER_SCALE) > LIMIT);
    conversation
}

fn manager_with_summaries() -> ContextManager {
    let summarizer = ScriptedSummarizer::new(|i, _| Ok(nine_sections(&format!("summary {i}"))));
    ContextManager::new(CascadeConfig::default()).with_summarizer(Arc::new(summarizer))
}

fn bytes(conversation: &Conversation) -> usize {
    format::to_vec(conversation, WriteOptions::default())
        .unwrap()
        .len()
}

/// The first user message and the current message went out unchanged in every request, and
/// every retried request is smaller than the one before, in bytes and in the estimate.
fn check_requests(manager: &ContextManager, original: &Conversation, received: &[Conversation]) {
    let first_user = &original.messages[original.first_user_index().unwrap()];
    let current = original.messages.last().unwrap();
    for (i, sent) in received.iter().enumerate() {
        assert!(
            sent.messages.contains(first_user),
            "call {i}: first user message lost"
        );
        assert_eq!(
            sent.messages.last(),
            Some(current),
            "call {i}: current message lost"
        );
        invariants::tool_pairs(sent).unwrap_or_else(|e| panic!("call {i}: {e}"));
        invariants::role_order(sent).unwrap_or_else(|e| panic!("call {i}: {e}"));
        invariants::markers_exact(sent).unwrap_or_else(|e| panic!("call {i}: {e}"));
    }
    let estimator = manager.estimator(MODEL);
    for pair in received.windows(2) {
        assert!(
            bytes(&pair[1]) < bytes(&pair[0]),
            "a retried request is not smaller"
        );
        assert!(estimator.tokens(&pair[1]) < estimator.tokens(&pair[0]));
    }
}

/// (strategy, recovery attempt, ⑤'s level) of every step, in order.
fn steps(report: &Report) -> Vec<(Strategy, Option<u8>, Option<u8>)> {
    report
        .steps
        .iter()
        .map(|s| (s.strategy, s.attempt, s.level))
        .collect()
}

/// Every recovery attempt, in order, as the report lists it: ③ at 0.75·E, ④ at 0.6·E, ④ at
/// 0.5·E, ⑤'s bare notice.
const EVERY_RECOVERY: [(Strategy, Option<u8>, Option<u8>); 4] = [
    (Strategy::PruneHistory, Some(1), None),
    (Strategy::Summarize, Some(2), None),
    (Strategy::Summarize, Some(3), None),
    (Strategy::Degrade, Some(4), Some(3)),
];

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
                    || text.ends_with("earlier messages removed; summary unavailable]"),
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
        let manager = manager_with_summaries();
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
    let manager = manager_with_summaries();
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
    let manager = manager_with_summaries();
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
fn a_step_that_frees_too_little_does_not_spend_a_call() {
    // The weight is in what must stay: a long first request and the current tool result.
    // After the provider refuses it (quoting no count), attempt 1 can only summarize the
    // two short messages in the middle, far under 10%; attempts 2 and 3 find nothing more;
    // attempt 4 cuts the current result to share the room. Only then is a call spent.
    let first = "Fix the parser: it keeps a stack of open brackets. ".repeat(200);
    let short = |who: &str| format!("{who}: the lexer emits one token per bracket. ").repeat(20);
    let output = "fn main() { println!(\"{}\", 42); }\n".repeat(250);
    let body = json!({"model": MODEL, "messages": [
        {"role": "system", "content": "You are a careful coding agent."},
        {"role": "user", "content": first},
        {"role": "assistant", "content": short("assistant")},
        {"role": "user", "content": short("user")},
        {"role": "assistant", "content": null, "tool_calls": [{"id": "call_1", "type": "function",
            "function": {"name": "Read", "arguments": "{\"file_path\": \"/src/parser.rs\"}"}}]},
        {"role": "tool", "tool_call_id": "call_1", "content": output},
    ]});
    let original = format::parse(body.to_string().as_bytes(), None).unwrap();
    let manager = manager_with_summaries();
    let llm = overflowing_upstream(1, Provider::OpenAi, false, PROVIDER_SCALE, LIMIT);
    let mut conversation = original.clone();
    let called =
        pollster::block_on(manager.call(&llm, &mut conversation, Budget::new(LIMIT, 0))).unwrap();
    let report = &called.report;
    assert_eq!(llm.calls(), 2);
    assert_eq!(report.calls, 2);
    // Attempt 1 ran and freed under 10%; the later attempts ran before the second call.
    let first = &report.steps[0];
    assert_eq!(first.attempt, Some(1), "{:#?}", report.steps);
    assert!(first.tokens_freed > 0, "{:#?}", report.steps);
    assert!(
        first.tokens_freed * 10 < first.tokens_before,
        "attempt 1 freed {} of {}",
        first.tokens_freed,
        first.tokens_before
    );
    let last = report.steps.last().unwrap();
    assert_eq!(
        (last.strategy, last.attempt, last.level),
        (Strategy::TruncateToolResult, Some(4), None),
        "{:#?}",
        report.steps
    );
    assert!(last.tokens_freed * 10 >= last.tokens_before);
    // The current result was cut by ① (invariant 1 allows it), never dropped.
    let sent = llm.received();
    let first_user = &original.messages[1];
    for request in &sent {
        assert!(request.messages.contains(first_user));
        invariants::tool_pairs(request).unwrap();
    }
    let cut = sent[1]
        .messages
        .last()
        .unwrap()
        .tool_results()
        .next()
        .unwrap()
        .joined_text();
    let head = cut
        .strip_suffix(context_cascade::markers::TRUNCATED)
        .expect("a truncation marker");
    assert!(
        original.messages[5]
            .tool_results()
            .next()
            .unwrap()
            .joined_text()
            .starts_with(head)
    );
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
fn a_failing_summarizer_degrades_inside_the_loop() {
    // ④ is attempts 2 and 3; with a summarizer that always times out each of them falls
    // through ⑤ (level 2 asks again) to the bare notice.
    let degraded = [
        (Strategy::PruneHistory, Some(1), None),
        (Strategy::Degrade, Some(2), Some(3)),
        (Strategy::Degrade, Some(3), Some(3)),
        (Strategy::Degrade, Some(4), Some(3)),
    ];
    for k in 1..=6 {
        let summarizer = Arc::new(ScriptedSummarizer::new(|_, _| Err(SummaryError::Timeout)));
        let manager =
            ContextManager::new(CascadeConfig::default()).with_summarizer(summarizer.clone());
        let original = overflowing_session();
        let llm = overflowing_upstream(k, Provider::OpenAi, true, PROVIDER_SCALE, LIMIT);
        let mut conversation = original.clone();
        let result =
            pollster::block_on(manager.call(&llm, &mut conversation, Budget::new(LIMIT, 0)));
        let report = match &result {
            Ok(called) => &called.report,
            Err(CallError::Exhausted { report }) => report,
            Err(e) => panic!("k = {k}: {e}"),
        };
        let attempts = k.min(4);
        assert_eq!(result.is_ok(), k <= 4, "k = {k}");
        assert_eq!(report.calls, (k + 1).min(5), "k = {k}");
        assert_eq!(steps(report), degraded[..attempts], "k = {k}");
        assert_eq!(report.degraded, k >= 2, "k = {k}");
        let summarizing_attempts = [2, 3].iter().filter(|a| **a <= attempts).count();
        assert_eq!(
            summarizer.requests().len(),
            2 * summarizing_attempts,
            "k = {k}"
        );
        check_requests(&manager, &original, &llm.received());
        // Nothing the failed summarizer was asked for went in.
        assert!(
            conversation
                .messages
                .iter()
                .all(|m| !m.text_content().starts_with(SUMMARY_PREFIX))
        );
    }
}

#[test]
fn giving_up_leaves_the_conversation_as_last_sent() {
    // `ContextManager::call` documents "The conversation is left as it was last sent". When
    // the loop gives up because no strategy frees enough, the steps it tried after the last
    // call were never sent: the caller should get back what the provider refused.
    let huge = "Please review this design document carefully. ".repeat(1_200);
    let original = session(6, 400, &huge);
    let manager = manager_with_summaries();
    let llm = enforcing_upstream(Provider::OpenAi, PROVIDER_SCALE, LIMIT, true);
    let mut conversation = original.clone();
    let result = pollster::block_on(manager.call(&llm, &mut conversation, Budget::new(LIMIT, 0)));
    assert!(
        matches!(result, Err(CallError::Exhausted { .. })),
        "{result:?}"
    );
    let last_sent = llm.received().pop().unwrap();
    assert_eq!(
        conversation.messages.len(),
        last_sent.messages.len(),
        "the conversation was compacted further after the last call"
    );
    assert_eq!(conversation, last_sent);
}

#[test]
fn the_retry_strategy_escalates_as_specified() {
    let manager = ContextManager::new(CascadeConfig::default());
    assert_eq!(
        manager.retry_strategy(1),
        Some(Recovery::PruneThenSummarize { target: 0.75 })
    );
    assert_eq!(
        manager.retry_strategy(2),
        Some(Recovery::Summarize {
            target: 0.6,
            tail: Tail::Full,
            old_results: OldResults::AsTheyAre,
        })
    );
    assert_eq!(
        manager.retry_strategy(3),
        Some(Recovery::Summarize {
            target: 0.5,
            tail: Tail::Half,
            old_results: OldResults::Compact,
        })
    );
    assert_eq!(manager.retry_strategy(4), Some(Recovery::BareNotice));
    assert_eq!(manager.retry_strategy(5), None);
    assert_eq!(manager.retry_strategy(0), None);
}

#[test]
fn attempt_3_compacts_every_old_tool_result_but_the_latest_turn() {
    // Twelve file reads, then the latest one the model is acting on now.
    let mut messages = vec![
        json!({"role": "system", "content": "You are a careful coding agent."}),
        json!({"role": "user", "content": "Review every module of the parser."}),
    ];
    for i in 0..=12 {
        let id = if i == 12 {
            "read_last".to_owned()
        } else {
            format!("read_{i}")
        };
        messages.push(json!({"role": "assistant", "content": format!("Reading module {i}."), "tool_calls": [
            {"id": id, "type": "function", "function": {"name": "Read", "arguments": format!("{{\"file_path\": \"src/module_{i}.rs\"}}")}}]}));
        let source = format!("fn item_{i}() -> usize {{ {i} }} // module {i}\n").repeat(80);
        messages.push(json!({"role": "tool", "tool_call_id": id, "content": source}));
        if i < 12 {
            messages
                .push(json!({"role": "user", "content": format!("Module {i} looks fine, go on.")}));
        }
    }
    messages.push(json!({"role": "user", "content": "What did you find?"}));
    let body = json!({"model": MODEL, "messages": messages});
    let original = format::parse(body.to_string().as_bytes(), None).unwrap();
    let manager = manager_with_summaries();
    let budget = Budget::new(16_000, 0);
    // A report with no steps yet, to collect what the attempt does.
    let mut report = manager.compact(&mut original.clone(), Budget::new(100_000_000, 0));
    assert!(report.steps.is_empty());
    let mut conversation = original.clone();
    pollster::block_on(manager.recover(&mut conversation, budget, 3, &mut report));
    let strategies: Vec<Strategy> = report.steps.iter().map(|s| s.strategy).collect();
    assert_eq!(
        strategies,
        [Strategy::CompactToolResults, Strategy::Summarize],
        "{report:#?}"
    );
    assert_eq!(report.steps[1].attempt, Some(3));
    assert_eq!(report.steps[0].attempt, Some(3));
    assert!(report.steps[1].tokens_after <= budget.share(0.5));
    for message in &conversation.messages {
        for result in message.tool_results() {
            let text = result.joined_text();
            assert!(
                result.call_id == "read_last" || text == COMPACTED,
                "an old result of {} survived attempt 3",
                result.call_id
            );
        }
    }
    let latest = conversation
        .messages
        .iter()
        .flat_map(|m| m.tool_results())
        .find(|r| r.call_id == "read_last")
        .expect("the latest turn is kept");
    assert_ne!(latest.joined_text(), COMPACTED);
    invariants::tool_pairs(&conversation).unwrap();
    invariants::role_order(&conversation).unwrap();
}

#[test]
fn pinned_and_remembered_messages_survive_every_attempt() {
    let mut original = overflowing_session();
    // A pinned tool exchange's assistant message and a remember request in the middle.
    let middle = original.messages.len() / 2;
    original.messages[middle].pin();
    let remember = Message::text(
        Role::User,
        "Please remember: the staging database is called parser_ci_7, never touch prod.",
    );
    original.messages.insert(3, remember.clone());
    original.messages.insert(
        4,
        Message::text(Role::Assistant, "Noted: staging only, parser_ci_7."),
    );
    let pinned = original.messages[middle + 2].clone();
    let manager = manager_with_summaries();
    let llm = overflowing_upstream(5, Provider::OpenAi, true, PROVIDER_SCALE, LIMIT);
    let mut conversation = original.clone();
    let result = pollster::block_on(manager.call(&llm, &mut conversation, Budget::new(LIMIT, 0)));
    assert!(matches!(result, Err(CallError::Exhausted { .. })));
    let received = llm.received();
    assert_eq!(received.len(), 5);
    for (i, sent) in received.iter().enumerate() {
        assert!(
            sent.messages.contains(&pinned),
            "call {i}: the pinned message is gone"
        );
        let kept = sent
            .messages
            .iter()
            .find(|m| m.text_content() == remember.text_content());
        assert!(
            kept.is_some_and(Message::is_pinned),
            "call {i}: the remember request is gone or not pinned"
        );
    }
    check_requests(&manager, &original, &received);
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
