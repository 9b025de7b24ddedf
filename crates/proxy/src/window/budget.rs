//! A request's budget: its model's window, resolved (where it came from counted, and the
//! model's name admitted as a label when that source vouches for it), less the reserve.
//! The fast path and the cascade's preparation both budget this way.

use context_cascade::Budget;
use reqwest::header::HeaderMap;

use crate::ops::metrics::Metrics;
use crate::window::discovery::{WindowSource, Windows};
use crate::window::labels::ModelLabels;

/// What budgeting needs.
pub(crate) struct Budgeting<'s> {
    pub(crate) windows: &'s Windows,
    pub(crate) labels: &'s ModelLabels,
    pub(crate) metrics: &'s Metrics,
    /// The client the window probes go through.
    pub(crate) client: &'s reqwest::Client,
    /// The upstream's base URL, which the probes ask.
    pub(crate) base: &'s str,
}

impl Budgeting<'_> {
    /// The budget for `model` and where its window came from, not noted yet (see
    /// [`Budgeting::note`]). `headers` are the client's as they go upstream, so that an
    /// upstream behind a key can answer the probes.
    pub(crate) async fn resolve(
        &self,
        headers: &HeaderMap,
        model: &str,
        reserve: u64,
    ) -> (Budget, WindowSource) {
        let (window, source) = (self.windows)
            .resolve(self.client, self.base, headers, model)
            .await;
        (self.windows.budget(model, window, source, reserve), source)
    }

    /// Notes a window used for `model`: counted by its source, and the name admitted as a
    /// label when the source vouches for it.
    pub(crate) fn note(&self, model: &str, source: WindowSource) {
        self.metrics.window_source(source.as_str());
        self.labels.admit(model, source);
    }

    /// The budget for `model`, noted.
    pub(crate) async fn budget(&self, headers: &HeaderMap, model: &str, reserve: u64) -> Budget {
        let (budget, source) = self.resolve(headers, model, reserve).await;
        self.note(model, source);
        budget
    }
}
