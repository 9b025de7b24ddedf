//! Handing summaries prepared ahead over to ④: [`PreparedSummaries`] answers a request it
//! was prepared for at once, and passes any other to the real summarizer.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use super::lock;
use crate::BoxFuture;
use crate::summarizer::{Summarizer, SummaryError, SummaryRequest};

/// At most this many summaries are kept by [`PreparedSummaries`]: one compaction needs at
/// most the chunks, their merge and ⑤'s fallbacks, for each of a few forecasts; older
/// ones belong to forecasts that did not come true.
const KEPT_REQUESTS: usize = 64;

/// What [`ContextManager::summarize_ahead`](crate::ContextManager::summarize_ahead) prepared: every summarizer request the forecast
/// compaction made, with its answer.
#[derive(Debug, Clone, PartialEq)]
pub struct PreparedSummary {
    pub(super) answers: Vec<(SummaryRequest, String)>,
    pub(super) forecasts: usize,
}

impl PreparedSummary {
    /// The requests prepared, in the order the engine made them.
    pub fn requests(&self) -> impl Iterator<Item = &SummaryRequest> {
        self.answers.iter().map(|(request, _)| request)
    }

    /// The answer prepared for `request`, if it was prepared for it (see
    /// [`PreparedSummaries`] for when an answer serves a request).
    pub fn answer(&self, request: &SummaryRequest) -> Option<&str> {
        (self.answers.iter())
            .find(|(prepared, answer)| serves(prepared, answer, request))
            .map(|(_, answer)| answer.as_str())
    }

    /// How many summarizer requests were prepared.
    pub fn len(&self) -> usize {
        self.answers.len()
    }

    /// How many distinct forecast compactions the requests were prepared for.
    pub fn forecasts(&self) -> usize {
        self.forecasts
    }

    /// Whether nothing was prepared (never the case for a value `summarize_ahead` returns).
    pub fn is_empty(&self) -> bool {
        self.answers.is_empty()
    }
}

/// Whether an answer prepared for `prepared` serves `asked`: the same input (messages,
/// previous summary, chunk summaries), and a summary that fits the limit asked for — made
/// under that limit or a stricter one, or no longer than it anyway (the proxy's summary
/// cache applies the first rule; a prepared answer is checked by ④ like any other).
fn serves(prepared: &SummaryRequest, answer: &str, asked: &SummaryRequest) -> bool {
    serves_first(prepared, answer, asked, asked.messages().len())
}

/// Whether an answer prepared for `prepared` serves `asked`'s first `length` messages
/// (all of them: [`serves`]; fewer: a stand-in, see [`SummaryRequest::stand_in_lengths`]).
fn serves_first(
    prepared: &SummaryRequest,
    answer: &str,
    asked: &SummaryRequest,
    length: usize,
) -> bool {
    let same_input = asked.messages().get(..length) == Some(prepared.messages())
        && prepared.previous_summary() == asked.previous_summary()
        && prepared.partials() == asked.partials()
        && prepared.is_merge() == asked.is_merge();
    same_input && asked.fits(answer, prepared.max_tokens(), true)
}

/// A [`Summarizer`] that answers the requests prepared ahead at once and passes any other
/// to the real summarizer. Share it (`Arc`) between the manager that compacts
/// ([`ContextManager::with_summarizer`](crate::ContextManager::with_summarizer)) and the code that prepares.
pub struct PreparedSummaries {
    inner: Arc<dyn Summarizer>,
    prepared: Mutex<Vec<(SummaryRequest, String)>>,
    gap_share: f64,
    served: AtomicU64,
    stood_in: AtomicU64,
}

impl PreparedSummaries {
    /// Answers from what is prepared, else from `inner`.
    pub fn new(inner: Arc<dyn Summarizer>) -> Self {
        PreparedSummaries {
            inner,
            prepared: Mutex::new(Vec::new()),
            gap_share: 0.0,
            served: AtomicU64::new(0),
            stood_in: AtomicU64::new(0),
        }
    }

    /// Lets a summary prepared for a shorter range stand in when none was prepared for the
    /// range asked and the messages past it are at most `gap_share` of it (pass
    /// `ExperimentalConfig::prepared_summary_gap`; see [`SummaryRequest::stand_in_lengths`]).
    /// The compaction then differs from the synchronous run's: the messages past the
    /// prepared range are named by the trail alone.
    /// A share outside `[0, 1)` (or NaN) is taken as the nearest one allowed: 0, or just
    /// under 1 (a summary of at least the range's first message).
    pub fn with_gap_share(mut self, gap_share: f64) -> Self {
        self.gap_share = if gap_share.is_nan() {
            0.0
        } else {
            gap_share.clamp(0.0, 0.99)
        };
        self
    }

    /// The real summarizer (what [`ContextManager::summarize_ahead`](crate::ContextManager::summarize_ahead) should prepare with).
    pub fn inner(&self) -> Arc<dyn Summarizer> {
        self.inner.clone()
    }

    /// Makes `summary`'s answers available; the oldest go beyond a few dozen.
    pub fn add(&self, summary: PreparedSummary) {
        let mut prepared = lock(&self.prepared);
        prepared.extend(summary.answers);
        let excess = prepared.len().saturating_sub(KEPT_REQUESTS);
        prepared.drain(..excess);
    }

    /// How many requests were answered from what was prepared (stand-ins included).
    pub fn served(&self) -> u64 {
        self.served.load(Ordering::Relaxed)
    }

    /// How many of those were answered by a summary of a shorter range (a stand-in).
    pub fn stood_in(&self) -> u64 {
        self.stood_in.load(Ordering::Relaxed)
    }

    /// The answer prepared for `request`, else the one prepared for its longest first
    /// messages allowed to stand in; with whether it stands in.
    fn find(&self, request: &SummaryRequest) -> Option<(String, bool)> {
        // Counted before the lock: it reads the whole range.
        let lengths = request.stand_in_lengths(self.gap_share);
        let prepared = lock(&self.prepared);
        let exact = (prepared.iter()).find(|(made_for, answer)| serves(made_for, answer, request));
        if let Some((_, answer)) = exact {
            return Some((answer.clone(), false));
        }
        // Only a summary whose length is allowed is compared: each comparison may read
        // the whole range.
        (prepared.iter())
            .filter(|(made_for, _)| lengths.contains(&made_for.messages().len()))
            .filter(|(made_for, answer)| {
                serves_first(made_for, answer, request, made_for.messages().len())
            })
            .max_by_key(|(made_for, _)| made_for.messages().len())
            .map(|(_, answer)| (answer.clone(), true))
    }
}

impl Summarizer for PreparedSummaries {
    fn id(&self) -> String {
        self.inner.id()
    }

    fn summarize<'a>(
        &'a self,
        request: &'a SummaryRequest,
    ) -> BoxFuture<'a, Result<String, SummaryError>> {
        match self.find(request) {
            Some((answer, stands_in)) => {
                self.served.fetch_add(1, Ordering::Relaxed);
                if stands_in {
                    self.stood_in.fetch_add(1, Ordering::Relaxed);
                }
                Box::pin(std::future::ready(Ok(answer)))
            }
            None => self.inner.summarize(request),
        }
    }
}
