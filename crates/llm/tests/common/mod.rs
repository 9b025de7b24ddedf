//! A scripted upstream on 127.0.0.1:0: every request is recorded and answered by a closure
//! that sees the request and how many came before it.

#![allow(clippy::unwrap_used, clippy::expect_used, unreachable_pub)] // test code: a failure is a test failure
#![allow(dead_code)] // each test file uses a different part

use std::convert::Infallible;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::http::{HeaderMap, StatusCode, Uri};
use axum::response::Response;
use serde_json::Value;

/// One request the upstream received.
#[derive(Debug, Clone)]
pub struct Recorded {
    pub path: String,
    pub headers: HeaderMap,
    pub body: Value,
}

type Script = dyn Fn(usize, &Recorded) -> Response + Send + Sync;

#[derive(Clone)]
struct Shared {
    script: Arc<Script>,
    hits: Arc<AtomicUsize>,
    requests: Arc<Mutex<Vec<Recorded>>>,
}

/// A running scripted upstream.
pub struct Upstream {
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
}

/// Starts an upstream answering with `script(hit_index, request)`.
pub async fn start(
    script: impl Fn(usize, &Recorded) -> Response + Send + Sync + 'static,
) -> Upstream {
    let shared = Shared {
        script: Arc::new(script),
        hits: Arc::new(AtomicUsize::new(0)),
        requests: Arc::new(Mutex::new(Vec::new())),
    };
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let address = listener.local_addr().expect("address");
    let app = axum::Router::new()
        .fallback(handle)
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

async fn handle(
    axum::extract::State(shared): axum::extract::State<Shared>,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let recorded = Recorded {
        path: uri.path().to_owned(),
        headers,
        body: serde_json::from_slice(&body).unwrap_or(Value::Null),
    };
    let index = shared.hits.fetch_add(1, Ordering::SeqCst);
    shared.requests.lock().expect("lock").push(recorded.clone());
    (shared.script)(index, &recorded)
}

/// A JSON answer.
pub fn json(status: u16, body: Value) -> Response {
    Response::builder()
        .status(StatusCode::from_u16(status).expect("status"))
        .header("content-type", "application/json")
        .header("x-request-id", "req-1")
        .body(Body::from(body.to_string()))
        .expect("response")
}

/// An SSE answer sent in the given chunks, with a short pause between them so that they
/// really arrive separately.
pub fn sse(chunks: Vec<String>) -> Response {
    let stream = futures::stream::unfold(chunks.into_iter(), |mut rest| async move {
        let chunk = rest.next()?;
        tokio::time::sleep(Duration::from_millis(5)).await;
        Some((Ok::<_, Infallible>(Bytes::from(chunk)), rest))
    });
    Response::builder()
        .status(200)
        .header("content-type", "text/event-stream")
        .body(Body::from_stream(stream))
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
    Response::builder()
        .status(200)
        .header("content-type", "text/event-stream")
        .body(Body::from_stream(stream))
        .expect("response")
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
pub async fn refused_base() -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let address = listener.local_addr().expect("address");
    drop(listener);
    format!("http://{address}")
}

/// The OpenAI overflow body of the brief.
pub fn openai_overflow() -> Value {
    serde_json::json!({"error": {
        "message": "This model's maximum context length is 8192 tokens. However, your messages resulted in 9000 tokens.",
        "type": "invalid_request_error",
        "code": "context_length_exceeded"
    }})
}
