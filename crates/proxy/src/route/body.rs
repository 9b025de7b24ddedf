//! Reading a request body within the proxy's limits: its size and how long it may take (a
//! slow client must not hold a connection forever).

use std::time::Duration;

use axum::body::Body;
use axum::http::{HeaderMap, header};
use axum::response::Response;
use bytes::Bytes;
use context_cascade::Format;
use futures::StreamExt;

use crate::error::{ErrorKind, error_response};

/// Reads the body, refusing more than `limit` bytes or a body slower than `timeout`.
async fn read_body(
    headers: &HeaderMap,
    body: Body,
    limit: usize,
    timeout: Duration,
) -> Result<Bytes, ErrorKind> {
    tokio::time::timeout(timeout, read_limited(headers, body, limit))
        .await
        .unwrap_or(Err(ErrorKind::ClientTimeout))
}

async fn read_limited(headers: &HeaderMap, body: Body, limit: usize) -> Result<Bytes, ErrorKind> {
    let declared = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|n| n > limit as u64) {
        return Err(ErrorKind::TooLarge);
    }
    let mut stream = body.into_data_stream();
    let mut buffer = Vec::with_capacity(declared.map_or(0, |n| n as usize));
    while let Some(chunk) = stream.next().await {
        let chunk = chunk.map_err(|_| ErrorKind::InvalidRequest)?;
        if buffer.len() + chunk.len() > limit {
            return Err(ErrorKind::TooLarge);
        }
        buffer.extend_from_slice(&chunk);
    }
    Ok(Bytes::from(buffer))
}

/// How much of a body the proxy reads, and for how long.
#[derive(Debug, Clone, Copy)]
pub(crate) struct BodyLimits {
    pub(crate) max_bytes: usize,
    pub(crate) read_timeout: Duration,
}

/// Reads a cascade route's body within the proxy's size and time limits, or the error
/// answer (in the route's format) that says which limit it broke.
pub(crate) async fn read_request_body(
    limits: BodyLimits,
    format: Format,
    headers: &HeaderMap,
    body: Body,
) -> Result<Bytes, Response> {
    let (limit, timeout) = (limits.max_bytes, limits.read_timeout);
    read_body(headers, body, limit, timeout)
        .await
        .map_err(|kind| {
            let message = match kind {
                ErrorKind::TooLarge => {
                    format!(
                        "context-cascade: request body exceeds the proxy's limit of {limit} bytes"
                    )
                }
                ErrorKind::ClientTimeout => format!(
                    "context-cascade: the request body did not arrive within {} s",
                    timeout.as_secs()
                ),
                _ => "context-cascade: could not read the request body".to_owned(),
            };
            error_response(format, kind, &message)
        })
}
