//! Summaries prepared in the background, so that the turn that needs ④ does not wait for
//! an LLM summary.
//!
//! After a request is answered, if its estimate is past `background_summary_ratio`·E
//! (0.8), a job forecasts the conversation's next request and prepares the summaries its
//! compaction will ask for ([`ContextManager::summarize_ahead`]) through the proxy's
//! caching summarizer: the summary cache keys a summary by the exact messages it replaces,
//! so when the next request crosses the threshold the synchronous ④ finds it there at once.
//! A request never waits for a job, and a forecast that does not come true costs one
//! summary and nothing else (④ runs as before).
//!
//! Bounds: one job per conversation at a time (a map of the keys in flight), at most
//! `background_jobs` running at once across the proxy (a semaphore; the others wait their
//! turn off the request path), and a failed job is tried once more, then dropped.
//!
//! [`ContextManager::summarize_ahead`]: context_cascade::ContextManager::summarize_ahead

use std::collections::HashSet;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use context_cascade::summarizer::{Summarizer, SummaryError};
use context_cascade::{Budget, Conversation, Report};
use tokio::sync::Semaphore;

use crate::server::AppState;
use crate::tenancy::TENANT;

/// Default bound on background summary jobs running at once.
pub const DEFAULT_BACKGROUND_JOBS: usize = 4;

/// The background summary jobs of one proxy.
pub struct Background {
    summarizer: Arc<dyn Summarizer>,
    in_flight: Mutex<HashSet<String>>,
    permits: Arc<Semaphore>,
    started: AtomicU64,
    prepared: AtomicU64,
    failed: AtomicU64,
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
    /// Jobs running or waiting for a permit now.
    pub in_flight: usize,
}

/// Takes a conversation's key out of the in-flight map when its job ends, however it ends.
struct InFlight {
    background: Arc<Background>,
    key: String,
}

impl Drop for InFlight {
    fn drop(&mut self) {
        lock(&self.background.in_flight).remove(&self.key);
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

impl Background {
    /// Jobs that summarize through `summarizer` (the proxy's caching one), at most `jobs`
    /// at once (at least one).
    pub fn new(summarizer: Arc<dyn Summarizer>, jobs: usize) -> Self {
        Background {
            summarizer,
            in_flight: Mutex::new(HashSet::new()),
            permits: Arc::new(Semaphore::new(jobs.max(1))),
            started: AtomicU64::new(0),
            prepared: AtomicU64::new(0),
            failed: AtomicU64::new(0),
        }
    }

    /// The counters as they are now.
    pub fn stats(&self) -> BackgroundStats {
        BackgroundStats {
            started: self.started.load(Ordering::Relaxed),
            prepared: self.prepared.load(Ordering::Relaxed),
            failed: self.failed.load(Ordering::Relaxed),
            in_flight: lock(&self.in_flight).len(),
        }
    }

    /// Claims `key` for a job; `None` when one is already in flight for it.
    fn claim(self: &Arc<Self>, key: &str) -> Option<InFlight> {
        lock(&self.in_flight)
            .insert(key.to_owned())
            .then(|| InFlight {
                background: self.clone(),
                key: key.to_owned(),
            })
    }
}

/// The hook the cascade routes call once a request is answered: starts a job for the
/// conversation `key` of `tenant` when `sent` (the request as it went upstream, under
/// `budget`, as `report` measured it) is past the pre-threshold. Returns at once.
pub(crate) fn after_answer(
    state: &Arc<AppState>,
    key: &str,
    tenant: &str,
    sent: &Conversation,
    budget: Budget,
    report: &Report,
) {
    let Some(background) = state.background() else {
        return;
    };
    let ratio = state.manager().config().background_summary_ratio;
    if report.tokens_after <= budget.share(ratio) {
        return;
    }
    let Some(claim) = background.claim(key) else {
        return;
    };
    background.started.fetch_add(1, Ordering::Relaxed);
    let (state, conversation, tenant) = (state.clone(), sent.clone(), tenant.to_owned());
    tokio::spawn(async move {
        let background = claim.background.clone();
        // Waiting for a permit happens here, off the request path.
        let Ok(_permit) = background.permits.clone().acquire_owned().await else {
            return;
        };
        let prepare = || {
            let summarizer = background.summarizer.clone();
            let ahead = state
                .manager()
                .summarize_ahead(&conversation, budget, summarizer);
            // The summary cache keys summaries by tenant, like the request's own would be.
            TENANT.scope(tenant.clone(), ahead)
        };
        let outcome = match prepare().await {
            Err(error) => {
                tracing::info!(%error, "background summary failed; trying once more");
                prepare().await
            }
            done => done,
        };
        record(&background, outcome);
        drop(claim);
    });
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

/// The jobs `config` asks for: on when `background_summaries` is and the summarizer is an
/// LLM (offline summaries are computed in microseconds, nothing to gain ahead).
pub(crate) fn for_config(
    config: &crate::config::ProxyConfig,
    summarizer: &Arc<dyn Summarizer>,
) -> Option<Arc<Background>> {
    let llm = !matches!(config.summarizer, cascade_llm::SummarizerSpec::Offline);
    (config.background_summaries && llm)
        .then(|| Arc::new(Background::new(summarizer.clone(), config.background_jobs)))
}
