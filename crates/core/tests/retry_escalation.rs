//! How the retry loop escalates (the policy of `escalation.rs`): steps that free too
//! little do not spend a call, a failing summarizer degrades inside the loop, giving up
//! leaves the conversation as last sent, the ladder of attempts, attempt 3's compaction,
//! and the messages no attempt may remove.

#![allow(clippy::unwrap_used, clippy::expect_used, unreachable_pub)] // test code: a failure is a test failure

mod common;

use std::sync::Arc;

use common::invariants;
use common::scripted::{Provider, ScriptedSummarizer, enforcing_upstream, overflowing_upstream};
use common::sessions::{
    LIMIT, MODEL, PROVIDER_SCALE, check_requests, manager_with_summaries, overflowing_session,
    session, steps,
};
use context_cascade::format;
use context_cascade::summarizer::SummaryError;
use context_cascade::{
    Budget, CallError, CascadeConfig, ContextManager, Message, OldResults, Recovery, Role,
    Strategy, Tail,
};
use context_cascade::{COMPACTED, SUMMARY_PREFIX};
use serde_json::json;

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
    // The marker, then ①'s note on what it cut (if anything).
    let head = &cut[..cut
        .rfind(context_cascade::TRUNCATED)
        .expect("a truncation marker")];
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
