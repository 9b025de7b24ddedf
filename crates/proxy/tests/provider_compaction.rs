//! The providers' own compaction through the proxy, on the real shapes
//! (`fixtures/provider-compaction.json`): requests that ask the provider to compact go
//! upstream byte for byte; compaction blocks and items, reasoning items, unknown items and
//! fields are never edited, reordered or dropped; the newest compaction starts the history
//! the cascade counts; answers (plain and streamed, `compaction_delta` included) pass
//! through; the proxy adds no `context_management`; calibration reads `usage.iterations`.

#![allow(clippy::unwrap_used, clippy::expect_used, unreachable_pub)] // test code: a failure is a test failure

mod common;

use axum::response::Response;
use cascade_proxy::ProxyConfig;
use cascade_proxy::config::IN_MEMORY_DB;
use cascade_test_support::compaction::{
    anthropic_block, anthropic_stream, anthropic_usage, compact_endpoint_answer, responses_item,
    shape, trigger_answer,
};
use cascade_test_support::upstream::{self, Recorded, Upstream};
use serde_json::{Value, json};

const WINDOW: u64 = 8_000;

/// A proxy with a small forced window in front of an upstream answering with `answer`.
async fn proxy(
    answer: impl Fn(usize, &Recorded) -> Response + Send + Sync + 'static,
) -> (Upstream, String, std::sync::Arc<cascade_proxy::AppState>) {
    let upstream = upstream::start(answer).await;
    let mut config = ProxyConfig::new(upstream.base.clone());
    config.state.path = IN_MEMORY_DB.into();
    config.window.discover = false;
    config.window.force = Some(WINDOW);
    let (proxy, state) = common::start_proxy(config).await;
    (upstream, proxy, state)
}

async fn send(proxy: &str, path: &str, body: &[u8]) -> reqwest::Response {
    reqwest::Client::new()
        .post(format!("{proxy}{path}"))
        .header("content-type", "application/json")
        .header("x-api-key", "k")
        .header("anthropic-beta", "compact-2026-01-12")
        .body(body.to_vec())
        .send()
        .await
        .unwrap()
}

/// Words enough to put a message far over [`WINDOW`].
fn long(n: usize) -> String {
    (0..n)
        .map(|i| format!("line {i} of a long tool output\n"))
        .collect()
}

fn anthropic_history(turns: usize, chars_each: usize) -> Vec<Value> {
    let mut messages = vec![json!({"role": "user", "content": "Fix the build."})];
    for i in 0..turns {
        messages.push(json!({"role": "assistant", "content": [{"type": "tool_use",
            "id": format!("toolu_{i}"), "name": "Bash", "input": {"command": "make"}}]}));
        messages.push(json!({"role": "user", "content": [{"type": "tool_result",
            "tool_use_id": format!("toolu_{i}"), "content": long(chars_each / 30)}]}));
    }
    messages
}

#[tokio::test]
async fn an_on_demand_compaction_request_goes_upstream_byte_for_byte() {
    for stream in [false, true] {
        let answer = shape("/anthropic/on_demand_answer");
        let (up, proxy, state) = proxy(move |_, _| {
            let body = json!({"id": "msg_1", "type": "message", "role": "assistant",
                "model": "claude-x", "content": answer["content"], "stop_reason": "compaction",
                "usage": answer["usage"]});
            upstream::json(200, body)
        })
        .await;
        let mut body = json!({"model": "claude-x", "max_tokens": 4096, "stream": stream,
            "messages": anthropic_history(6, 8_000)});
        body["compaction"] = shape("/anthropic/on_demand_request/compaction");
        let bytes = serde_json::to_vec(&body).unwrap();
        let response = send(&proxy, "/v1/messages", &bytes).await;
        assert_eq!(response.status(), 200);
        assert_eq!(
            response.headers()["x-context-cascade"],
            "provider-compaction; forwarded untouched"
        );
        let got: Value = response.json().await.unwrap();
        assert_eq!(got["content"][0]["signature"], "EuYBCkQY...");
        assert_eq!(up.requests()[0].bytes, bytes, "sent as the client wrote it");
        assert!(up.requests()[0].body.get("context_management").is_none());
        let metrics = state.metrics();
        assert_eq!(metrics.overflow_errors, 0);
    }
}

/// A Codex request whose input ends with `compaction_trigger`, over the window.
fn codex_trigger_body(stream: bool) -> Value {
    let mut input = vec![
        json!({"type": "message", "role": "developer", "content": [{"type": "input_text", "text": "You are Codex."}]}),
        json!({"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Fix it."}]}),
    ];
    for i in 0..6 {
        input.push(json!({"type": "reasoning", "id": format!("rs_{i}"), "summary": [], "encrypted_content": "gAAA"}));
        input.push(
            json!({"type": "function_call", "id": format!("fc_{i}"), "call_id": format!("call_{i}"),
            "name": "exec_command", "arguments": "{\"cmd\":\"make\"}"}),
        );
        input.push(json!({"type": "function_call_output", "call_id": format!("call_{i}"), "output": long(300)}));
    }
    input.push(shape("/openai/codex_compaction_trigger/last_input_item"));
    json!({"model": "gpt-5.1-codex", "stream": stream, "store": false, "input": input,
        "tools": [{"type": "function", "name": "exec_command", "parameters": {}}]})
}

#[tokio::test]
async fn codex_compaction_trigger_goes_upstream_byte_for_byte_and_its_item_comes_back() {
    for stream in [false, true] {
        let (up, proxy, _) = proxy(|i, r| trigger_answer(&r.body, i as u64, 9_000)).await;
        let bytes = serde_json::to_vec(&codex_trigger_body(stream)).unwrap();
        let response = send(&proxy, "/v1/responses", &bytes).await;
        assert_eq!(response.status(), 200);
        assert_eq!(
            response.headers()["x-context-cascade"],
            "provider-compaction; forwarded untouched"
        );
        let text = response.text().await.unwrap();
        assert!(text.contains("\"type\":\"compaction\""), "{text}");
        assert_eq!(up.requests()[0].bytes, bytes);
        // The answer's bytes are the upstream's: streamed events included.
        let direct = trigger_answer(&codex_trigger_body(stream), 0, 9_000);
        let direct = axum::body::to_bytes(direct.into_body(), usize::MAX)
            .await
            .unwrap();
        assert_eq!(text.as_bytes(), &direct[..]);
    }
}

#[tokio::test]
async fn responses_compact_is_a_forwarded_route() {
    let (up, proxy, _) =
        proxy(|i, r| upstream::json(200, compact_endpoint_answer(&r.body, i as u64, 500))).await;
    let body = codex_trigger_body(false);
    let mut body = body.clone();
    body["input"].as_array_mut().unwrap().pop();
    let bytes = serde_json::to_vec(&body).unwrap();
    let response = send(&proxy, "/v1/responses/compact", &bytes).await;
    assert_eq!(response.status(), 200);
    let got: Value = response.json().await.unwrap();
    assert_eq!(got["object"], "response.compaction");
    assert_eq!(
        got["output"].as_array().unwrap().last().unwrap()["type"],
        "compaction"
    );
    assert_eq!(up.requests()[0].path, "/v1/responses/compact");
    assert_eq!(up.requests()[0].bytes, bytes);
    let metrics = reqwest::get(format!("{proxy}/metrics"))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        metrics.contains("cascade_provider_compaction_total 1"),
        "{metrics}"
    );
}

/// An Anthropic threshold-compaction conversation: `superseded` tool turns, the assistant
/// message that begins with the compaction block, then `live` tool turns.
fn threshold_body(superseded: usize, live: usize, stream: bool) -> Value {
    let mut messages = anthropic_history(superseded, 6_000);
    let mut block = anthropic_block("Summary of the build so far.", "opaque==");
    block["content"] = Value::Null; // a failed summary: round-tripped as it came
    messages.push(json!({"role": "assistant", "content": [block, {"type": "text", "text": "Going on.", "future_field": {"kept": true}}]}));
    messages.push(json!({"role": "user", "content": "Continue."}));
    for i in 0..live {
        messages.push(json!({"role": "assistant", "content": [{"type": "tool_use",
            "id": format!("toolu_live_{i}"), "name": "Bash", "input": {"command": "make"}}]}));
        messages.push(json!({"role": "user", "content": [{"type": "tool_result",
            "tool_use_id": format!("toolu_live_{i}"), "content": long(200)}]}));
    }
    let mut body = json!({"model": "claude-x", "max_tokens": 1024, "stream": stream,
        "system": "You are Claude Code.", "messages": messages});
    body["context_management"] = shape("/anthropic/threshold_request/context_management");
    body
}

fn threshold_answer(r: &Recorded) -> Response {
    let block = anthropic_block("Summary of everything.", "enc");
    let usage = anthropic_usage(60_000, 2_000, 20);
    if r.body["stream"] == true {
        let then = (
            json!({"type": "text", "text": ""}),
            json!({"type": "text_delta", "text": "ok"}),
        );
        let events = anthropic_stream(("msg_1", "claude-x"), &block, then, "end_turn", &usage);
        return upstream::sse(events, std::time::Duration::ZERO);
    }
    upstream::json(
        200,
        json!({"id": "msg_1", "type": "message", "role": "assistant", "model": "claude-x",
        "content": [block, {"type": "text", "text": "ok"}], "stop_reason": "end_turn", "usage": usage}),
    )
}

#[tokio::test]
async fn what_a_compaction_block_supersedes_is_neither_counted_nor_touched() {
    for stream in [false, true] {
        let (up, proxy, state) = proxy(|_, r| threshold_answer(r)).await;
        // Far over the window before the block, well under it from the block on.
        let bytes = serde_json::to_vec(&threshold_body(8, 1, stream)).unwrap();
        let response = send(&proxy, "/v1/messages", &bytes).await;
        assert_eq!(response.status(), 200);
        assert!(
            response.headers().get("x-context-cascade").is_none(),
            "nothing to do"
        );
        let text = response.text().await.unwrap();
        let direct = threshold_answer(&up.requests()[0]);
        let direct = axum::body::to_bytes(direct.into_body(), usize::MAX)
            .await
            .unwrap();
        assert_eq!(
            text.as_bytes(),
            &direct[..],
            "the answer (compaction_delta too) as it came"
        );
        assert_eq!(up.requests()[0].bytes, bytes, "sent byte for byte");
        // The answer counts the provider's summary, not the request: no calibration.
        assert!(state.manager().calibration().get("claude-x").is_none());
    }
}

#[tokio::test]
async fn the_cascade_works_after_the_newest_compaction_and_keeps_it_and_what_precedes() {
    for stream in [false, true] {
        let (up, proxy, _) = proxy(|_, r| threshold_answer(r)).await;
        let body = threshold_body(4, 12, stream);
        let bytes = serde_json::to_vec(&body).unwrap();
        let response = send(&proxy, "/v1/messages", &bytes).await;
        assert_eq!(response.status(), 200);
        assert!(
            response.headers().get("x-context-cascade").is_some(),
            "the live part was cut"
        );
        let _ = response.bytes().await.unwrap();
        let sent = &up.requests()[0].body;
        let at = 1 + 4 * 2; // the first user message, then the superseded tool turns
        let (before, after) = (
            &body["messages"].as_array().unwrap()[..at + 1],
            sent["messages"].as_array().unwrap(),
        );
        assert_eq!(
            &after[..at + 1],
            before,
            "superseded messages and the block, unchanged"
        );
        let size = |v: &[Value]| v.iter().map(|m| m.to_string().len()).sum::<usize>();
        let original = &body["messages"].as_array().unwrap()[at + 1..];
        assert!(
            size(&after[at + 1..]) < size(original),
            "the live part was cut"
        );
        assert_eq!(sent["context_management"], body["context_management"]);
        assert_ne!(up.requests()[0].bytes, bytes);
    }
}

#[tokio::test]
async fn compaction_reasoning_and_unknown_items_survive_the_cascade() {
    let (up, proxy, _) = proxy(|i, r| {
        trigger_answer(
            &json!({"model": r.body["model"], "stream": false}),
            i as u64,
            100,
        )
    })
    .await;
    let mut body = codex_trigger_body(false);
    let input = body["input"].as_array_mut().unwrap();
    input.pop(); // a plain turn, not a trigger
    let kept = vec![
        responses_item(7, "old-window"),
        json!({"type": "future_item", "payload": {"x": [1, 2]}}),
    ];
    input.splice(2..2, kept.clone());
    // The newest compaction: everything before it is superseded.
    input.insert(5, responses_item(8, "newest"));
    for i in 0..10 {
        input.push(json!({"type": "function_call", "id": format!("fc_l{i}"), "call_id": format!("call_l{i}"),
            "name": "exec_command", "arguments": "{}", "unknown_field": i}));
        input.push(json!({"type": "function_call_output", "call_id": format!("call_l{i}"), "output": long(200)}));
    }
    let bytes = serde_json::to_vec(&body).unwrap();
    let response = send(&proxy, "/v1/responses", &bytes).await;
    assert_eq!(response.status(), 200);
    let sent = &up.requests()[0].body;
    let (original, after) = (
        body["input"].as_array().unwrap(),
        sent["input"].as_array().unwrap(),
    );
    assert_eq!(
        &after[..6],
        &original[..6],
        "everything up to the newest compaction, unchanged"
    );
    let size = |v: &[Value]| v.iter().map(|m| m.to_string().len()).sum::<usize>();
    assert!(
        size(&after[6..]) < size(&original[6..]),
        "the cascade cut the live part"
    );
    for item in after {
        if item["type"] == "function_call" && item["id"].as_str().unwrap().starts_with("fc_l") {
            assert!(
                item.get("unknown_field").is_some(),
                "unknown fields kept: {item}"
            );
        }
    }
    assert!(sent.get("context_management").is_none());
}

#[tokio::test]
async fn calibration_reads_the_message_iteration() {
    let (_, proxy, state) = proxy(|_, _| {
        let usage = json!({"input_tokens": 700, "output_tokens": 5, "cache_read_input_tokens": 0,
            "cache_creation_input_tokens": 0, "iterations": [{"type": "message", "input_tokens": 300,
            "output_tokens": 5, "cache_read_input_tokens": 0, "cache_creation_input_tokens": 0, "model": "m"}]});
        upstream::json(200, json!({"id": "msg_1", "type": "message", "role": "assistant", "model": "m",
            "content": [{"type": "text", "text": "ok"}], "stop_reason": "end_turn", "usage": usage}))
    })
    .await;
    let body = json!({"model": "claude-x", "max_tokens": 100, "messages": [{"role": "user", "content": "hi there"}]});
    let response = send(&proxy, "/v1/messages", &serde_json::to_vec(&body).unwrap()).await;
    assert_eq!(response.status(), 200);
    let scale = state.manager().calibration().get("claude-x");
    assert!(scale.is_some(), "the message entry calibrates");
}
