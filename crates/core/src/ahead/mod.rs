//! Summaries prepared ahead: ④'s summarizer calls made between turns, so that the turn
//! that crosses the preemptive threshold does not wait for them.
//!
//! When a conversation's estimate passes `background.summary_ratio`·E (0.8 by default,
//! below the preemptive 0.9), [`ContextManager::summarize_ahead`] forecasts several next
//! requests — this one followed by one more exchange whose tool output is of each size
//! that matters (see [`forecast`]) — and runs the engine's own `prepare` on each with a
//! probe summarizer that answers at once, to learn which range ④ would summarize for it.
//! Forecasts that lead to the same range are one; the first `background.forecasts`
//! distinct ones are prepared for real, concurrently, with a recording summarizer.
//! Nothing here chooses a range or builds a request: the range ③/④ remove, the chunks and
//! the merge are the engine's, so a prepared [`SummaryRequest`] is byte for byte one the
//! synchronous run will make when one of the forecasts holds.
//!
//! [`PreparedSummaries`] hands them over: a [`Summarizer`] that answers a request it was
//! prepared for at once and passes any other to the real summarizer (the history diverged
//! from every forecast: the synchronous path, as before).

mod forecast;
mod prepared;

use forecast::Forecasts;
pub use prepared::{PreparedSummaries, PreparedSummary};

use std::sync::{Arc, Mutex, MutexGuard};

use tracing::instrument::WithSubscriber;

use crate::BoxFuture;
use crate::config::Budget;
use crate::conversation::{Conversation, Message};
use crate::engine::{ContextManager, model_of};
use crate::join::join_all;
use crate::report::Report;
use crate::summarizer::{Summarizer, SummaryError, SummaryRequest};

/// Records every request a summarizer answers (the forecast compaction's calls).
struct Recording {
    inner: Arc<dyn Summarizer>,
    log: Mutex<Vec<(SummaryRequest, Result<String, SummaryError>)>>,
}

impl Summarizer for Recording {
    fn id(&self) -> String {
        self.inner.id()
    }

    fn summarize<'a>(
        &'a self,
        request: &'a SummaryRequest,
    ) -> BoxFuture<'a, Result<String, SummaryError>> {
        Box::pin(async move {
            let result = self.inner.summarize(request).await;
            lock(&self.log).push((request.clone(), result.clone()));
            result
        })
    }
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Records every request and answers at once with a short text: what ④ would ask for a
/// forecast, learned without asking the real summarizer.
struct Probe {
    id: String,
    log: Mutex<Vec<SummaryRequest>>,
}

impl Summarizer for Probe {
    fn id(&self) -> String {
        self.id.clone()
    }

    fn summarize<'a>(
        &'a self,
        request: &'a SummaryRequest,
    ) -> BoxFuture<'a, Result<String, SummaryError>> {
        lock(&self.log).push(request.clone());
        Box::pin(std::future::ready(Ok("- forecast".to_owned())))
    }
}

/// The sizes of a new output tried, from none to ①'s cap: this many steps (each a
/// `prepare` run without a summarizer call). ④'s range changes with the size where the
/// kept tail loses a message, and again at each relaxed target (a sawtooth, not a
/// monotone step: a bisection misses ranges): even steps find every range but those only
/// a narrow band of sizes leads to.
const SIZE_STEPS: u64 = 48;

/// Bisection steps towards the least room of each range found (each a `prepare` run).
const EDGE_STEPS: usize = 6;

/// What identifies a forecast's compaction: the input of every summary it asks for (not
/// the limits: a summary made under the strictest limit serves the others, see
/// `prepared::serves`).
type RangeKey = Vec<(Vec<Message>, Option<String>)>;

/// The key of what a probe recorded; `None` when the forecast needed no summary.
fn range_key(requests: &[SummaryRequest]) -> Option<(RangeKey, u64)> {
    let first = requests.iter().find(|r| !r.is_merge())?;
    let key = (requests.iter().filter(|r| !r.is_merge()))
        .map(|r| {
            (
                r.messages().to_vec(),
                r.previous_summary().map(str::to_owned),
            )
        })
        .collect();
    Some((key, first.max_tokens()))
}

impl ContextManager {
    /// Prepares, between turns, the summaries the next request's compaction will ask for.
    ///
    /// Below `background.summary_ratio`·E nothing is forecast (`Ok(None)`). Above it,
    /// several next requests are forecast (this conversation followed by one more exchange
    /// whose new tool output is of each size that decides ④'s range: like the latest, past
    /// ①'s cap, like the largest lately, none, and every size in between; or two exchanges
    /// ahead). A probe runs the engine's `prepare` on each to learn the range ④ would
    /// summarize, without a summarizer call; for the first `background.forecasts` distinct
    /// ranges `prepare` runs again with `summarizer`, concurrently, each on the forecast of
    /// its range with the least room (whose summary then fits the others), recording every
    /// request. `Ok(None)` when no forecast needs ④.
    /// The first summarizer error is returned (the caller may try again; the synchronous
    /// path will anyway).
    ///
    /// The conversation is not changed and the calibration is only read. Hand the result
    /// to [`PreparedSummaries::add`] behind the manager's summarizer: when one of the
    /// forecasts holds, the synchronous ④ makes no summarizer call and writes the same
    /// bytes. Cost: up to `background.forecasts` times one compaction's summarizer calls
    /// (fewer when forecasts share a range, none for a range already in a summary cache
    /// below `summarizer`), and about 80 `prepare` runs of CPU, each on a copy of its
    /// forecast.
    pub async fn summarize_ahead(
        &self,
        conversation: &Conversation,
        budget: Budget,
        summarizer: Arc<dyn Summarizer>,
    ) -> Result<Option<PreparedSummary>, SummaryError> {
        let config = self.config();
        if self.estimate(conversation) <= budget.share(config.background.summary_ratio) {
            return Ok(None);
        }
        let estimator = self.estimator(model_of(conversation));
        let Some(forecasts) = Forecasts::new(conversation, &estimator, budget, config) else {
            return Ok(None);
        };
        let mut chosen = self.distinct_ranges(&forecasts, budget, &summarizer).await;
        let recording = Arc::new(Recording {
            inner: summarizer,
            log: Mutex::new(Vec::new()),
        });
        let shadow = self.shadow(recording.clone());
        let runs: Vec<BoxFuture<'_, Report>> = (chosen.iter_mut())
            .map(|next| Box::pin(quiet(shadow.prepare(next, budget))) as BoxFuture<'_, Report>)
            .collect();
        join_all(runs).await;
        let log = std::mem::take(&mut *lock(&recording.log));
        let mut answers = Vec::with_capacity(log.len());
        for (request, result) in log {
            answers.push((request, result?));
        }
        tracing::debug!(
            requests = answers.len(),
            forecasts = chosen.len(),
            "summaries prepared ahead"
        );
        let forecasts = chosen.len();
        Ok((!answers.is_empty()).then_some(PreparedSummary { answers, forecasts }))
    }

    /// The forecasts to prepare: one per distinct range ④ would summarize, at most
    /// `background.forecasts`, the named forecasts' ranges first (in their order), then
    /// those of one more exchange with a new output of each size from ①'s cap down to
    /// none, the range most sizes lead to first. Of the forecasts reaching one range, the
    /// one that leaves the summary the least room is kept: its summary fits the others'.
    async fn distinct_ranges(
        &self,
        forecasts: &Forecasts<'_>,
        budget: Budget,
        summarizer: &Arc<dyn Summarizer>,
    ) -> Vec<Conversation> {
        let probe = ProbeRun::new(self, budget, summarizer);
        let mut found: Vec<Found> = Vec::new();
        for next in forecasts.named() {
            if let Some((key, room)) = probe.range_of(&next).await {
                note(&mut found, key, room, next);
            }
        }
        // By size: every range the sizes up to the cap lead to, with how many of the sizes
        // lead there (the more, the likelier) and the forecast with the least room, at
        // `at` tokens, the next size tried above being `above`.
        struct BySize {
            hits: usize,
            found: Found,
            at: u64,
            above: u64,
        }
        let mut sized: Vec<BySize> = Vec::new();
        let cap = forecasts.cap();
        for step in (0..=SIZE_STEPS).rev() {
            let (at, above) = (cap * step / SIZE_STEPS, cap * (step + 1) / SIZE_STEPS);
            let Some(next) = forecasts.sized(at) else {
                break;
            };
            let Some((key, room)) = probe.range_of(&next).await else {
                continue;
            };
            match sized.iter_mut().find(|s| s.found.key == key) {
                Some(known) => {
                    known.hits += 1;
                    if room < known.found.room {
                        (known.found.room, known.found.next) = (room, next);
                        (known.at, known.above) = (at, above);
                    }
                }
                None => {
                    let found = Found { key, room, next };
                    let hits = 1;
                    sized.push(BySize {
                        hits,
                        found,
                        at,
                        above,
                    });
                }
            }
        }
        // The room shrinks as the output grows, down to where the tail loses a message
        // and the range changes: the least room of a range lies between the size that
        // left the least and the next one tried, found by bisection. A summary made for
        // that room serves every size of the range (the cache serves a summary made
        // under a limit no larger than the one asked for).
        for range in sized.iter_mut().filter(|s| s.above <= cap) {
            let (mut lo, mut hi) = (range.at, range.above);
            for _ in 0..EDGE_STEPS {
                let mid = lo + (hi - lo) / 2;
                let Some(next) = (mid > lo).then(|| forecasts.sized(mid)).flatten() else {
                    break;
                };
                match probe.range_of(&next).await {
                    Some((key, room)) if key == range.found.key => {
                        if room < range.found.room {
                            (range.found.room, range.found.next) = (room, next);
                        }
                        lo = mid;
                    }
                    _ => hi = mid,
                }
            }
        }
        // Stable: among ranges as likely, the larger outputs' first.
        sized.sort_by_key(|s| std::cmp::Reverse(s.hits));
        for s in sized {
            note(&mut found, s.found.key, s.found.room, s.found.next);
        }
        found.truncate(self.config().background.forecasts.max(1));
        found.into_iter().map(|f| f.next).collect()
    }
}

/// Runs the engine on forecasts with a [`Probe`] summarizer.
struct ProbeRun {
    probe: Arc<Probe>,
    shadow: ContextManager,
    budget: Budget,
}

impl ProbeRun {
    fn new(manager: &ContextManager, budget: Budget, summarizer: &Arc<dyn Summarizer>) -> Self {
        let probe = Arc::new(Probe {
            id: summarizer.id(),
            log: Mutex::new(Vec::new()),
        });
        let shadow = manager.shadow(probe.clone());
        ProbeRun {
            probe,
            shadow,
            budget,
        }
    }

    /// The range ④ would summarize for `next`, and the room it leaves; `None` when the
    /// engine would not summarize.
    async fn range_of(&self, next: &Conversation) -> Option<(RangeKey, u64)> {
        let mut next = next.clone();
        // A probe never waits: it yields once, so that an executor's other tasks run
        // between the probes of a long search.
        yield_now().await;
        quiet(self.shadow.prepare(&mut next, self.budget)).await;
        range_key(&std::mem::take(&mut *lock(&self.probe.log)))
    }
}

/// One distinct range and the forecast chosen for it.
struct Found {
    key: RangeKey,
    room: u64,
    next: Conversation,
}

/// Adds a forecast reaching range `key` with `room` for its summary: a new range goes
/// last; a known one keeps the forecast with the least room.
fn note(found: &mut Vec<Found>, key: RangeKey, room: u64, next: Conversation) {
    match found.iter_mut().find(|f| f.key == key) {
        Some(known) if room < known.room => (known.room, known.next) = (room, next),
        Some(_) => {}
        None => found.push(Found { key, room, next }),
    }
}

/// Returns `Pending` once (waking itself at once), then `Ready`: lets other tasks run.
async fn yield_now() {
    let mut yielded = false;
    std::future::poll_fn(|cx| {
        if std::mem::replace(&mut yielded, true) {
            std::task::Poll::Ready(())
        } else {
            cx.waker().wake_by_ref();
            std::task::Poll::Pending
        }
    })
    .await;
}

/// A forecast's compaction is not the conversation's: its log lines would say a history
/// was replaced when none was.
fn quiet<F: std::future::Future>(future: F) -> tracing::instrument::WithDispatch<F> {
    future.with_subscriber(tracing::subscriber::NoSubscriber::default())
}
