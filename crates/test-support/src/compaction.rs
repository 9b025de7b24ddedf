//! The providers' own compaction, answered by a scripted upstream with the shapes recorded
//! in `fixtures/provider-compaction.json` (each with its source): Anthropic threshold
//! compaction (a `compaction` block first in the answer, `compaction_delta` when streamed,
//! the compaction's usage only in `usage.iterations`), the Responses API's `compaction`
//! item for Codex's `compaction_trigger`, and `POST /v1/responses/compact`.

use std::sync::LazyLock;
use std::time::Duration;

use axum::response::Response;
use serde_json::{Value, json};

use crate::upstream;

static SHAPES: LazyLock<Value> = LazyLock::new(|| {
    let text = std::fs::read_to_string(crate::fixture("provider-compaction.json"))
        .expect("fixtures/provider-compaction.json");
    serde_json::from_str(&text).expect("provider-compaction.json is JSON")
});

/// The recorded shape at `pointer` (a JSON pointer into the fixture).
pub fn shape(pointer: &str) -> Value {
    SHAPES
        .pointer(pointer)
        .unwrap_or_else(|| panic!("provider-compaction.json has {pointer}"))
        .clone()
}

/// Whether an Anthropic request turns on threshold compaction, and its trigger (input
/// tokens; the documented default is 150,000).
pub fn anthropic_threshold(body: &Value) -> Option<u64> {
    let edits = body.pointer("/context_management/edits")?.as_array()?;
    let edit = edits.iter().find(|e| e["type"] == "compact_20260112")?;
    Some(
        edit.pointer("/trigger/value")
            .and_then(Value::as_u64)
            .unwrap_or(150_000),
    )
}

/// An Anthropic `compaction` block holding `summary` (the recorded block's keys).
pub fn anthropic_block(summary: &str, opaque: &str) -> Value {
    let mut block = shape("/anthropic/threshold_answer/content/0");
    block["content"] = json!(summary);
    block["encrypted_content"] = json!(opaque);
    block
}

/// Usage of an answer the provider compacted first: top level is the message iteration's;
/// the compaction's own usage is only in `iterations`.
pub fn anthropic_usage(compacted_from: u64, prompt: u64, output: u64) -> Value {
    let mut usage = shape("/anthropic/threshold_answer/usage");
    let fill = |v: &mut Value, input: u64, out: u64| {
        v["input_tokens"] = json!(input);
        v["output_tokens"] = json!(out);
    };
    fill(&mut usage, prompt, output);
    fill(&mut usage["iterations"][0], compacted_from, 50);
    fill(&mut usage["iterations"][1], prompt, output);
    usage
}

/// The SSE events of an Anthropic answer that begins with a compaction block (one
/// `compaction_delta`, as documented), then the block `then` opens with its one delta
/// (`(start, delta)`: a text or a tool call) ending with `stop`; `usage` as
/// [`anthropic_usage`] gives.
pub fn anthropic_stream(
    (id, model): (&str, &str),
    block: &Value,
    then: (Value, Value),
    stop: &str,
    usage: &Value,
) -> Vec<String> {
    let mut start = shape("/anthropic/threshold_stream/events/0");
    start["content_block"]["content"] = Value::Null;
    let mut delta = shape("/anthropic/threshold_stream/events/1");
    delta["delta"]["content"] = block["content"].clone();
    delta["delta"]["encrypted_content"] = block["encrypted_content"].clone();
    let block_stop = shape("/anthropic/threshold_stream/events/2");
    let events = [
        (
            "message_start",
            json!({"type": "message_start", "message": {"id": id, "type": "message",
            "role": "assistant", "model": model, "content": [], "stop_reason": null, "stop_sequence": null,
            "usage": {"input_tokens": usage["input_tokens"], "output_tokens": 1}}}),
        ),
        ("content_block_start", start),
        ("content_block_delta", delta),
        ("content_block_stop", block_stop),
        (
            "content_block_start",
            json!({"type": "content_block_start", "index": 1,
            "content_block": then.0}),
        ),
        (
            "content_block_delta",
            json!({"type": "content_block_delta", "index": 1,
            "delta": then.1}),
        ),
        (
            "content_block_stop",
            json!({"type": "content_block_stop", "index": 1}),
        ),
        (
            "message_delta",
            json!({"type": "message_delta", "delta": {"stop_reason": stop,
            "stop_sequence": null}, "usage": usage}),
        ),
        ("message_stop", json!({"type": "message_stop"})),
    ];
    events
        .iter()
        .map(|(name, data)| format!("event: {name}\ndata: {data}\n\n"))
        .collect()
}

/// A Responses `compaction` item (the recorded item's keys), numbered `n`.
pub fn responses_item(n: u64, opaque: &str) -> Value {
    let mut item = shape("/openai/compaction_item/item");
    item["id"] = json!(format!("cmp_{n:05}"));
    item["encrypted_content"] = json!(opaque);
    item
}

/// Whether a Responses request ends its input with Codex's `compaction_trigger`.
pub fn asks_for_compaction(body: &Value) -> bool {
    (body["input"].as_array()).is_some_and(|items| {
        items
            .iter()
            .any(|i| i["type"] == shape("/openai/codex_compaction_trigger/last_input_item/type"))
    })
}

/// The answer to a `compaction_trigger` request: a response whose output is exactly one
/// compaction item (what Codex requires), streamed when the request asks for it.
pub fn trigger_answer(body: &Value, n: u64, input_tokens: u64) -> Response {
    let item = responses_item(n, &format!("scripted-summary-{n}"));
    let usage = json!({"input_tokens": input_tokens, "input_tokens_details": {"cached_tokens": 0},
        "output_tokens": 50, "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": input_tokens + 50});
    let model = body["model"].as_str().unwrap_or("scripted");
    let response = |status: &str, output: Value, usage: Value| {
        json!({"id": format!("resp_c{n:05}"), "object": "response", "created_at": 1, "status": status,
            "model": model, "output": output, "usage": usage})
    };
    if body["stream"] != true {
        return upstream::json(200, response("completed", json!([item]), usage));
    }
    let events = [
        json!({"type": "response.created", "response": response("in_progress", json!([]), Value::Null)}),
        json!({"type": "response.output_item.added", "output_index": 0, "item": item}),
        json!({"type": "response.output_item.done", "output_index": 0, "item": item}),
        json!({"type": "response.completed", "response": response("completed", json!([item]), usage)}),
    ];
    let sse = (events.iter().enumerate())
        .map(|(i, e)| {
            let mut e = e.clone();
            e["sequence_number"] = json!(i);
            format!("event: {}\ndata: {e}\n\n", e["type"].as_str().unwrap_or(""))
        })
        .collect();
    upstream::sse(sse, Duration::ZERO)
}

/// The answer of `POST /v1/responses/compact`: every user message of the input, then one
/// compaction item (the recorded answer's keys).
pub fn compact_endpoint_answer(body: &Value, n: u64, input_tokens: u64) -> Value {
    let mut answer = shape("/openai/compact_endpoint_answer/body");
    let users: Vec<Value> = (body["input"].as_array().into_iter().flatten())
        .filter(|i| i["type"] == "message" && i["role"] == "user")
        .cloned()
        .collect();
    let mut output = users;
    output.push(responses_item(n, &format!("scripted-summary-{n}")));
    answer["id"] = json!(format!("resp_c{n:05}"));
    answer["output"] = Value::Array(output);
    answer["usage"] = json!({"input_tokens": input_tokens, "output_tokens": 50,
        "total_tokens": input_tokens + 50});
    answer
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_recorded_shapes_are_there() {
        assert_eq!(anthropic_block("s", "o")["type"], "compaction");
        assert_eq!(responses_item(1, "o")["type"], "compaction");
        let usage = anthropic_usage(60_000, 2_000, 40);
        assert_eq!(usage["iterations"][0]["type"], "compaction");
        assert_eq!(usage["iterations"][1]["input_tokens"], 2_000);
        let body = json!({"context_management": {"edits": [{"type": "compact_20260112",
            "trigger": {"type": "input_tokens", "value": 50_000}}]}});
        assert_eq!(anthropic_threshold(&body), Some(50_000));
        let codex = json!({"input": [{"type": "message", "role": "user", "content": "x"},
            {"type": "compaction_trigger"}]});
        assert!(asks_for_compaction(&codex));
        let compacted = compact_endpoint_answer(&codex, 3, 100);
        assert_eq!(compacted["object"], "response.compaction");
        assert_eq!(compacted["output"].as_array().unwrap().len(), 2);
    }
}
