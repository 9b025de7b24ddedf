//! What recall adds to a request's latency, through the proxy against a scripted upstream
//! on loopback that answers at once: the README's real Claude Code session (170K tokens)
//! sent as a Chat request with a window of a tenth, 20 times each, medians side by side:
//!
//! * recall off;
//! * recall on, the model never calling the tool (the cost of keeping: sealing the removed
//!   chunks and writing them to SQLite, and offering the tool);
//! * recall on, the model calling the tool once (one recall round: the chunks opened and
//!   ranked, and the second upstream call);
//!
//! each as a complete answer and streamed (SSE, timed to the stream's end: a streamed round
//! is spliced into the client's stream by `route::splice`).
//!
//! Not a test: numbers for docs/benchmarks.md ("What recall brings back").
//!
//! ```text
//! cargo run --release -p cascade-proxy --example recall_round
//! ```

#![allow(clippy::unwrap_used, clippy::expect_used)] // a development tool: a failure ends the run

use std::time::{Duration, Instant};

use axum::response::{IntoResponse, Response};
use cascade_proxy::{AppState, ProxyConfig, serve_state};
use cascade_test_support::upstream::{self, Recorded};
use serde_json::{Value, json};

const RUNS: usize = 20;

fn chat(message: Value) -> Response {
    axum::Json(
        json!({"id": "x", "object": "chat.completion", "model": "gpt-4o",
        // No usage: the calibration stays put, so every run compacts the same way.
        "choices": [{"index": 0, "message": message, "finish_reason": "stop"}]}),
    )
    .into_response()
}

/// `message` as a Chat stream: its content, then its tool calls, then the finish reason.
fn chat_stream(message: Value) -> Response {
    let chunk = |delta: Value, finish: Value| {
        let chunk = json!({"id": "x", "object": "chat.completion.chunk", "model": "gpt-4o",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]});
        format!("data: {chunk}\n\n")
    };
    let mut events = vec![chunk(
        json!({"role": "assistant", "content": message["content"]}),
        Value::Null,
    )];
    let calls = message["tool_calls"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    for (index, call) in calls.iter().enumerate() {
        let mut call = call.clone();
        call["index"] = json!(index);
        events.push(chunk(json!({"tool_calls": [call]}), Value::Null));
    }
    let finish = if calls.is_empty() {
        "stop"
    } else {
        "tool_calls"
    };
    events.push(chunk(json!({}), json!(finish)));
    events.push("data: [DONE]\n\n".into());
    // One write: the scripted upstream does not set TCP_NODELAY, and a second small write
    // would wait for the delayed ACK of the first (Nagle), about 40 ms on loopback.
    upstream::sse(vec![events.concat()], Duration::ZERO).into_response()
}

/// Calls recall once when `calls` and it is offered and not yet answered; else answers.
fn model(calls: bool) -> impl Fn(usize, &Recorded) -> Response + Send + Sync + 'static {
    move |_, request| {
        let chat = if request.body["stream"] == true {
            chat_stream
        } else {
            chat
        };
        let offered = (request.body["tools"].as_array().into_iter().flatten())
            .any(|t| t["function"]["name"] == "context_recall");
        let last = request.body["messages"]
            .as_array()
            .and_then(|m| m.last().cloned());
        let answered = last.is_some_and(|m| m["tool_call_id"] == "r1");
        if calls && offered && !answered {
            return chat(
                json!({"role": "assistant", "content": null, "tool_calls": [{"id": "r1",
                "type": "function", "function": {"name": "context_recall",
                "arguments": "{\"query\":\"mix test failed assertion\"}"}}]}),
            );
        }
        chat(json!({"role": "assistant", "content": "done"}))
    }
}

async fn median(recall: bool, calls: bool, body: &Value, db: &std::path::Path) -> Duration {
    let upstream = upstream::start(model(calls)).await;
    let mut config = ProxyConfig::new(upstream.base.clone());
    config.state.path = db.to_path_buf();
    config.window.discover = false;
    config.window.force = Some(17_000);
    config.requests.recall = recall;
    let state = AppState::new(config).unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!(
        "http://{}/v1/chat/completions",
        listener.local_addr().unwrap()
    );
    tokio::spawn(async move { serve_state(state, listener, std::future::pending()).await });
    let client = reqwest::Client::new();
    let mut times = Vec::with_capacity(RUNS);
    for run in 0..=RUNS {
        let start = Instant::now();
        let response = (client.post(&url))
            .header("authorization", "Bearer sk-bench")
            .json(body)
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 200);
        let bytes = response.bytes().await.unwrap();
        let text = String::from_utf8_lossy(&bytes);
        assert!(
            text.contains("done") && !text.contains("context_recall"),
            "{text}"
        );
        if run > 0 {
            times.push(start.elapsed());
        }
    }
    let expected = (RUNS + 1) * if calls { 2 } else { 1 };
    assert_eq!(upstream.hits(), expected, "the rounds ran as scripted");
    times.sort();
    times[RUNS / 2]
}

#[tokio::main]
async fn main() {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../examples/claude-code-session.json"
    );
    let session: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let plain = json!({"model": "gpt-4o", "messages": session["messages"].clone()});
    let mut streamed = plain.clone();
    streamed["stream"] = json!(true);
    let dir = std::env::temp_dir().join(format!("cascade-recall-round-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let mut rows = Vec::new();
    for (name, recall, calls, body) in [
        ("recall off", false, false, &plain),
        ("recall on, no call", true, false, &plain),
        ("recall on, one round", true, true, &plain),
        ("streamed, recall off", false, false, &streamed),
        ("streamed, recall on, no call", true, false, &streamed),
        ("streamed, recall on, one round", true, true, &streamed),
    ] {
        let db = dir.join(format!("{}.db", name.replace([' ', ','], "-")));
        let took = median(recall, calls, body, &db).await;
        let bytes = std::fs::metadata(&db).map(|m| m.len()).unwrap_or(0);
        rows.push(format!(
            "| {name} | {:.1} ms | {} KB |",
            took.as_secs_f64() * 1e3,
            bytes / 1024
        ));
    }
    println!("| claude-code-session at 17K | median of {RUNS} | database |\n|---|---|---|");
    println!("{}", rows.join("\n"));
    let _ = std::fs::remove_dir_all(&dir);
}
