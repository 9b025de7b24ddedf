//! Recall's round in the Messages and Responses formats (Chat: tests/recall.rs): a scripted
//! model calls `context_recall`, gets the cut line back, and the client gets one answer
//! without the tool, usage summed.

#![allow(clippy::unwrap_used, clippy::expect_used, unreachable_pub)] // test code: a failure is a test failure

mod common;

use axum::response::{IntoResponse, Response};
use cascade_test_support::upstream::{self, Recorded};
use serde_json::{Value, json};

const SECRET_LINE: &str = "error[E0425]: cannot find value `swordfish_budget` in this scope";

fn log() -> String {
    let lines: String = (0..1500)
        .map(|i| format!("compiling unit {i} ok\n"))
        .collect();
    format!("{lines}{SECRET_LINE}\n")
}

use common::recall::proxy;

async fn send(url: String, body: &Value) -> Value {
    let response = reqwest::Client::new()
        .post(url)
        .header("x-api-key", "sk-carol")
        .header("anthropic-version", "2023-06-01")
        .json(body)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    response.json().await.unwrap()
}

fn anthropic_model(_: usize, request: &Recorded) -> Response {
    let usage = json!({"input_tokens": 100, "output_tokens": 10});
    let offered = (request.body["tools"].as_array().into_iter().flatten())
        .any(|t| t["name"] == "context_recall");
    let last = request.body["messages"]
        .as_array()
        .unwrap()
        .last()
        .unwrap()
        .clone();
    let result = &last["content"][0];
    let (content, stop) = if result["type"] == "tool_result" && result["tool_use_id"] == "r1" {
        let found = result["content"].as_str().unwrap_or("");
        let line = found
            .lines()
            .find(|l| l.contains("E0425"))
            .unwrap_or("nothing");
        (json!([{"type": "text", "text": line}]), "end_turn")
    } else if offered {
        let call = json!({"type": "tool_use", "id": "r1", "name": "context_recall",
            "input": {"query": "swordfish_budget"}});
        (
            json!([{"type": "text", "text": "Looking."}, call]),
            "tool_use",
        )
    } else {
        (json!([{"type": "text", "text": "no tool"}]), "end_turn")
    };
    axum::Json(
        json!({"id": "m", "type": "message", "role": "assistant", "model": "claude-sonnet-4",
        "content": content, "stop_reason": stop, "usage": usage}),
    )
    .into_response()
}

#[tokio::test]
async fn messages_a_recall_round_is_invisible_to_the_client() {
    let upstream = upstream::start(anthropic_model).await;
    let proxy = proxy(&upstream.base).await;
    let body = json!({"model": "claude-sonnet-4", "max_tokens": 1000, "messages": [
        {"role": "user", "content": "build it"},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "b1", "name": "bash",
            "input": {"command": "cargo build"}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "b1", "content": log()}]},
        {"role": "assistant", "content": "It ran."},
        {"role": "user", "content": "why did it fail?"}],
        "tools": [{"name": "bash", "input_schema": {"type": "object"}}]});
    let answer = send(format!("{proxy}/v1/messages"), &body).await;
    assert_eq!(
        answer["content"],
        json!([{"type": "text", "text": SECRET_LINE}]),
        "{answer}"
    );
    assert_eq!(answer["stop_reason"], "end_turn");
    assert_eq!(answer["usage"]["input_tokens"], 200);
    let seen = upstream.requests();
    assert_eq!(seen.len(), 2);
    assert_eq!(seen[0].body["tools"][1]["name"], "context_recall");
    assert_eq!(seen[1].body["messages"].as_array().unwrap().len(), 7);
}

fn responses_model(_: usize, request: &Recorded) -> Response {
    let usage = json!({"input_tokens": 100, "output_tokens": 10, "total_tokens": 110});
    let offered = (request.body["tools"].as_array().into_iter().flatten())
        .any(|t| t["name"] == "context_recall");
    let last = request.body["input"]
        .as_array()
        .unwrap()
        .last()
        .unwrap()
        .clone();
    let output = if last["type"] == "function_call_output" && last["call_id"] == "c1" {
        let found = last["output"].as_str().unwrap_or("");
        let line = found
            .lines()
            .find(|l| l.contains("E0425"))
            .unwrap_or("nothing");
        json!([{"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": line}]}])
    } else if offered {
        json!([{"type": "function_call", "id": "fc1", "call_id": "c1", "name": "context_recall",
            "arguments": "{\"query\":\"swordfish_budget\"}"}])
    } else {
        json!([{"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "no tool"}]}])
    };
    axum::Json(
        json!({"id": "resp", "object": "response", "status": "completed", "output": output,
        "usage": usage}),
    )
    .into_response()
}

#[tokio::test]
async fn responses_a_recall_round_is_invisible_to_the_client() {
    let upstream = upstream::start(responses_model).await;
    let proxy = proxy(&upstream.base).await;
    let body = json!({"model": "gpt-4o", "input": [
        {"role": "user", "content": "build it"},
        {"type": "function_call", "id": "fb", "call_id": "b1", "name": "shell", "arguments": "{\"command\":\"cargo build\"}"},
        {"type": "function_call_output", "call_id": "b1", "output": log()},
        {"role": "user", "content": "why did it fail?"}],
        "tools": [{"type": "function", "name": "shell", "parameters": {"type": "object"}}]});
    let answer = send(format!("{proxy}/v1/responses"), &body).await;
    let output = answer["output"].as_array().unwrap();
    assert_eq!(output.len(), 1, "{answer}");
    assert_eq!(output[0]["content"][0]["text"], SECRET_LINE);
    assert_eq!(answer["usage"]["total_tokens"], 220);
    let seen = upstream.requests();
    assert_eq!(seen.len(), 2);
    assert_eq!(seen[0].body["tools"][1]["strict"], false);
}
