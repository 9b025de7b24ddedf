//! A scripted model that streams: it calls `context_recall` when the request offers it,
//! and, once a recall result came back, says the line it found. Its answers are SSE in
//! each wire format, built the way the providers send them (text deltas, a tool call's
//! name first and its arguments after, the ending and usage last).

use std::time::Duration;

use axum::response::{IntoResponse, Response};
use cascade_test_support::upstream::{Recorded, json, not_found, sse, sse_body};
use serde_json::{Value, json};

const USAGE_IN: u64 = 100;

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
    /// As `Once`, but the stream after the recall breaks after its second event.
    CutFollowUp,
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
        Mode::Once | Mode::CutFollowUp if !found.is_empty() => {
            let last = found.last().map(String::as_str).unwrap_or("");
            let line = last
                .lines()
                .find(|l| l.contains("E0425"))
                .unwrap_or("nothing");
            vec![Part::Text(line.into())]
        }
        _ if !offered(body) => vec![Part::Text("no tool".into())],
        Mode::Once | Mode::CutFollowUp => vec![Part::Text("Looking.".into()), recall(1)],
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

/// The wire format of a request, by its path.
pub fn wire(path: &str) -> Option<Wire> {
    match path {
        "/v1/chat/completions" => Some(Wire::Chat),
        "/v1/messages" => Some(Wire::Messages),
        "/v1/responses" => Some(Wire::Responses),
        _ => None,
    }
}

/// The scripted upstream's answer to `request` (any of the three paths): SSE when it asks
/// for a stream, else the complete answer.
pub fn answer(mode: Mode, request: &Recorded) -> Response {
    match wire(&request.path) {
        Some(wire) if request.body["stream"] == true => model(mode, wire, request),
        Some(wire) => {
            let parts = parts(mode, wire, &request.body);
            let round = results(wire, &request.body).len();
            json(200, complete(wire, &parts, round))
        }
        None => not_found(),
    }
}

/// The scripted upstream's streamed answer to `request`.
pub fn model(mode: Mode, wire: Wire, request: &Recorded) -> Response {
    assert_eq!(
        request.body["stream"], true,
        "a follow-up streams like the request"
    );
    let parts = parts(mode, wire, &request.body);
    let round = results(wire, &request.body).len();
    let events = match wire {
        Wire::Chat => chat(
            &parts,
            request.body["stream_options"]["include_usage"] == true,
        ),
        Wire::Messages => messages(&parts, round),
        Wire::Responses => responses(&parts, round),
    };
    if mode == Mode::CutFollowUp && round > 0 {
        let sent = events.into_iter().take(2).map(Ok::<_, std::io::Error>);
        let cut = futures::stream::once(async {
            // Once the events are out: the proxy did receive them.
            tokio::time::sleep(Duration::from_millis(30)).await;
            Err(std::io::Error::other("connection reset"))
        });
        let chunks = futures::StreamExt::chain(futures::stream::iter(sent), cut);
        return sse_body(axum::body::Body::from_stream(chunks));
    }
    sse(events, Duration::ZERO).into_response()
}

/// The non-streaming answer saying `parts`.
fn complete(wire: Wire, parts: &[Part], round: usize) -> Value {
    let calls = parts.iter().any(|p| matches!(p, Part::Call(..)));
    match wire {
        Wire::Chat => {
            let text: String = (parts.iter())
                .filter_map(|p| match p {
                    Part::Text(t) => Some(t.as_str()),
                    Part::Call(..) => None,
                })
                .collect();
            let tool_calls: Vec<Value> = (parts.iter())
                .filter_map(|p| match p {
                    Part::Call(id, name, arguments) => Some(json!({"id": id, "type": "function",
                    "function": {"name": name, "arguments": arguments}})),
                    Part::Text(_) => None,
                })
                .collect();
            let mut message = json!({"role": "assistant", "content": text});
            if calls {
                message["tool_calls"] = json!(tool_calls);
            }
            json!({"id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": "gpt-4o",
                "choices": [{"index": 0, "message": message,
                    "finish_reason": if calls { "tool_calls" } else { "stop" }}],
                "usage": {"prompt_tokens": USAGE_IN, "completion_tokens": 10, "total_tokens": USAGE_IN + 10}})
        }
        Wire::Messages => {
            let content: Vec<Value> = (parts.iter())
                .map(|p| match p {
                    Part::Text(t) => json!({"type": "text", "text": t}),
                    Part::Call(id, name, arguments) => {
                        json!({"type": "tool_use", "id": id, "name": name,
                    "input": serde_json::from_str::<Value>(arguments).unwrap()})
                    }
                })
                .collect();
            json!({"id": format!("msg_{round}"), "type": "message", "role": "assistant",
                "model": "claude-sonnet-4", "content": content,
                "stop_reason": if calls { "tool_use" } else { "end_turn" }, "stop_sequence": null,
                "usage": {"input_tokens": USAGE_IN, "output_tokens": 10}})
        }
        Wire::Responses => {
            let items: Vec<Value> = (parts.iter().enumerate())
                .map(|(i, p)| item(p, round, i))
                .collect();
            json!({"id": format!("resp_{round}"), "object": "response", "created_at": 1,
                "status": "completed", "model": "gpt-4o", "output": items, "error": null,
                "usage": {"input_tokens": USAGE_IN, "output_tokens": 10, "total_tokens": USAGE_IN + 10}})
        }
    }
}

/// A Responses output item saying `part`, the `index`th of round `round`.
fn item(part: &Part, round: usize, index: usize) -> Value {
    match part {
        Part::Text(text) => json!({"type": "message", "id": format!("msg_{round}_{index}"),
            "status": "completed", "role": "assistant",
            "content": [{"type": "output_text", "text": text, "annotations": []}]}),
        Part::Call(id, name, arguments) => json!({"type": "function_call",
            "id": format!("fc_{round}_{index}"), "call_id": id, "name": name,
            "arguments": arguments, "status": "completed"}),
    }
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
            "usage": {"prompt_tokens": USAGE_IN, "completion_tokens": 10, "total_tokens": USAGE_IN + 10}}),
        ));
    }
    out.push("data: [DONE]\n\n".into());
    out
}

fn messages(parts: &[Part], round: usize) -> Vec<String> {
    let mut out = vec![named(
        json!({"type": "message_start", "message": {"id": format!("msg_{round}"),
        "type": "message", "role": "assistant", "model": "claude-sonnet-4", "content": [],
        "stop_reason": null, "stop_sequence": null,
        "usage": {"input_tokens": USAGE_IN, "output_tokens": 1}}}),
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

fn responses(parts: &[Part], round: usize) -> Vec<String> {
    let mut sequence = 0;
    let mut event = |mut json: Value| {
        json["sequence_number"] = json!(sequence);
        sequence += 1;
        named(json)
    };
    let id = format!("resp_{round}");
    let opening = json!({"id": id, "object": "response", "created_at": 1,
        "status": "in_progress", "model": "gpt-4o", "output": [], "error": null});
    let mut out = vec![event(
        json!({"type": "response.created", "response": opening}),
    )];
    let mut items = Vec::new();
    for (index, part) in parts.iter().enumerate() {
        let item = item(part, round, index);
        let item_id = item["id"].clone();
        let mut added = item.clone();
        added["status"] = json!("in_progress");
        match part {
            Part::Text(text) => {
                added["content"] = json!([]);
                let empty = json!({"type": "output_text", "text": "", "annotations": []});
                let at = json!({"item_id": item_id, "output_index": index, "content_index": 0});
                let with = |kind: &str, key: &str, value: Value| {
                    let mut e = at.clone();
                    e["type"] = json!(kind);
                    e[key] = value;
                    e
                };
                out.push(event(json!({"type": "response.output_item.added", "output_index": index, "item": added})));
                out.push(event(with("response.content_part.added", "part", empty)));
                out.push(event(with(
                    "response.output_text.delta",
                    "delta",
                    json!(text),
                )));
                out.push(event(with(
                    "response.output_text.done",
                    "text",
                    json!(text),
                )));
                out.push(event(with(
                    "response.content_part.done",
                    "part",
                    item["content"][0].clone(),
                )));
            }
            Part::Call(_, _, arguments) => {
                added["arguments"] = json!("");
                out.push(event(json!({"type": "response.output_item.added", "output_index": index, "item": added})));
                out.push(event(
                    json!({"type": "response.function_call_arguments.delta",
                    "item_id": item_id, "output_index": index, "delta": arguments}),
                ));
                out.push(event(
                    json!({"type": "response.function_call_arguments.done",
                    "item_id": item_id, "output_index": index, "arguments": arguments}),
                ));
            }
        }
        out.push(event(
            json!({"type": "response.output_item.done", "output_index": index, "item": item}),
        ));
        items.push(item);
    }
    let done = json!({"id": id, "object": "response", "created_at": 1,
        "status": "completed", "model": "gpt-4o", "output": items, "error": null,
        "usage": {"input_tokens": USAGE_IN, "output_tokens": 10, "total_tokens": USAGE_IN + 10}});
    out.push(event(
        json!({"type": "response.completed", "response": done}),
    ));
    out
}
