//! Recall through the proxy (issue 25): a scripted model that calls `context_recall` gets
//! what the cascade removed, the client sees one answer without the tool, usage is summed,
//! a mixed answer goes to the client with its own calls only, and one credential never
//! recalls what another's requests removed.

#![allow(clippy::unwrap_used, clippy::expect_used, unreachable_pub)] // test code: a failure is a test failure

mod common;

use axum::response::{IntoResponse, Response};
use cascade_test_support::upstream::{self, Recorded};
use serde_json::{Value, json};

const SECRET_LINE: &str = "error[E0425]: cannot find value `swordfish_budget` in this scope";

/// A chat body whose one tool result is a 40 KB log with `tail` on its last line.
fn body(tail: &str) -> Value {
    body_of(1_500, tail)
}

/// A chat body whose one tool result is `lines` lines of log, then `tail`.
fn body_of(lines: usize, tail: &str) -> Value {
    let log: String = (0..lines)
        .map(|i| format!("compiling unit {i} ok\n"))
        .collect();
    json!({"model": "gpt-4o", "messages": [
        {"role": "user", "content": "build the project"},
        {"role": "assistant", "content": null, "tool_calls": [{"id": "b1", "type": "function",
            "function": {"name": "bash", "arguments": "{\"command\":\"cargo build\"}"}}]},
        {"role": "tool", "tool_call_id": "b1", "content": format!("{log}{tail}\n")},
        {"role": "user", "content": "why did the build fail?"}],
        "tools": [{"type": "function", "function": {"name": "bash", "parameters": {"type": "object"}}}]})
}

fn chat(message: Value, finish: &str) -> Response {
    axum::Json(
        json!({"id": "x", "object": "chat.completion", "model": "gpt-4o",
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        "usage": {"prompt_tokens": 100, "completion_tokens": 10, "total_tokens": 110}}),
    )
    .into_response()
}

fn recall_call(extra: Option<Value>) -> Response {
    let mut calls = vec![json!({"id": "r1", "type": "function", "function": {
        "name": "context_recall", "arguments": "{\"query\":\"swordfish_budget\"}"}})];
    calls.extend(extra);
    chat(
        json!({"role": "assistant", "content": null, "tool_calls": calls}),
        "tool_calls",
    )
}

/// The model: asks recall when it is offered and has not asked yet; then answers with the
/// result it got (or says it found nothing).
fn model(_: usize, request: &Recorded) -> Response {
    let messages = request.body["messages"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let offered = (request.body["tools"].as_array().into_iter().flatten())
        .any(|t| t["function"]["name"] == "context_recall");
    match messages.last() {
        Some(last) if last["role"] == "tool" && last["tool_call_id"] == "r1" => {
            let found = last["content"].as_str().unwrap_or("");
            let line = found
                .lines()
                .find(|l| l.contains("E0425"))
                .unwrap_or("nothing found");
            chat(json!({"role": "assistant", "content": line}), "stop")
        }
        _ if offered => recall_call(None),
        _ => chat(json!({"role": "assistant", "content": "no tool"}), "stop"),
    }
}

use common::recall::proxy;

use common::recall::send_chat as send;

#[tokio::test]
async fn the_model_recalls_what_was_cut_and_the_client_sees_one_answer() {
    let upstream = upstream::start(model).await;
    let proxy = proxy(&upstream.base).await;
    let answer = send(&proxy, "sk-alice", &body(SECRET_LINE)).await;
    let message = &answer["choices"][0]["message"];
    assert_eq!(message["content"], SECRET_LINE, "{answer}");
    assert!(message.get("tool_calls").is_none(), "{answer}");
    assert_eq!(answer["choices"][0]["finish_reason"], "stop");
    assert_eq!(
        answer["usage"]["prompt_tokens"], 200,
        "usage summed over both calls"
    );
    assert_eq!(answer["usage"]["total_tokens"], 220);
    let seen = upstream.requests();
    assert_eq!(seen.len(), 2);
    // The cut result carries its handle; the tool comes after the client's, the same twice.
    let cut = seen[0].body["messages"][2]["content"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(
        cut.contains("[truncated: output exceeded context limit]\nrecall handle: "),
        "{cut}"
    );
    // The head keeps none of the cut part; ①'s trail note names its error after the
    // handle (issue 24), and the model recalls the whole line below.
    let (head, after) = cut
        .split_once("[truncated: output exceeded context limit]")
        .unwrap();
    assert!(!head.contains("swordfish"), "{cut:?}");
    assert!(after.starts_with("\nrecall handle: "), "{after:?}");
    assert!(after.contains("\nerrors: E0425: "), "{after:?}");
    assert_eq!(
        seen[0].body["tools"][1]["function"]["name"],
        "context_recall"
    );
    assert_eq!(seen[0].body["tools"], seen[1].body["tools"]);
    let result = seen[1].body["messages"]
        .as_array()
        .unwrap()
        .last()
        .unwrap()
        .clone();
    assert!(
        result["content"].as_str().unwrap().contains(SECRET_LINE),
        "{result}"
    );
}

#[tokio::test]
async fn a_mixed_answer_gives_the_client_its_own_calls_only() {
    let upstream = upstream::start(|_, _| {
        recall_call(Some(json!({"id": "b2", "type": "function",
            "function": {"name": "bash", "arguments": "{\"command\":\"ls\"}"}})))
    })
    .await;
    let proxy = proxy(&upstream.base).await;
    let answer = send(&proxy, "sk-alice", &body(SECRET_LINE)).await;
    let calls = answer["choices"][0]["message"]["tool_calls"]
        .as_array()
        .unwrap();
    assert_eq!(calls.len(), 1);
    assert_eq!(calls[0]["function"]["name"], "bash");
    assert_eq!(answer["choices"][0]["finish_reason"], "tool_calls");
    assert_eq!(
        upstream.hits(),
        1,
        "no recall round when the client's own calls are due"
    );
}

#[tokio::test]
async fn a_recall_at_most_three_rounds_then_the_answer_as_it_is_without_the_tool() {
    let upstream = upstream::start(|_, _| recall_call(None)).await;
    let proxy = proxy(&upstream.base).await;
    let answer = send(&proxy, "sk-alice", &body(SECRET_LINE)).await;
    assert_eq!(upstream.hits(), 4, "the first call and three rounds");
    assert!(
        answer["choices"][0]["message"].get("tool_calls").is_none(),
        "{answer}"
    );
    assert_eq!(answer["usage"]["prompt_tokens"], 400);
}

#[tokio::test]
async fn two_keys_one_conversation_never_recall_each_others_content() {
    let upstream = upstream::start(model).await;
    let proxy = proxy(&upstream.base).await;
    let alice = send(&proxy, "sk-alice", &body(SECRET_LINE)).await;
    assert_eq!(alice["choices"][0]["message"]["content"], SECRET_LINE);
    // Bob sends the same conversation, whose removed log holds no secret of his own (a
    // longer log: the scripted usage taught the calibration that requests count little).
    let bob = send(&proxy, "sk-bob", &body_of(8_000, "error: linker failed")).await;
    assert_eq!(
        bob["choices"][0]["message"]["content"], "nothing found",
        "{bob}"
    );
    let seen = upstream.requests();
    let recalled = seen.last().unwrap().body["messages"]
        .as_array()
        .unwrap()
        .last()
        .unwrap()
        .clone();
    assert!(
        !recalled.to_string().contains("cannot find value"),
        "{recalled}"
    );
    let said = recalled["content"].as_str().unwrap();
    assert!(
        said.starts_with("[recall: nothing removed matches"),
        "{said}"
    );
}
