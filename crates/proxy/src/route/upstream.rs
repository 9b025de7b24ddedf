//! Talking to the upstream: the engine's [`Llm`] implementation for the two cascade
//! routes, and the untouched forwarding of every other request.
//!
//! Client headers go upstream as they came (API keys included), minus hop-by-hop headers,
//! `host` and `content-length`, which belong to each connection. Header values are never
//! logged.

use std::time::Duration;

use axum::body::Body;
use axum::http::header::CONTENT_TYPE;
use axum::http::{HeaderMap, HeaderName, Method, StatusCode};
use axum::response::Response;
use bytes::Bytes;
use context_cascade::BoxFuture;
use context_cascade::format::{WriteOptions, to_vec};
use context_cascade::{Completion, Llm, LlmError};
use context_cascade::{Conversation, Format};

use cascade_llm::{Provider, header_pairs, transport_error, usage_from_body};

use crate::route::heavy::Turn;
use crate::route::history::Held;

/// Headers that describe one connection, not the request (RFC 9110 §7.6.1), plus the ones
/// the HTTP client sets itself.
const CONNECTION_HEADERS: &[&str] = &[
    "connection",
    "keep-alive",
    "proxy-connection",
    "proxy-authenticate",
    "proxy-authorization",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
    "host",
    "content-length",
];

/// The header names the `Connection` header lists: they describe this hop only and are
/// not forwarded either (RFC 9110 §7.6.1), lower-cased.
fn connection_options(headers: &HeaderMap) -> Vec<String> {
    (headers.get_all(axum::http::header::CONNECTION).iter())
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .map(|token| token.trim().to_ascii_lowercase())
        .filter(|token| !token.is_empty())
        .collect()
}

/// Whether `name` (lower case, as `HeaderName` keeps it) belongs to this hop only.
fn hop_by_hop(name: &str, options: &[String]) -> bool {
    CONNECTION_HEADERS.contains(&name) || options.iter().any(|o| o == name)
}

/// The client's headers minus the per-connection ones. With `identity`, also without
/// `accept-encoding`: the cascade routes must read the upstream's answers (usage, overflow
/// errors), so they ask for them uncompressed.
pub(crate) fn forwarded_headers(headers: &HeaderMap, identity: bool) -> HeaderMap {
    let options = connection_options(headers);
    let mut out = HeaderMap::with_capacity(headers.len());
    for (name, value) in headers {
        let lower = name.as_str();
        if hop_by_hop(lower, &options)
            || (identity && lower == "accept-encoding")
            || lower == "x-cascade-session"
        {
            continue;
        }
        out.append(name.clone(), value.clone());
    }
    out
}

/// The upstream's response headers that may be passed on to the client.
pub(crate) fn response_headers(headers: &HeaderMap) -> HeaderMap {
    let options = connection_options(headers);
    let mut out = HeaderMap::with_capacity(headers.len());
    for (name, value) in headers {
        if !hop_by_hop(name.as_str(), &options) {
            out.append(name.clone(), value.clone());
        }
    }
    out
}

/// The upstream as every route reaches it: its base address, the proxy's HTTP client (one
/// connection pool) and the time an answer may take.
pub(crate) struct Upstream {
    /// The base URL, without a trailing slash.
    pub(crate) base: String,
    pub(crate) client: reqwest::Client,
    pub(crate) timeout: Duration,
}

impl Upstream {
    /// The full address of `path` (with its query) on the upstream.
    pub(crate) fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    /// A cascade call of `format` to `path` with the client's forwarded `headers`;
    /// `original` is the client's body and its conversation when those may go as they came.
    pub(crate) fn call(
        &self,
        format: Format,
        path: &str,
        headers: HeaderMap,
        stream: bool,
        original: Option<(Bytes, Conversation)>,
    ) -> UpstreamCall<'_> {
        UpstreamCall {
            provider: Provider::for_format(format),
            original: std::sync::Mutex::new(original),
            client: &self.client,
            url: self.url(path),
            headers,
            stream,
            timeout: self.timeout,
            recall_tool: false,
            turn: None,
            held: None,
        }
    }

    /// Forwards a request to `path` untouched (see [`forward`]).
    pub(crate) async fn forward(
        &self,
        path: &str,
        method: Method,
        headers: &HeaderMap,
        body: Body,
    ) -> Result<Response, LlmError> {
        forward(
            &self.client,
            self.url(path),
            method,
            headers,
            body,
            self.timeout,
        )
        .await
    }
}

/// What a successful upstream call gave back.
pub(crate) enum UpstreamOutput {
    /// A complete (non-streaming) answer.
    Full {
        /// The upstream's status.
        status: StatusCode,
        /// The upstream's headers, as they came.
        headers: HeaderMap,
        /// The complete body.
        body: Bytes,
    },
    /// A streaming answer whose body is still to be read.
    Stream(reqwest::Response),
    /// A streaming answer to a request offering the recall tool: the first round's
    /// response, and what runs the recall rounds into the client's stream.
    Recalling(reqwest::Response, Box<crate::route::splice::Splice>),
}

/// One cascade request's upstream: where to POST and with which client headers.
pub(crate) struct UpstreamCall<'a> {
    /// The proxy's HTTP client (its connection pool).
    pub client: &'a reqwest::Client,
    /// The protocol of the route, for reading usage out of the answer.
    pub provider: Provider,
    /// The full URL to POST to.
    pub url: String,
    /// The headers to send (the client's, see [`forwarded_headers`]).
    pub headers: HeaderMap,
    /// Whether the client asked for a streamed answer.
    pub stream: bool,
    /// Time allowed for the headers, and for a complete body.
    pub timeout: Duration,
    /// The client's body and the conversation it parsed into: when the conversation the
    /// engine first sends is still equal to it, the client's bytes go upstream as they
    /// came. Taken by the first call, so that the copy is not held while the upstream
    /// answers (a later call follows an overflow: the engine changed the conversation).
    pub original: std::sync::Mutex<Option<(Bytes, Conversation)>>,
    /// The request's turn at the heavy stages, ended once the body is written: the wait
    /// for the upstream needs none.
    pub turn: Option<&'a Turn>,
    /// What a provider's compaction supersedes: put back, as it came, in every request.
    pub held: Option<Held>,
    /// Offer the recall tool when the request carries removed content (recall on):
    /// `crate::recall::with_tool`.
    pub recall_tool: bool,
}

impl<'a> UpstreamCall<'a> {
    /// The call, giving `turn` back once its first body is written.
    pub(crate) fn ending(mut self, turn: Option<&'a Turn>) -> Self {
        self.turn = turn;
        self
    }

    /// The request body for `conversation`: the client's own bytes when nothing changed,
    /// else the conversation written out with `_pin` stripped.
    pub(crate) fn body(&self, conversation: &Conversation) -> Result<Bytes, LlmError> {
        let joined;
        let conversation = match &self.held {
            Some(held) => {
                joined = held.join(conversation);
                &joined
            }
            None => conversation,
        };
        let original = (self.original.lock().unwrap_or_else(|p| p.into_inner())).take();
        if let Some((bytes, parsed)) = original
            && parsed == *conversation
        {
            return Ok(bytes);
        }
        let options = WriteOptions {
            strip_pins: true,
            pretty: false,
        };
        let written = to_vec(conversation, options)
            .map(Bytes::from)
            .map_err(|e| LlmError::Local(format!("could not write the request: {e}")))?;
        if self.recall_tool && crate::recall::has_removed(conversation) {
            return crate::recall::with_tool(conversation.format, &written);
        }
        Ok(written)
    }

    async fn send(
        &self,
        conversation: &Conversation,
    ) -> Result<Completion<UpstreamOutput>, LlmError> {
        let body = self.body(conversation);
        self.send_body(body).await
    }

    /// POSTs `body` (the body of a request, or why none could be written) as this call's
    /// request, giving the heavy-stage turn back first: the wait for the upstream needs
    /// none. A recall round's follow-up goes this way too.
    pub(crate) async fn send_body(
        &self,
        body: Result<Bytes, LlmError>,
    ) -> Result<Completion<UpstreamOutput>, LlmError> {
        if let Some(turn) = self.turn {
            turn.end();
        }
        let body = body?;
        let mut request = self.client.post(&self.url).headers(self.headers.clone());
        if !self.headers.contains_key(CONTENT_TYPE) {
            // The body is JSON whatever the client said (or did not say).
            request = request.header(CONTENT_TYPE, "application/json");
        }
        let request = request.body(body).send();
        let response = match tokio::time::timeout(self.timeout, request).await {
            Err(_) => return Err(LlmError::Timeout),
            Ok(Err(e)) => return Err(transport_error(&e)),
            Ok(Ok(response)) => response,
        };
        let status = response.status();
        if status.is_success() && self.stream {
            return Ok(Completion {
                output: UpstreamOutput::Stream(response),
                prompt_tokens: None,
            });
        }
        let headers = response.headers().clone();
        let body = match tokio::time::timeout(self.timeout, response.bytes()).await {
            Err(_) => return Err(LlmError::Timeout),
            Ok(Err(e)) => return Err(transport_error(&e)),
            Ok(Ok(body)) => body,
        };
        if !status.is_success() {
            return Err(LlmError::Status {
                status: status.as_u16(),
                headers: header_pairs(&headers),
                body: String::from_utf8_lossy(&body).into_owned(),
            });
        }
        let prompt_tokens = usage_from_body(self.provider, &body);
        Ok(Completion {
            output: UpstreamOutput::Full {
                status,
                headers,
                body,
            },
            prompt_tokens,
        })
    }
}

impl Llm for UpstreamCall<'_> {
    type Output = UpstreamOutput;

    fn call<'a>(
        &'a self,
        conversation: &'a Conversation,
    ) -> BoxFuture<'a, Result<Completion<UpstreamOutput>, LlmError>> {
        Box::pin(self.send(conversation))
    }
}

/// Rebuilds an upstream error answer exactly as it came (status, headers, body).
pub(crate) fn passthrough_error(
    status: u16,
    headers: &[(String, String)],
    body: String,
) -> Response {
    let mut response = Response::new(Body::from(body));
    *response.status_mut() = StatusCode::from_u16(status).unwrap_or(StatusCode::BAD_GATEWAY);
    for (name, value) in headers {
        if CONNECTION_HEADERS.contains(&name.to_ascii_lowercase().as_str()) {
            continue;
        }
        if let (Ok(name), Ok(value)) = (
            HeaderName::from_bytes(name.as_bytes()),
            axum::http::HeaderValue::from_str(value),
        ) {
            response.headers_mut().append(name, value);
        }
    }
    response
}

/// Forwards any other request untouched, streaming both bodies.
pub(crate) async fn forward(
    client: &reqwest::Client,
    url: String,
    method: Method,
    headers: &HeaderMap,
    body: Body,
    timeout: Duration,
) -> Result<Response, LlmError> {
    let body = reqwest::Body::wrap_stream(body.into_data_stream());
    let mut outgoing = forwarded_headers(headers, false);
    // The client's framing is kept: a body it sent with a length goes on with that length
    // (the HTTP client honours the header), not re-framed as chunks some upstreams cannot
    // read. Only a chunked body goes on chunked.
    if !headers.contains_key(axum::http::header::TRANSFER_ENCODING)
        && let Some(length) = headers.get(axum::http::header::CONTENT_LENGTH)
    {
        outgoing.insert(axum::http::header::CONTENT_LENGTH, length.clone());
    }
    let request = client
        .request(method, url)
        .headers(outgoing)
        .body(body)
        .send();
    let upstream = match tokio::time::timeout(timeout, request).await {
        Err(_) => return Err(LlmError::Timeout),
        Ok(Err(e)) => return Err(transport_error(&e)),
        Ok(Ok(r)) => r,
    };
    let status = upstream.status();
    let headers = response_headers(upstream.headers());
    let mut response = Response::new(Body::from_stream(upstream.bytes_stream()));
    *response.status_mut() = status;
    *response.headers_mut() = headers;
    Ok(response)
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    #[test]
    fn connection_headers_are_dropped_and_keys_kept() {
        let mut h = HeaderMap::new();
        h.insert("authorization", HeaderValue::from_static("Bearer k"));
        h.insert("host", HeaderValue::from_static("proxy"));
        h.insert("content-length", HeaderValue::from_static("12"));
        h.insert("accept-encoding", HeaderValue::from_static("gzip"));
        h.insert("x-cascade-session", HeaderValue::from_static("s"));
        let out = forwarded_headers(&h, true);
        assert_eq!(out.get("authorization").unwrap(), "Bearer k");
        assert!(out.get("host").is_none() && out.get("content-length").is_none());
        assert!(out.get("accept-encoding").is_none() && out.get("x-cascade-session").is_none());
        assert!(
            forwarded_headers(&h, false)
                .get("accept-encoding")
                .is_some()
        );
        h.insert("connection", HeaderValue::from_static("close, X-Hop"));
        h.insert("x-hop", HeaderValue::from_static("1"));
        assert!(forwarded_headers(&h, false).get("x-hop").is_none());
        assert!(response_headers(&h).get("x-hop").is_none());
    }

    #[test]
    fn passthrough_keeps_status_headers_and_body() {
        let r = passthrough_error(429, &[("retry-after".into(), "7".into())], "slow".into());
        assert_eq!(r.status(), StatusCode::TOO_MANY_REQUESTS);
        assert_eq!(r.headers().get("retry-after").unwrap(), "7");
    }
}
