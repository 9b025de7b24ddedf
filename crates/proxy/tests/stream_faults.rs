//! A stream the upstream cuts or stalls: every complete event already received reaches the
//! client, then the format's own error event ends the stream (what the SDKs report).

#![allow(clippy::unwrap_used, clippy::expect_used, unreachable_pub)] // test code: a failure is a test failure

mod common;

use std::time::{Duration, Instant};

use axum::body::{Body, Bytes};
use cascade_proxy::ProxyConfig;
use cascade_proxy::config::IN_MEMORY_DB;
use cascade_test_support::upstream::{self, Answer};
use futures::StreamExt;
use serde_json::{Value, json};

/// The events of one answer in `path`'s format.
fn events(path: &str, n: usize) -> Vec<String> {
    (0..n)
        .map(|i| {
            if path == "/v1/messages" {
                let data = json!({"type": "content_block_delta", "index": 0,
                    "delta": {"type": "text_delta", "text": format!("w{i} ")}});
                format!("event: content_block_delta\ndata: {data}\n\n")
            } else {
                let data =
                    json!({"choices": [{"index": 0, "delta": {"content": format!("w{i} ")}}]});
                format!("data: {data}\n\n")
            }
        })
        .collect()
}

/// Starts an upstream that sends `events(path, n)` in odd-sized pieces, half an event
/// more, then cuts the connection; and a proxy in front of it.
async fn cutting(n: usize, timeout: Duration) -> String {
    let up = upstream::start_async(move |hit, request| {
        let all = events(&request.path, n).concat();
        let partial = &events(&request.path, n + 1)[n];
        let mut bytes = all.into_bytes();
        bytes.extend_from_slice(&partial.as_bytes()[..partial.len() / 2]);
        let piece = 7 + hit % 13;
        let chunks: Vec<Result<Bytes, std::io::Error>> = bytes
            .chunks(piece)
            .map(|c| Ok(Bytes::copy_from_slice(c)))
            .collect();
        // The cut comes once the bytes are out (hyper would drop what it had not yet
        // written if the error came with them): the upstream did send every byte.
        let cut = futures::stream::once(async {
            tokio::time::sleep(Duration::from_millis(30)).await;
            Err(std::io::Error::other("cut"))
        });
        let stream = futures::stream::iter(chunks).chain(cut);
        Box::pin(async move { upstream::sse_body(Body::from_stream(stream)) }) as Answer
    })
    .await;
    let mut config = ProxyConfig::new(up.base.clone());
    config.state.path = IN_MEMORY_DB.into();
    config.window.discover = false;
    config.limits.upstream_timeout = timeout;
    common::start_proxy(config).await.0
}

fn request(path: &str) -> Value {
    let messages = json!([{"role": "user", "content": "stream please"}]);
    if path == "/v1/messages" {
        json!({"model": "claude-sonnet-4-5", "max_tokens": 50, "stream": true, "messages": messages})
    } else {
        json!({"model": "gpt-4o", "stream": true, "messages": messages})
    }
}

/// The complete events of an SSE text, and whether it ended with the format's error event.
fn received(path: &str, text: &str) -> (Vec<String>, bool) {
    let mut blocks: Vec<String> = text
        .split("\n\n")
        .filter(|b| !b.trim().is_empty())
        .map(|b| format!("{b}\n\n"))
        .collect();
    let last = blocks.pop().unwrap_or_default();
    let error = if path == "/v1/messages" {
        last.starts_with("event: error\ndata: ")
            && serde_json::from_str::<Value>(last["event: error\ndata: ".len()..].trim())
                .is_ok_and(|v| v["type"] == "error" && v["error"]["message"].is_string())
    } else {
        last.starts_with("data: ")
            && serde_json::from_str::<Value>(last["data: ".len()..].trim())
                .is_ok_and(|v| v["error"]["message"].is_string())
    };
    if !error {
        blocks.push(last);
    }
    (blocks, error)
}

async fn cut_mid_event(path: &str) {
    let proxy = cutting(12, Duration::from_secs(30)).await;
    let client = reqwest::Client::new();
    let expected = events(path, 12);
    for run in 0..30 {
        let response = client
            .post(format!("{proxy}{path}"))
            .json(&request(path))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 200);
        let text = response.text().await.expect("the stream ends cleanly");
        let (got, error) = received(path, &text);
        assert_eq!(got, expected, "run {run} lost events: {text}");
        assert!(error, "run {run}: no error event at the end: {text}");
    }
}

#[tokio::test]
async fn openai_cut_stream_keeps_every_complete_event() {
    cut_mid_event("/v1/chat/completions").await;
}

#[tokio::test]
async fn anthropic_cut_stream_keeps_every_complete_event() {
    cut_mid_event("/v1/messages").await;
}

async fn stalled(path: &str) {
    let up = upstream::start(|_, _| upstream::stalled_stream()).await;
    let mut config = ProxyConfig::new(up.base.clone());
    config.state.path = IN_MEMORY_DB.into();
    config.window.discover = false;
    config.limits.upstream_timeout = Duration::from_millis(800);
    let proxy = common::start_proxy(config).await.0;
    let started = Instant::now();
    let response = reqwest::Client::new()
        .post(format!("{proxy}{path}"))
        .json(&request(path))
        .send()
        .await
        .unwrap();
    let text = tokio::time::timeout(Duration::from_secs(10), response.text())
        .await
        .expect("the stalled stream is cut")
        .unwrap();
    assert!(started.elapsed() < Duration::from_secs(5));
    assert!(text.starts_with("data: {\"a\":1}\n\n"), "{text}");
    let (_, error) = received(path, &text);
    assert!(error, "{text}");
}

#[tokio::test]
async fn openai_stalled_stream_ends_with_an_error_event() {
    stalled("/v1/chat/completions").await;
}

#[tokio::test]
async fn anthropic_stalled_stream_ends_with_an_error_event() {
    stalled("/v1/messages").await;
}
