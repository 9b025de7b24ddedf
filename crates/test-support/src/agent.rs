//! The wire shapes of the scripted agent model (`crates/proxy/examples/agent_upstream.rs`):
//! its answers in Anthropic Messages and OpenAI Responses, streaming or not, and the checks a
//! provider makes before answering (a tool call without its result, or a result without its
//! call, is a 400). Kept here, beside the other scripted shapes, so that the example stays a
//! script and the shapes have tests.

use std::collections::HashSet;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use axum::response::Response;
use serde_json::{Value, json};

use crate::upstream;

/// The two wire formats the agents speak.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Protocol {
    /// Anthropic Messages (Claude Code).
    Anthropic,
    /// OpenAI Responses (Codex).
    Responses,
}

impl Protocol {
    /// The name the scripted model's statistics use.
    pub fn label(self) -> &'static str {
        match self {
            Protocol::Anthropic => "anthropic",
            Protocol::Responses => "responses",
        }
    }
}

/// Answers so far: every answer gets its own message id (agents merge the streamed blocks
/// of one id into one message).
static ANSWERS: AtomicU64 = AtomicU64::new(0);

/// The next answer's number.
pub fn next_answer() -> u64 {
    ANSWERS.fetch_add(1, Ordering::SeqCst)
}

/// What makes a request invalid for the provider: a tool call without its result right
/// after it, or a result without its call before it.
pub fn unpaired(protocol: Protocol, body: &Value) -> Option<String> {
    match protocol {
        Protocol::Anthropic => {
            let messages = body["messages"].as_array()?;
            let ids = |m: &Value, kind: &str, key: &str| -> Vec<String> {
                (m["content"].as_array().into_iter().flatten())
                    .filter(|b| b["type"] == kind)
                    .filter_map(|b| b[key].as_str().map(str::to_owned))
                    .collect()
            };
            for (i, m) in messages.iter().enumerate() {
                let results = ids(m, "tool_result", "tool_use_id");
                let calls_before = match i.checked_sub(1) {
                    Some(p) if messages[p]["role"] == "assistant" => {
                        ids(&messages[p], "tool_use", "id")
                    }
                    _ => Vec::new(),
                };
                if let Some(orphan) = results.iter().find(|r| !calls_before.contains(r)) {
                    return Some(format!(
                        "messages.{i}: unexpected `tool_use_id` {orphan}: no `tool_use` block in the previous message"
                    ));
                }
                if m["role"] == "assistant" {
                    let calls = ids(m, "tool_use", "id");
                    let next = messages.get(i + 1);
                    let answered = next.map(|n| ids(n, "tool_result", "tool_use_id"));
                    let answered = answered.unwrap_or_default();
                    let missing: Vec<_> = calls.iter().filter(|c| !answered.contains(c)).collect();
                    // The last assistant message may be a prefill without results yet only
                    // when it has no calls.
                    if !missing.is_empty() {
                        return Some(format!(
                            "messages.{i}: `tool_use` ids were found without `tool_result` blocks immediately after: {missing:?}"
                        ));
                    }
                }
            }
            None
        }
        Protocol::Responses => {
            let input = body["input"].as_array()?;
            let mut calls = HashSet::new();
            let mut outputs = HashSet::new();
            for item in input {
                let id = item["call_id"].as_str().unwrap_or("").to_owned();
                match item["type"].as_str().unwrap_or("") {
                    "function_call" | "custom_tool_call" | "local_shell_call" => {
                        calls.insert(id);
                    }
                    "function_call_output"
                    | "custom_tool_call_output"
                    | "local_shell_call_output" => {
                        if !calls.contains(&id) {
                            return Some(format!(
                                "No tool call found for function call output with call_id {id}."
                            ));
                        }
                        outputs.insert(id);
                    }
                    _ => {}
                }
            }
            let missing: Vec<_> = calls.difference(&outputs).collect();
            (!missing.is_empty())
                .then(|| format!("No tool output found for function call {missing:?}."))
        }
    }
}

/// The provider's 400 for an invalid request, saying `message`.
pub fn invalid(protocol: Protocol, message: &str) -> Response {
    let body = match protocol {
        Protocol::Anthropic => {
            json!({"type": "error", "error": {"type": "invalid_request_error", "message": message}})
        }
        Protocol::Responses => {
            json!({"error": {"message": message, "type": "invalid_request_error", "param": "input", "code": null}})
        }
    };
    upstream::json(400, body)
}

/// What a turn answers: a text, or one tool call (its id tag, its name and arguments). The
/// tag makes the call's ids: `toolu_{tag}` (Anthropic), `call_{tag}` and `fc_{tag}`
/// (Responses).
pub enum Reply {
    /// A plain text answer (the turn ends).
    Text(String),
    /// One tool call.
    Tool(String, (String, Value)),
}

/// The answer `what` to `body`, in `protocol`'s shape, streamed when the request asks.
pub fn reply(protocol: Protocol, body: &Value, input_tokens: u64, what: Reply) -> Response {
    let n = next_answer();
    let message_id = format!("msg_{n:05}");
    let model = body["model"].as_str().unwrap_or("scripted").to_owned();
    let stream = body["stream"] == true;
    match protocol {
        Protocol::Anthropic => {
            let (block, stop) = match &what {
                Reply::Text(text) => (json!({"type": "text", "text": text}), "end_turn"),
                Reply::Tool(tag, (name, input)) => (
                    json!({"type": "tool_use", "id": format!("toolu_{tag}"), "name": name, "input": input}),
                    "tool_use",
                ),
            };
            let usage = json!({"input_tokens": input_tokens, "output_tokens": 20});
            if !stream {
                return upstream::json(
                    200,
                    json!({"id": message_id, "type": "message", "role": "assistant",
                    "model": model, "content": [block], "stop_reason": stop, "stop_sequence": null, "usage": usage}),
                );
            }
            let (start, delta) = match &what {
                Reply::Text(text) => (
                    json!({"type": "text", "text": ""}),
                    json!({"type": "text_delta", "text": text}),
                ),
                Reply::Tool(_, (_, input)) => {
                    let mut start = block.clone();
                    start["input"] = json!({});
                    (
                        start,
                        json!({"type": "input_json_delta", "partial_json": input.to_string()}),
                    )
                }
            };
            let events = [
                (
                    "message_start",
                    json!({"type": "message_start", "message": {"id": message_id, "type": "message",
                    "role": "assistant", "model": model, "content": [], "stop_reason": null,
                    "stop_sequence": null, "usage": {"input_tokens": input_tokens, "output_tokens": 1}}}),
                ),
                (
                    "content_block_start",
                    json!({"type": "content_block_start", "index": 0, "content_block": start}),
                ),
                (
                    "content_block_delta",
                    json!({"type": "content_block_delta", "index": 0, "delta": delta}),
                ),
                (
                    "content_block_stop",
                    json!({"type": "content_block_stop", "index": 0}),
                ),
                (
                    "message_delta",
                    json!({"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": null},
                    "usage": {"output_tokens": 20}}),
                ),
                ("message_stop", json!({"type": "message_stop"})),
            ];
            let sse = events
                .iter()
                .map(|(n, d)| format!("event: {n}\ndata: {d}\n\n"))
                .collect();
            upstream::sse(sse, Duration::ZERO)
        }
        Protocol::Responses => responses_reply(&model, stream, input_tokens, n, what),
    }
}

fn responses_reply(model: &str, stream: bool, input_tokens: u64, n: u64, what: Reply) -> Response {
    let (response_id, message_id) = (format!("resp_{n:05}"), format!("msg_{n:05}"));
    let item = match &what {
        Reply::Text(text) => {
            json!({"type": "message", "id": message_id, "status": "completed", "role": "assistant",
            "content": [{"type": "output_text", "text": text, "annotations": []}]})
        }
        Reply::Tool(tag, (name, args)) => {
            json!({"type": "function_call", "id": format!("fc_{tag}"),
            "status": "completed", "call_id": format!("call_{tag}"), "name": name, "arguments": args.to_string()})
        }
    };
    let usage = json!({"input_tokens": input_tokens, "input_tokens_details": {"cached_tokens": 0},
        "output_tokens": 20, "output_tokens_details": {"reasoning_tokens": 0}, "total_tokens": input_tokens + 20});
    let response = |status: &str, output: Value, usage: Value| {
        json!({"id": response_id, "object": "response", "created_at": 1, "status": status, "model": model,
            "output": output, "usage": usage})
    };
    if !stream {
        return upstream::json(200, response("completed", json!([item]), usage));
    }
    let mut events = vec![
        json!({"type": "response.created", "response": response("in_progress", json!([]), Value::Null)}),
        json!({"type": "response.in_progress", "response": response("in_progress", json!([]), Value::Null)}),
    ];
    match &what {
        Reply::Text(text) => {
            let mut open = item.clone();
            open["content"] = json!([]);
            open["status"] = json!("in_progress");
            events.push(
                json!({"type": "response.output_item.added", "output_index": 0, "item": open}),
            );
            events.push(json!({"type": "response.content_part.added", "item_id": message_id, "output_index": 0,
                "content_index": 0, "part": {"type": "output_text", "text": "", "annotations": []}}));
            events.push(
                json!({"type": "response.output_text.delta", "item_id": message_id, "output_index": 0,
                "content_index": 0, "delta": text}),
            );
            events.push(
                json!({"type": "response.output_text.done", "item_id": message_id, "output_index": 0,
                "content_index": 0, "text": text}),
            );
            events.push(json!({"type": "response.content_part.done", "item_id": message_id, "output_index": 0,
                "content_index": 0, "part": {"type": "output_text", "text": text, "annotations": []}}));
        }
        Reply::Tool(_, _) => {
            let mut open = item.clone();
            open["arguments"] = json!("");
            open["status"] = json!("in_progress");
            events.push(
                json!({"type": "response.output_item.added", "output_index": 0, "item": open}),
            );
            events.push(
                json!({"type": "response.function_call_arguments.delta", "item_id": item["id"],
                "output_index": 0, "delta": item["arguments"]}),
            );
            events.push(
                json!({"type": "response.function_call_arguments.done", "item_id": item["id"],
                "output_index": 0, "arguments": item["arguments"]}),
            );
        }
    }
    events.push(json!({"type": "response.output_item.done", "output_index": 0, "item": item}));
    events.push(json!({"type": "response.completed", "response": response("completed", json!([item]), usage)}));
    let sse = (events.iter().enumerate())
        .map(|(i, e)| {
            let mut e = e.clone();
            e["sequence_number"] = json!(i);
            format!("event: {}\ndata: {e}\n\n", e["type"].as_str().unwrap_or(""))
        })
        .collect();
    upstream::sse(sse, Duration::ZERO)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_call_without_its_result_or_a_result_without_its_call_is_refused() {
        let call = json!({"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "Bash", "input": {}}]});
        let result = json!({"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "x"}]});
        let paired = json!({"messages": [{"role": "user", "content": "go"}, call, result]});
        assert_eq!(unpaired(Protocol::Anthropic, &paired), None);
        let lone_call = json!({"messages": [{"role": "user", "content": "go"}, call]});
        assert!(unpaired(Protocol::Anthropic, &lone_call).is_some_and(|p| p.contains("t1")));
        let lone_result = json!({"messages": [{"role": "user", "content": "go"}, result]});
        assert!(unpaired(Protocol::Anthropic, &lone_result).is_some_and(|p| p.contains("t1")));

        let call =
            json!({"type": "function_call", "call_id": "c1", "name": "shell", "arguments": "{}"});
        let output = json!({"type": "function_call_output", "call_id": "c1", "output": "x"});
        assert_eq!(
            unpaired(Protocol::Responses, &json!({"input": [call, output]})),
            None
        );
        assert!(unpaired(Protocol::Responses, &json!({"input": [call]})).is_some());
        assert!(unpaired(Protocol::Responses, &json!({"input": [output]})).is_some());
    }

    #[test]
    fn a_tool_call_takes_its_ids_from_its_tag() {
        let tag = || {
            Reply::Tool(
                "rc0001".into(),
                ("context_recall".into(), json!({"handle": "h"})),
            )
        };
        let body = json!({"model": "m", "stream": false});
        let runtime = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let read = |response: Response| {
            runtime.block_on(async {
                let bytes = axum::body::to_bytes(response.into_body(), usize::MAX)
                    .await
                    .unwrap();
                serde_json::from_slice::<Value>(&bytes).unwrap()
            })
        };
        let anthropic = read(reply(Protocol::Anthropic, &body, 10, tag()));
        assert_eq!(anthropic["content"][0]["id"], "toolu_rc0001");
        assert_eq!(anthropic["stop_reason"], "tool_use");
        let responses = read(reply(Protocol::Responses, &body, 10, tag()));
        assert_eq!(responses["output"][0]["call_id"], "call_rc0001");
        assert_eq!(responses["output"][0]["arguments"], r#"{"handle":"h"}"#);
    }
}
