//! One client connection, from accept to close: its first request head within the header
//! deadline (or it is closed), its place among its peer's unfinished connections, and the
//! answers of a connection that came in over the connection limit.
//!
//! hyper's own `header_read_timeout` does not cover the start of a connection: the
//! auto (HTTP/1 or HTTP/2) builder first reads the bytes that tell the two apart, with no
//! deadline, so a client that connects and sends nothing (or the first bytes of the HTTP/2
//! preface) held its connection forever. The first head's deadline is therefore kept here,
//! from accept; hyper's applies to the heads after it (an idle keep-alive connection is
//! closed when it passes).

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::extract::ConnectInfo;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto::Builder;
use hyper_util::server::graceful::Watcher;
use tower::ServiceExt;

use crate::ops::limits::Limits;
use crate::ops::metrics::{ConnectionClosed, Metrics};
use crate::ops::peers::{FirstHead, UnfinishedHeads, first_head};
use crate::ops::repeats;

/// The path answered on a connection over the limit, so that a health check always gets
/// through.
const HEALTH_PATH: &str = "/healthz";
/// Time a connection over the limit has to send its head: a health check sends it at once,
/// and the reserve must not fill with stalled heads.
const RESERVE_HEAD_DEADLINE: Duration = Duration::from_secs(2);

/// Which slot a connection holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Slot {
    /// One of `limits.max_connections`: served in full.
    Full,
    /// One of the few kept beyond the limit: `/healthz` is answered, every other request
    /// gets 503 with `retry-after`, and the connection closes after one answer.
    Reserve,
}

/// What every connection shares.
pub(crate) struct Connections {
    router: Router,
    builder: Builder<TokioExecutor>,
    heads: Arc<UnfinishedHeads>,
    limits: Limits,
    metrics: Arc<Metrics>,
}

/// The largest read buffer a connection keeps (and so the largest request head).
const READ_BUFFER_BYTES: usize = 64 * 1024;

impl Connections {
    /// Connections to `router` under `limits`, counted in `metrics`.
    pub(crate) fn new(router: Router, limits: Limits, metrics: Arc<Metrics>) -> Self {
        let mut builder = Builder::new(TokioExecutor::new());
        builder
            .http1()
            .timer(TokioTimer::new())
            .header_read_timeout(limits.header_read_timeout)
            // hyper grows a connection's read buffer up to ~400 kB while a large body
            // streams in, and keeps it: 200 heavy clients held 112 MB of them at the peak
            // (docs/benchmarks.md, "Hardening"). The body is copied out chunk by chunk
            // anyway; a request head must fit in this too (64 KiB, 8x nginx's default).
            .max_buf_size(READ_BUFFER_BYTES);
        Connections {
            router,
            builder,
            heads: UnfinishedHeads::new(limits.max_unfinished_heads_per_peer),
            limits,
            metrics,
        }
    }

    /// Serves one accepted connection until it closes (or is closed).
    pub(crate) async fn serve(
        self: Arc<Self>,
        socket: tokio::net::TcpStream,
        peer: SocketAddr,
        slot: Slot,
        watcher: Watcher,
    ) {
        let (ticket, evicted, made_room) = self.heads.admit(peer.ip());
        if made_room {
            self.metrics.connection_closed(ConnectionClosed::Evicted);
            if let Some(repeats) = repeats::admit("unfinished heads", &peer.ip().to_string()) {
                tracing::warn!(
                    peer = %peer.ip(),
                    limit = self.limits.max_unfinished_heads_per_peer,
                    repeats,
                    "a client holds too many connections without a complete request head; \
                     closing its oldest (limits.max_unfinished_heads_per_peer)"
                );
            }
        }
        let (this, counted) = (self.clone(), ticket.clone());
        let service = hyper::service::service_fn(move |request: hyper::Request<_>| {
            // A head is complete: the connection leaves its peer's unfinished count.
            counted.finish();
            let mut request = request.map(Body::new);
            // The peer, for the handlers that serve loopback only (the status page).
            request.extensions_mut().insert(ConnectInfo(peer));
            this.clone().answer(request, slot)
        });
        let io = TokioIo::new(socket);
        let connection = self.builder.serve_connection_with_upgrades(io, service);
        let mut connection = std::pin::pin!(watcher.watch(connection.into_owned()));
        let deadline = match slot {
            Slot::Full => self.limits.header_read_timeout,
            Slot::Reserve => RESERVE_HEAD_DEADLINE.min(self.limits.header_read_timeout),
        };
        let waited = tokio::select! {
            ended = &mut connection => return ended_quietly(ended),
            waited = tokio::time::timeout(deadline, first_head(evicted)) => waited,
        };
        match waited {
            Ok(FirstHead::Complete) => {}
            // Counted by the connection that made room.
            Ok(FirstHead::Evicted) => return,
            // Unless the head completed at the deadline itself, the connection is closed.
            Err(_) if ticket.finish() => {
                self.metrics
                    .connection_closed(ConnectionClosed::HeadTimeout);
                return;
            }
            Err(_) => {}
        }
        ended_quietly(connection.await);
    }
}

impl Connections {
    /// The answer to one request on a connection in `slot`.
    async fn answer(
        self: Arc<Self>,
        request: axum::extract::Request,
        slot: Slot,
    ) -> Result<Response, std::convert::Infallible> {
        let router = self.router.clone();
        if slot == Slot::Full {
            return router.oneshot(request).await;
        }
        let mut response = if request.uri().path() == HEALTH_PATH {
            router.oneshot(request).await?
        } else {
            self.metrics
                .connection_closed(ConnectionClosed::OverCapacity);
            over_capacity(self.limits.max_connections)
        };
        // The reserve is for the next health check: nothing stays on it.
        (response.headers_mut()).insert(header::CONNECTION, HeaderValue::from_static("close"));
        Ok(response)
    }
}

/// 503 for a request over the connection limit: the SDKs retry it after `retry-after`.
fn over_capacity(max_connections: usize) -> Response {
    if let Some(repeats) = repeats::admit("connection limit", "") {
        tracing::warn!(
            max_connections,
            repeats,
            "at the connection limit: answering 503 (limits.max_connections)"
        );
    }
    let message = format!(
        "context-cascade: the proxy is at its connection limit \
         (limits.max_connections = {max_connections}); retry shortly"
    );
    let body = serde_json::json!({
        "type": "error",
        "error": {"type": "overloaded_error", "message": message},
    });
    let mut response = (StatusCode::SERVICE_UNAVAILABLE, axum::Json(body)).into_response();
    (response.headers_mut()).insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
    response
}

fn ended_quietly(ended: Result<(), Box<dyn std::error::Error + Send + Sync>>) {
    if let Err(e) = ended {
        tracing::debug!(error = %e, "connection ended");
    }
}
