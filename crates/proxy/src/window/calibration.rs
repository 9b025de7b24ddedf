//! The token calibration per model, kept: what the provider's usage showed is folded into
//! the engine's scale, and persisted for the model names something other than the client
//! vouched for (see [`ModelLabels`]).

use std::sync::Arc;

use context_cascade::ContextManager;

use crate::state::StateStore;
use crate::window::labels::ModelLabels;

/// The engine's calibration and where it is persisted.
pub(crate) struct Calibrator {
    manager: Arc<ContextManager>,
    labels: Arc<ModelLabels>,
    store: Arc<dyn StateStore>,
}

impl Calibrator {
    pub(crate) fn new(
        manager: Arc<ContextManager>,
        labels: Arc<ModelLabels>,
        store: Arc<dyn StateStore>,
    ) -> Self {
        Calibrator {
            manager,
            labels,
            store,
        }
    }

    /// Folds the provider's count of a request (`tokens`) into `model`'s scale: `prior` and
    /// `counted` are the engine's numbers for the request sent.
    pub(crate) fn observe_sent(&self, model: &str, prior: f64, counted: u64, tokens: u64) {
        self.manager.observe_sent(model, prior, counted, tokens);
    }

    /// Persists the calibration of `model` after an observation (only for an admitted name).
    pub(crate) async fn save(&self, model: &str) {
        if !self.labels.is_known(model) {
            return;
        }
        if let Some(scale) = self.manager.calibration().get(model)
            && let Err(e) = self.store.save_scale(model, scale).await
        {
            tracing::warn!(error = %e, "could not persist the calibration");
        }
    }
}
