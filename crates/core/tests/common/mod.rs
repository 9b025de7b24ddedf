//! Test helpers shared by the integration tests: the fixtures and their Anthropic form.
// Helpers, not tests: they unwrap what a test would unwrap, and each test crate uses a part.
#![allow(dead_code, unreachable_pub, clippy::unwrap_used, clippy::expect_used)]

pub mod degraded;
pub mod invariants;
pub mod scripted;
pub mod sessions;

use serde_json::{Map, Value, json};

/// `fixtures/` at the repository root (vendored, with their sources and licenses).
pub fn fixtures_dir() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures")
}

/// Every transcript fixture: (file stem, the whole file as JSON).
pub fn transcripts() -> Vec<(String, Value)> {
    let dir = fixtures_dir().join("transcripts");
    let mut out = Vec::new();
    let mut entries: Vec<_> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("fixtures at {}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    entries.sort();
    for path in entries {
        let text = std::fs::read_to_string(&path).unwrap();
        let stem = path.file_stem().unwrap().to_string_lossy().into_owned();
        out.push((stem, serde_json::from_str(&text).unwrap()));
    }
    assert_eq!(out.len(), 10, "expected the ten transcript fixtures");
    out
}

/// An OpenAI request body made from a fixture's messages.
pub fn openai_body(fixture: &Value) -> Value {
    json!({"model": "gpt-4o", "messages": fixture["messages"].clone(), "max_tokens": 1024})
}

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
