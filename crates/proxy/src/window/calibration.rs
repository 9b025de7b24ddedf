//! The token calibration per model, kept: what the provider's usage showed is folded into
//! the engine's scale, and persisted for the model names something other than the client
//! vouched for (see [`ModelLabels`]).

use std::sync::Arc;

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
    pub(crate) fn persist(self: &Arc<Self>, model: &str) {
        if !self.labels.is_known(model) {
            return;
        }
        let (calibrator, model) = (self.clone(), model.to_owned());
        self.writes.spawn(async move {
            if let Some(scale) = calibrator.manager.calibration().get(&model)
                && let Err(e) = calibrator.store.save_scale(&model, scale).await
            {
                tracing::warn!(error = %e, "could not persist the calibration");
            }
        });
    }
}
