//! Streaming answers: upstream SSE bytes passed to the client as they arrive, unchanged,
//! while cascade-llm's [`UsageScanner`] reads the prompt-token usage out of the events going
//! by.
//!
//! The scanner keeps only the current unfinished line and event, so memory stays bounded
//! whatever the stream's length. The count is reported when the stream ends: an Anthropic
//! stream may show only later (a `compaction` block, `usage.iterations`) that the provider
//! compacted the prompt, and then its count is not of the request sent. When the client goes away, axum drops the body stream,
//! which drops the upstream response and closes its connection.

use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use cascade_llm::{Provider, UsageScanner};
use futures::Stream;

/// Passes `upstream` through unchanged, calling `on_usage` once with the prompt tokens the
/// stream reports (when it reports them and the provider did not compact the prompt), when
/// the stream ends.
pub(crate) fn scan_usage<S, E, F>(provider: Provider, upstream: S, on_usage: F) -> ScanUsage<S, F>
where
    S: Stream<Item = Result<Bytes, E>> + Send,
    F: FnMut(u64) + Send + 'static,
{
    ScanUsage {
        upstream: Box::pin(upstream),
        scanner: UsageScanner::new(provider),
        on_usage,
        reported: false,
    }
}

/// The stream [`scan_usage`] returns.
pub(crate) struct ScanUsage<S, F> {
    upstream: Pin<Box<S>>,
    scanner: UsageScanner,
    on_usage: F,
    reported: bool,
}

impl<S, F> ScanUsage<S, F>
where
    F: FnMut(u64),
{
    fn report(&mut self) {
        if let Some(tokens) = self.scanner.prompt_tokens() {
            self.reported = true;
            (self.on_usage)(tokens);
        }
    }
}

impl<S, E, F> Stream for ScanUsage<S, F>
where
    S: Stream<Item = Result<Bytes, E>>,
    F: FnMut(u64) + Unpin,
{
    type Item = Result<Bytes, E>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.get_mut();
        let item = this.upstream.as_mut().poll_next(cx);
        if !this.reported {
            match &item {
                Poll::Ready(Some(Ok(chunk))) => this.scanner.feed(chunk),
                // The last event may lack its blank line.
                Poll::Ready(None) => {
                    this.scanner.finish();
                    this.report();
                }
                Poll::Ready(Some(Err(_))) | Poll::Pending => {}
            }
        }
        item
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures::StreamExt;
    use std::sync::{Arc, Mutex};

    fn scanned(provider: Provider, chunks: &[&'static [u8]]) -> (Vec<u8>, Option<u64>) {
        let seen = Arc::new(Mutex::new(None));
        let sink = seen.clone();
        let chunks: Vec<Result<Bytes, std::io::Error>> =
            chunks.iter().map(|c| Ok(Bytes::from_static(c))).collect();
        let out: Vec<_> = pollster::block_on(
            scan_usage(provider, futures::stream::iter(chunks), move |n| {
                *sink.lock().unwrap() = Some(n)
            })
            .collect::<Vec<_>>(),
        );
        let bytes = out.into_iter().flat_map(|c| c.unwrap().to_vec()).collect();
        let tokens = *seen.lock().unwrap();
        (bytes, tokens)
    }

    #[test]
    fn bytes_pass_through_unchanged() {
        let (bytes, tokens) = scanned(
            Provider::OpenAi,
            &[b"data: {\"usage\":{\"prompt", b"_tokens\":5}}\n\n"],
        );
        assert_eq!(bytes, b"data: {\"usage\":{\"prompt_tokens\":5}}\n\n");
        assert_eq!(tokens, Some(5));
    }

    #[test]
    fn usage_is_found_across_chunk_boundaries_and_at_the_end() {
        let sse: &'static [u8] = b"event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"usage\":{\"input_tokens\":120,\"cache_read_input_tokens\":30}}}\n\n";
        let pieces: Vec<&'static [u8]> = sse.chunks(7).collect();
        assert_eq!(scanned(Provider::Anthropic, &pieces).1, Some(150));
        let last = b"data: {\"choices\":[],\"usage\":{\"prompt_tokens\":42}}";
        assert_eq!(scanned(Provider::OpenAi, &[last]).1, Some(42));
        assert_eq!(
            scanned(Provider::OpenAi, &[b"data: {\"usage\":null}\n\n"]).1,
            None
        );
    }
}
