//! The latency the proxy adds on each cascade route (Chat Completions, Messages, Responses)
//! for a real session of about 100K tokens: `claude-code__spotter__ae4a77f8-main` (466
//! messages, 477 kB as a Chat body), written in each route's format. The upstream is the
//! scripted one the tests use, with the window of each model configured and discovery off,
//! so the proxy asks it nothing but the requests (a hosted API: no `/props`, no
//! `/tokenize`). Fast path on, as shipped; `--off` adds a proxy with it off beside.
//!
//! Two scenarios per route, each its own conversation: the whole session repeated, and the
//! session's last calls as its agent made them (each request extends the previous one).
//! "Added" is the proxy's time minus the direct call's, request by request, in one run with
//! the routes interleaved. Not a test: numbers for docs/benchmarks.md.
//!
//! The proxy runs in this process (glibc's allocator, an in-memory store), or with
//! `--binary PATH` as the shipped `cascade proxy` in its own process (its allocator, a
//! SQLite file), which is what a user runs.
//!
//! ```text
//! cargo run --release -p cascade-proxy --example route_latency [-- --runs 3 --n 100 --off]
//! cargo run --release -p cascade-proxy --example route_latency -- --binary target/release/cascade
//! ```

#![allow(clippy::unwrap_used, clippy::expect_used, unreachable_pub)] // a development tool: a failure ends the run

mod latency;
#[path = "../tests/common/scripted.rs"]
mod scripted;
#[path = "../../core/tests/common/to_anthropic.rs"]
mod to_anthropic;

use std::time::Duration;

use latency::{
    arg, fast_path_taken, percentile_ms as percentile, scripted_upstream, send, session,
    spawn_binary, start_proxy,
};
use serde_json::{Value, json};

/// One route: its path, and the session up to a call point as a body of its format.
struct Route {
    name: &'static str,
    path: &'static str,
    body: fn(&[Value], &str) -> Value,
}

fn chat(messages: &[Value], tag: &str) -> Value {
    let mut messages = messages.to_vec();
    tag_first_user(&mut messages, tag);
    json!({"model": "gpt-4o", "max_tokens": 4096, "messages": messages})
}

fn anthropic(messages: &[Value], tag: &str) -> Value {
    let mut messages = messages.to_vec();
    tag_first_user(&mut messages, tag);
    let mut body = to_anthropic::to_anthropic(&messages);
    body["model"] = json!("claude-sonnet-4-5");
    body["max_tokens"] = json!(4096);
    body
}

/// The session as Codex would send it: input items (user messages, assistant text,
/// function calls and their outputs).
fn responses(messages: &[Value], tag: &str) -> Value {
    let mut messages = messages.to_vec();
    tag_first_user(&mut messages, tag);
    let text = |m: &Value| match &m["content"] {
        Value::String(s) => s.clone(),
        Value::Array(parts) => (parts.iter())
            .filter_map(|p| p["text"].as_str())
            .collect::<Vec<_>>()
            .join("\n"),
        _ => String::new(),
    };
    let mut input = Vec::new();
    for m in &messages {
        match m["role"].as_str().unwrap_or("") {
            "user" => input.push(json!({"type": "message", "role": "user",
                "content": [{"type": "input_text", "text": text(m)}]})),
            "assistant" => {
                let said = text(m);
                if !said.trim().is_empty() {
                    input.push(json!({"type": "message", "role": "assistant",
                        "content": [{"type": "output_text", "text": said}]}));
                }
                for call in m["tool_calls"].as_array().into_iter().flatten() {
                    input.push(json!({"type": "function_call", "call_id": call["id"],
                        "name": call["function"]["name"],
                        "arguments": call["function"]["arguments"]}));
                }
            }
            "tool" => input.push(json!({"type": "function_call_output",
                "call_id": m["tool_call_id"], "output": text(m)})),
            _ => {}
        }
    }
    json!({"model": "gpt-4o", "instructions": "You are a coding agent.", "input": input,
           "max_output_tokens": 4096})
}

/// Names the conversation: each scenario is its own (the first user message is its key).
fn tag_first_user(messages: &mut [Value], tag: &str) {
    if let Some(m) = messages.iter_mut().find(|m| m["role"] == "user")
        && let Some(text) = m["content"].as_str()
    {
        m["content"] = json!(format!("[{tag}] {text}"));
    }
}

const ROUTES: [Route; 3] = [
    Route {
        name: "Chat",
        path: "/v1/chat/completions",
        body: chat,
    },
    Route {
        name: "Messages",
        path: "/v1/messages",
        body: anthropic,
    },
    Route {
        name: "Responses",
        path: "/v1/responses",
        body: responses,
    },
];

/// Per route, the added times of one scenario.
type Added = Vec<Vec<Duration>>;

#[tokio::main]
async fn main() {
    let args: Vec<String> = std::env::args().collect();
    let (runs, n) = (arg(&args, "--runs", 3), arg(&args, "--n", 100));
    let off = args.iter().any(|a| a == "--off");
    let binary = (args.iter().position(|a| a == "--binary")).and_then(|i| args.get(i + 1));
    let (messages, points) = session();
    let (script, upstream, _upstream) = scripted_upstream().await;
    let client = reqwest::Client::new();

    for route in &ROUTES {
        let bytes = serde_json::to_vec(&(route.body)(&messages, "size")).unwrap();
        println!(
            "{}: the whole session is a {:.1} kB body",
            route.name,
            bytes.len() as f64 / 1000.0
        );
    }
    println!(
        "\n| run | scenario | route | direct p50 | fast path: added p50 / p99 | fast path off: added p50 / p99 | on the fast path |"
    );
    println!("|---|---|---|---|---|---|---|");
    // Windows the session never fills: every request needs no compaction.
    let windows: Vec<(String, u64)> = [("gpt-4o", 1_000_000), ("claude-sonnet-4-5", 1_000_000)]
        .into_iter()
        .map(|(m, w)| (m.to_owned(), w))
        .collect();
    for run in 1..=runs {
        // Fresh proxies per run: every scenario starts with an unseen conversation.
        // Dropped at the end of the run: the process ends, its folder goes.
        let process = match binary {
            Some(binary) => Some(spawn_binary(binary, &upstream, &windows).await),
            None => None,
        };
        let fast = match &process {
            Some(process) => process.url.clone(),
            None => start_proxy(&upstream, true, &windows).await,
        };
        let slow = if off {
            Some(start_proxy(&upstream, false, &windows).await)
        } else {
            None
        };
        tokio::time::sleep(Duration::from_millis(100)).await;
        let warm = 3;
        let last = *points.last().unwrap();
        let grows: Vec<usize> = points[points.len().saturating_sub(n + warm)..].to_vec();
        for (scenario, ends) in [
            ("whole session, repeated", vec![last; n + warm]),
            ("last calls, each extends the previous", grows),
        ] {
            let taken_before = fast_path_taken(&client, &fast).await;
            let mut direct: Added = vec![Vec::new(); 3];
            let mut added: Added = vec![Vec::new(); 3];
            let mut added_off: Added = vec![Vec::new(); 3];
            for (i, &end) in ends.iter().enumerate() {
                // The routes interleaved, request by request: the same machine state for each.
                for (r, route) in ROUTES.iter().enumerate() {
                    let tag = format!("run {run}, {scenario}");
                    let body = serde_json::to_vec(&(route.body)(&messages[..end], &tag)).unwrap();
                    let d = send(&client, &format!("{upstream}{}", route.path), &body).await;
                    let a = send(&client, &format!("{fast}{}", route.path), &body).await;
                    let b = match &slow {
                        Some(slow) => send(&client, &format!("{slow}{}", route.path), &body).await,
                        None => d,
                    };
                    if i >= warm {
                        direct[r].push(d);
                        added[r].push(a.max(d) - d);
                        added_off[r].push(b.max(d) - d);
                    }
                }
            }
            script.seen.lock().unwrap().clear();
            let taken = fast_path_taken(&client, &fast).await - taken_before;
            for (r, route) in ROUTES.iter().enumerate() {
                for list in [&mut direct[r], &mut added[r], &mut added_off[r]] {
                    list.sort();
                }
                let off_cell = if off {
                    format!(
                        "{:.2} / {:.2} ms",
                        percentile(&added_off[r], 0.5),
                        percentile(&added_off[r], 0.99)
                    )
                } else {
                    "—".to_owned()
                };
                println!(
                    "| {run} | {scenario} | {} | {:.2} ms | {:.2} / {:.2} ms | {off_cell} | {} |",
                    route.name,
                    percentile(&direct[r], 0.5),
                    percentile(&added[r], 0.5),
                    percentile(&added[r], 0.99),
                    if r == 2 {
                        format!("{taken}/{} (all routes)", 3 * ends.len())
                    } else {
                        String::new()
                    },
                );
            }
        }
    }
}
