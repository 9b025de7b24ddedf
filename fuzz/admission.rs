//! The proxy's request admission under fuzzing: a client's request head and body through
//! the proxy's router (route detection, the body read within limits, the tenant, the fast
//! path or the parse, preparation, the cascade, the engine's calls), with a scripted
//! upstream on 127.0.0.1 standing in for the provider. Shared by the `admission` fuzz
//! target and `crates/proxy/tests/fuzz_regressions.rs`, which replays its findings.
//!
//! An input is `[route, upstream, window, head lines..., "\n\n", body...]`:
//! - `route`: bits 0–1 pick `/v1/chat/completions`, `/v1/messages`, `/v1/responses` or
//!   a path the proxy only forwards; bit 2 sends `GET` instead of `POST`; bit 3 adds
//!   `?beta=true` (as the Anthropic SDK does);
//! - `upstream`: how the scripted provider answers (bits 0–1: an answer in the route's
//!   shape, an overflow past a size that bits 2–7 set, a 500, a 200 that is not JSON);
//! - `window`: the forced window, 1,024 to 131,584 tokens;
//! - then header lines `name: value` up to the first blank line (when there is one), then
//!   the body.
//!
//! Each input runs on a fresh proxy (in-memory state), twice: the first request is one the
//! proxy has not seen (the slow path), the second the same again (which the fast path may
//! take). The property, beyond "no panic": a request the upstream never saw was refused
//! with a 4xx whose JSON says why; one request makes at most 5 upstream calls (SPEC's
//! bound on the retry loop); a body the proxy changed is one it could read, reads back in
//! the route's format, and keeps its tool calls paired when the client's were.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::http::{HeaderName, HeaderValue, Method, Request, StatusCode, header};
use axum::response::Response;
use cascade_proxy::config::IN_MEMORY_DB;
use cascade_proxy::{AppState, ProxyConfig};
use cascade_test_support::overflow::{OverflowKind, overflow_body_sized};
use cascade_test_support::upstream::{self as scripted, Recorded};
use context_cascade::{Format, format};
use serde_json::{Value, json};
use tower::ServiceExt;

#[path = "tool_pairs.rs"]
mod tool_pairs;

/// SPEC: the retry loop makes at most this many calls for one request.
const MAX_CALLS: usize = 5;

/// What a run of inputs exercised: the regression test checks that its seeds reach every
/// stage (a harness that only ever saw refusals would prove little).
#[derive(Debug, Default, Clone, Copy)]
pub struct Tally {
    /// Requests sent to the proxy (two per input).
    pub requests: usize,
    /// Requests refused without an upstream call.
    pub refused: usize,
    /// Upstream calls whose body the proxy changed (compacted, facts put back...).
    pub rewritten: usize,
    /// Requests that took more than one upstream call (the retry loop).
    pub retried: usize,
    /// Requests the fast path sent as they came.
    pub fast_path: u64,
    /// Requests answered after recovering from an overflow.
    pub recovered: u64,
}

impl std::ops::AddAssign for Tally {
    fn add_assign(&mut self, other: Tally) {
        self.requests += other.requests;
        self.refused += other.refused;
        self.rewritten += other.rewritten;
        self.retried += other.retried;
        self.fast_path += other.fast_path;
        self.recovered += other.recovered;
    }
}

/// The runtime and the scripted upstream, made once per process (a fuzz run executes
/// thousands of inputs a second; a proxy is built fresh for each).
pub struct Harness {
    runtime: tokio::runtime::Runtime,
    upstream: scripted::Upstream,
    /// The current input's `upstream` byte, read by the script.
    behaviour: Arc<AtomicU32>,
    /// The proxy's configuration but the window (building one compiles the remember
    /// patterns: most of an input's time if done for each).
    config: ProxyConfig,
}

impl Default for Harness {
    fn default() -> Self {
        Self::new()
    }
}

impl Harness {
    /// A current-thread runtime and the scripted upstream on it.
    pub fn new() -> Harness {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("a Tokio runtime");
        let behaviour = Arc::new(AtomicU32::new(0));
        let seen_by_script = behaviour.clone();
        let upstream = runtime.block_on(scripted::start(move |_, request| {
            answer(seen_by_script.load(Ordering::Relaxed), request)
        }));
        let mut config = ProxyConfig::new(upstream.base.clone());
        config.state.path = IN_MEMORY_DB.into();
        config.window.discover = false;
        // The property is about admission and the retry loop; recall's tool is added after
        // the budget, and the seeds' windows (375 tokens and up) are too small to carry it.
        config.requests.recall = false;
        Harness {
            runtime,
            upstream,
            behaviour,
            config,
        }
    }

    /// Runs one input and checks the property (panics on a violation).
    pub fn check(&self, data: &[u8]) -> Tally {
        let Some(case) = Case::read(data) else {
            return Tally::default();
        };
        self.behaviour
            .store(u32::from(case.upstream), Ordering::Relaxed);
        self.runtime.block_on(self.run(&case))
    }

    async fn run(&self, case: &Case<'_>) -> Tally {
        let mut config = self.config.clone();
        config.window.force = Some(case.window);
        let state = AppState::new(config).expect("the harness's configuration is valid");
        let router = cascade_proxy::router(state.clone());
        self.upstream.take_requests();
        let mut tally = Tally::default();
        for round in ["first", "second"] {
            let response = match router.clone().oneshot(case.request()).await {
                Ok(response) => response,
                Err(never) => match never {},
            };
            let (status, body) = read(response).await;
            let calls = self.upstream.take_requests();
            tally += case.check(round, status, body.as_ref(), &calls);
        }
        assert!(
            state.flush(Duration::from_secs(10)).await,
            "state writes still pending 10 s after the answer"
        );
        let metrics = state.metrics();
        tally.fast_path = metrics.fast_path;
        tally.recovered = metrics.overflow_recoveries;
        tally
    }
}

/// One decoded input.
struct Case<'a> {
    /// The path without the query.
    path: &'static str,
    query: &'static str,
    /// The cascade route's format (`None`: a path the proxy forwards as it came).
    format: Option<Format>,
    method: Method,
    headers: Vec<(HeaderName, HeaderValue)>,
    body: &'a [u8],
    upstream: u8,
    window: u64,
}

impl<'a> Case<'a> {
    fn read(data: &'a [u8]) -> Option<Case<'a>> {
        let [route, upstream, window, rest @ ..] = data else {
            return None;
        };
        let (path, format) = match route & 3 {
            0 => ("/v1/chat/completions", Some(Format::OpenAi)),
            1 => ("/v1/messages", Some(Format::Anthropic)),
            2 => ("/v1/responses", Some(Format::Responses)),
            _ => ("/v1/embeddings", None),
        };
        let method = if route & 4 == 0 {
            Method::POST
        } else {
            Method::GET
        };
        let (head, body) = match rest.windows(2).position(|w| w == b"\n\n") {
            Some(end) => (&rest[..end], &rest[end + 2..]),
            None => (&[][..], rest),
        };
        Some(Case {
            path,
            query: if route & 8 == 0 { "" } else { "?beta=true" },
            format: format.filter(|_| method == Method::POST),
            method,
            headers: head_lines(head),
            body,
            upstream: *upstream,
            window: 1024 + 512 * u64::from(*window),
        })
    }

    /// The request as a client (through hyper, which frames the body) would send it.
    fn request(&self) -> Request<Body> {
        let mut request = Request::builder()
            .method(self.method.clone())
            .uri(format!("{}{}", self.path, self.query));
        for (name, value) in &self.headers {
            request = request.header(name, value);
        }
        request
            .header(header::CONTENT_LENGTH, self.body.len())
            .body(Body::from(self.body.to_vec()))
            .expect("a request from valid parts")
    }

    /// The property, for one request's answer and the upstream calls it made.
    fn check(
        &self,
        round: &str,
        status: StatusCode,
        body: Option<&Bytes>,
        calls: &[Recorded],
    ) -> Tally {
        let on_route: Vec<&Recorded> = calls.iter().filter(|c| c.path == self.path).collect();
        let mut tally = Tally {
            requests: 1,
            retried: usize::from(on_route.len() > 1),
            ..Tally::default()
        };
        let Some(format) = self.format else {
            // Forwarded as it came: one call, the client's bytes.
            assert!(
                on_route.len() <= 1,
                "{round}: a forwarded request was sent twice"
            );
            if let Some(call) = on_route.first() {
                assert_eq!(
                    call.bytes, self.body,
                    "{round}: a forwarded body was changed"
                );
            }
            return tally;
        };
        assert!(
            on_route.len() <= MAX_CALLS,
            "{round}: {} upstream calls for one request",
            on_route.len()
        );
        if on_route.is_empty() {
            refused_with_a_reason(round, status, body);
            tally.refused += 1;
        }
        let client = format::parse(self.body, Some(format)).ok();
        for call in on_route {
            if call.bytes == self.body {
                continue;
            }
            tally.rewritten += 1;
            let Some(client) = &client else {
                panic!(
                    "{round}: the proxy rewrote a body the parser refuses into {:?}",
                    String::from_utf8_lossy(&call.bytes)
                );
            };
            let sent = format::parse(&call.bytes, Some(format)).unwrap_or_else(|e| {
                panic!("{round}: the proxy sent a body it cannot read back ({e})")
            });
            if tool_pairs::hold(client) {
                assert!(
                    tool_pairs::hold(&sent),
                    "{round}: the client's tool calls were paired, the upstream's are not"
                );
            }
        }
        tally
    }
}

/// A request the upstream never saw: refused with a 4xx whose JSON error says why.
fn refused_with_a_reason(round: &str, status: StatusCode, body: Option<&Bytes>) {
    assert!(
        status.is_client_error(),
        "{round}: the proxy answered {status} without calling the upstream"
    );
    let body = body.unwrap_or_else(|| panic!("{round}: a {status} refusal without a body"));
    let json: Value = serde_json::from_slice(body)
        .unwrap_or_else(|e| panic!("{round}: a {status} refusal that is not JSON ({e})"));
    let message = json["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.starts_with("context-cascade: "),
        "{round}: a {status} refusal that does not say why: {json}"
    );
}

/// The header lines an input carries: `name: value`, each one the HTTP crate accepts
/// (what hyper would have parsed); framing headers are the harness's to set.
fn head_lines(head: &[u8]) -> Vec<(HeaderName, HeaderValue)> {
    head.split(|b| *b == b'\n')
        .filter_map(|line| {
            let colon = line.iter().position(|b| *b == b':')?;
            let name = HeaderName::from_bytes(line[..colon].trim_ascii()).ok()?;
            let value = HeaderValue::from_bytes(line[colon + 1..].trim_ascii()).ok()?;
            let framing = name == header::CONTENT_LENGTH || name == header::TRANSFER_ENCODING;
            (!framing).then_some((name, value))
        })
        .collect()
}

/// The answer's status and its whole body (`None` when the body ended in an error).
async fn read(response: Response) -> (StatusCode, Option<Bytes>) {
    let status = response.status();
    let body = axum::body::to_bytes(response.into_body(), usize::MAX).await;
    (status, body.ok())
}

/// The scripted provider: what it answers to `request` under the input's `upstream` byte.
fn answer(behaviour: u32, request: &Recorded) -> Response {
    let route = request.path.as_str();
    match behaviour & 3 {
        1 => {
            // A provider whose window is this many bytes of request (about 4 per token).
            let limit = 1500 * (1 + (behaviour >> 2) as usize);
            if request.bytes.len() <= limit {
                return answered(route, request);
            }
            let kind = match route {
                "/v1/messages" => OverflowKind::Anthropic,
                _ => OverflowKind::OpenAi,
            };
            let (window, prompt) = (limit as u64 / 4, request.bytes.len() as u64 / 4);
            let (status, body) = overflow_body_sized(kind, window, prompt);
            scripted::raw_json(status, body, &[])
        }
        2 => scripted::json(500, json!({"error": {"message": "upstream failed"}})),
        3 => scripted::raw_json(200, "not json".to_owned(), &[]),
        _ => answered(route, request),
    }
}

/// A successful answer in the route's shape: JSON, or a short event stream when asked.
fn answered(route: &str, request: &Recorded) -> Response {
    let prompt = request.bytes.len() as u64 / 4;
    if request.body["stream"] == true {
        let event = match route {
            "/v1/messages" => "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n",
            _ => {
                "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"ok\"}}]}\n\ndata: [DONE]\n\n"
            }
        };
        return scripted::sse(vec![event.to_owned()], Duration::ZERO);
    }
    let body = match route {
        "/v1/messages" => scripted::anthropic_message("ok", prompt),
        "/v1/responses" => json!({
            "id": "resp_1", "object": "response", "status": "completed", "model": "scripted",
            "output": [{"type": "message", "role": "assistant",
                "content": [{"type": "output_text", "text": "ok"}]}],
            "usage": {"input_tokens": prompt, "output_tokens": 5, "total_tokens": prompt + 5}
        }),
        _ => scripted::openai_completion("ok", prompt),
    };
    scripted::json(200, body)
}
