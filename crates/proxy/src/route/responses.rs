//! The OpenAI Responses API route (`POST /v1/responses`: Codex, the Agents SDKs), and what
//! every cascade route learns from the upstream's overflow errors.
//!
//! A Responses request goes through the same cascade as the two other routes, with one
//! exception: a request with `previous_response_id` or `conversation` holds its history on
//! the provider's side, so its body is only the newest part and nothing in it may be
//! removed; it goes upstream byte for byte, and the answer says so in the
//! [`REPORT_HEADER`](crate::route::answer::REPORT_HEADER) header.
//!
//! Streaming: a Responses stream may open with `response.created` / `response.in_progress`
//! and then fail with `response.failed` (`context_length_exceeded`). Those opening events are
//! held back until the stream shows what it is; a failure that is an overflow becomes an
//! overflow error for the retry loop before any event reached the client, anything else
//! passes through as it arrives.

use std::sync::atomic::{AtomicU64, Ordering};

use axum::response::Response;
use bytes::Bytes;
use cascade_llm::{header_pairs, responses_failure, transport_error};
use context_cascade::{BoxFuture, Completion, Conversation, Format, Llm, LlmError, classify};
use futures::{StreamExt, TryStreamExt};
use serde_json::Value;

use crate::route::inbound::Inbound;
use crate::route::provider_compaction::{PROVIDER_COMPACTION, forward_untouched};
use crate::route::upstream::{Upstream, UpstreamCall, UpstreamOutput};
use crate::window::discovery::Learned;

/// The route's path.
pub(crate) const ROUTE: &str = "/v1/responses";
/// The report header's value for a request whose history the provider holds.
pub(crate) const HISTORY_UPSTREAM: &str = "history-upstream; forwarded untouched";
/// Bytes of opening events held back at most while waiting to see whether a stream fails.
const PEEK_LIMIT: usize = 256 * 1024;

/// Counters of the Responses route that the shared metrics do not have.
#[derive(Debug, Default)]
pub(crate) struct ResponsesCounters {
    history_upstream: AtomicU64,
    /// Requests that asked the provider to compact (any cascade route, and
    /// `/v1/responses/compact`).
    provider_compaction: AtomicU64,
}

impl ResponsesCounters {
    /// The counters in the Prometheus text format (appended to `/metrics`).
    pub(crate) fn render(&self) -> String {
        format!(
            "# HELP cascade_history_upstream_total Responses requests whose history the provider holds (previous_response_id, conversation), forwarded untouched.\n\
             # TYPE cascade_history_upstream_total counter\n\
             cascade_history_upstream_total {}\n\
             # HELP cascade_provider_compaction_total Requests that asked the provider to compact (Anthropic compaction parameter, Responses compaction_trigger, /v1/responses/compact), forwarded untouched.\n\
             # TYPE cascade_provider_compaction_total counter\n\
             cascade_provider_compaction_total {}\n",
            self.history_upstream.load(Ordering::Relaxed),
            self.provider_compaction.load(Ordering::Relaxed)
        )
    }
}

/// A Responses request whose history the provider holds, forwarded byte for byte; the
/// answer says so in the report header.
pub(crate) async fn forward_history(
    upstream: &Upstream,
    counters: &ResponsesCounters,
    inbound: Inbound,
) -> Response {
    counters.history_upstream.fetch_add(1, Ordering::Relaxed);
    forward_untouched(upstream, inbound, HISTORY_UPSTREAM).await
}

/// A request that asks the provider to compact, forwarded byte for byte (see
/// [`crate::route::provider_compaction`]).
pub(crate) async fn forward_compaction(
    upstream: &Upstream,
    counters: &ResponsesCounters,
    inbound: Inbound,
) -> Response {
    counters.provider_compaction.fetch_add(1, Ordering::Relaxed);
    forward_untouched(upstream, inbound, PROVIDER_COMPACTION).await
}

/// Whether a Responses body names `previous_response_id` or `conversation` (read without
/// building the conversation; invalid JSON is left to the cascade's error answer).
pub(crate) fn holds_history_upstream(bytes: &[u8]) -> bool {
    // A body without either name cannot hold them, and every Responses request takes this
    // check: a search (~10 GB/s) spares the others a scan of the whole body (about a third
    // of the fast path's time, issue 27). `"conversation"` with its quotes: in a string's
    // text the quotes would be escaped. As for the compaction check, a key spelled with `\u`
    // escapes is not recognised.
    let named = |word: &[u8]| memchr::memmem::find(bytes, word).is_some();
    // `"conversation"` found as `conversation"` with a quote before it: a search for the
    // name from its opening quote, a byte JSON is full of, took twice as long (40 against
    // 20 µs on a 500 kB body).
    let conversation = || {
        memchr::memmem::find_iter(bytes, b"conversation\"")
            .any(|at| at.checked_sub(1).and_then(|i| bytes.get(i)) == Some(&b'"'))
    };
    if !named(b"previous_response_id") && !conversation() {
        return false;
    }
    #[derive(serde::Deserialize)]
    struct Envelope {
        #[serde(default)]
        previous_response_id: Option<Value>,
        #[serde(default)]
        conversation: Option<Value>,
    }
    serde_json::from_slice::<Envelope>(bytes).is_ok_and(|e| {
        [e.previous_response_id, e.conversation]
            .iter()
            .any(|v| v.as_ref().is_some_and(|v| !v.is_null()))
    })
}

/// The upstream of one cascade request, watched: the limits its overflow errors state are
/// kept for the window, and a Responses stream that fails with an overflow before its first
/// output event becomes an overflow error.
pub(crate) struct Watched<'a> {
    inner: UpstreamCall<'a>,
    format: Format,
    learned: std::sync::Mutex<Option<Learned>>,
    /// What the upstream already answered to the first call's request (the fast path's
    /// overflow): the first call returns it rather than sending the request again, so the
    /// whole exchange stays within `max_calls`.
    answered: std::sync::Mutex<Option<LlmError>>,
}

impl<'a> Watched<'a> {
    /// Watches `inner`, a call for a conversation of `format`.
    pub(crate) fn new(inner: UpstreamCall<'a>, format: Format) -> Self {
        Watched {
            inner,
            format,
            learned: std::sync::Mutex::new(None),
            answered: std::sync::Mutex::new(None),
        }
    }

    /// The first call answers `error`, which the upstream gave to that same request.
    pub(crate) fn answered_already(self, error: Option<LlmError>) -> Self {
        *self.answered.lock().unwrap_or_else(|p| p.into_inner()) = error;
        self
    }

    /// The smallest limit an overflow error of this request stated.
    pub(crate) fn learned(&self) -> Option<Learned> {
        *self.learned.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn note(&self, error: &LlmError) {
        let LlmError::Status { body, .. } = error else {
            return;
        };
        if let Some(learned) = Learned::from_error(body) {
            let mut slot = self.learned.lock().unwrap_or_else(|p| p.into_inner());
            if slot.is_none_or(|known| learned.limit < known.limit) {
                *slot = Some(learned);
            }
        }
    }

    async fn send(
        &self,
        conversation: &Conversation,
    ) -> Result<Completion<UpstreamOutput>, LlmError> {
        let answered = self
            .answered
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take();
        if let Some(error) = answered {
            self.note(&error);
            return Err(error);
        }
        let result =
            match self.inner.call(conversation).await {
                Ok(Completion {
                    output: UpstreamOutput::Stream(response),
                    prompt_tokens,
                }) if self.format == Format::Responses => peek(response, self.inner.timeout)
                    .await
                    .map(|output| Completion {
                        output,
                        prompt_tokens,
                    }),
                other => other,
            };
        if let Err(error) = &result {
            self.note(error);
        }
        result
    }
}

impl Llm for Watched<'_> {
    type Output = UpstreamOutput;

    fn call<'b>(
        &'b self,
        conversation: &'b Conversation,
    ) -> BoxFuture<'b, Result<Completion<UpstreamOutput>, LlmError>> {
        Box::pin(self.send(conversation))
    }
}

/// What the opening of a Responses stream showed.
enum Opening {
    /// Still only `response.created` / `in_progress` / `queued` events.
    Undecided,
    /// An event that carries output (or anything else): the stream goes to the client.
    Passing,
    /// The response failed with this error body (`{"error": ...}`).
    Failed(String),
}

/// Reads complete events of `buffer` (SSE, events end with a blank line).
fn opening(buffer: &[u8]) -> Opening {
    let text = String::from_utf8_lossy(buffer).replace("\r\n", "\n");
    for event in text.split("\n\n") {
        let data: Vec<&str> = (event.lines())
            .filter_map(|l| l.strip_prefix("data:"))
            .map(|d| d.strip_prefix(' ').unwrap_or(d))
            .collect();
        if data.is_empty() {
            continue;
        }
        let data = data.join("\n");
        if let Some(error) = responses_failure(&data) {
            return Opening::Failed(error);
        }
        let kind = serde_json::from_str::<Value>(&data)
            .ok()
            .and_then(|v| v.get("type").and_then(Value::as_str).map(str::to_owned));
        let opening_event = matches!(
            kind.as_deref(),
            Some("response.created" | "response.in_progress" | "response.queued")
        );
        // Only complete events count: the last piece may be cut mid-event.
        if !opening_event && text.contains(&format!("{event}\n\n")) {
            return Opening::Passing;
        }
    }
    Opening::Undecided
}

/// Holds back the opening events of a Responses stream until it shows whether it failed
/// with an overflow; otherwise gives the stream back whole (held bytes first).
async fn peek(
    response: reqwest::Response,
    timeout: std::time::Duration,
) -> Result<UpstreamOutput, LlmError> {
    let status = response.status();
    let headers = response.headers().clone();
    let mut stream = response.bytes_stream();
    let mut held: Vec<Bytes> = Vec::new();
    let mut size = 0;
    let mut buffer = Vec::new();
    loop {
        let next = match tokio::time::timeout(timeout, stream.next()).await {
            Err(_) => return Err(LlmError::Timeout),
            Ok(next) => next,
        };
        let Some(chunk) = next else { break };
        let chunk = chunk.map_err(|e| transport_error(&e))?;
        size += chunk.len();
        buffer.extend_from_slice(&chunk);
        held.push(chunk);
        match opening(&buffer) {
            Opening::Failed(body) if classify(Some(400), &body).is_some() => {
                return Err(LlmError::Status {
                    status: 400,
                    headers: header_pairs(&headers),
                    body,
                });
            }
            Opening::Undecided if size < PEEK_LIMIT => {}
            _ => break,
        }
    }
    let rest = stream.map_err(std::io::Error::other);
    let prefix = futures::stream::iter(held.into_iter().map(Ok::<_, std::io::Error>));
    let body = reqwest::Body::wrap_stream(prefix.chain(rest));
    let mut rebuilt = axum::http::Response::new(body);
    *rebuilt.status_mut() = status;
    *rebuilt.headers_mut() = headers;
    Ok(UpstreamOutput::Stream(reqwest::Response::from(rebuilt)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn history_upstream_is_read_from_the_envelope() {
        assert!(holds_history_upstream(
            br#"{"model":"m","previous_response_id":"resp_1","input":"hi"}"#
        ));
        assert!(holds_history_upstream(br#"{"conversation":"conv_1"}"#));
        assert!(!holds_history_upstream(
            br#"{"model":"m","previous_response_id":null,"input":"hi"}"#
        ));
        assert!(!holds_history_upstream(b"not json"));
        // The word in a string's text is no key.
        assert!(!holds_history_upstream(
            br#"{"model":"m","input":"the "conversation" and previous_response_id"}"#
        ));
        assert!(holds_history_upstream(
            br#"{"input":"a long conversation","conversation":{"id":"conv_1"}}"#
        ));
    }

    #[test]
    fn the_opening_of_a_stream_is_judged_on_complete_events() {
        let created = "event: response.created\ndata: {\"type\":\"response.created\"}\n\n";
        assert!(matches!(opening(created.as_bytes()), Opening::Undecided));
        let failed = format!(
            "{created}event: response.failed\ndata: {{\"type\":\"response.failed\",\"response\":{{\"error\":{{\"code\":\"context_length_exceeded\",\"message\":\"x\"}}}}}}\n\n"
        );
        assert!(matches!(opening(failed.as_bytes()), Opening::Failed(_)));
        let delta = format!(
            "{created}data: {{\"type\":\"response.output_text.delta\",\"delta\":\"hi\"}}\n\n"
        );
        assert!(matches!(opening(delta.as_bytes()), Opening::Passing));
        let cut = format!("{created}data: {{\"type\":\"response.output_te");
        assert!(matches!(opening(cut.as_bytes()), Opening::Undecided));
    }
}
