//! LlmSummarizer against a scripted upstream: what it sends, which answers it accepts, its
//! retries and its circuit breaker.

#![allow(clippy::unwrap_used, clippy::expect_used, unreachable_pub)] // test code: a failure is a test failure

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use cascade_llm::summarizer::prompt::TranscriptLimits;
use cascade_llm::{ChatClient, ClientConfig, LlmSummarizer, Provider, SummarizerPolicy};
use context_cascade::ToolResult;
use context_cascade::summarizer::{
    Summarizer, SummaryError, SummaryRequest, section_heading, split_sections,
};
use context_cascade::{Block, Message, Role, Shape};
use serde_json::{Map, Value, json};

fn policy() -> SummarizerPolicy {
    SummarizerPolicy {
        backoff: vec![Duration::from_millis(1), Duration::from_millis(1)],
        failure_threshold: 3,
        cooldown: Duration::from_secs(3600),
        limits: TranscriptLimits::default(),
    }
}

fn summarizer(provider: Provider, base: &str, policy: SummarizerPolicy) -> LlmSummarizer {
    let client = ChatClient::new(
        ClientConfig::new(provider, base)
            .model("summary-model")
            .timeout(Duration::from_secs(10)),
    )
    .expect("client");
    LlmSummarizer::with_policy(client, policy)
}

/// A history worth summarizing: some talk and a long tool output.
fn request() -> SummaryRequest {
    let call = Block::ToolCall(context_cascade::ToolCall {
        id: "c1".into(),
        name: "run_tests".into(),
        arguments: json!("{\"path\":\"crates/core\"}"),
        fields: Map::new(),
        function_fields: Map::new(),
        legacy: false,
    });
    let output = format!(
        "{}\nerror[E0308]: mismatched types in src/lib.rs:42",
        "test log line ...\n".repeat(600)
    );
    SummaryRequest::Summarize {
        messages: vec![
            Message::text(
                Role::User,
                "Fix the failing build in crates/core; keep the public API.",
            ),
            Message::new(Role::Assistant, vec![call], Shape::Parts, Map::new()),
            Message::new(
                Role::Tool,
                vec![Block::ToolResult(ToolResult::text(
                    "c1",
                    Some("run_tests".into()),
                    output,
                ))],
                Shape::String,
                Map::new(),
            ),
            Message::text(
                Role::Assistant,
                "The type error is in src/lib.rs line 42; I will change the return type.",
            ),
        ],
        previous_summary: None,
        max_tokens: 800,
    }
}

fn nine_sections() -> String {
    let bodies = [
        "- Fix the failing build in crates/core",
        "- E0308",
        "- src/lib.rs",
        "- mismatched types at src/lib.rs:42",
        "- run the tests, read the error",
        "- \"keep the public API\"",
        "- change the return type",
        "- error located",
        "- edit src/lib.rs:42, rerun tests",
    ];
    bodies
        .iter()
        .enumerate()
        .map(|(i, body)| format!("{}\n{body}", section_heading(i)))
        .collect::<Vec<_>>()
        .join("\n\n")
}

fn openai_answer(text: &str, finish_reason: &str) -> axum::response::Response {
    common::json(
        200,
        json!({"choices": [{"message": {"role": "assistant", "content": text},
            "finish_reason": finish_reason}], "usage": {"prompt_tokens": 900}}),
    )
}

fn anthropic_answer(text: &str, stop_reason: &str) -> axum::response::Response {
    common::json(
        200,
        json!({"type": "message", "content": [{"type": "text", "text": text}],
            "stop_reason": stop_reason, "usage": {"input_tokens": 900}}),
    )
}

fn prompt_text(body: &Value) -> String {
    body.to_string()
}

#[tokio::test]
async fn a_good_nine_section_answer_is_accepted_from_both_providers() {
    for provider in [Provider::OpenAi, Provider::Anthropic] {
        let upstream = common::start(move |_, _| match provider {
            Provider::OpenAi => openai_answer(&nine_sections(), "stop"),
            Provider::Anthropic => anthropic_answer(&nine_sections(), "end_turn"),
        })
        .await;
        let summarizer = summarizer(provider, &upstream.base, policy());
        let summary = summarizer.summarize(&request()).await.expect("summary");
        let sections = split_sections(&summary);
        assert!(sections.iter().all(|s| !s.is_empty()), "{summary}");
        assert_eq!(sections[2], vec!["- src/lib.rs"]);
        assert!(summary.starts_with(&section_heading(0)));

        let requests = upstream.requests();
        assert_eq!(requests.len(), 1);
        let body = &requests[0].body;
        assert_eq!(body["model"], "summary-model");
        assert_eq!(body["max_tokens"], 800);
        // Deterministic summaries: a prepared one and a synchronous one agree.
        assert_eq!(body["temperature"], 0);
        let text = prompt_text(body);
        for index in 0..9 {
            assert!(text.contains(&section_heading(index)), "heading {index}");
        }
        assert!(text.contains("Fix the failing build in crates/core"));
        assert!(text.contains("calls tool `run_tests`"));
        // The long tool output is shortened, its last line (the error) kept.
        assert!(text.contains("characters omitted"));
        assert!(text.contains("mismatched types in src/lib.rs:42"));
        match provider {
            Provider::OpenAi => {
                assert_eq!(requests[0].path, "/v1/chat/completions");
                assert_eq!(body["messages"][0]["role"], "system");
            }
            Provider::Anthropic => {
                assert_eq!(requests[0].path, "/v1/messages");
                assert!(body["system"].as_str().is_some());
            }
        }
    }
}

#[tokio::test]
async fn partial_headings_are_tolerated_and_filled_in() {
    let answer = format!(
        "Sure! Here it is.\n{}\n- fix the build\n{}\n- rerun tests",
        section_heading(0),
        section_heading(8)
    );
    let upstream = common::start(move |_, _| openai_answer(&answer, "stop")).await;
    let summary = summarizer(Provider::OpenAi, &upstream.base, policy())
        .summarize(&request())
        .await
        .expect("summary");
    assert!(!summary.contains("Sure!"));
    let sections = split_sections(&summary);
    assert_eq!(sections[0], vec!["- fix the build"]);
    assert_eq!(sections[4], vec!["- none"]);
    assert_eq!(sections[8], vec!["- rerun tests"]);
}

#[tokio::test]
async fn bad_answers_are_rejected_with_the_right_error() {
    let huge = format!("{}\n{}", section_heading(0), "- word ".repeat(20_000));
    let cases: Vec<(Provider, axum::response::Response, SummaryError)> = vec![
        (
            Provider::OpenAi,
            openai_answer("", "stop"),
            SummaryError::Empty,
        ),
        (
            Provider::Anthropic,
            anthropic_answer("  \n ", "end_turn"),
            SummaryError::Empty,
        ),
        (
            Provider::OpenAi,
            openai_answer(&nine_sections(), "length"),
            SummaryError::Truncated,
        ),
        (
            Provider::Anthropic,
            anthropic_answer(&nine_sections(), "max_tokens"),
            SummaryError::Truncated,
        ),
    ];
    for (provider, response, expected) in cases {
        let response = Arc::new(std::sync::Mutex::new(Some(response)));
        let upstream = common::start(move |_, _| {
            response
                .lock()
                .expect("lock")
                .take()
                .unwrap_or_else(|| common::json(500, json!({})))
        })
        .await;
        let result = summarizer(provider, &upstream.base, policy())
            .summarize(&request())
            .await;
        assert_eq!(result, Err(expected), "{provider}");
        assert_eq!(upstream.hits(), 1, "content failures are not retried");
    }

    let upstream = common::start(move |_, _| openai_answer(&huge, "stop")).await;
    let result = summarizer(Provider::OpenAi, &upstream.base, policy())
        .summarize(&request())
        .await;
    let Err(SummaryError::TooLarge { summary, replaced }) = result else {
        panic!("expected TooLarge, got {result:?}");
    };
    assert!(summary >= replaced);

    let upstream =
        common::start(|_, _| openai_answer("All good, nothing to report.", "stop")).await;
    let result = summarizer(Provider::OpenAi, &upstream.base, policy())
        .summarize(&request())
        .await;
    assert!(
        matches!(result, Err(SummaryError::Failed(ref m)) if m.contains("headings")),
        "{result:?}"
    );
}

#[tokio::test]
async fn previous_summary_and_partials_are_put_in_the_prompt() {
    let upstream = common::start(|_, _| openai_answer(&nine_sections(), "stop")).await;
    let summarizer = summarizer(Provider::OpenAi, &upstream.base, policy());
    let update = match request() {
        SummaryRequest::Summarize {
            messages,
            max_tokens,
            ..
        } => SummaryRequest::Summarize {
            messages,
            previous_summary: Some(format!(
                "{}\n- earlier goal: port to 2024 edition",
                section_heading(0)
            )),
            max_tokens,
        },
        merge => merge,
    };
    summarizer.summarize(&update).await.expect("update");
    let merge = SummaryRequest::Merge {
        partials: vec![
            format!(
                "{}\n- chunk one facts {}",
                section_heading(0),
                "a ".repeat(400)
            ),
            format!(
                "{}\n- chunk two facts {}",
                section_heading(8),
                "b ".repeat(400)
            ),
        ],
        max_tokens: 600,
    };
    summarizer.summarize(&merge).await.expect("merge");

    let requests = upstream.requests();
    let first = prompt_text(&requests[0].body);
    assert!(first.contains("<previous_summary>"));
    assert!(first.contains("earlier goal: port to 2024 edition"));
    assert!(first.contains("<transcript>"));
    let second = prompt_text(&requests[1].body);
    assert!(second.contains("2 consecutive chunks"));
    assert!(second.contains("<chunk 1>") && second.contains("chunk two facts"));
    assert!(!second.contains("<transcript>"));
    assert_eq!(requests[1].body["max_tokens"], 600);
}

#[tokio::test]
async fn transient_errors_are_retried_then_succeed() {
    let upstream = common::start(|hit, _| {
        if hit < 2 {
            common::json(503, json!({"error": {"message": "overloaded"}}))
        } else {
            openai_answer(&nine_sections(), "stop")
        }
    })
    .await;
    let summary = summarizer(Provider::OpenAi, &upstream.base, policy())
        .summarize(&request())
        .await;
    assert!(summary.is_ok(), "{summary:?}");
    assert_eq!(upstream.hits(), 3);
}

#[tokio::test]
async fn retries_are_bounded_and_client_errors_not_retried() {
    let upstream = common::start(|_, _| common::json(503, json!({}))).await;
    let result = summarizer(Provider::OpenAi, &upstream.base, policy())
        .summarize(&request())
        .await;
    assert!(
        matches!(result, Err(SummaryError::Failed(ref m)) if m.contains("503")),
        "{result:?}"
    );
    assert_eq!(upstream.hits(), 3, "one call and two retries");

    let upstream = common::start(|_, _| common::json(400, json!({"error": "bad model"}))).await;
    let result = summarizer(Provider::Anthropic, &upstream.base, policy())
        .summarize(&request())
        .await;
    assert!(matches!(result, Err(SummaryError::Failed(_))), "{result:?}");
    assert_eq!(upstream.hits(), 1);
}

#[tokio::test]
async fn a_silent_endpoint_is_a_timeout() {
    let base = common::start_silent().await;
    let client = ChatClient::new(
        ClientConfig::new(Provider::OpenAi, &base).timeout(Duration::from_millis(150)),
    )
    .expect("client");
    let summarizer = LlmSummarizer::with_policy(
        client,
        SummarizerPolicy {
            backoff: Vec::new(),
            ..policy()
        },
    );
    assert_eq!(
        summarizer.summarize(&request()).await,
        Err(SummaryError::Timeout)
    );
}

#[tokio::test]
async fn the_breaker_opens_after_three_failures_and_closes_after_the_cooldown() {
    let healthy = Arc::new(AtomicBool::new(false));
    let switch = healthy.clone();
    let upstream = common::start(move |_, _| {
        if switch.load(Ordering::SeqCst) {
            openai_answer(&nine_sections(), "stop")
        } else {
            common::json(500, json!({"error": "down"}))
        }
    })
    .await;
    let cooldown = Duration::from_secs(2);
    let summarizer = summarizer(
        Provider::OpenAi,
        &upstream.base,
        SummarizerPolicy {
            backoff: Vec::new(),
            cooldown,
            ..policy()
        },
    );
    for _ in 0..3 {
        let result = summarizer.summarize(&request()).await;
        assert!(matches!(result, Err(SummaryError::Failed(_))), "{result:?}");
    }
    assert_eq!(upstream.hits(), 3);

    // Open: answered at once, the server is not called.
    healthy.store(true, Ordering::SeqCst);
    for _ in 0..2 {
        let result = summarizer.summarize(&request()).await;
        assert!(
            matches!(result, Err(SummaryError::Unavailable(_))),
            "{result:?}"
        );
    }
    assert_eq!(upstream.hits(), 3);

    tokio::time::sleep(cooldown + Duration::from_millis(200)).await;
    let result = summarizer.summarize(&request()).await;
    assert!(result.is_ok(), "{result:?}");
    assert_eq!(upstream.hits(), 4);
}

#[tokio::test]
async fn a_success_resets_the_failure_run() {
    let upstream = common::start(|hit, _| {
        // fail, fail, succeed, fail, fail: never three in a row.
        if hit == 2 {
            openai_answer(&nine_sections(), "stop")
        } else {
            common::json(500, json!({}))
        }
    })
    .await;
    let summarizer = summarizer(
        Provider::OpenAi,
        &upstream.base,
        SummarizerPolicy {
            backoff: Vec::new(),
            ..policy()
        },
    );
    let mut outcomes = Vec::new();
    for _ in 0..5 {
        outcomes.push(summarizer.summarize(&request()).await.is_ok());
    }
    assert_eq!(outcomes, [false, false, true, false, false]);
    assert_eq!(upstream.hits(), 5);
}

#[tokio::test]
async fn identity_names_provider_endpoint_and_model() {
    let client = ChatClient::new(
        ClientConfig::new(Provider::Anthropic, "http://127.0.0.1:9/").model("claude-haiku"),
    )
    .expect("client");
    assert_eq!(
        LlmSummarizer::new(client).id(),
        "llm/anthropic/http://127.0.0.1:9/claude-haiku"
    );
    let client =
        ChatClient::new(ClientConfig::new(Provider::OpenAi, "http://h:8080/v1")).expect("client");
    assert_eq!(
        LlmSummarizer::new(client).id(),
        "llm/openai/http://h:8080/v1/default"
    );
}

#[tokio::test]
async fn an_empty_request_is_refused_without_a_call() {
    let upstream = common::start(|_, _| openai_answer(&nine_sections(), "stop")).await;
    let result = summarizer(Provider::OpenAi, &upstream.base, policy())
        .summarize(&SummaryRequest::summarize(Vec::new(), 0))
        .await;
    assert!(matches!(result, Err(SummaryError::Failed(_))));
    assert_eq!(upstream.hits(), 0);
}
