//! Summaries prepared in the background, so that the turn that needs ④ does not wait for
//! an LLM summary.
//!
//! After a request is answered, if its estimate is past `background.summary_ratio`·E
//! (0.8), a job forecasts the conversation's next request and prepares the summaries its
//! compaction will ask for ([`ContextManager::summarize_ahead`]) through the proxy's
//! caching summarizer: the summary cache keys a summary by the exact messages it replaces,
//! so when the next request crosses the threshold the synchronous ④ finds it there at once.
//! A request never waits for a job, and a forecast that does not come true costs one
//! summary and nothing else (④ runs as before).
//!
//! Each job prepares for several forecasts of the next request (the new tool output at
//! each size that changes ④'s range, several outputs at once; `background.forecasts`
//! distinct ranges at most), so that the turn bringing a large output finds its summary
//! too. A request the fast path sends unparsed starts its job too: the job parses the
//! client's bytes, off the request path. With `prepared_summary_gap` the summary cache also
//! answers a range a little longer than one prepared (see `summary_cache`).
//!
//! Bounds: one job per conversation at a time (a map of the keys in flight), at most
//! `background_jobs` running at once across the proxy (a semaphore; the others wait their
//! turn off the request path), and a failed job is tried once more, then dropped. A
//! request answered while its conversation's job runs leaves its conversation as the
//! job's next one (the latest such request only): when the job ends it runs once more on
//! it, since the history has grown past what the job forecast from.
//!
//! [`ContextManager::summarize_ahead`]: context_cascade::ContextManager::summarize_ahead

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use context_cascade::format::parse;
use context_cascade::summarizer::{Summarizer, SummaryError};
use context_cascade::{Budget, ContextManager, Conversation, Format};
use tokio::sync::Semaphore;

use crate::state::summary_cache::CachingSummarizer;
use crate::state::tenancy::Tenant;

/// What a job prepares from: the request as sent, its budget and its tenant.
#[derive(Clone)]
struct Job {
    sent: Sent,
    budget: Budget,
    tenant: Tenant,
}

/// The request as it went upstream: parsed (the slow path's), or the client's bytes that
/// the fast path forwarded unparsed, parsed by the job off the request path.
#[derive(Clone)]
pub(crate) enum Sent {
    Parsed(Arc<Conversation>),
    Raw(Format, Bytes),
}

impl Sent {
    fn conversation(&self) -> Result<Arc<Conversation>, SummaryError> {
        match self {
            Sent::Parsed(conversation) => Ok(conversation.clone()),
            Sent::Raw(format, bytes) => parse(bytes, Some(*format))
                .map(Arc::new)
                .map_err(|e| SummaryError::Failed(format!("request to prepare for: {e}"))),
        }
    }
}

/// The background summary jobs of one proxy.
pub struct Background {
    /// The summary cache, used through a view bound to each job's tenant.
    summaries: Arc<CachingSummarizer>,
    /// The engine whose compaction the jobs prepare for.
    manager: Arc<ContextManager>,
    /// The conversations with a job running or waiting, each with the request answered
    /// meanwhile that the job runs on next.
    in_flight: Mutex<HashMap<String, Option<Job>>>,
    permits: Arc<Semaphore>,
    started: AtomicU64,
    prepared: AtomicU64,
    failed: AtomicU64,
    rerun: AtomicU64,
    forecasts: AtomicU64,
}

/// What the background jobs have done so far.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct BackgroundStats {
    /// Jobs started.
    pub started: u64,
    /// Jobs that prepared at least one summary.
    pub prepared: u64,
    /// Jobs that failed twice and were dropped.
    pub failed: u64,
    /// Runs started again because the conversation grew while its job ran (counted in
    /// `started` too).
    pub rerun: u64,
    /// Distinct forecasts prepared for, over all jobs (at most `background.forecasts` each).
    pub forecasts: u64,
    /// Jobs running or waiting for a permit now.
    pub in_flight: usize,
}

/// Takes a conversation's key out of the in-flight map when its job ends, however it ends
/// (a panic too), unless [`InFlight::next`] already did.
struct InFlight {
    background: Arc<Background>,
    key: String,
    released: bool,
}

impl InFlight {
    /// The request answered while the job ran, to run on next; `None` releases the key
    /// (in the same lock, so that a request answered now starts a job of its own).
    fn next(&mut self) -> Option<Job> {
        let mut in_flight = lock(&self.background.in_flight);
        let next = in_flight.get_mut(&self.key).and_then(Option::take);
        if next.is_none() {
            in_flight.remove(&self.key);
            self.released = true;
        }
        next
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        if !self.released {
            lock(&self.background.in_flight).remove(&self.key);
        }
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

impl Background {
    /// Jobs that prepare for `manager`'s compactions through the proxy's summary cache, each
    /// bound to its request's tenant, at most `jobs` at once (at least one).
    pub(crate) fn new(
        summaries: Arc<CachingSummarizer>,
        manager: Arc<ContextManager>,
        jobs: usize,
    ) -> Self {
        Background {
            summaries,
            manager,
            in_flight: Mutex::new(HashMap::new()),
            permits: Arc::new(Semaphore::new(jobs.max(1))),
            started: AtomicU64::new(0),
            prepared: AtomicU64::new(0),
            failed: AtomicU64::new(0),
            rerun: AtomicU64::new(0),
            forecasts: AtomicU64::new(0),
        }
    }

    /// The counters as they are now.
    pub fn stats(&self) -> BackgroundStats {
        BackgroundStats {
            started: self.started.load(Ordering::Relaxed),
            prepared: self.prepared.load(Ordering::Relaxed),
            failed: self.failed.load(Ordering::Relaxed),
            rerun: self.rerun.load(Ordering::Relaxed),
            forecasts: self.forecasts.load(Ordering::Relaxed),
            in_flight: lock(&self.in_flight).len(),
        }
    }

    /// Claims `key` for `job`; when a job is in flight for it already, `job` becomes its
    /// next one (replacing an older one) and `None` is returned.
    fn claim(self: &Arc<Self>, key: &str, job: Job) -> Option<(InFlight, Job)> {
        let mut in_flight = lock(&self.in_flight);
        if let Some(next) = in_flight.get_mut(key) {
            *next = Some(job);
            return None;
        }
        in_flight.insert(key.to_owned(), None);
        let claim = InFlight {
            background: self.clone(),
            key: key.to_owned(),
            released: false,
        };
        Some((claim, job))
    }
}

impl Background {
    /// Whether a request estimated at `tokens` under `budget` is past the pre-threshold
    /// (`background.summary_ratio`·E), where a job prepares for its next request.
    pub(crate) fn past_threshold(&self, tokens: u64, budget: Budget) -> bool {
        tokens > budget.share(self.manager.config().background.summary_ratio)
    }

    /// Starts a job for the conversation `key` of `tenant`, preparing from `sent` (the
    /// request as it went upstream, under `budget`), or leaves it as the running job's next.
    /// Returns at once.
    pub(crate) fn prepare_after(
        self: &Arc<Self>,
        key: &str,
        tenant: &Tenant,
        sent: Sent,
        budget: Budget,
    ) {
        let job = Job {
            sent,
            budget,
            tenant: tenant.clone(),
        };
        let Some((mut claim, mut job)) = self.claim(key, job) else {
            return;
        };
        self.started.fetch_add(1, Ordering::Relaxed);
        tokio::spawn(async move {
            let background = claim.background.clone();
            loop {
                run(&background, &job).await;
                let Some(next) = claim.next() else {
                    break;
                };
                job = next;
                background.started.fetch_add(1, Ordering::Relaxed);
                background.rerun.fetch_add(1, Ordering::Relaxed);
            }
        });
    }
}

/// One run of a job: waits for a permit (off the request path), prepares, retries once.
async fn run(background: &Arc<Background>, job: &Job) {
    let Ok(_permit) = background.permits.clone().acquire_owned().await else {
        return;
    };
    let prepare = || {
        let (manager, job) = (background.manager.clone(), job.clone());
        // The summary cache keys summaries by tenant, like the request's own would be.
        let summarizer: Arc<dyn Summarizer> =
            Arc::new(background.summaries.for_tenant(&job.tenant));
        let handle = tokio::runtime::Handle::current();
        // A job runs the engine on dozens of forecasts (tokenizing their made-up outputs
        // for a model counted exactly): on the blocking pool, not on a worker that serves
        // requests. The permit above bounds how many run at once.
        tokio::task::spawn_blocking(move || {
            let conversation = job.sent.conversation()?;
            let ahead = manager.summarize_ahead(&conversation, job.budget, summarizer);
            handle.block_on(ahead)
        })
    };
    let attempt = || async {
        prepare().await.unwrap_or_else(|e| {
            Err(SummaryError::Failed(format!(
                "background summary task ended: {e}"
            )))
        })
    };
    let outcome = match attempt().await {
        Err(error) => {
            tracing::info!(%error, "background summary failed; trying once more");
            attempt().await
        }
        done => done,
    };
    if let Ok(Some(summary)) = &outcome {
        (background.forecasts).fetch_add(summary.forecasts() as u64, Ordering::Relaxed);
    }
    record(background, outcome);
}

fn record<T>(background: &Background, outcome: Result<Option<T>, SummaryError>) {
    match outcome {
        Ok(Some(_)) => {
            background.prepared.fetch_add(1, Ordering::Relaxed);
            tracing::debug!("background summary prepared");
        }
        Ok(None) => {}
        Err(error) => {
            background.failed.fetch_add(1, Ordering::Relaxed);
            tracing::warn!(%error, "background summary failed twice; ④ will run at the threshold");
        }
    }
}

/// How many jobs at once `config` asks for, `None` when they are off: on when
/// `background_summaries` is and the summarizer is an LLM (offline summaries are computed
/// in microseconds, nothing to gain ahead).
pub(crate) fn jobs_for(config: &crate::config::ProxyConfig) -> Option<usize> {
    let llm = !matches!(
        config.summarizer.spec(),
        cascade_llm::SummarizerSpec::Offline
    );
    (config.summarizer.background && llm).then_some(config.summarizer.background_jobs)
}
