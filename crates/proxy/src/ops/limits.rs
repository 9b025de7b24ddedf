//! Slow and numerous clients: the proxy's own accept loop, so that a client has a bounded
//! time to send its request head (HTTP/1 header read timeout) and its body, and the number
//! of open connections is bounded (further ones wait in the listen queue until one closes).
//!
//! `axum::serve` has neither knob, hence this loop over hyper-util's connection builder;
//! the router is the same.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::extract::ConnectInfo;
use bytes::Bytes;
use futures::{Stream, StreamExt};
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto::Builder;
use hyper_util::server::graceful::GracefulShutdown;
use tokio::sync::Semaphore;
use tower::ServiceExt;

use crate::config::ProxyConfig;
use crate::error::ProxyError;

/// The client-side limits of a running proxy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Limits {
    /// Time to send the request head.
    pub header_read_timeout: Duration,
    /// Time to send the request body.
    pub body_read_timeout: Duration,
    /// Open connections at most.
    pub max_connections: usize,
}

impl Limits {
    /// The limits `config` sets.
    pub(crate) fn from_config(config: &ProxyConfig) -> Self {
        Limits {
            header_read_timeout: config.limits.header_read_timeout,
            body_read_timeout: config.limits.body_read_timeout,
            max_connections: config.limits.max_connections,
        }
    }
}

/// Serves `router` on `listener` under `limits` until `shutdown` completes, then lets the
/// open connections finish.
pub(crate) async fn serve_connections(
    listener: tokio::net::TcpListener,
    router: Router,
    limits: Limits,
    shutdown: impl Future<Output = ()> + Send,
) -> Result<(), ProxyError> {
    let slots = Arc::new(Semaphore::new(limits.max_connections));
    let mut builder = Builder::new(TokioExecutor::new());
    builder
        .http1()
        .timer(TokioTimer::new())
        .header_read_timeout(limits.header_read_timeout);
    let builder = Arc::new(builder);
    let graceful = GracefulShutdown::new();
    let mut shutdown = std::pin::pin!(shutdown);
    loop {
        // A slot first: beyond the limit, connections wait in the kernel's queue.
        let permit = tokio::select! {
            permit = slots.clone().acquire_owned() => match permit {
                Ok(permit) => permit,
                Err(_) => break,
            },
            () = &mut shutdown => break,
        };
        let (socket, peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(e) => {
                    // Out of file descriptors and the like: wait, do not spin.
                    tracing::warn!(error = %e, "accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
            () = &mut shutdown => break,
        };
        let router = router.clone();
        let service = hyper::service::service_fn(move |request: hyper::Request<_>| {
            let mut request = request.map(Body::new);
            // The peer, for the handlers that serve loopback only (the status page).
            request.extensions_mut().insert(ConnectInfo(peer));
            router.clone().oneshot(request)
        });
        let builder = builder.clone();
        let watcher = graceful.watcher();
        tokio::spawn(async move {
            let connection = builder.serve_connection_with_upgrades(TokioIo::new(socket), service);
            if let Err(e) = watcher.watch(connection.into_owned()).await {
                tracing::debug!(error = %e, "connection ended");
            }
            drop(permit);
        });
    }
    graceful.shutdown().await;
    Ok(())
}

/// The request body, failing once `limit` has passed since it started: a client trickling
/// its body cannot hold the request (and the upstream connection) forever.
pub(crate) fn deadline_body(
    body: Body,
    limit: Duration,
) -> impl Stream<Item = Result<Bytes, std::io::Error>> + Send {
    let deadline = tokio::time::Instant::now() + limit;
    let start = (body.into_data_stream(), false);
    futures::stream::unfold(start, move |(mut stream, failed)| async move {
        if failed {
            return None;
        }
        match tokio::time::timeout_at(deadline, stream.next()).await {
            Err(_) => {
                let e = std::io::Error::new(
                    std::io::ErrorKind::TimedOut,
                    "the client did not send its body in time",
                );
                Some((Err(e), (stream, true)))
            }
            Ok(None) => None,
            Ok(Some(Ok(chunk))) => Some((Ok(chunk), (stream, false))),
            Ok(Some(Err(e))) => Some((Err(std::io::Error::other(e)), (stream, true))),
        }
    })
}
