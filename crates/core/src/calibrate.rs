//! EMA calibration of the token estimate, per model (SPEC.md "Token estimation").
//!
//! Whenever a provider reports the real prompt tokens of a request whose prior is known,
//! `obs = real / prior` (clamped) updates the model's scale: the first observation is taken
//! as is, later ones with `scale = α·obs + (1 − α)·scale`. Until then estimates carry a
//! safety margin (and a catalog entry's starting scale, when it has one), so an uncalibrated
//! estimate errs on the side that does not overflow.

use std::collections::BTreeMap;

use crate::config::CascadeConfig;

/// One model's calibration state.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Scale {
    /// real tokens / prior tokens.
    pub scale: f64,
    /// Observations folded in so far.
    pub observations: u64,
}

/// Calibration for every model seen, keyed by model id.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Calibration {
    models: BTreeMap<String, Scale>,
}

impl Calibration {
    pub fn new() -> Self {
        Self::default()
    }

    /// Folds in one observation: the provider counted `real` tokens where the prior said
    /// `prior`. Returns the new scale.
    pub fn observe(&mut self, model: &str, prior: f64, real: u64, config: &CascadeConfig) -> f64 {
        if prior <= 0.0 || real == 0 {
            return self.get(model).map_or(1.0, |s| s.scale);
        }
        let (lo, hi) = config.ema_clamp;
        let obs = (real as f64 / prior).clamp(lo, hi);
        let entry = self.models.entry(model.to_owned()).or_insert(Scale {
            scale: obs,
            observations: 0,
        });
        if entry.observations > 0 {
            entry.scale = config.ema_alpha * obs + (1.0 - config.ema_alpha) * entry.scale;
        }
        entry.observations += 1;
        tracing::debug!(
            model,
            prior,
            real,
            scale = entry.scale,
            "calibrated token estimate"
        );
        entry.scale
    }

    /// The calibration of a model, if it has been observed.
    pub fn get(&self, model: &str) -> Option<Scale> {
        self.models.get(model).copied()
    }

    /// Restores a persisted scale.
    pub fn set(&mut self, model: &str, scale: Scale) {
        self.models.insert(model.to_owned(), scale);
    }

    /// Every model's scale.
    pub fn models(&self) -> impl Iterator<Item = (&str, Scale)> {
        self.models.iter().map(|(k, v)| (k.as_str(), *v))
    }

    /// The multiplier to apply to a prior for `model`: its calibrated scale, or before any
    /// observation the starting scale (default 1) times the safety margin.
    pub fn multiplier(
        &self,
        model: &str,
        starting_scale: Option<f64>,
        config: &CascadeConfig,
    ) -> f64 {
        match self.get(model) {
            Some(s) => s.scale,
            None => starting_scale.unwrap_or(1.0) * config.uncalibrated_margin,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn first_observation_is_taken_then_smoothed() {
        let config = CascadeConfig::default();
        let mut c = Calibration::new();
        assert!((c.observe("m", 1000.0, 1200, &config) - 1.2).abs() < 1e-12);
        // 0.3·1.5 + 0.7·1.2 = 1.29
        assert!((c.observe("m", 1000.0, 1500, &config) - 1.29).abs() < 1e-12);
        assert_eq!(c.get("m").map(|s| s.observations), Some(2));
    }

    #[test]
    fn observations_are_clamped() {
        let config = CascadeConfig::default();
        let mut c = Calibration::new();
        assert_eq!(c.observe("m", 100.0, 100_000, &config), 4.0);
        let mut d = Calibration::new();
        assert_eq!(d.observe("m", 100_000.0, 1, &config), 0.25);
    }

    #[test]
    fn converges_to_the_true_ratio() {
        let config = CascadeConfig::default();
        let mut c = Calibration::new();
        c.observe("m", 1000.0, 800, &config);
        for _ in 0..20 {
            c.observe("m", 1000.0, 1190, &config);
        }
        assert!((c.get("m").unwrap().scale - 1.19).abs() < 0.01);
    }

    #[test]
    fn uncalibrated_estimates_carry_the_margin() {
        let config = CascadeConfig::default();
        let c = Calibration::new();
        assert!((c.multiplier("x", None, &config) - 1.1).abs() < 1e-12);
        assert!((c.multiplier("claude", Some(1.6), &config) - 1.76).abs() < 1e-12);
    }
}
