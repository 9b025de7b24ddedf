//! The circuit breaker: after a run of failed summaries the endpoint is skipped for a while,
//! so a dead summarizer does not add its timeouts to every request.

use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Consecutive failures and, once they reach the threshold, until when calls are skipped.
#[derive(Debug)]
pub(crate) struct Breaker {
    threshold: u32,
    cooldown: Duration,
    state: Mutex<State>,
}

#[derive(Debug, Default)]
struct State {
    consecutive_failures: u32,
    open_until: Option<Instant>,
}

impl Breaker {
    pub(crate) fn new(threshold: u32, cooldown: Duration) -> Self {
        Breaker {
            threshold: threshold.max(1),
            cooldown,
            state: Mutex::new(State::default()),
        }
    }

    /// `Some(remaining)` while the breaker is open: the call must be skipped.
    pub(crate) fn open_for(&self) -> Option<Duration> {
        let state = self.lock();
        let until = state.open_until?;
        until.checked_duration_since(Instant::now())
    }

    /// A summary came back: the run of failures is over.
    pub(crate) fn succeeded(&self) {
        let mut state = self.lock();
        state.consecutive_failures = 0;
        state.open_until = None;
    }

    /// A summary failed; returns true when this failure opened the breaker. After the
    /// cool-down the next call is let through, and if it fails too the breaker opens again at
    /// once (the failure count is only reset by a success).
    pub(crate) fn failed(&self) -> bool {
        let mut state = self.lock();
        state.consecutive_failures = state.consecutive_failures.saturating_add(1);
        if state.consecutive_failures >= self.threshold {
            state.open_until = Instant::now().checked_add(self.cooldown);
            return true;
        }
        false
    }

    /// A poisoned lock only means another call panicked mid-update; the counters are still
    /// meaningful, so keep using them.
    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn opens_at_the_threshold_and_a_success_closes_it() {
        let breaker = Breaker::new(3, Duration::from_secs(3600));
        assert!(!breaker.failed());
        assert!(!breaker.failed());
        assert!(breaker.open_for().is_none());
        assert!(breaker.failed());
        assert!(breaker.open_for().is_some());
        breaker.succeeded();
        assert!(breaker.open_for().is_none());
    }

    #[test]
    fn a_success_resets_the_run() {
        let breaker = Breaker::new(2, Duration::from_secs(3600));
        assert!(!breaker.failed());
        breaker.succeeded();
        assert!(!breaker.failed());
        assert!(breaker.open_for().is_none());
    }

    #[test]
    fn zero_cooldown_lets_the_next_call_through() {
        let breaker = Breaker::new(1, Duration::ZERO);
        assert!(breaker.failed());
        assert!(breaker.open_for().is_none());
    }
}
