//! Which model names may become a metric label or a persisted calibration row.
//!
//! The model name is chosen by the client: taken as is, 300 junk names would make 300
//! Prometheus series and 300 rows. A name is admitted only once something other than the
//! client vouches for it (SPEC "Proxy state": bounded label sets): the catalog matches it,
//! the config file names its window, or the upstream reported its window. And however many
//! are vouched for, at most [`MAX_MODEL_LABELS`] are kept.

use std::collections::HashSet;
use std::sync::Mutex;

use context_cascade::catalog::{Catalog, MatchKind};

use crate::window::discovery::WindowSource;

/// The most model names that become labels.
pub(crate) const MAX_MODEL_LABELS: usize = 64;

/// The admitted model names.
pub(crate) struct ModelLabels {
    catalog: Catalog,
    known: Mutex<HashSet<String>>,
}

impl ModelLabels {
    /// Admits names the `catalog` knows, plus `restored` (rows persisted by an earlier run,
    /// which were admitted then).
    pub(crate) fn new(catalog: Catalog, restored: impl IntoIterator<Item = String>) -> Self {
        let known = restored.into_iter().take(MAX_MODEL_LABELS).collect();
        ModelLabels {
            catalog,
            known: Mutex::new(known),
        }
    }

    /// Admits `model` when the window's `source` or the catalog vouches for it (and the set
    /// has room); returns whether it is admitted.
    pub(crate) fn admit(&self, model: &str, source: WindowSource) -> bool {
        if model.is_empty() {
            return false;
        }
        let mut known = self.known.lock().unwrap_or_else(|p| p.into_inner());
        if known.contains(model) {
            return true;
        }
        // A forced window (`Flag`) says nothing about the name: the catalog is asked.
        let vouched = matches!(
            source,
            WindowSource::Config | WindowSource::Upstream | WindowSource::Catalog
        ) || (source == WindowSource::Flag
            && self.catalog.lookup(model).matched != MatchKind::Default);
        if !vouched || known.len() >= MAX_MODEL_LABELS {
            return false;
        }
        known.insert(model.to_owned());
        true
    }

    /// Whether `model` was admitted.
    pub(crate) fn is_known(&self, model: &str) -> bool {
        (self.known.lock().unwrap_or_else(|p| p.into_inner())).contains(model)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_vouched_names_are_admitted_and_the_set_is_bounded() {
        let labels = ModelLabels::new(Catalog::builtin(), ["restored".to_owned()]);
        assert!(labels.is_known("restored"));
        assert!(!labels.admit("junk-1", WindowSource::Default));
        assert!(!labels.admit("junk-2", WindowSource::Flag));
        assert!(labels.admit("gpt-4o", WindowSource::Flag));
        for i in 0..200 {
            labels.admit(&format!("m{i}"), WindowSource::Upstream);
        }
        let admitted = (0..200)
            .filter(|i| labels.is_known(&format!("m{i}")))
            .count();
        assert_eq!(admitted, MAX_MODEL_LABELS - 2);
    }
}
