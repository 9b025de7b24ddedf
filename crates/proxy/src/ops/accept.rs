//! The proxy's own accept loop, so that a client has a bounded time to send its request
//! head, one client cannot hold the connection limit with request heads it never
//! finishes, and `/healthz` answers even at the limit.
//!
//! `axum::serve` has none of these knobs, hence this loop over hyper-util's connection
//! builder; the router is the same. What happens to one connection is in
//! [`crate::ops::connection`]; the count of unfinished heads per client in
//! [`crate::ops::peers`].

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use hyper_util::server::graceful::GracefulShutdown;
use tokio::sync::Semaphore;

use crate::error::ProxyError;
use crate::ops::connection::{Connections, Slot};
use crate::ops::limits::Limits;
use crate::ops::metrics::Metrics;

/// Connections accepted beyond `limits.max_connections`, each to answer one request:
/// `/healthz`, or 503 for anything else. Enough for health checks from a few places.
pub(crate) const RESERVED_CONNECTIONS: usize = 32;

/// Serves `router` on `listener` under `limits` until `shutdown` completes, then lets the
/// open connections finish. `metrics` counts the connections the limits closed.
pub(crate) async fn serve_connections(
    listener: tokio::net::TcpListener,
    router: Router,
    limits: Limits,
    metrics: Arc<Metrics>,
    shutdown: impl Future<Output = ()> + Send,
) -> Result<(), ProxyError> {
    let full = Arc::new(Semaphore::new(limits.max_connections));
    let accepted = Arc::new(Semaphore::new(
        limits.max_connections + RESERVED_CONNECTIONS,
    ));
    let connections = Arc::new(Connections::new(router, limits, metrics));
    let graceful = GracefulShutdown::new();
    let mut shutdown = std::pin::pin!(shutdown);
    loop {
        // Beyond the limit and the reserve, connections wait in the kernel's queue.
        let permit = tokio::select! {
            permit = accepted.clone().acquire_owned() => match permit {
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
        // Streamed answers go out as many small writes (events, then the chunked body's
        // end): with Nagle's algorithm on, each waits for the client's delayed ACK of the
        // one before, about 40 ms on Linux.
        if let Err(e) = socket.set_nodelay(true) {
            tracing::debug!(error = %e, "TCP_NODELAY not set");
        }
        let (slot, full_permit) = match full.clone().try_acquire_owned() {
            Ok(full_permit) => (Slot::Full, Some(full_permit)),
            Err(_) => (Slot::Reserve, None),
        };
        let (connections, watcher) = (connections.clone(), graceful.watcher());
        tokio::spawn(async move {
            connections.serve(socket, peer, slot, watcher).await;
            drop((full_permit, permit));
        });
    }
    graceful.shutdown().await;
    Ok(())
}
