//! A scripted upstream for tests and the SDK check: an OpenAI- (Chat Completions and
//! Responses) and Anthropic-compatible server on loopback that enforces a context limit
//! with the bodies real providers send, answers with usage (streaming or not), records
//! every request it sees, and can be told to answer the next requests with a canned error.
//!
//! It counts a request's prompt as its body bytes divided by `bytes_per_token`, which is
//! deliberately not the proxy's estimator.

#![allow(clippy::unwrap_used, clippy::expect_used, unreachable_pub)] // test code: a failure is a test failure

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use cascade_test_support::upstream::{self, Answer, Recorded, Upstream};
use cascade_test_support::{OverflowKind, overflow_body_sized};
use serde_json::{Value, json};

/// Which overflow body the OpenAI route sends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[allow(dead_code)]
pub enum OpenAiFlavor {
    /// OpenAI's `context_length_exceeded`.
    OpenAi,
    /// llama.cpp's `exceed_context_size_error`.
    LlamaCpp,
}

/// One request the upstream received.
#[derive(Debug, Clone)]
#[allow(dead_code)]
pub struct Seen {
    pub path: String,
    pub headers: HeaderMap,
    pub body: Bytes,
    /// The answer's status.
    pub status: u16,
}

/// A canned answer: status, JSON body, extra headers.
pub type Canned = (u16, String, Vec<(String, String)>);

/// What the upstream does, and what it saw.
pub struct Script {
    /// The context limit it enforces, in its own tokens.
    pub limit: u64,
    pub bytes_per_token: f64,
    pub flavor: OpenAiFlavor,
    /// Whether answers carry `usage` (without it the proxy's calibration stays put).
    pub report_usage: bool,
    /// Reported by `GET /props` (llama.cpp discovery) when set.
    pub n_ctx: Option<u64>,
    /// Canned answers for the next requests: (status, JSON body, extra headers).
    pub canned: Mutex<VecDeque<Canned>>,
    pub seen: Mutex<Vec<Seen>>,
    /// How long the chat and messages routes wait before answering.
    pub delay: Duration,
    /// Set when an endless stream (model `endless`) was dropped: its client went away.
    pub stream_dropped: AtomicBool,
}

impl Script {
    #[allow(dead_code)]
    pub fn new(limit: u64) -> Self {
        Script {
            limit,
            bytes_per_token: 3.0,
            flavor: OpenAiFlavor::OpenAi,
            report_usage: true,
            n_ctx: None,
            canned: Mutex::new(VecDeque::new()),
            seen: Mutex::new(Vec::new()),
            delay: Duration::ZERO,
            stream_dropped: AtomicBool::new(false),
        }
    }

    /// Every request seen so far.
    #[allow(dead_code)]
    pub fn seen(&self) -> Vec<Seen> {
        self.seen.lock().unwrap().clone()
    }

    /// Answers the next request with this error.
    #[allow(dead_code)]
    pub fn push_error(&self, status: u16, body: &str, headers: &[(&str, &str)]) {
        let headers = headers
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        self.canned
            .lock()
            .unwrap()
            .push_back((status, body.to_string(), headers));
    }

    fn tokens(&self, body: &[u8]) -> u64 {
        (body.len() as f64 / self.bytes_per_token).ceil() as u64
    }
}

/// Answers one request the way the script says (the shared loopback server of
/// cascade-test-support carries it): the chat and messages routes, llama.cpp's `/props` and
/// the models list; 405 for another method on those paths, 404 elsewhere.
fn answer(script: Arc<Script>, request: Recorded) -> Answer {
    Box::pin(async move {
        let (headers, body) = (request.headers, request.bytes);
        match (request.method.as_str(), request.path.as_str()) {
            ("POST", "/v1/chat/completions") => chat(script, headers, body).await,
            ("POST", "/v1/messages") => messages(script, headers, body).await,
            ("POST", "/v1/responses") => responses(script, headers, body).await,
            ("GET", "/props") => props(script).await,
            ("GET", "/v1/models") => models(script, headers).await,
            (
                _,
                "/v1/chat/completions" | "/v1/messages" | "/v1/responses" | "/props" | "/v1/models",
            ) => (StatusCode::METHOD_NOT_ALLOWED, "method not allowed").into_response(),
            _ => upstream::not_found(),
        }
    })
}

/// Serves the scripted upstream on `listener` (in the background; returns at once).
#[allow(dead_code)]
pub fn serve(script: Arc<Script>, listener: tokio::net::TcpListener) -> Upstream {
    upstream::serve_on(listener, move |_, request| answer(script.clone(), request))
}

fn record(script: &Script, path: &str, headers: &HeaderMap, body: &Bytes, status: u16) {
    script.seen.lock().unwrap().push(Seen {
        path: path.into(),
        headers: headers.clone(),
        body: body.clone(),
        status,
    });
}

fn json_response(status: u16, body: String, headers: &[(String, String)]) -> Response {
    upstream::raw_json(status, body, headers)
}

/// The last user text of a request (for the reply, so a test can see which request it got).
fn last_user_text(request: &Value) -> String {
    let Some(messages) = request["messages"].as_array() else {
        return String::new();
    };
    for m in messages.iter().rev() {
        if m["role"] != "user" {
            continue;
        }
        match &m["content"] {
            Value::String(s) => return s.chars().take(60).collect(),
            Value::Array(parts) => {
                if let Some(t) = parts.iter().find_map(|p| p["text"].as_str()) {
                    return t.chars().take(60).collect();
                }
            }
            _ => {}
        }
    }
    String::new()
}

/// A summarizer's request (the LLM summarizer's system prompt asks for nine headings) is
/// answered with a nine-section summary; anything else with a line naming the request.
fn reply_text(request: &Value) -> String {
    let system = request["messages"][0]["content"].as_str().unwrap_or("");
    if system.contains("nine headings") {
        return (0..9)
            .map(|i| {
                format!(
                    "{}\n- scripted summary of the history",
                    context_cascade::summarizer::section_heading(i)
                )
            })
            .collect::<Vec<_>>()
            .join("\n");
    }
    let count = request["messages"].as_array().map_or(0, Vec::len);
    format!(
        "scripted reply to {count} messages: {}",
        last_user_text(request)
    )
}

async fn chat(script: Arc<Script>, headers: HeaderMap, body: Bytes) -> Response {
    if !script.delay.is_zero() {
        tokio::time::sleep(script.delay).await;
    }
    let canned = script.canned.lock().unwrap().pop_front();
    if let Some((status, text, extra)) = canned {
        record(&script, "/v1/chat/completions", &headers, &body, status);
        return json_response(status, text, &extra);
    }
    let Ok(request) = serde_json::from_slice::<Value>(&body) else {
        record(&script, "/v1/chat/completions", &headers, &body, 400);
        return json_response(
            400,
            json!({"error": {"message": "bad json", "type": "invalid_request_error"}}).to_string(),
            &[],
        );
    };
    let tokens = script.tokens(&body);
    if tokens > script.limit {
        record(&script, "/v1/chat/completions", &headers, &body, 400);
        let kind = match script.flavor {
            OpenAiFlavor::OpenAi => OverflowKind::OpenAi,
            OpenAiFlavor::LlamaCpp => OverflowKind::LlamaCpp,
        };
        let (status, error) = overflow_body_sized(kind, script.limit, tokens);
        return json_response(status, error, &[]);
    }
    record(&script, "/v1/chat/completions", &headers, &body, 200);
    let text = reply_text(&request);
    let model = request["model"].as_str().unwrap_or("scripted").to_string();
    if model == "endless" {
        return endless(script.clone());
    }
    if model == "cut" {
        let data = json!({"id": "c", "object": "chat.completion.chunk", "created": 1,
            "model": "cut", "choices": [{"index": 0, "delta": {"content": "partial "}}]});
        return cut_stream(format!("data: {data}\n\n"));
    }
    if request["stream"] == true {
        let include_usage = request["stream_options"]["include_usage"] == true;
        let mut events = Vec::new();
        let chunk = |delta: Value, finish: Value| {
            json!({"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1, "model": model,
                   "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})
        };
        events.push(chunk(
            json!({"role": "assistant", "content": ""}),
            Value::Null,
        ));
        for word in text.split_inclusive(' ') {
            events.push(chunk(json!({"content": word}), Value::Null));
        }
        events.push(chunk(json!({}), json!("stop")));
        if include_usage && script.report_usage {
            events.push(json!({"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1, "model": model,
                "choices": [], "usage": {"prompt_tokens": tokens, "completion_tokens": 5, "total_tokens": tokens + 5}}));
        }
        let mut sse: Vec<String> = events.iter().map(|e| format!("data: {e}\n\n")).collect();
        sse.push("data: [DONE]\n\n".into());
        return sse_response(sse);
    }
    let mut answer = json!({
        "id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": model,
        "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": tokens, "completion_tokens": 5, "total_tokens": tokens + 5}
    });
    if !script.report_usage {
        answer["usage"] = Value::Null;
    }
    json_response(
        200,
        answer.to_string(),
        &[("x-upstream".into(), "scripted".into())],
    )
}

async fn messages(script: Arc<Script>, headers: HeaderMap, body: Bytes) -> Response {
    if !script.delay.is_zero() {
        tokio::time::sleep(script.delay).await;
    }
    let canned = script.canned.lock().unwrap().pop_front();
    if let Some((status, text, extra)) = canned {
        record(&script, "/v1/messages", &headers, &body, status);
        return json_response(status, text, &extra);
    }
    let Ok(request) = serde_json::from_slice::<Value>(&body) else {
        record(&script, "/v1/messages", &headers, &body, 400);
        return json_response(400, json!({"type": "error", "error": {"type": "invalid_request_error", "message": "bad json"}}).to_string(), &[]);
    };
    let tokens = script.tokens(&body);
    if tokens > script.limit {
        record(&script, "/v1/messages", &headers, &body, 400);
        let (status, error) = overflow_body_sized(OverflowKind::Anthropic, script.limit, tokens);
        return json_response(status, error, &[]);
    }
    record(&script, "/v1/messages", &headers, &body, 200);
    let text = reply_text(&request);
    let model = request["model"].as_str().unwrap_or("scripted").to_string();
    if model == "cut" {
        let start = json!({"type": "message_start", "message": {"id": "msg_c", "type": "message",
            "role": "assistant", "model": "cut", "content": [], "stop_reason": null,
            "stop_sequence": null, "usage": {"input_tokens": 1, "output_tokens": 1}}});
        return cut_stream(format!("event: message_start\ndata: {start}\n\n"));
    }
    // Without usage reporting the counts are zero, which the proxy ignores.
    let reported = if script.report_usage { tokens } else { 0 };
    let usage = json!({"input_tokens": reported, "output_tokens": 5});
    if request["stream"] == true {
        let mut events = vec![
            (
                "message_start",
                json!({"type": "message_start", "message": {"id": "msg_1", "type": "message",
                "role": "assistant", "model": model, "content": [], "stop_reason": null,
                "stop_sequence": null, "usage": {"input_tokens": reported, "output_tokens": 1}}}),
            ),
            (
                "content_block_start",
                json!({"type": "content_block_start", "index": 0,
                "content_block": {"type": "text", "text": ""}}),
            ),
        ];
        for word in text.split_inclusive(' ') {
            events.push((
                "content_block_delta",
                json!({"type": "content_block_delta", "index": 0,
                "delta": {"type": "text_delta", "text": word}}),
            ));
        }
        events.push((
            "content_block_stop",
            json!({"type": "content_block_stop", "index": 0}),
        ));
        events.push(("message_delta", json!({"type": "message_delta",
            "delta": {"stop_reason": "end_turn", "stop_sequence": null}, "usage": {"output_tokens": 5}})));
        events.push(("message_stop", json!({"type": "message_stop"})));
        let sse = events
            .iter()
            .map(|(name, data)| format!("event: {name}\ndata: {data}\n\n"))
            .collect();
        return sse_response(sse);
    }
    let answer = json!({
        "id": "msg_1", "type": "message", "role": "assistant", "model": model,
        "content": [{"type": "text", "text": text}],
        "stop_reason": "end_turn", "stop_sequence": null, "usage": usage
    });
    json_response(200, answer.to_string(), &[])
}

/// The OpenAI Responses API: an overflow is a 400 answer when not streaming, and a
/// `response.failed` event after `response.created` when streaming (as OpenAI does).
async fn responses(script: Arc<Script>, headers: HeaderMap, body: Bytes) -> Response {
    let canned = script.canned.lock().unwrap().pop_front();
    if let Some((status, text, extra)) = canned {
        record(&script, "/v1/responses", &headers, &body, status);
        return json_response(status, text, &extra);
    }
    let request: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let tokens = script.tokens(&body);
    let stream = request["stream"] == true;
    let model = request["model"].as_str().unwrap_or("scripted").to_string();
    let response = |status: &str, output: Value, usage: Value| {
        json!({"id": "resp_1", "object": "response", "created_at": 1, "status": status,
               "model": model, "output": output, "usage": usage, "error": null})
    };
    let created = json!({"type": "response.created", "sequence_number": 0,
        "response": response("in_progress", json!([]), Value::Null)});
    let event = |e: &Value| format!("event: {}\ndata: {e}\n\n", e["type"].as_str().unwrap());
    if tokens > script.limit {
        record(&script, "/v1/responses", &headers, &body, 400);
        if stream {
            let mut failed = response("failed", json!([]), Value::Null);
            failed["error"] = json!({"code": "context_length_exceeded",
                "message": "Your input exceeds the context window of this model. Please adjust your input and try again."});
            let failed =
                json!({"type": "response.failed", "sequence_number": 1, "response": failed});
            return sse_response(vec![event(&created), event(&failed)]);
        }
        let (status, error) = overflow_body_sized(OverflowKind::OpenAi, script.limit, tokens);
        return json_response(status, error, &[]);
    }
    record(&script, "/v1/responses", &headers, &body, 200);
    let items = request["input"].as_array().map_or(1, Vec::len);
    let last = match &request["input"] {
        Value::String(s) => s.chars().take(60).collect(),
        Value::Array(items) => (items.iter().rev())
            .filter(|i| i["role"] == "user")
            .find_map(|i| match &i["content"] {
                Value::String(s) => Some(s.chars().take(60).collect()),
                Value::Array(parts) => parts
                    .iter()
                    .find_map(|p| p["text"].as_str().map(|t| t.chars().take(60).collect())),
                _ => None,
            })
            .unwrap_or_default(),
        _ => String::new(),
    };
    let text = format!("scripted reply to {items} items: {last}");
    let message = json!({"type": "message", "id": "msg_1", "status": "completed", "role": "assistant",
        "content": [{"type": "output_text", "text": text, "annotations": []}]});
    // Without usage reporting the counts are zero, which the proxy ignores.
    let reported = if script.report_usage { tokens } else { 0 };
    let usage = json!({"input_tokens": reported, "input_tokens_details": {"cached_tokens": 0},
        "output_tokens": 5, "output_tokens_details": {"reasoning_tokens": 0}, "total_tokens": reported + 5});
    let done = response("completed", json!([message]), usage);
    if !stream {
        return json_response(200, done.to_string(), &[]);
    }
    let events = [
        created,
        json!({"type": "response.output_item.added", "sequence_number": 1, "output_index": 0,
            "item": {"type": "message", "id": "msg_1", "status": "in_progress", "role": "assistant", "content": []}}),
        json!({"type": "response.content_part.added", "sequence_number": 2, "item_id": "msg_1", "output_index": 0,
            "content_index": 0, "part": {"type": "output_text", "text": "", "annotations": []}}),
        json!({"type": "response.output_text.delta", "sequence_number": 3, "item_id": "msg_1", "output_index": 0,
            "content_index": 0, "delta": text}),
        json!({"type": "response.output_text.done", "sequence_number": 4, "item_id": "msg_1", "output_index": 0,
            "content_index": 0, "text": text}),
        json!({"type": "response.content_part.done", "sequence_number": 5, "item_id": "msg_1", "output_index": 0,
            "content_index": 0, "part": {"type": "output_text", "text": text, "annotations": []}}),
        json!({"type": "response.output_item.done", "sequence_number": 6, "output_index": 0, "item": message}),
        json!({"type": "response.completed", "sequence_number": 7, "response": done}),
    ];
    sse_response(events.iter().map(event).collect())
}

fn sse_response(events: Vec<String>) -> Response {
    upstream::sse(events, Duration::ZERO)
}

/// Sets the script's flag when dropped (the stream it lives in was abandoned).
struct DropFlag(Arc<Script>);

impl Drop for DropFlag {
    fn drop(&mut self) {
        self.0.stream_dropped.store(true, Ordering::SeqCst);
    }
}

/// A stream that never ends: a chunk every 20 ms until the client goes away.
fn endless(script: Arc<Script>) -> Response {
    let flag = DropFlag(script);
    let stream = futures::stream::unfold((flag, 0u64), |(flag, n)| async move {
        tokio::time::sleep(Duration::from_millis(20)).await;
        let event = format!(
            "data: {{\"choices\":[{{\"index\":0,\"delta\":{{\"content\":\"tick {n} \"}}}}]}}\n\n"
        );
        Some((Ok::<_, std::io::Error>(Bytes::from(event)), (flag, n + 1)))
    });
    upstream::sse_body(Body::from_stream(stream))
}

/// A stream (model `cut`) that sends `first`, half an event more, then breaks the connection.
fn cut_stream(first: String) -> Response {
    let sent = futures::stream::iter([
        Ok::<_, std::io::Error>(Bytes::from(first)),
        Ok(Bytes::from_static(b"data: {\"choices\":[{\"ind")),
    ]);
    let cut = futures::stream::once(async {
        // Once the bytes are out: the proxy did receive them.
        tokio::time::sleep(Duration::from_millis(30)).await;
        Err(std::io::Error::other("cut"))
    });
    upstream::sse_body(Body::from_stream(futures::StreamExt::chain(sent, cut)))
}

async fn props(script: Arc<Script>) -> Response {
    match script.n_ctx {
        Some(n) => json_response(
            200,
            json!({"default_generation_settings": {"n_ctx": n}}).to_string(),
            &[],
        ),
        None => (StatusCode::NOT_FOUND, "not found").into_response(),
    }
}

async fn models(script: Arc<Script>, headers: HeaderMap) -> Response {
    record(&script, "/v1/models", &headers, &Bytes::new(), 200);
    json_response(
        200,
        json!({"object": "list", "data": [{"id": "scripted-model", "object": "model"}]})
            .to_string(),
        &[],
    )
}
