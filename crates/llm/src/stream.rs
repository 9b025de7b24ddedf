//! Server-sent events: a parsed event stream for the client's own streaming calls, and a
//! byte scanner for a proxy that passes a stream through untouched but wants its usage.

use std::fmt;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll};

use context_cascade::LlmError;
use eventsource_stream::{EventStreamError, Eventsource};
use futures::{Stream, StreamExt};

use crate::http::{header_pairs, transport_error};
use crate::provider::{Provider, provider_compacted, usage_from_sse_event};

/// One server-sent event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SseEvent {
    /// The `event:` name (Anthropic `message_start`, ...); empty when the server sent none.
    pub event: String,
    /// The `data:` lines joined by newlines (a JSON chunk, or OpenAI's `[DONE]`).
    pub data: String,
    /// The `id:` field, empty when absent.
    pub id: String,
}

/// The prompt tokens a stream reported, readable while and after it is consumed. Clones
/// share the value.
#[derive(Clone)]
pub struct UsageProbe(Arc<AtomicU64>);

/// Stored while no usage has been seen (a real count never reaches it).
const NO_USAGE: u64 = u64::MAX;

impl UsageProbe {
    /// A probe that has seen nothing.
    pub fn new() -> Self {
        UsageProbe(Arc::new(AtomicU64::new(NO_USAGE)))
    }

    /// The last prompt-token count seen, if any.
    pub fn get(&self) -> Option<u64> {
        match self.0.load(Ordering::Acquire) {
            NO_USAGE => None,
            tokens => Some(tokens),
        }
    }

    /// Records a count (the latest wins: Anthropic repeats the input count in later events).
    pub fn record(&self, tokens: u64) {
        self.0.store(tokens.min(NO_USAGE - 1), Ordering::Release);
    }
}

impl Default for UsageProbe {
    fn default() -> Self {
        UsageProbe::new()
    }
}

impl fmt::Debug for UsageProbe {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("UsageProbe").field(&self.get()).finish()
    }
}

type EventStream = Pin<Box<dyn Stream<Item = Result<SseEvent, LlmError>> + Send>>;

/// The events of a streaming call, as the server sends them. Usage seen in the events is
/// recorded in [`SseStream::usage`].
pub struct SseStream {
    events: EventStream,
    usage: UsageProbe,
    status: u16,
    headers: Vec<(String, String)>,
}

impl SseStream {
    pub(crate) fn from_response(provider: Provider, response: reqwest::Response) -> Self {
        let status = response.status().as_u16();
        let headers = header_pairs(response.headers());
        let usage = UsageProbe::new();
        let recorder = usage.clone();
        let events = response
            .bytes_stream()
            .eventsource()
            .map(move |item| match item {
                Ok(event) => {
                    if let Some(tokens) = usage_from_sse_event(provider, &event.data) {
                        recorder.record(tokens);
                    }
                    Ok(SseEvent {
                        event: event.event,
                        data: event.data,
                        id: event.id,
                    })
                }
                Err(EventStreamError::Transport(e)) => Err(transport_error(&e)),
                Err(other) => Err(LlmError::Transport(format!(
                    "malformed event stream: {other}"
                ))),
            });
        SseStream {
            events: Box::pin(events),
            usage,
            status,
            headers,
        }
    }

    /// A handle on the prompt tokens the stream reports (filled in as events arrive).
    pub fn usage(&self) -> UsageProbe {
        self.usage.clone()
    }

    /// The prompt tokens seen so far.
    pub fn prompt_tokens(&self) -> Option<u64> {
        self.usage.get()
    }

    /// The response status (2xx: errors came back before the stream).
    pub fn status(&self) -> u16 {
        self.status
    }

    /// The response headers, in order.
    pub fn headers(&self) -> &[(String, String)] {
        &self.headers
    }
}

impl fmt::Debug for SseStream {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SseStream")
            .field("status", &self.status)
            .field("usage", &self.usage)
            .finish_non_exhaustive()
    }
}

impl Stream for SseStream {
    type Item = Result<SseEvent, LlmError>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        self.events.as_mut().poll_next(cx)
    }
}

/// A line longer than this is not an event worth scanning (usage chunks are small); it is
/// skipped instead of buffered without bound.
const MAX_LINE: usize = 1 << 20;

/// Finds usage in raw SSE bytes, chunk by chunk, without changing them: for a proxy that
/// forwards a stream as it arrives. Feed every chunk, then read
/// [`UsageScanner::prompt_tokens`].
#[derive(Debug, Clone)]
pub struct UsageScanner {
    provider: Provider,
    line: Vec<u8>,
    skipping_line: bool,
    data: String,
    tokens: Option<u64>,
    /// The provider compacted the prompt: no count of the request sent.
    compacted: bool,
}

impl UsageScanner {
    /// A scanner for a stream of this protocol.
    pub fn new(provider: Provider) -> Self {
        UsageScanner {
            provider,
            line: Vec::new(),
            skipping_line: false,
            data: String::new(),
            tokens: None,
            compacted: false,
        }
    }

    /// Scans the next bytes of the stream (chunks may split lines anywhere).
    pub fn feed(&mut self, chunk: &[u8]) {
        for piece in chunk.split_inclusive(|b| *b == b'\n') {
            let complete = piece.last() == Some(&b'\n');
            if !self.skipping_line {
                if self.line.len() + piece.len() > MAX_LINE {
                    self.line.clear();
                    self.skipping_line = true;
                } else {
                    self.line.extend_from_slice(piece);
                }
            }
            if complete {
                if !self.skipping_line {
                    let line = std::mem::take(&mut self.line);
                    self.end_line(&line);
                }
                self.skipping_line = false;
            }
        }
    }

    /// Ends the stream: an event not followed by a blank line is still looked at.
    pub fn finish(&mut self) {
        let line = std::mem::take(&mut self.line);
        if !line.is_empty() && !self.skipping_line {
            self.end_line(&line);
        }
        self.dispatch();
    }

    /// The last prompt-token count seen; none once the provider compacted the prompt (an
    /// Anthropic `compaction` block or iteration), whose count is not of the request sent.
    pub fn prompt_tokens(&self) -> Option<u64> {
        self.tokens.filter(|_| !self.compacted)
    }

    fn end_line(&mut self, line: &[u8]) {
        let line = line.strip_suffix(b"\n").unwrap_or(line);
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        if line.is_empty() {
            self.dispatch();
        } else if let Some(value) = line.strip_prefix(b"data:") {
            let value = value.strip_prefix(b" ").unwrap_or(value);
            if !self.data.is_empty() {
                self.data.push('\n');
            }
            self.data.push_str(&String::from_utf8_lossy(value));
        }
    }

    fn dispatch(&mut self) {
        if !self.data.is_empty() {
            if let Some(tokens) = usage_from_sse_event(self.provider, &self.data) {
                self.tokens = Some(tokens);
            }
            if self.provider == Provider::Anthropic && provider_compacted(&self.data) {
                self.compacted = true;
            }
            self.data.clear();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scanner_finds_usage_across_split_chunks() {
        let raw = "event: message_start\r\ndata: {\"type\":\"message_start\",\"message\":{\"usage\":{\"input_tokens\":77,\"cache_read_input_tokens\":3}}}\r\n\r\nevent: ping\ndata: {\"type\":\"ping\"}\n\n";
        for split in [1, 5, 17, raw.len()] {
            let mut scanner = UsageScanner::new(Provider::Anthropic);
            for chunk in raw.as_bytes().chunks(split) {
                scanner.feed(chunk);
            }
            scanner.finish();
            assert_eq!(scanner.prompt_tokens(), Some(80), "chunk size {split}");
        }
    }

    #[test]
    fn scanner_reads_a_final_event_without_blank_line() {
        let mut scanner = UsageScanner::new(Provider::OpenAi);
        scanner.feed(b"data: {\"choices\":[],\"usage\":{\"prompt_tokens\":9}}");
        assert_eq!(scanner.prompt_tokens(), None);
        scanner.finish();
        assert_eq!(scanner.prompt_tokens(), Some(9));
    }

    #[test]
    fn probe_starts_empty_and_keeps_the_latest() {
        let probe = UsageProbe::new();
        assert_eq!(probe.get(), None);
        probe.record(5);
        probe.clone().record(6);
        assert_eq!(probe.get(), Some(6));
    }

    #[test]
    fn a_stream_the_provider_compacted_reports_no_prompt_count() {
        let mut scanner = UsageScanner::new(Provider::Anthropic);
        scanner.feed(b"event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"usage\":{\"input_tokens\":2000}}}\n\n");
        assert_eq!(scanner.prompt_tokens(), Some(2000));
        scanner.feed(b"event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"compaction\",\"content\":null}}\n\n");
        scanner.finish();
        assert_eq!(scanner.prompt_tokens(), None);
    }
}
