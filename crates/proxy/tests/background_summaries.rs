//! Background summaries: once a conversation is past the pre-threshold, the proxy prepares
//! the next compaction's LLM summary off the request path, and the request that crosses
//! the threshold then makes no summarizer call (counted at the scripted upstream, which
//! also serves the summarizer). Not timed: the mechanism, not the latency (for that, see
//! the `background_summaries` example).

#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failure is a test failure

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use axum::response::{IntoResponse, Response};
use cascade_proxy::config::IN_MEMORY_DB;
use cascade_proxy::{AppState, Provider, ProxyConfig, REPORT_HEADER, SummarizerSpec, serve_state};
use cascade_test_support::upstream::{Answer, start_async};
use serde_json::{Value, json};

const SUMMARY_MODEL: &str = "summary-model";
const WINDOW: u64 = 10_000;

/// A nine-section summary, short enough for any room the cascade leaves.
fn nine_sections() -> String {
    (context_cascade::SUMMARY_SECTIONS.iter().enumerate())
        .map(|(i, title)| format!("## {}. {title}\n- noted", i + 1))
        .collect::<Vec<_>>()
        .join("\n")
}

fn answer(text: &str) -> Response {
    axum::Json(
        json!({"choices": [{"message": {"role": "assistant", "content": text},
        "finish_reason": "stop"}]}),
    )
    .into_response()
}

/// The upstream: chat answers at once, summaries (the summarizer's model) after `delay`,
/// counted in `summaries`.
async fn upstream(summaries: Arc<AtomicUsize>, delay: Duration) -> String {
    start_async(move |_, request| {
        let summaries = summaries.clone();
        Box::pin(async move {
            if request.body["model"] == SUMMARY_MODEL {
                summaries.fetch_add(1, Ordering::SeqCst);
                tokio::time::sleep(delay).await;
                return answer(&nine_sections());
            }
            answer("on it")
        }) as Answer
    })
    .await
    .base
}

async fn proxy(upstream: &str, background: bool) -> (String, Arc<AppState>) {
    let mut config = ProxyConfig::new(upstream);
    config.db_path = IN_MEMORY_DB.into();
    config.discover = false;
    config.window = Some(WINDOW);
    config.background_summaries = background;
    config.summarizer =
        SummarizerSpec::parse(upstream, Some(Provider::OpenAi), Some(SUMMARY_MODEL.into()));
    let state = AppState::new(config).unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let served = state.clone();
    tokio::spawn(async move {
        let _ = serve_state(served, listener, std::future::pending()).await;
    });
    (base, state)
}

/// A task whose first message takes most of the window (so ③ cannot reach its target and
/// ④ runs), then `exchanges` calls of a tool ② may not compact, all of one size.
fn session(exchanges: usize) -> Value {
    let mut messages = vec![
        json!({"role": "system", "content": "You are a careful agent."}),
        json!({"role": "user", "content": "Audit these records. ".repeat(800)}),
    ];
    for i in 0..exchanges {
        let id = format!("call_{i:04}");
        let output =
            format!("record {i:04}: status nominal, checksum {:08}\n", i * 7919).repeat(72);
        messages.push(
            json!({"role": "assistant", "content": null, "tool_calls": [{"id": id,
            "type": "function", "function": {"name": "lookup",
            "arguments": format!("{{\"record\":{i:04}}}")}}]}),
        );
        messages.push(json!({"role": "tool", "tool_call_id": id, "content": output}));
    }
    // Estimated with the prior (no exact tokenizer for this id): the sizes above are sized by it.
    json!({"model": "local-model", "messages": messages})
}

/// Sends the session turn by turn until a request runs ④; returns the summarizer calls
/// made while that request was in the proxy. Between turns, waits for background jobs (an
/// agent's own turn takes longer than one summary).
async fn calls_at_the_compaction_turn(background: bool) -> (usize, Arc<AppState>) {
    let summaries = Arc::new(AtomicUsize::new(0));
    let upstream = upstream(summaries.clone(), Duration::from_millis(200)).await;
    let (proxy, state) = proxy(&upstream, background).await;
    let client = reqwest::Client::new();
    for turn in 1..40 {
        let before = summaries.load(Ordering::SeqCst);
        let response = client
            .post(format!("{proxy}/v1/chat/completions"))
            .json(&session(turn))
            .send()
            .await
            .unwrap();
        assert!(response.status().is_success(), "turn {turn}");
        let report = (response.headers().get(REPORT_HEADER))
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_owned();
        let _ = response.bytes().await;
        if report.contains("summarize") {
            return (summaries.load(Ordering::SeqCst) - before, state);
        }
        if let Some(jobs) = state.background() {
            for _ in 0..200 {
                if jobs.stats().in_flight == 0 {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        }
    }
    panic!("no request ran ④");
}

#[tokio::test]
async fn the_compaction_request_makes_no_summarizer_call_when_prepared() {
    let (calls, state) = calls_at_the_compaction_turn(true).await;
    let stats = state
        .background()
        .expect("background summaries are on")
        .stats();
    assert!(stats.prepared >= 1, "{stats:?}");
    assert_eq!(stats.failed, 0);
    assert_eq!(calls, 0, "the compaction turn asked the summarizer");
    assert!(state.metrics().summary_hits >= 1);
}

#[tokio::test]
async fn without_background_summaries_the_compaction_request_waits_for_one() {
    let (calls, state) = calls_at_the_compaction_turn(false).await;
    assert!(state.background().is_none());
    assert!(calls >= 1);
}

#[tokio::test]
async fn the_offline_summarizer_needs_no_background_jobs() {
    let mut config = ProxyConfig::new("http://127.0.0.1:9");
    config.db_path = IN_MEMORY_DB.into();
    assert!(config.background_summaries);
    assert!(AppState::new(config).unwrap().background().is_none());
}
