//! Streams the upstream cuts or stalls: the client gets every complete event already
//! received, then the format's own error event, which the SDKs raise as an error (OpenAI:
//! a `data:` event with an `error` object; Anthropic: `event: error`). Never half an event,
//! never a connection reset that loses what was already buffered.
//!
//! Bytes are passed on up to the last event boundary seen (a blank line); the unfinished
//! event waits for the bytes that finish it. A stream that ends normally passes its
//! remainder on as it is (the last event may lack its blank line).

use std::time::Duration;

use bytes::{Bytes, BytesMut};
use context_cascade::Format;
use futures::{Stream, StreamExt};
use serde_json::json;

/// Why a stream was ended early.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Cut {
    /// The upstream connection failed mid-stream.
    Broken,
    /// Nothing arrived for the whole timeout.
    Stalled,
}

struct State<S> {
    upstream: std::pin::Pin<Box<S>>,
    pending: BytesMut,
    done: bool,
}

/// `upstream` cut at event boundaries, ended by the error event of `format` when it fails
/// or sends nothing for `idle`.
pub(crate) fn complete_events<S, E>(
    format: Format,
    upstream: S,
    idle: Duration,
) -> impl Stream<Item = Result<Bytes, std::convert::Infallible>> + Send
where
    S: Stream<Item = Result<Bytes, E>> + Send + 'static,
    E: std::fmt::Display,
{
    let state = State {
        upstream: Box::pin(upstream),
        pending: BytesMut::new(),
        done: false,
    };
    futures::stream::unfold(state, move |mut state| async move {
        loop {
            if state.done {
                return None;
            }
            let next = tokio::time::timeout(idle, state.upstream.next()).await;
            let cut = match next {
                Ok(Some(Ok(chunk))) => {
                    state.pending.extend_from_slice(&chunk);
                    match last_boundary(&state.pending) {
                        Some(end) => {
                            let ready = state.pending.split_to(end).freeze();
                            return Some((Ok(ready), state));
                        }
                        None => continue,
                    }
                }
                Ok(None) => {
                    state.done = true;
                    if state.pending.is_empty() {
                        return None;
                    }
                    let rest = state.pending.split().freeze();
                    return Some((Ok(rest), state));
                }
                Ok(Some(Err(e))) => {
                    tracing::warn!(error = %e, dropped = state.pending.len(),
                        "upstream stream cut mid-answer; ending it with an error event");
                    Cut::Broken
                }
                Err(_) => {
                    tracing::warn!(
                        timeout_secs = idle.as_secs_f64(),
                        dropped = state.pending.len(),
                        "upstream stream stalled; ending it with an error event"
                    );
                    Cut::Stalled
                }
            };
            state.done = true;
            state.pending.clear();
            return Some((Ok(error_event(format, cut)), state));
        }
    })
}

/// The end of the last complete event in `bytes` (just past its blank line).
fn last_boundary(bytes: &[u8]) -> Option<usize> {
    (1..bytes.len()).rev().find_map(|i| {
        let blank = bytes[i] == b'\n'
            && (bytes[i - 1] == b'\n'
                || (i >= 2 && bytes[i - 1] == b'\r' && bytes[i - 2] == b'\n'));
        blank.then_some(i + 1)
    })
}

/// The error event that ends a cut stream, in the shape the format's SDKs raise.
fn error_event(format: Format, cut: Cut) -> Bytes {
    let message = match cut {
        Cut::Broken => "context-cascade: the upstream connection broke in the middle of the answer",
        Cut::Stalled => "context-cascade: the upstream stopped sending in the middle of the answer",
    };
    let text = match format {
        Format::Anthropic => {
            let kind = if cut == Cut::Stalled {
                "timeout_error"
            } else {
                "api_error"
            };
            let data = json!({"type": "error", "error": {"type": kind, "message": message}});
            format!("event: error\ndata: {data}\n\n")
        }
        Format::OpenAi | Format::Bare | Format::Responses => {
            let code = if cut == Cut::Stalled {
                "upstream_timeout"
            } else {
                "stream_interrupted"
            };
            let data = json!({"error": {"message": message, "type": "upstream_error",
                "param": null, "code": code}});
            format!("data: {data}\n\n")
        }
    };
    Bytes::from(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(format: Format, chunks: Vec<Result<Bytes, String>>) -> String {
        let stream = complete_events(
            format,
            futures::stream::iter(chunks),
            Duration::from_secs(5),
        );
        // The idle timer needs a runtime with time.
        let out: Vec<_> = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .unwrap()
            .block_on(stream.collect::<Vec<_>>());
        out.into_iter()
            .map(|c| String::from_utf8(c.unwrap().to_vec()).unwrap())
            .collect()
    }

    #[test]
    fn complete_events_pass_and_a_cut_ends_with_the_error_event() {
        let chunks = vec![
            Ok(Bytes::from("data: 1\n\ndata: ")),
            Ok(Bytes::from("2\r\n\r\ndata: 3")),
            Err("reset".to_owned()),
        ];
        let text = run(Format::OpenAi, chunks);
        assert!(
            text.starts_with("data: 1\n\ndata: 2\r\n\r\ndata: {\"error\""),
            "{text}"
        );
        let text = run(
            Format::Anthropic,
            vec![
                Ok(Bytes::from("event: a\ndata: {}\n\nevent")),
                Err("x".into()),
            ],
        );
        assert!(
            text.starts_with("event: a\ndata: {}\n\nevent: error\ndata: {\"type\":\"error\""),
            "{text}"
        );
        let clean = run(
            Format::OpenAi,
            vec![Ok(Bytes::from("data: 1\n\ndata: [DONE]"))],
        );
        assert_eq!(clean, "data: 1\n\ndata: [DONE]");
    }
}
