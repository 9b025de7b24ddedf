//! A scripted model that streams: it calls `context_recall` when the request offers it,
//! and, once a recall result came back, says the line it found. Its answers are SSE in
//! each wire format, built the way the providers send them (text deltas, a tool call's
//! name first and its arguments after, the ending and usage last).

use std::time::Duration;

use axum::response::{IntoResponse, Response};
use cascade_proxy::ProxyConfig;
use cascade_proxy::config::IN_MEMORY_DB;
use cascade_test_support::upstream::{Recorded, sse};
use serde_json::{Value, json};

pub const SECRET_LINE: &str = "error[E0425]: cannot find value `swordfish_budget` in this scope";

/// What the model does.
#[derive(Clone, Copy, PartialEq)]
pub enum Mode {
    /// Calls the tool once, then answers with the line found.
    Once,
    /// Calls the tool every time.
    Always,
    /// Calls the tool and the client's `bash` together.
    Mixed,
}

#[derive(Clone, Copy, PartialEq)]
pub enum Wire {
    Chat,
    Messages,
    Responses,
}

enum Part {
    Text(String),
    Call(String, String, String),
}

pub fn log() -> String {
    let lines: String = (0..1500)
        .map(|i| format!("compiling unit {i} ok\n"))
        .collect();
    format!("{lines}{SECRET_LINE}\n")
}

pub async fn proxy(upstream: &str) -> String {
    let mut config = ProxyConfig::new(upstream.to_owned());
    config.state.path = IN_MEMORY_DB.into();
    config.window.discover = false;
    config.window.force = Some(8_000);
    config.requests.recall = true;
    super::common::start_proxy(config).await.0
}

/// The recall results a request carries back (their texts, in order).
fn results(wire: Wire, body: &Value) -> Vec<String> {
    let list = |key: &str| body[key].as_array().cloned().unwrap_or_default();
    let text = |v: &Value| v.as_str().unwrap_or("").to_owned();
    match wire {
        Wire::Chat => (list("messages").iter())
            .filter(|m| {
                m["role"] == "tool"
                    && m["tool_call_id"]
                        .as_str()
                        .is_some_and(|i| i.starts_with('r'))
            })
            .map(|m| text(&m["content"]))
            .collect(),
        Wire::Messages => (list("messages").iter())
            .filter_map(|m| m["content"].as_array().cloned())
            .flatten()
            .filter(|b| {
                b["type"] == "tool_result"
                    && b["tool_use_id"]
                        .as_str()
                        .is_some_and(|i| i.starts_with('r'))
            })
            .map(|b| text(&b["content"]))
            .collect(),
        Wire::Responses => (list("input").iter())
            .filter(|i| {
                i["type"] == "function_call_output"
                    && i["call_id"].as_str().is_some_and(|c| c.starts_with('r'))
            })
            .map(|i| text(&i["output"]))
            .collect(),
    }
}

fn offered(body: &Value) -> bool {
    (body["tools"].as_array().into_iter().flatten())
        .any(|t| t["name"] == "context_recall" || t["function"]["name"] == "context_recall")
}

fn parts(mode: Mode, wire: Wire, body: &Value) -> Vec<Part> {
    let found = results(wire, body);
    let recall = |n: usize| {
        Part::Call(
            format!("r{n}"),
            "context_recall".into(),
            r#"{"query":"swordfish_budget"}"#.into(),
        )
    };
    match mode {
        Mode::Once if !found.is_empty() => {
            let last = found.last().map(String::as_str).unwrap_or("");
            let line = last
                .lines()
                .find(|l| l.contains("E0425"))
                .unwrap_or("nothing");
            vec![Part::Text(line.into())]
        }
        _ if !offered(body) => vec![Part::Text("no tool".into())],
        Mode::Once => vec![Part::Text("Looking.".into()), recall(1)],
        Mode::Always => vec![
            Part::Text(format!("Round {}.", found.len() + 1)),
            recall(found.len() + 1),
        ],
        Mode::Mixed => vec![
            Part::Text("Both.".into()),
            recall(1),
            Part::Call("b2".into(), "bash".into(), r#"{"command":"ls"}"#.into()),
        ],
    }
}

/// The scripted upstream's answer to `request`: SSE when it asks for a stream.
pub fn model(mode: Mode, wire: Wire, request: &Recorded) -> Response {
    assert_eq!(
        request.body["stream"], true,
        "a follow-up streams like the request"
    );
    let parts = parts(mode, wire, &request.body);
    let events = match wire {
        Wire::Chat => chat(
            &parts,
            request.body["stream_options"]["include_usage"] == true,
        ),
        Wire::Messages => messages(&parts),
        Wire::Responses => responses(&parts),
    };
    sse(events, Duration::ZERO).into_response()
}

fn data(json: Value) -> String {
    format!("data: {json}\n\n")
}

fn named(json: Value) -> String {
    format!(
        "event: {}\ndata: {json}\n\n",
        json["type"].as_str().unwrap()
    )
}

fn chat(parts: &[Part], usage: bool) -> Vec<String> {
    let chunk = |delta: Value, finish: Value| {
        data(
            json!({"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1,
            "model": "gpt-4o", "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}),
        )
    };
    let mut out = vec![chunk(
        json!({"role": "assistant", "content": ""}),
        Value::Null,
    )];
    let mut calls = 0;
    for part in parts {
        match part {
            Part::Text(text) => out.push(chunk(json!({"content": text}), Value::Null)),
            Part::Call(id, name, arguments) => {
                let opening = json!({"index": calls, "id": id, "type": "function",
                    "function": {"name": name, "arguments": ""}});
                out.push(chunk(json!({"tool_calls": [opening]}), Value::Null));
                let rest = json!({"index": calls, "function": {"arguments": arguments}});
                out.push(chunk(json!({"tool_calls": [rest]}), Value::Null));
                calls += 1;
            }
        }
    }
    let finish = if calls > 0 { "tool_calls" } else { "stop" };
    out.push(chunk(json!({}), json!(finish)));
    if usage {
        out.push(data(
            json!({"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1,
            "model": "gpt-4o", "choices": [],
            "usage": {"prompt_tokens": 100, "completion_tokens": 10, "total_tokens": 110}}),
        ));
    }
    out.push("data: [DONE]\n\n".into());
    out
}

fn messages(parts: &[Part]) -> Vec<String> {
    let mut out = vec![named(
        json!({"type": "message_start", "message": {"id": "msg_1",
        "type": "message", "role": "assistant", "model": "claude-sonnet-4", "content": [],
        "stop_reason": null, "stop_sequence": null,
        "usage": {"input_tokens": 100, "output_tokens": 1}}}),
    )];
    let mut calls = false;
    for (index, part) in parts.iter().enumerate() {
        let (block, delta) = match part {
            Part::Text(text) => (
                json!({"type": "text", "text": ""}),
                json!({"type": "text_delta", "text": text}),
            ),
            Part::Call(id, name, arguments) => {
                calls = true;
                (
                    json!({"type": "tool_use", "id": id, "name": name, "input": {}}),
                    json!({"type": "input_json_delta", "partial_json": arguments}),
                )
            }
        };
        out.push(named(
            json!({"type": "content_block_start", "index": index, "content_block": block}),
        ));
        out.push(named(
            json!({"type": "content_block_delta", "index": index, "delta": delta}),
        ));
        out.push(named(json!({"type": "content_block_stop", "index": index})));
    }
    let stop = if calls { "tool_use" } else { "end_turn" };
    out.push(named(json!({"type": "message_delta",
        "delta": {"stop_reason": stop, "stop_sequence": null}, "usage": {"output_tokens": 10}})));
    out.push(named(json!({"type": "message_stop"})));
    out
}

fn responses(parts: &[Part]) -> Vec<String> {
    let mut sequence = 0;
    let mut event = |mut json: Value| {
        json["sequence_number"] = json!(sequence);
        sequence += 1;
        named(json)
    };
    let opening = json!({"id": "resp_1", "object": "response", "created_at": 1,
        "status": "in_progress", "model": "gpt-4o", "output": []});
    let mut out = vec![event(
        json!({"type": "response.created", "response": opening}),
    )];
    let mut items = Vec::new();
    for (index, part) in parts.iter().enumerate() {
        let item = match part {
            Part::Text(text) => json!({"type": "message", "id": format!("msg_{index}"),
                "status": "completed", "role": "assistant",
                "content": [{"type": "output_text", "text": text, "annotations": []}]}),
            Part::Call(id, name, arguments) => json!({"type": "function_call",
                "id": format!("fc_{index}"), "call_id": id, "name": name,
                "arguments": arguments, "status": "completed"}),
        };
        let mut added = item.clone();
        added["status"] = json!("in_progress");
        out.push(event(
            json!({"type": "response.output_item.added", "output_index": index, "item": added}),
        ));
        match part {
            Part::Text(text) => out.push(event(json!({"type": "response.output_text.delta",
                "item_id": item["id"], "output_index": index, "content_index": 0, "delta": text}))),
            Part::Call(_, _, arguments) => out.push(event(json!({
                "type": "response.function_call_arguments.delta", "item_id": item["id"],
                "output_index": index, "delta": arguments}))),
        }
        out.push(event(
            json!({"type": "response.output_item.done", "output_index": index, "item": item}),
        ));
        items.push(item);
    }
    let done = json!({"id": "resp_1", "object": "response", "created_at": 1,
        "status": "completed", "model": "gpt-4o", "output": items,
        "usage": {"input_tokens": 100, "output_tokens": 10, "total_tokens": 110}});
    out.push(event(
        json!({"type": "response.completed", "response": done}),
    ));
    out
}
