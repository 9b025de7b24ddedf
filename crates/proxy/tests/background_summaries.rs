//! Background summaries: once a conversation is past the pre-threshold, the proxy prepares
//! the next compaction's LLM summary off the request path, and the request that crosses
//! the threshold then makes no summarizer call (counted at the scripted upstream, which
//! also serves the summarizer) — also when it brings a large new tool output, and on the
//! Responses route — and goes upstream as it would have without. Not timed: the
//! mechanism, not the latency (for that, see the `background_summaries` example).

#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failure is a test failure

mod common;
#[path = "common/summaries.rs"]
mod summaries;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use axum::response::IntoResponse;
use cascade_proxy::config::IN_MEMORY_DB;
use cascade_proxy::{AppState, Provider, ProxyConfig, REPORT_HEADER};
use cascade_test_support::upstream::{Answer, Upstream, start_async};
use context_cascade::{Budget, CascadeConfig, ContextManager, format};
use serde_json::{Value, json};
use summaries::{answer, nine_sections};

const SUMMARY_MODEL: &str = "summary-model";
const WINDOW: u64 = 10_000;

/// The upstream: chat answers at once (in the Responses shape on its route), summaries
/// (the summarizer's model) after `delay`, counted in `summaries`.
async fn upstream_recording(summaries: Arc<AtomicUsize>, delay: Duration) -> Upstream {
    start_async(move |_, request| {
        let summaries = summaries.clone();
        Box::pin(async move {
            if request.body["model"] == SUMMARY_MODEL {
                summaries.fetch_add(1, Ordering::SeqCst);
                tokio::time::sleep(delay).await;
                return answer(&nine_sections());
            }
            if request.path.starts_with("/v1/responses") {
                let output = json!({"output": [{"type": "message", "role": "assistant",
                    "content": [{"type": "output_text", "text": "on it"}]}]});
                return axum::Json(output).into_response();
            }
            answer("on it")
        }) as Answer
    })
    .await
}

async fn upstream(summaries: Arc<AtomicUsize>, delay: Duration) -> String {
    upstream_recording(summaries, delay).await.base
}

async fn proxy(upstream: &str, background: bool) -> (String, Arc<AppState>) {
    proxy_with(upstream, background, CascadeConfig::default()).await
}

async fn proxy_with(
    upstream: &str,
    background: bool,
    cascade: CascadeConfig,
) -> (String, Arc<AppState>) {
    let mut config = ProxyConfig::new(upstream);
    config.cascade = cascade;
    config.state.path = IN_MEMORY_DB.into();
    config.window.discover = false;
    config.window.force = Some(WINDOW);
    config.summarizer.background = background;
    config.summarizer.endpoint = upstream.to_owned();
    config.summarizer.protocol = Some(Provider::OpenAi);
    config.summarizer.model = Some(SUMMARY_MODEL.into());
    common::start_proxy(config).await
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
        let response = common::send_chat(&client, &proxy, &session(turn)).await;
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
    config.state.path = IN_MEMORY_DB.into();
    assert!(config.summarizer.background);
    assert!(AppState::new(config).unwrap().background().is_none());
}

/// The task, `exchanges` exchanges of `lines`-line outputs, then, with `last`, one more
/// whose output has that many lines; as a chat body, or as a Responses body.
fn session_of(exchanges: usize, lines: usize, last: Option<usize>, responses: bool) -> Value {
    let mut items = vec![json!({"role": "user", "content": "Audit these records. ".repeat(800)})];
    let sizes = (0..exchanges).map(|_| lines).chain(last);
    for (i, lines) in sizes.enumerate() {
        let id = format!("call_{i:04}");
        let output =
            format!("record {i:04}: status nominal, checksum {:08}\n", i * 7919).repeat(lines);
        let arguments = format!("{{\"record\":{i:04}}}");
        if responses {
            items.push(
                json!({"type": "function_call", "call_id": id, "name": "lookup",
                "arguments": arguments}),
            );
            items.push(json!({"type": "function_call_output", "call_id": id, "output": output}));
        } else {
            items.push(
                json!({"role": "assistant", "content": null, "tool_calls": [{"id": id,
                "type": "function", "function": {"name": "lookup", "arguments": arguments}}]}),
            );
            items.push(json!({"role": "tool", "tool_call_id": id, "content": output}));
        }
    }
    let system = "You are a careful agent.";
    if responses {
        json!({"model": "local-model", "instructions": system, "input": items})
    } else {
        items.insert(0, json!({"role": "system", "content": system}));
        json!({"model": "local-model", "messages": items})
    }
}

/// The first number of 12-line exchanges past the pre-threshold (by the proxy's own
/// estimate, the uncalibrated prior), where one more alike stays under the preemptive one.
fn past_the_pre_threshold(responses: bool) -> usize {
    let manager = ContextManager::new(CascadeConfig::default());
    let budget = Budget::new(WINDOW, 0);
    let estimate = |k| {
        let body = session_of(k, 12, None, responses).to_string();
        manager.estimate(&format::parse(body.as_bytes(), None).unwrap())
    };
    let k = (1..200).find(|&k| estimate(k) > budget.share(0.8)).unwrap();
    assert!(estimate(k + 1) <= budget.share(0.9));
    k
}

/// Sends `body` to the proxy's chat route; the answer must be a success.
async fn post_chat(client: &reqwest::Client, proxy: &str, body: &Value) {
    let response = common::send_chat(client, proxy, body).await;
    assert!(response.status().is_success());
}

async fn wait_for_jobs(state: &AppState) {
    if let Some(jobs) = state.background() {
        for _ in 0..500 {
            if jobs.stats().in_flight == 0 {
                return;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
}

/// Turns 1..=k of small exchanges, then the one that brings a `last`-line output; returns
/// the summarizer calls of that turn, its report and the body the upstream received.
async fn a_large_output_after(
    background: bool,
    last: usize,
    responses: bool,
) -> (usize, String, Value, Arc<AppState>) {
    let summaries = Arc::new(AtomicUsize::new(0));
    let upstream = upstream_recording(summaries.clone(), Duration::from_millis(100)).await;
    let (proxy, state) = proxy(&upstream.base, background).await;
    let route = if responses {
        "/v1/responses"
    } else {
        "/v1/chat/completions"
    };
    let client = reqwest::Client::new();
    let k = past_the_pre_threshold(responses);
    let turns = (1..=k).map(|t| session_of(t, 12, None, responses));
    let mut report = String::new();
    let mut calls = 0;
    for body in turns.chain([session_of(k, 12, Some(last), responses)]) {
        let before = summaries.load(Ordering::SeqCst);
        let response = client
            .post(format!("{proxy}{route}"))
            .json(&body)
            .send()
            .await;
        let response = response.unwrap();
        assert!(response.status().is_success());
        report = (response.headers().get(REPORT_HEADER))
            .map(|v| v.to_str().unwrap().to_owned())
            .unwrap_or_default();
        let _ = response.bytes().await;
        calls = summaries.load(Ordering::SeqCst) - before;
        wait_for_jobs(&state).await;
    }
    let sent = (upstream.requests().into_iter())
        .filter(|r| r.body["model"] != SUMMARY_MODEL)
        .last()
        .unwrap()
        .body;
    (calls, report, sent, state)
}

#[tokio::test]
async fn a_large_new_output_finds_its_summary_prepared_and_goes_up_as_without() {
    // 200 lines: about 0.4·E, under ①'s cap; its like would not need ④, a 12-line one not.
    let (calls, report, sent, state) = a_large_output_after(true, 200, false).await;
    assert!(report.contains("summarize"), "{report}");
    assert_eq!(calls, 0, "the compaction turn asked the summarizer");
    let stats = state.background().unwrap().stats();
    assert!(stats.forecasts >= 2, "{stats:?}");
    let (calls_off, report_off, sent_off, _) = a_large_output_after(false, 200, false).await;
    assert!(calls_off >= 1);
    assert_eq!(report, report_off);
    assert_eq!(sent, sent_off, "the request went upstream otherwise");
}

#[tokio::test]
async fn the_responses_route_prepares_ahead_too() {
    let (calls, report, sent, state) = a_large_output_after(true, 200, true).await;
    assert!(report.contains("summarize"), "{report}");
    assert_eq!(calls, 0, "the compaction turn asked the summarizer");
    assert!(state.background().unwrap().stats().prepared >= 1);
    let (_, _, sent_off, _) = a_large_output_after(false, 200, true).await;
    assert_eq!(sent, sent_off);
}

#[tokio::test]
async fn a_conversation_that_grew_while_its_job_ran_is_prepared_again() {
    let summaries = Arc::new(AtomicUsize::new(0));
    let upstream = upstream(summaries.clone(), Duration::from_millis(300)).await;
    let (proxy, state) = proxy(&upstream, true).await;
    let client = reqwest::Client::new();
    let k = past_the_pre_threshold(false);
    // Two turns past the pre-threshold, the second while the first one's job runs.
    for turns in [k, k + 1] {
        post_chat(&client, &proxy, &session_of(turns, 12, None, false)).await;
    }
    wait_for_jobs(&state).await;
    let stats = state.background().unwrap().stats();
    assert_eq!(
        (stats.started, stats.rerun, stats.in_flight),
        (2, 1, 0),
        "{stats:?}"
    );
    // The key is free again: the next turn starts a job of its own.
    post_chat(&client, &proxy, &session_of(k + 2, 12, None, false)).await;
    wait_for_jobs(&state).await;
    assert_eq!(state.background().unwrap().stats().started, 3);
}

/// Past a pre-threshold below ②'s, a request no strategy changes still goes by the fast
/// path (it is not parsed before it is sent), and its job starts from it once answered.
#[tokio::test]
async fn the_fast_path_takes_requests_past_the_pre_threshold_and_their_jobs_still_start() {
    let summaries = Arc::new(AtomicUsize::new(0));
    let upstream = upstream(summaries.clone(), Duration::from_millis(10)).await;
    let mut cascade = CascadeConfig::default();
    cascade.background.summary_ratio = 0.5;
    let (proxy, state) = proxy_with(&upstream, true, cascade).await;
    let client = reqwest::Client::new();
    let manager = ContextManager::new(CascadeConfig::default());
    let budget = Budget::new(WINDOW, 0);
    let estimate = |k| {
        let body = session_of(k, 12, None, false).to_string();
        manager.estimate(&format::parse(body.as_bytes(), None).unwrap())
    };
    let k = (1..200).find(|&k| estimate(k) > budget.share(0.5)).unwrap();
    assert!(estimate(k + 1) <= budget.share(0.75), "② would run");
    for turns in [k, k + 1] {
        post_chat(&client, &proxy, &session_of(turns, 12, None, false)).await;
        wait_for_jobs(&state).await;
    }
    // The first request of a conversation takes the slow path; the next one, the fast.
    assert_eq!(state.metrics().fast_path, 1);
    let stats = state.background().unwrap().stats();
    assert_eq!((stats.started, stats.failed), (2, 0), "{stats:?}");
    assert!(stats.prepared >= 2, "{stats:?}");
}

#[test]
fn the_forecast_bound_is_read_and_checked() {
    let config = ProxyConfig::from_toml_str("[cascade.background]\nforecasts = 2").unwrap();
    assert_eq!(config.cascade.background.forecasts, 2);
    assert!(ProxyConfig::from_toml_str("[cascade.background]\nforecasts = 0").is_err());
    let default = ProxyConfig::from_toml_str("").unwrap();
    assert_eq!(default.cascade.background.forecasts, 4);
}
