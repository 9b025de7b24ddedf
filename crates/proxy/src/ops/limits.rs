//! Slow and numerous clients: the limits a running proxy holds them to, and the request
//! body's deadline. The accept loop that applies the connection limits is
//! [`crate::ops::accept`].

use std::time::Duration;

use axum::body::Body;
use bytes::Bytes;
use futures::{Stream, StreamExt};

use crate::config::ProxyConfig;

/// The client-side limits of a running proxy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Limits {
    /// Time to send the request head (the first from accept; each later one on a
    /// keep-alive connection from the end of the answer before it).
    pub header_read_timeout: Duration,
    /// Time to send the request body.
    pub body_read_timeout: Duration,
    /// Open connections at most (besides the reserve).
    pub max_connections: usize,
    /// Connections without a complete first head one client may hold.
    pub max_unfinished_heads_per_peer: usize,
}

impl Limits {
    /// The limits `config` sets.
    pub(crate) fn from_config(config: &ProxyConfig) -> Self {
        Limits {
            header_read_timeout: config.limits.header_read_timeout,
            body_read_timeout: config.limits.body_read_timeout,
            max_connections: config.limits.max_connections,
            max_unfinished_heads_per_peer: config.max_unfinished_heads_per_peer(),
        }
    }
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
