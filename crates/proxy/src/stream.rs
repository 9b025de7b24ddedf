//! Streaming answers: upstream SSE bytes passed to the client as they arrive, unchanged,
//! while a scanner reads the prompt-token usage out of the events going by.
//!
//! OpenAI streams report usage in a final chunk (`usage.prompt_tokens`, when the client
//! asked for `stream_options.include_usage`); Anthropic in `message_start`
//! (`message.usage.input_tokens` plus cache tokens). The scanner keeps only the current
//! unfinished line, so memory stays bounded whatever the stream's length. When the client
//! goes away, axum drops the body stream, which drops the upstream response and closes its
//! connection.

use bytes::Bytes;
use futures::{Stream, StreamExt};
use serde_json::Value;

/// A line longer than this cannot be a usage event worth reading; it is skipped, not kept.
const MAX_LINE_BYTES: usize = 1 << 20;

/// The prompt tokens a JSON usage object reports: `prompt_tokens` (OpenAI) or
/// `input_tokens` + `cache_creation_input_tokens` + `cache_read_input_tokens` (Anthropic).
pub fn prompt_tokens_of_usage(usage: &Value) -> Option<u64> {
    if let Some(n) = usage.get("prompt_tokens").and_then(Value::as_u64) {
        return Some(n);
    }
    let input = usage.get("input_tokens").and_then(Value::as_u64)?;
    let cache = ["cache_creation_input_tokens", "cache_read_input_tokens"]
        .iter()
        .filter_map(|k| usage.get(*k).and_then(Value::as_u64))
        .sum::<u64>();
    Some(input + cache)
}

/// The prompt tokens of a complete JSON answer (`usage` at the top).
pub fn usage_from_body(body: &[u8]) -> Option<u64> {
    let value: Value = serde_json::from_slice(body).ok()?;
    value.get("usage").and_then(prompt_tokens_of_usage)
}

/// The prompt tokens of one SSE event's data, if it reports them.
pub fn usage_from_event(data: &str) -> Option<u64> {
    let value: Value = serde_json::from_str(data).ok()?;
    let usage = value
        .get("usage")
        .filter(|u| !u.is_null())
        .or_else(|| value.pointer("/message/usage"))?;
    prompt_tokens_of_usage(usage).filter(|n| *n > 0)
}

/// Reads `data:` lines out of SSE bytes split anywhere.
#[derive(Debug, Default)]
pub struct UsageScanner {
    line: Vec<u8>,
    skipping: bool,
    /// The latest prompt-token count seen.
    pub prompt_tokens: Option<u64>,
}

impl UsageScanner {
    /// Feeds the next chunk of the stream.
    pub fn feed(&mut self, chunk: &[u8]) {
        let mut rest = chunk;
        while let Some(newline) = rest.iter().position(|b| *b == b'\n') {
            if !self.skipping {
                self.line.extend_from_slice(&rest[..newline]);
                self.finish_line();
            }
            self.line.clear();
            self.skipping = false;
            rest = &rest[newline + 1..];
        }
        if !self.skipping {
            self.line.extend_from_slice(rest);
            if self.line.len() > MAX_LINE_BYTES {
                self.line.clear();
                self.skipping = true;
            }
        }
    }

    fn finish_line(&mut self) {
        let line = self.line.strip_suffix(b"\r").unwrap_or(&self.line);
        let Some(data) = line.strip_prefix(b"data:") else {
            return;
        };
        // Cheap filter: most events carry no usage.
        if !data.windows(5).any(|w| w == b"usage") {
            return;
        }
        if let Ok(text) = std::str::from_utf8(data)
            && let Some(tokens) = usage_from_event(text.trim_start())
        {
            self.prompt_tokens = Some(tokens);
        }
    }
}

/// Passes `upstream` through unchanged, calling `on_usage` once with the prompt tokens the
/// stream reports (when it reports them), as soon as they go by.
pub fn scan_usage<S, E>(
    upstream: S,
    mut on_usage: impl FnMut(u64) + Send + 'static,
) -> impl Stream<Item = Result<Bytes, E>> + Send
where
    S: Stream<Item = Result<Bytes, E>> + Send,
{
    let mut scanner = UsageScanner::default();
    let mut reported = false;
    upstream.map(move |item| {
        if let Ok(chunk) = &item
            && !reported
        {
            scanner.feed(chunk);
            if let Some(tokens) = scanner.prompt_tokens {
                reported = true;
                on_usage(tokens);
            }
        }
        item
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::{Arc, Mutex};

    #[test]
    fn usage_is_found_across_chunk_boundaries() {
        let sse = "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"usage\":{\"input_tokens\":120,\"cache_read_input_tokens\":30}}}\n\n";
        let mut s = UsageScanner::default();
        for piece in sse.as_bytes().chunks(7) {
            s.feed(piece);
        }
        assert_eq!(s.prompt_tokens, Some(150));
        let mut o = UsageScanner::default();
        o.feed(b"data: {\"choices\":[],\"usage\":{\"prompt_tokens\":42,\"completion_tokens\":3}}\r\n\r\ndata: [DONE]\n\n");
        assert_eq!(o.prompt_tokens, Some(42));
    }

    #[test]
    fn bodies_and_null_usage() {
        assert_eq!(
            usage_from_body(br#"{"usage":{"prompt_tokens":9}}"#),
            Some(9)
        );
        assert_eq!(usage_from_event(r#"{"usage":null}"#), None);
    }

    #[test]
    fn bytes_pass_through_unchanged() {
        let seen = Arc::new(Mutex::new(None));
        let sink = seen.clone();
        let chunks: Vec<Result<Bytes, std::io::Error>> = vec![
            Ok(Bytes::from_static(b"data: {\"usage\":{\"prompt")),
            Ok(Bytes::from_static(b"_tokens\":5}}\n\n")),
        ];
        let out: Vec<_> = pollster::block_on(
            scan_usage(futures::stream::iter(chunks), move |n| {
                *sink.lock().unwrap() = Some(n)
            })
            .collect::<Vec<_>>(),
        );
        let bytes: Vec<u8> = out.into_iter().flat_map(|c| c.unwrap().to_vec()).collect();
        assert_eq!(bytes, b"data: {\"usage\":{\"prompt_tokens\":5}}\n\n");
        assert_eq!(*seen.lock().unwrap(), Some(5));
    }
}
