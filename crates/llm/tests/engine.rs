//! The clients plugged into the core engine: LlmSummarizer behind strategy ④, and
//! ChatClient as the `Llm` of the retry loop against an upstream that enforces a limit.

#![allow(clippy::unwrap_used, clippy::expect_used, unreachable_pub)] // test code: a failure is a test failure

mod common;

use cascade_test_support::OverflowKind;

use std::sync::Arc;
use std::time::Duration;

use cascade_llm::{ChatClient, ClientConfig, LlmSummarizer, Provider, SummarizerPolicy};
use context_cascade::SUMMARY_PREFIX;
use context_cascade::summarizer::section_heading;
use context_cascade::{
    Budget, CascadeConfig, ContextManager, Conversation, Format, Message, Report, Role, Strategy,
};
use serde_json::json;

/// A system prompt and `turns` user/assistant exchanges of about 1,500 characters each.
fn long_conversation(turns: usize) -> Conversation {
    let mut conversation = Conversation::new(Format::OpenAi);
    conversation
        .envelope
        .insert("model".into(), json!("test-model"));
    conversation.envelope.insert("messages".into(), json!(null));
    conversation.messages.push(Message::text(
        Role::System,
        "You are a careful coding agent.",
    ));
    for turn in 0..turns {
        let filler =
            format!("step {turn}: looked at src/module_{turn}.rs and found things. ").repeat(25);
        conversation.messages.push(Message::text(
            Role::User,
            format!("turn {turn}, please continue. {filler}"),
        ));
        conversation.messages.push(Message::text(
            Role::Assistant,
            format!("done with turn {turn}. {filler}"),
        ));
    }
    conversation
        .messages
        .push(Message::text(Role::User, "What is left to do?"));
    conversation
}

/// `long_conversation(40)` compacted to a 4,000-token window by the whole cascade, with
/// `summarizer` behind ④.
async fn compact_long_conversation(summarizer: LlmSummarizer) -> (Conversation, Report) {
    let manager =
        ContextManager::new(CascadeConfig::default()).with_summarizer(Arc::new(summarizer));
    let mut conversation = long_conversation(40);
    let report = manager
        .compact_with_summary(&mut conversation, Budget::new(4_000, 500))
        .await;
    (conversation, report)
}

fn nine_sections() -> String {
    (0..9)
        .map(|i| format!("{}\n- point {i}", section_heading(i)))
        .collect::<Vec<_>>()
        .join("\n\n")
}

fn client(base: &str) -> ChatClient {
    ChatClient::new(
        ClientConfig::new(Provider::OpenAi, base)
            .model("summary-model")
            .timeout(Duration::from_secs(10)),
    )
    .expect("client")
}

#[tokio::test]
async fn the_engine_writes_the_llm_summary_into_the_conversation() {
    let upstream = common::start(|_, _| {
        common::json(
            200,
            json!({"choices": [{"message": {"content": nine_sections()}, "finish_reason": "stop"}]}),
        )
    })
    .await;
    let summarizer = LlmSummarizer::new(client(&upstream.base));
    let (conversation, report) = compact_long_conversation(summarizer).await;

    assert!(report.fits, "{report:?}");
    assert!(!report.degraded, "{report:?}");
    assert!(
        report
            .steps
            .iter()
            .any(|s| s.strategy == Strategy::Summarize),
        "{}",
        report.summary_line()
    );
    let summary = conversation
        .messages
        .iter()
        .map(Message::text_content)
        .find(|t| t.starts_with(SUMMARY_PREFIX))
        .expect("a summary message");
    assert!(summary.contains(&section_heading(0)));
    assert!(summary.contains("- point 8"));
    assert!(upstream.hits() >= 1);
    assert_eq!(
        conversation
            .messages
            .last()
            .map(Message::text_content)
            .as_deref(),
        Some("What is left to do?")
    );
}

#[tokio::test]
async fn a_dead_summarizer_degrades_without_failing_the_compaction() {
    let upstream = common::start(|_, _| common::json(503, json!({"error": "down"}))).await;
    let summarizer = LlmSummarizer::with_policy(
        client(&upstream.base),
        SummarizerPolicy {
            backoff: vec![Duration::from_millis(1)],
            ..SummarizerPolicy::default()
        },
    );
    let (_, report) = compact_long_conversation(summarizer).await;
    assert!(report.fits, "{report:?}");
    assert!(report.degraded);
    // Each summarize call is tried twice (one retry); the breaker stops the calls after 3
    // failures, so the dead endpoint is not hammered.
    assert!(upstream.hits() <= 6, "hits: {}", upstream.hits());
}

#[tokio::test]
async fn the_retry_loop_recovers_from_a_real_overflow_answer() {
    const LIMIT: usize = 8_192;
    // The upstream counts a token per 4 bytes of the body and refuses above its limit.
    let upstream = common::start(|_, request| {
        let tokens = request.body.to_string().len() / 4;
        if tokens > LIMIT {
            let body = common::overflow(OverflowKind::OpenAi, LIMIT as u64, tokens as u64);
            common::json(400, body)
        } else {
            common::json(
                200,
                json!({"choices": [{"message": {"content": "ok"}, "finish_reason": "stop"}],
                    "usage": {"prompt_tokens": tokens}}),
            )
        }
    })
    .await;
    let llm = client(&upstream.base);
    let manager = ContextManager::new(CascadeConfig::default());
    let mut conversation = long_conversation(20);
    // The caller believes the window is much larger than the upstream's real one.
    let called = manager
        .call(&llm, &mut conversation, Budget::new(128_000, 1_000))
        .await
        .expect("recovered");
    assert_eq!(called.output["choices"][0]["message"]["content"], "ok");
    assert!(called.report.overflows >= 1, "{:?}", called.report);
    assert_eq!(called.report.calls, upstream.hits());
    assert!(called.report.calls <= 5);
    let last = upstream.requests().pop().expect("a request");
    assert!(last.body.to_string().len() / 4 <= LIMIT);
}
