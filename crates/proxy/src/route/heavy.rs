//! Bounded concurrency of the heavy stages. A request's body is bytes (430 kB for a 100K-token
//! history); parsed into a `serde_json::Value`, then a conversation, compacted and written
//! out again, it takes several times that for as long as the work runs. With 200 clients at
//! once, every request in those stages together took 600 MB (docs/benchmarks.md, "Hardening").
//! The work is CPU-bound, so running more of it at once than there are cores finishes
//! nothing sooner: a request waits for a [`Turn`] (holding only its bytes), runs admission,
//! parsing, preparation and the writing of its upstream body, and gives the turn back
//! before it waits for the upstream (which may take minutes, and needs no CPU).

use std::sync::{Arc, Mutex};

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// The turns at the heavy stages: as many as the machine has cores.
pub(crate) struct HeavyStages {
    turns: Arc<Semaphore>,
}

impl HeavyStages {
    /// `turns` requests at a time in the heavy stages (at least one).
    pub(crate) fn new(turns: usize) -> Self {
        HeavyStages {
            turns: Arc::new(Semaphore::new(turns.max(1))),
        }
    }

    /// One turn per core the process may use.
    pub(crate) fn per_core() -> Self {
        Self::new(std::thread::available_parallelism().map_or(2, |n| n.get()))
    }

    /// The turns themselves, for background work as heavy as a request's (the sticky
    /// record's encoding).
    pub(crate) fn semaphore(&self) -> Arc<Semaphore> {
        self.turns.clone()
    }

    /// Waits for a turn. A request that gives up (its client went away) leaves the queue.
    pub(crate) async fn turn(&self) -> Turn {
        let turn = Turn {
            turns: self.turns.clone(),
            permit: Mutex::new(None),
        };
        turn.again().await;
        turn
    }

    /// How many turns are free now.
    #[cfg(test)]
    fn free(&self) -> usize {
        self.turns.available_permits()
    }
}

/// One request's turn at the heavy stages, held from admission until its first upstream
/// body is written ([`Turn::end`]), or until the request ends, whichever comes first.
pub(crate) struct Turn {
    turns: Arc<Semaphore>,
    permit: Mutex<Option<OwnedSemaphorePermit>>,
}

impl Turn {
    /// Gives the turn back (the request now only waits); a second call does nothing.
    pub(crate) fn end(&self) {
        drop(self.lock().take());
    }

    /// Waits for a turn again after [`Turn::end`] (the fast path's request overflowed and
    /// goes to the cascade); holding one already, does nothing.
    pub(crate) async fn again(&self) {
        if self.lock().is_some() {
            return;
        }
        // The semaphore is never closed: `None` cannot happen, and would only mean ungated.
        let permit = self.turns.clone().acquire_owned().await.ok();
        *self.lock() = permit;
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Option<OwnedSemaphorePermit>> {
        self.permit.lock().unwrap_or_else(|p| p.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_request_waits_for_a_turn_and_gives_it_back_once() {
        let heavy = HeavyStages::new(1);
        let first = heavy.turn().await;
        assert_eq!(heavy.free(), 0);
        let waiting = tokio::time::timeout(std::time::Duration::from_millis(20), heavy.turn());
        assert!(
            waiting.await.is_err(),
            "no second turn while the first is held"
        );
        first.end();
        first.end();
        assert_eq!(heavy.free(), 1);
        let second = heavy.turn().await;
        drop(second);
        drop(first);
        assert_eq!(heavy.free(), 1, "ending twice gave back one turn");
        let third = heavy.turn().await;
        third.end();
        third.again().await;
        third.again().await;
        assert_eq!(heavy.free(), 0, "one turn taken again");
        drop(third);
        assert_eq!(heavy.free(), 1);
    }
}
