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
//! client (a request without tools that asks for a summary, or Claude Code's summary prompt
//! with its tools) or the provider.
//! It counts a request's prompt as its body bytes divided by 3 (not the proxy's estimator).
//!
//! Recall: when a main request offers the proxy's recall tool and its history carries a
//! marker's handle line, the model calls the tool by that handle instead of taking its
//! turn (the first time a handle appears, then every [`RECALL_EVERY`] turns), as non-
//! streaming or streaming as the request. The proxy's follow-up (the call and its result
//! appended) is checked to hold recalled text, counted (`recall_rounds`, `recall_hits`)
//! and answered with the session's normal next step; a result that is only a marker with
//! its own handle line is followed by a call by that handle (`recall_followed`). Its prompt is billed, but it is not a
//! main request of the client's: the client never sees it.

#![allow(clippy::unwrap_used, clippy::expect_used)] // a test tool: a failure ends the run

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::response::Response;
use cascade_test_support::agent::{self, Protocol, Reply, next_answer, reply};
use cascade_test_support::agent_recall;
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
/// Turns between two recall calls (after the first, made when a handle first appears): a
/// few rounds per session, as a model that looks back now and then.
const RECALL_EVERY: u64 = 6;

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
    /// Recall calls made at a main request (the turn they came at), rounds completed (the
    /// proxy's follow-up came back), of those the ones whose result held recalled text, and
    /// the ones whose result was only a marker whose handle the model called next.
    recall_calls: Vec<u64>,
    recall_rounds: u64,
    recall_hits: u64,
    recall_followed: u64,
    #[serde(skip)]
    previous: Option<Vec<Value>>,
    #[serde(skip)]
    recalled: Vec<String>,
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
            let n = next_answer();
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

fn turn(script: &Script, protocol: Protocol, request: &Recorded) -> Response {
    let label = protocol.label();
    let body = &request.body;
    let tokens = prompt_tokens(protocol, request);
    let mut all = script.stats.lock().unwrap();
    let stats = all.entry(label).or_default();
    stats.requests += 1;
    if let Some(problem) = agent::unpaired(protocol, body) {
        stats.unpaired += 1;
        eprintln!("agent_upstream: {label}: refused an unpaired request: {problem}");
        return agent::invalid(protocol, &problem);
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
        let n = next_answer();
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
    // Claude Code's own compaction keeps its tools (the prompt cache is shared with its
    // turns) and asks for a text-only summary in its last message: a summary, not a turn.
    if compaction_prompt(body) {
        stats.client_compactions.push(stats.turns);
        eprintln!(
            "agent_upstream: {label}: the client compacts at turn {}",
            stats.turns
        );
        let summary = format!(
            "<summary>Ran `seq` {} times as asked.</summary>",
            stats.turns
        );
        return reply(protocol, body, tokens, Reply::Text(summary));
    }
    let items = comparable(protocol, body);
    let cached = stats
        .previous
        .as_ref()
        .map_or(0, |p| common_prefix_tokens(p, &items));
    stats.cached_tokens += cached.min(tokens);
    stats.uncached_tokens += tokens.saturating_sub(cached);
    // The proxy's follow-up after a recall call: checked and counted, then the turn the
    // call stood in for. Not a main request: the client never sent it.
    let follow_up = agent_recall::follow_up_result(protocol, body);
    if let Some(result) = &follow_up {
        stats.recall_rounds += 1;
        let hit = agent_recall::holds_recalled(result);
        stats.recall_hits += u64::from(hit);
        let head: String = result.chars().take(160).collect();
        eprintln!("agent_upstream: {label}: recall round back, hit {hit}: {head:?}");
        if !hit && let Some(call) = follow_chain(stats, protocol, body, result) {
            drop(all);
            return reply(protocol, body, tokens, call);
        }
    } else {
        if let Some(previous) = &stats.previous {
            stats.extends_previous += u64::from(items.starts_with(previous));
        }
        stats.previous = Some(items);
        stats.main_answered += 1;
    }
    let compacted_from = (protocol == Protocol::Anthropic)
        .then(|| compaction::anthropic_threshold(body))
        .flatten()
        .filter(|trigger| tokens > *trigger)
        .map(|_| tokens);
    if compacted_from.is_some() {
        stats.provider_compactions.push(stats.turns);
    }
    if follow_up.is_none()
        && compacted_from.is_none()
        && let Some(call) = recall_call(stats, protocol, body)
    {
        eprintln!(
            "agent_upstream: {label}: recall call at turn {}",
            stats.turns
        );
        drop(all);
        return reply(protocol, body, tokens, call);
    }
    stats.turns += 1;
    let step = stats.turns;
    if let Some(dir) = &script.dump {
        std::fs::write(dir.join(format!("{label}-{step:03}.json")), &request.bytes).unwrap();
    }
    let what = if step > script.turns {
        stats.finished = true;
        Reply::Text(format!("{FINAL}: ran {} commands", script.turns))
    } else {
        Reply::Tool(format!("{step:04}"), tool_for(protocol, body))
    };
    eprintln!("agent_upstream: {label}: turn {step}, prompt {tokens} tokens");
    drop(all);
    match compacted_from {
        Some(from) => anthropic_compacted(body, from, what),
        None => reply(protocol, body, tokens, what),
    }
}

/// A recall result that holds no removed text but a marker (a removal of a marker: the
/// cascade cut a result it had cut before) is followed by a call by that marker's handle,
/// as a model reading it would, while the proxy's rounds for this request allow another
/// (`recall::MAX_ROUNDS`, 3).
fn follow_chain(
    stats: &mut Stats,
    protocol: Protocol,
    body: &Value,
    result: &str,
) -> Option<Reply> {
    const MAX_ROUNDS: usize = 3;
    let tool = agent_recall::offered_tool(body)?;
    if agent_recall::rounds_so_far(protocol, body) >= MAX_ROUNDS {
        return None;
    }
    let next = agent_recall::handles_in(result)
        .into_iter()
        .find(|h| !stats.recalled.contains(h))?;
    stats.recall_followed += 1;
    stats.recalled.push(next.clone());
    let n = stats.recall_calls.len() as u64 + stats.recall_followed;
    eprintln!("agent_upstream: recall follows the marker's handle {next}");
    Some(agent_recall::call(n, &tool, &next))
}

/// The recall call this main request gets instead of its turn, if any: the request offers
/// the proxy's tool, its history carries a handle, and this is the first handle seen or
/// [`RECALL_EVERY`] turns have gone since the last call. By the newest handle not yet
/// recalled (else the newest).
fn recall_call(stats: &mut Stats, protocol: Protocol, body: &Value) -> Option<Reply> {
    let tool = agent_recall::offered_tool(body)?;
    let handles = agent_recall::handles(protocol, body);
    let due = (stats.recall_calls.last()).is_none_or(|last| stats.turns >= last + RECALL_EVERY);
    if handles.is_empty() || !due {
        return None;
    }
    let fresh = handles.iter().rev().find(|h| !stats.recalled.contains(h));
    let handle = fresh.or(handles.last())?.clone();
    stats.recall_calls.push(stats.turns);
    stats.recalled.push(handle.clone());
    let n = stats.recall_calls.len() as u64 + stats.recall_followed;
    Some(agent_recall::call(n, &tool, &handle))
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

/// Whether a request that offers tools is the client's compaction: Claude Code's summary
/// prompt (2.1.332) appended to its last message says to answer in text only and to write
/// the summary inside `<summary>` tags.
fn compaction_prompt(body: &Value) -> bool {
    let last = (body["messages"].as_array())
        .and_then(|m| m.last())
        .map(Value::to_string)
        .unwrap_or_default();
    last.contains("Respond with TEXT ONLY") || last.contains("<summary></summary>")
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
    let n = next_answer();
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
        Reply::Tool(tag, (name, input)) => {
            let call = json!({"type": "tool_use", "id": format!("toolu_{tag}"), "name": name, "input": input});
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
