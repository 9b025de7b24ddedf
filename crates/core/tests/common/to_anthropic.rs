//! A fixture's OpenAI chat messages as an Anthropic Messages body. Shared by core's tests
//! and the proxy's (which include this file by path: one converter for both).

use serde_json::{Map, Value, json};

/// The same conversation as an Anthropic Messages body: system on top, tool calls as
/// `tool_use` blocks, consecutive tool messages as one user message of `tool_result` blocks.
pub fn to_anthropic(messages: &[Value]) -> Value {
    let mut system = Vec::new();
    let mut out: Vec<Value> = Vec::new();
    let mut pending_results: Vec<Value> = Vec::new();
    let flush = |out: &mut Vec<Value>, pending: &mut Vec<Value>| {
        if !pending.is_empty() {
            out.push(json!({"role": "user", "content": std::mem::take(pending)}));
        }
    };
    for m in messages {
        let role = m["role"].as_str().unwrap();
        let text = match &m["content"] {
            Value::String(s) => s.clone(),
            Value::Array(parts) => parts
                .iter()
                .filter_map(|p| p["text"].as_str())
                .collect::<Vec<_>>()
                .join("\n"),
            _ => String::new(),
        };
        match role {
            "system" | "developer" => system.push(json!({"type": "text", "text": text})),
            "tool" => {
                let mut block = Map::new();
                block.insert("type".into(), json!("tool_result"));
                block.insert("tool_use_id".into(), m["tool_call_id"].clone());
                block.insert("content".into(), json!(text));
                if let Some(e) = m.get("is_error") {
                    block.insert("is_error".into(), e.clone());
                }
                pending_results.push(Value::Object(block));
            }
            "assistant" => {
                flush(&mut out, &mut pending_results);
                let mut blocks = Vec::new();
                if let Some(r) = m.get("reasoning_content").and_then(Value::as_str) {
                    blocks.push(json!({"type": "thinking", "thinking": r, "signature": "sig"}));
                }
                if !text.is_empty() {
                    blocks.push(json!({"type": "text", "text": text}));
                }
                for call in m["tool_calls"].as_array().into_iter().flatten() {
                    let args = call["function"]["arguments"].as_str().unwrap_or("{}");
                    let input: Value = serde_json::from_str(args).unwrap_or(json!({"raw": args}));
                    blocks.push(json!({"type": "tool_use", "id": call["id"], "name": call["function"]["name"], "input": input}));
                }
                if blocks.is_empty() {
                    blocks.push(json!({"type": "text", "text": ""}));
                }
                out.push(json!({"role": "assistant", "content": blocks}));
            }
            _ => {
                flush(&mut out, &mut pending_results);
                out.push(json!({"role": "user", "content": text}));
            }
        }
    }
    flush(&mut out, &mut pending_results);
    let mut body = Map::new();
    body.insert("model".into(), json!("claude-sonnet-4-5"));
    body.insert("max_tokens".into(), json!(1024));
    if !system.is_empty() {
        body.insert("system".into(), Value::Array(system));
    }
    body.insert("messages".into(), Value::Array(out));
    Value::Object(body)
}
