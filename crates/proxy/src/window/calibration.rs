//! The token calibration per model, kept: what the provider's usage showed is folded into
//! the engine's scale, and persisted for the model names something other than the client
//! vouched for (see [`ModelLabels`]).

use std::collections::HashSet;
use std::sync::{Arc, Mutex};

use context_cascade::ContextManager;

use crate::state::StateStore;
use crate::state::writes::Writes;
use crate::window::labels::ModelLabels;

/// The engine's calibration and where it is persisted.
pub(crate) struct Calibrator {
    manager: Arc<ContextManager>,
    labels: Arc<ModelLabels>,
    store: Arc<dyn StateStore>,
    /// Where the writes run: in the background, flushed at a graceful shutdown.
    writes: Writes,
    /// The models whose write is queued and has not read their scale yet: another
    /// observation of one of them is in that write already.
    queued: Mutex<HashSet<String>>,
}

impl Calibrator {
    pub(crate) fn new(
        manager: Arc<ContextManager>,
        labels: Arc<ModelLabels>,
        store: Arc<dyn StateStore>,
        writes: Writes,
    ) -> Self {
        Calibrator {
            manager,
            labels,
            store,
            writes,
            queued: Mutex::default(),
        }
    }

    /// Folds the provider's count of a request (`tokens`) into `model`'s scale: `prior` and
    /// `counted` are the engine's numbers for the request sent.
    pub(crate) fn observe_sent(&self, model: &str, prior: f64, counted: u64, tokens: u64) {
        self.manager.observe_sent(model, prior, counted, tokens);
    }

    /// Persists the calibration of `model` after an observation (only for an admitted name),
    /// in the background: a local store's write is a synced transaction, and the answer it
    /// followed had waited for it (about a millisecond a request, issue 27). A restarted
    /// proxy loses at most the observations of writes a graceful shutdown could not flush.
    /// Requests that come faster than the store writes share one write per model: a write
    /// reads the scale when it runs, so it carries every observation made before then.
    pub(crate) fn persist(self: &Arc<Self>, model: &str) {
        if !self.labels.is_known(model) || !self.queue(model) {
            return;
        }
        let (calibrator, model) = (self.clone(), model.to_owned());
        self.writes.spawn(async move {
            calibrator.queued().remove(&model);
            if let Some(scale) = calibrator.manager.calibration().get(&model)
                && let Err(e) = calibrator.store.save_scale(&model, scale).await
            {
                tracing::warn!(error = %e, "could not persist the calibration");
            }
        });
    }

    /// Marks `model`'s write queued; false when one already is.
    fn queue(&self, model: &str) -> bool {
        let mut queued = self.queued();
        !queued.contains(model) && queued.insert(model.to_owned())
    }

    fn queued(&self) -> std::sync::MutexGuard<'_, HashSet<String>> {
        self.queued.lock().unwrap_or_else(|p| p.into_inner())
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)] // test code: a failure is a test failure
    use std::path::Path;
    use std::time::Duration;

    use context_cascade::CascadeConfig;
    use context_cascade::catalog::Catalog;

    use super::*;
    use crate::state::store::SqliteStore;

    /// Observations that come before the store writes share one write, which carries the
    /// last of them; one that comes after it is written again.
    #[tokio::test(flavor = "current_thread")]
    async fn observations_before_the_write_share_it() {
        let manager = Arc::new(ContextManager::new(CascadeConfig::default()));
        let labels = Arc::new(ModelLabels::new(Catalog::builtin(), ["m".to_owned()]));
        let store = Arc::new(SqliteStore::open(Path::new(":memory:"), Default::default()).unwrap());
        let writes = Writes::default();
        let calibrator = Arc::new(Calibrator::new(
            manager.clone(),
            labels,
            store.clone(),
            writes.clone(),
        ));
        let stored = || store.calibration().unwrap();
        for real in [1_000, 1_100, 1_200] {
            calibrator.observe_sent("m", 1_000.0, 1_000, real);
            calibrator.persist("m");
        }
        // On this one thread no write has run yet: the three share the first.
        assert_eq!(writes.pending(), 1);
        assert!(writes.flush(Duration::from_secs(5)).await);
        let scale = manager.calibration().get("m").unwrap();
        assert_eq!(stored(), [("m".to_owned(), scale)]);
        calibrator.observe_sent("m", 1_000.0, 1_000, 2_000);
        calibrator.persist("m");
        assert_eq!(writes.pending(), 1);
        assert!(writes.flush(Duration::from_secs(5)).await);
        let later = manager.calibration().get("m").unwrap();
        assert_ne!(later, scale);
        assert_eq!(stored(), [("m".to_owned(), later)]);
    }
}
