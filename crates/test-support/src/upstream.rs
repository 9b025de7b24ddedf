//! One scripted HTTP upstream on `127.0.0.1:0`: every request is recorded and answered by a
//! script that sees the request and how many came before it. Start it from a Tokio test
//! ([`start`], [`start_async`]) or from a plain one ([`spawn`], which runs it on its own
//! thread, e.g. beside a `cascade` child process).

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{HeaderMap, Method, StatusCode, Uri};
use axum::response::Response;
use serde_json::{Value, json};

/// One request the upstream received.
#[derive(Debug, Clone)]
pub struct Recorded {
    /// The request method.
    pub method: Method,
    /// The path (without the query).
    pub path: String,
    /// The request headers.
    pub headers: HeaderMap,
    /// The raw body.
    pub bytes: Bytes,
    /// The body as JSON (`Null` when it is not JSON).
    pub body: Value,
}

/// A boxed future answering one request.
pub type Answer = Pin<Box<dyn Future<Output = Response> + Send>>;
type Script = dyn Fn(usize, Recorded) -> Answer + Send + Sync;

#[derive(Clone)]
struct Shared {
    script: Arc<Script>,
    hits: Arc<AtomicUsize>,
    requests: Arc<Mutex<Vec<Recorded>>>,
}

/// A running scripted upstream.
pub struct Upstream {
    /// Its base URL, `http://127.0.0.1:PORT`.
    pub base: String,
    hits: Arc<AtomicUsize>,
    requests: Arc<Mutex<Vec<Recorded>>>,
}

impl Upstream {
    /// Requests received so far.
    pub fn hits(&self) -> usize {
        self.hits.load(Ordering::SeqCst)
    }

    /// The requests received, in order.
    pub fn requests(&self) -> Vec<Recorded> {
        self.requests.lock().expect("lock").clone()
    }

    /// Takes the requests received so far, leaving none: a harness that sends requests
    /// for as long as it runs (the admission fuzz target) would otherwise keep them all.
    pub fn take_requests(&self) -> Vec<Recorded> {
        std::mem::take(&mut *self.requests.lock().expect("lock"))
    }

    /// The paths of the requests received, in order.
    pub fn paths(&self) -> Vec<String> {
        self.requests().into_iter().map(|r| r.path).collect()
    }
}

/// Starts an upstream answering with `script(hit_index, request)`.
pub async fn start(
    script: impl Fn(usize, &Recorded) -> Response + Send + Sync + 'static,
) -> Upstream {
    start_async(move |index, request| {
        let response = script(index, &request);
        Box::pin(async move { response }) as Answer
    })
    .await
}

/// Starts an upstream whose script answers asynchronously (delays, computed streams).
pub async fn start_async(
    script: impl Fn(usize, Recorded) -> Answer + Send + Sync + 'static,
) -> Upstream {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    serve_on(listener, script)
}

/// Serves `script` on a listener already bound (a fixed port), in the background.
pub fn serve_on(
    listener: tokio::net::TcpListener,
    script: impl Fn(usize, Recorded) -> Answer + Send + Sync + 'static,
) -> Upstream {
    let shared = Shared {
        script: Arc::new(script),
        hits: Arc::new(AtomicUsize::new(0)),
        requests: Arc::new(Mutex::new(Vec::new())),
    };
    let address = listener.local_addr().expect("address");
    // No body limit (axum's default is 2 MB): the proxy's latency check sends 1M-token
    // requests, and a provider's limit is the proxy's to test, not this stand-in's.
    let app = axum::Router::new()
        .fallback(handle)
        .layer(axum::extract::DefaultBodyLimit::disable())
        .with_state(shared.clone());
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    Upstream {
        base: format!("http://{address}"),
        hits: shared.hits,
        requests: shared.requests,
    }
}

/// [`start`] for a test without a runtime: the upstream runs on a thread of its own, for
/// as long as the test process lives.
pub fn spawn(script: impl Fn(usize, &Recorded) -> Response + Send + Sync + 'static) -> Upstream {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime");
        runtime.block_on(async move {
            tx.send(start(script).await).expect("send");
            std::future::pending::<()>().await;
        });
    });
    rx.recv().expect("the upstream thread started")
}

async fn handle(
    State(shared): State<Shared>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    bytes: Bytes,
) -> Response {
    let recorded = Recorded {
        method,
        path: uri.path().to_owned(),
        headers,
        body: serde_json::from_slice(&bytes).unwrap_or(Value::Null),
        bytes,
    };
    let index = shared.hits.fetch_add(1, Ordering::SeqCst);
    shared.requests.lock().expect("lock").push(recorded.clone());
    (shared.script)(index, recorded).await
}

/// A JSON answer (with an `x-request-id` header, as providers send).
pub fn json(status: u16, body: Value) -> Response {
    raw_json(status, body.to_string(), &[])
}

/// A JSON answer from text, with extra headers.
pub fn raw_json(status: u16, body: String, headers: &[(String, String)]) -> Response {
    let mut builder = Response::builder()
        .status(StatusCode::from_u16(status).expect("status"))
        .header("content-type", "application/json")
        .header("x-request-id", "req-1");
    for (name, value) in headers {
        builder = builder.header(name.as_str(), value.as_str());
    }
    builder.body(Body::from(body)).expect("response")
}

/// A 404 with a short text.
pub fn not_found() -> Response {
    Response::builder()
        .status(404)
        .body(Body::from("not found"))
        .expect("response")
}

/// An SSE answer sent in the given chunks, `pause` apart (zero: as fast as they go).
pub fn sse(chunks: Vec<String>, pause: Duration) -> Response {
    let stream = futures::stream::unfold(chunks.into_iter(), move |mut rest| async move {
        let chunk = rest.next()?;
        if !pause.is_zero() {
            tokio::time::sleep(pause).await;
        }
        Some((Ok::<_, Infallible>(Bytes::from(chunk)), rest))
    });
    sse_body(Body::from_stream(stream))
}

/// An SSE answer with this body.
pub fn sse_body(body: Body) -> Response {
    Response::builder()
        .status(200)
        .header("content-type", "text/event-stream")
        .body(body)
        .expect("response")
}

/// An SSE answer that sends one event, then stalls forever.
pub fn stalled_stream() -> Response {
    let stream = futures::stream::unfold(false, |sent| async move {
        if !sent {
            Some((
                Ok::<_, Infallible>(Bytes::from("data: {\"a\":1}\n\n")),
                true,
            ))
        } else {
            tokio::time::sleep(Duration::from_secs(3600)).await;
            None
        }
    });
    sse_body(Body::from_stream(stream))
}

/// An OpenAI chat completion answering `text`, reporting `prompt_tokens`.
pub fn openai_completion(text: &str, prompt_tokens: u64) -> Value {
    json!({
        "id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": "scripted",
        "choices": [{"index": 0, "finish_reason": "stop",
            "message": {"role": "assistant", "content": text}}],
        "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": 5,
            "total_tokens": prompt_tokens + 5}
    })
}

/// An Anthropic message answering `text`, reporting `input_tokens`.
pub fn anthropic_message(text: &str, input_tokens: u64) -> Value {
    json!({
        "id": "msg_1", "type": "message", "role": "assistant", "model": "scripted",
        "content": [{"type": "text", "text": text}],
        "stop_reason": "end_turn", "stop_sequence": null,
        "usage": {"input_tokens": input_tokens, "output_tokens": 5}
    })
}

/// An upstream that accepts connections and never answers.
pub async fn start_silent() -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let address = listener.local_addr().expect("address");
    tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((socket, _)) = listener.accept().await {
            held.push(socket); // keep it open, say nothing
        }
    });
    format!("http://{address}")
}

/// A loopback address nothing listens on.
pub fn refused_base() -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let address = listener.local_addr().expect("address");
    drop(listener);
    format!("http://{address}")
}
