//! The offline summarizer as its tests call it: at once, sized as it sizes itself.

use std::task::{Context, Poll, Waker};

use context_cascade::OfflineSummarizer;
use context_cascade::estimate::Estimator;
use context_cascade::summarizer::{Summarizer, SummaryError, SummaryRequest};

/// Tokens of a summary as the offline summarizer sizes it: the prior with its 10% margin.
pub fn tokens(estimator: &Estimator, text: &str) -> u64 {
    (estimator.text_tokens(text) as f64 * 1.1).ceil() as u64
}

/// Polls the summarizer's future once: it must be ready immediately.
pub fn run(request: &SummaryRequest) -> Result<String, SummaryError> {
    let summarizer = OfflineSummarizer::default();
    let mut future = summarizer.summarize(request);
    let mut cx = Context::from_waker(Waker::noop());
    match future.as_mut().poll(&mut cx) {
        Poll::Ready(result) => result,
        Poll::Pending => panic!("the offline summarizer must be ready at once"),
    }
}
