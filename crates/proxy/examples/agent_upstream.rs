//! A scripted model for the real-agent end-to-end check (`scripts/ci-agents.sh`): speaks
//! Anthropic Messages (Claude Code) and OpenAI Responses (Codex), streaming or not; enforces
//! a context limit with the providers' real error bodies; refuses, with 400 as providers
//! do, a request with a tool call lacking its result or a result lacking its call; and plays
//! an agent script: each main turn answers with a shell tool call whose output is large,
//! `--turns` times, then a final text answer.
//!
//! ```text
//! cargo run -p cascade-proxy --example agent_upstream -- --port 9201 --limit 40000 --turns 12
//! ```
//!
//! The provider's own compaction is answered as the API does (shapes from
//! `fixtures/provider-compaction.json`): a Responses request ending with Codex's
//! `compaction_trigger` gets exactly one `compaction` item, `POST /v1/responses/compact` the
//! user messages and a compaction item, and an Anthropic request with a `compact_20260112`
//! edit over its trigger an answer that begins with a `compaction` block.
//!
//! `GET /stats` gives what it saw, per protocol: requests, overflow answers, unpaired
//! requests, main turns answered, how many main requests extend the previous one, the
//! prompt tokens a provider's prompt cache would serve (the longest common prefix of the
//! main request's items with the previous one's) and the rest, and who compacted when: the
//! client (a request without tools that asks for a summary) or the provider.
//! It counts a request's prompt as its body bytes divided by 3 (not the proxy's estimator).

#![allow(clippy::unwrap_used, clippy::expect_used)] // a test tool: a failure ends the run

use std::collections::{BTreeMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::response::Response;
use cascade_test_support::compaction;
use cascade_test_support::upstream::{self, Answer, Recorded};
use cascade_test_support::{OverflowKind, overflow_body_sized};
use serde_json::{Value, json};

/// The command every tool call asks for: about 109 KB of output (Codex keeps its head and
/// tail).
const COMMAND: &str = "seq 1 20000";
/// Claude Code's command: about 24 KB, under the size past which Claude Code saves an output
/// to a file and sends the model only a 2 KB preview.
const CLAUDE_COMMAND: &str = "seq 1 5000";
/// The final answer's text, which the script checks the agents print.
const FINAL: &str = "CASCADE-AGENT-SCRIPT-DONE";

#[derive(Default, serde::Serialize, Clone)]
struct Stats {
    requests: u64,
    overflows: u64,
    unpaired: u64,
    /// Main-agent requests answered (tool calls and the final answer).
    turns: u64,
    /// Main requests answered, and of those how many extend the previous one.
    main_answered: u64,
    extends_previous: u64,
    finished: bool,
    largest_prompt: u64,
    /// Prompt tokens of main requests a prompt cache would serve, and the rest.
    cached_tokens: u64,
    uncached_tokens: u64,
    /// Compactions: asked of the provider (the main turn they came at), and by the client
    /// itself (a summary request without tools).
    provider_compactions: Vec<u64>,
    client_compactions: Vec<u64>,
    #[serde(skip)]
    previous: Option<Vec<Value>>,
}

struct Script {
    /// Where to write each main request's body (`--dump DIR`), for looking into a run.
    dump: Option<std::path::PathBuf>,
    limit: u64,
    turns: u64,
    stats: Mutex<BTreeMap<&'static str, Stats>>,
}

fn arg(args: &[String], name: &str, default: u64) -> u64 {
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .map_or(default, |v| v.parse().expect("a number"))
}

#[tokio::main]
async fn main() {
    let args: Vec<String> = std::env::args().collect();
    let port = arg(&args, "--port", 9201) as u16;
    let dump = (args.iter().position(|a| a == "--dump"))
        .and_then(|i| args.get(i + 1))
        .map(std::path::PathBuf::from);
    let script = Arc::new(Script {
        dump,
        limit: arg(&args, "--limit", 40_000),
        turns: arg(&args, "--turns", 12),
        stats: Mutex::new(BTreeMap::new()),
    });
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", port))
        .await
        .expect("bind");
    println!("agent upstream on http://127.0.0.1:{port}");
    let _server = upstream::serve_on(listener, move |_, request| {
        let script = script.clone();
        Box::pin(async move { answer(&script, request) }) as Answer
    });
    std::future::pending::<()>().await;
}

fn answer(script: &Script, request: Recorded) -> Response {
    match (request.method.as_str(), request.path.as_str()) {
        ("GET", "/stats") => {
            let stats = script.stats.lock().unwrap().clone();
            upstream::json(200, serde_json::to_value(stats).unwrap())
        }
        ("POST", "/v1/messages") => turn(script, Protocol::Anthropic, &request),
        ("POST", "/v1/responses") => turn(script, Protocol::Responses, &request),
        ("POST", "/v1/responses/compact") => {
            let mut all = script.stats.lock().unwrap();
            let stats = all.entry("responses").or_default();
            stats.requests += 1;
            let turn = stats.turns;
            stats.provider_compactions.push(turn);
            let n = ANSWERS.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            let tokens = request.bytes.len() as u64 / 3;
            eprintln!("agent_upstream: responses: /v1/responses/compact at turn {turn}");
            upstream::json(
                200,
                compaction::compact_endpoint_answer(&request.body, n, tokens),
            )
        }
        ("POST", "/v1/messages/count_tokens") => {
            upstream::json(200, json!({"input_tokens": request.bytes.len() / 3}))
        }
        _ => upstream::not_found(),
    }
}

#[derive(Clone, Copy, PartialEq)]
enum Protocol {
    Anthropic,
    Responses,
}

fn turn(script: &Script, protocol: Protocol, request: &Recorded) -> Response {
    let label = match protocol {
        Protocol::Anthropic => "anthropic",
        Protocol::Responses => "responses",
    };
    let body = &request.body;
    let tokens = prompt_tokens(protocol, request);
    let mut all = script.stats.lock().unwrap();
    let stats = all.entry(label).or_default();
    stats.requests += 1;
    if let Some(problem) = unpaired(protocol, body) {
        stats.unpaired += 1;
        eprintln!("agent_upstream: {label}: refused an unpaired request: {problem}");
        return invalid(protocol, &problem);
    }
    if tokens > script.limit {
        stats.overflows += 1;
        eprintln!(
            "agent_upstream: {label}: overflow, {tokens} > {}",
            script.limit
        );
        let kind = match protocol {
            Protocol::Anthropic => OverflowKind::Anthropic,
            Protocol::Responses => OverflowKind::OpenAi,
        };
        let (status, error) = overflow_body_sized(kind, script.limit, tokens);
        return upstream::raw_json(status, error, &[]);
    }
    stats.largest_prompt = stats.largest_prompt.max(tokens);
    if protocol == Protocol::Responses && compaction::asks_for_compaction(body) {
        stats.provider_compactions.push(stats.turns);
        eprintln!(
            "agent_upstream: responses: compaction_trigger at turn {}",
            stats.turns
        );
        let n = ANSWERS.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        return compaction::trigger_answer(body, n, tokens);
    }
    let tools = body["tools"].as_array().map_or(0, Vec::len);
    // Side requests (titles, topic checks, quota probes) carry no tools: a short text. A
    // client's own compaction is one of them (its summary request).
    if tools == 0 {
        if asks_for_summary(body) {
            stats.client_compactions.push(stats.turns);
            eprintln!(
                "agent_upstream: {label}: the client compacts at turn {}",
                stats.turns
            );
        }
        return reply(protocol, body, tokens, Reply::Text("ok".into()));
    }
    let items = comparable(protocol, body);
    let cached = stats
        .previous
        .as_ref()
        .map_or(0, |p| common_prefix_tokens(p, &items));
    stats.cached_tokens += cached.min(tokens);
    stats.uncached_tokens += tokens.saturating_sub(cached);
    if let Some(previous) = &stats.previous {
        stats.extends_previous += u64::from(items.starts_with(previous));
    }
    stats.previous = Some(items);
    let compacted_from = (protocol == Protocol::Anthropic)
        .then(|| compaction::anthropic_threshold(body))
        .flatten()
        .filter(|trigger| tokens > *trigger)
        .map(|_| tokens);
    if compacted_from.is_some() {
        stats.provider_compactions.push(stats.turns);
    }
    stats.main_answered += 1;
    stats.turns += 1;
    let step = stats.turns;
    if let Some(dir) = &script.dump {
        std::fs::write(dir.join(format!("{label}-{step:03}.json")), &request.bytes).unwrap();
    }
    let what = if step > script.turns {
        stats.finished = true;
        Reply::Text(format!("{FINAL}: ran {} commands", script.turns))
    } else {
        Reply::Tool(step, tool_for(protocol, body))
    };
    eprintln!("agent_upstream: {label}: turn {step}, prompt {tokens} tokens");
    drop(all);
    match compacted_from {
        Some(from) => anthropic_compacted(body, from, what),
        None => reply(protocol, body, tokens, what),
    }
}

/// A request's prompt in the scripted model's tokens (body bytes / 3). An Anthropic request
/// that carries a compaction block is counted from the block on: the API ignores what
/// precedes it.
fn prompt_tokens(protocol: Protocol, request: &Recorded) -> u64 {
    let whole = request.bytes.len() as u64 / 3;
    if protocol != Protocol::Anthropic {
        return whole;
    }
    let messages = request.body["messages"].as_array();
    let start = messages.and_then(|m| {
        m.iter().rposition(|message| {
            (message["content"].as_array().into_iter().flatten()).any(|b| b["type"] == "compaction")
        })
    });
    match (messages, start) {
        (Some(messages), Some(start)) => {
            let before: usize = messages[..start].iter().map(|m| m.to_string().len()).sum();
            whole.saturating_sub(before as u64 / 3)
        }
        _ => whole,
    }
}

/// Whether a side request asks the model for a summary of the conversation (Claude Code's
/// and Codex's own compaction prompts say so in their last user message).
fn asks_for_summary(body: &Value) -> bool {
    let last = (body["messages"]
        .as_array()
        .or_else(|| body["input"].as_array()))
    .and_then(|items| items.last())
    .map(|m| m.to_string().to_lowercase())
    .unwrap_or_default();
    last.contains("summary") || last.contains("summarize") || last.contains("compact")
}

/// The tokens (serialized bytes / 3) of the longest common prefix of two item lists: what a
/// provider's prompt cache would serve.
fn common_prefix_tokens(previous: &[Value], items: &[Value]) -> u64 {
    let same = previous.iter().zip(items).take_while(|(a, b)| a == b);
    same.map(|(a, _)| a.to_string().len() as u64).sum::<u64>() / 3
}

/// An Anthropic answer the provider compacted first: a compaction block, then `what`,
/// with the compaction's usage only in `usage.iterations`.
fn anthropic_compacted(body: &Value, compacted_from: u64, what: Reply) -> Response {
    let n = ANSWERS.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    let model = body["model"].as_str().unwrap_or("scripted");
    let block = compaction::anthropic_block(
        &format!("Summary of turns so far (compaction {n})."),
        &format!("scripted-{n}"),
    );
    let prompt = 2_000;
    let usage = compaction::anthropic_usage(compacted_from, prompt, 20);
    let (block2, stream_open, stream_delta, stop) = match what {
        Reply::Text(text) => (
            json!({"type": "text", "text": text}),
            json!({"type": "text", "text": ""}),
            json!({"type": "text_delta", "text": text}),
            "end_turn",
        ),
        Reply::Tool(step, (name, input)) => {
            let call = json!({"type": "tool_use", "id": format!("toolu_{step:04}"), "name": name, "input": input});
            let mut open = call.clone();
            open["input"] = json!({});
            let delta = json!({"type": "input_json_delta", "partial_json": input.to_string()});
            (call, open, delta, "tool_use")
        }
    };
    if body["stream"] == true {
        let id = format!("msg_{n:05}");
        let then = (stream_open, stream_delta);
        let events = compaction::anthropic_stream((&id, model), &block, then, stop, &usage);
        return upstream::sse(events, Duration::ZERO);
    }
    upstream::json(
        200,
        json!({"id": format!("msg_{n:05}"), "type": "message", "role": "assistant", "model": model,
            "content": [block, block2], "stop_reason": stop, "stop_sequence": null, "usage": usage}),
    )
}

/// The request's history as comparable items (without `cache_control`, which agents move
/// to the newest message every turn without changing what the provider caches).
fn comparable(protocol: Protocol, body: &Value) -> Vec<Value> {
    let mut items = Vec::new();
    let (head, list) = match protocol {
        Protocol::Anthropic => ("system", "messages"),
        Protocol::Responses => ("instructions", "input"),
    };
    items.push(body[head].clone());
    items.extend(body[list].as_array().cloned().unwrap_or_default());
    items.iter_mut().for_each(strip_cache_control);
    items
}

fn strip_cache_control(value: &mut Value) {
    match value {
        Value::Object(map) => {
            map.remove("cache_control");
            map.values_mut().for_each(strip_cache_control);
        }
        Value::Array(list) => list.iter_mut().for_each(strip_cache_control),
        _ => {}
    }
}

/// What makes a request invalid for the provider: a tool call without its result right
/// after it, or a result without its call before it.
fn unpaired(protocol: Protocol, body: &Value) -> Option<String> {
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

fn invalid(protocol: Protocol, message: &str) -> Response {
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

/// The shell tool the agent offers, and the arguments that run [`COMMAND`] with it.
fn tool_for(protocol: Protocol, body: &Value) -> (String, Value) {
    let names: Vec<&str> = (body["tools"].as_array().into_iter().flatten())
        .filter_map(|t| t["name"].as_str())
        .collect();
    let has = |n: &str| names.contains(&n);
    match protocol {
        Protocol::Anthropic => (
            "Bash".into(),
            json!({"command": CLAUDE_COMMAND, "description": "Print many numbers"}),
        ),
        Protocol::Responses if has("exec_command") => {
            ("exec_command".into(), json!({"cmd": COMMAND}))
        }
        Protocol::Responses if has("shell_command") => {
            ("shell_command".into(), json!({"command": COMMAND}))
        }
        Protocol::Responses => ("shell".into(), json!({"command": ["bash", "-lc", COMMAND]})),
    }
}

enum Reply {
    Text(String),
    Tool(u64, (String, Value)),
}

/// Answers so far: every answer gets its own message id (agents merge the streamed blocks
/// of one id into one message).
static ANSWERS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

fn reply(protocol: Protocol, body: &Value, input_tokens: u64, what: Reply) -> Response {
    let n = ANSWERS.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    let message_id = format!("msg_{n:05}");
    let model = body["model"].as_str().unwrap_or("scripted").to_owned();
    let stream = body["stream"] == true;
    match protocol {
        Protocol::Anthropic => {
            let (block, stop) = match &what {
                Reply::Text(text) => (json!({"type": "text", "text": text}), "end_turn"),
                Reply::Tool(step, (name, input)) => (
                    json!({"type": "tool_use", "id": format!("toolu_{step:04}"), "name": name, "input": input}),
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
        Reply::Tool(step, (name, args)) => {
            json!({"type": "function_call", "id": format!("fc_{step:04}"),
            "status": "completed", "call_id": format!("call_{step:04}"), "name": name, "arguments": args.to_string()})
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
