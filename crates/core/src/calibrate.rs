//! EMA calibration of the token estimate, per model (SPEC.md "Token estimation").
//!
//! Whenever a provider reports the real prompt tokens of a request whose prior is known,
//! `obs = real / prior` (clamped) updates the model's scale: the first observation is taken
//! as is, later ones with `scale = α·obs + (1 − α)·scale`. Until then estimates carry a
//! safety margin (and a catalog entry's starting scale, when it has one), so an uncalibrated
//! estimate errs on the side that does not overflow.
//!
//! That rule weighs a one-line first request like a 100,000-token one, and the first
//! requests of a session (system prompt, task) have another mix of text than the tool
//! output that follows. With [`CalibrationConfig::prior_tokens`](crate::CalibrationConfig::prior_tokens) > 0 (the default) the scale is
//! instead a size-weighted ratio, `Σ real / Σ prior`, each term decaying by `1 − α` per
//! observation, in which the starting scale counts as an observation of that many tokens.
//! On the fixtures (docs/benchmarks.md, section 3) that brings the error after 3 observations
//! from a median of 5.2% to 2.8% and leaves the rolling case as good (0.1%).
//!
//! Under both rules one odd answer cannot poison the scale: once calibrated, an observation
//! outside [0.5, 2]× of the scale waits for the next one to confirm it (SPEC.md).

use std::collections::BTreeMap;

use crate::config::CascadeConfig;
use crate::estimate::counter::MODELS_KEPT;

/// One model's calibration state: all of it, so that a scale persisted and read back (a
/// restart, another replica) folds the next observation exactly as the process that wrote it
/// would have.
#[derive(Debug, Clone, Copy, PartialEq, Default, serde::Serialize, serde::Deserialize)]
pub struct Scale {
    /// real tokens / prior tokens.
    pub scale: f64,
    /// Observations folded in so far.
    pub observations: u64,
    /// Size-weighted rule only: the decayed `Σ prior` behind `scale`; 0 when unknown (a
    /// scale written before it was kept), which weighs as the starting scale does.
    #[serde(default)]
    pub weight: f64,
}

/// Calibration for every model seen, keyed by model id.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Calibration {
    models: BTreeMap<String, Scale>,
    /// An observation far from a model's scale, waiting for the next one to confirm it.
    /// Absent from forms written before it existed; not persisted by the proxy (a restart
    /// forgets an unconfirmed outlier, which is the safe side).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    held: BTreeMap<String, Held>,
}

/// A held-back observation: the prior it was made on and its clamped ratio.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
struct Held {
    prior: f64,
    obs: f64,
}

/// How far an observation may lie from the scale (either way) and still count at once
/// (SPEC: [0.5, 2]×).
const OUTLIER_FACTOR: f64 = 2.0;

/// Whether `obs` lies within [1/OUTLIER_FACTOR, OUTLIER_FACTOR]× of `reference`.
fn near(obs: f64, reference: f64) -> bool {
    let ratio = obs / reference;
    (1.0 / OUTLIER_FACTOR..=OUTLIER_FACTOR).contains(&ratio)
}

impl Calibration {
    /// An empty calibration: no model observed yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Folds in one observation: the provider counted `real` tokens where the prior said
    /// `prior`. `starting_scale` is the model's catalog scale (1 when `None`), which the
    /// size-weighted rule starts from. Returns the new scale.
    ///
    /// Once a model is calibrated, an observation outside [0.5, 2]× of its scale is held
    /// back: it counts only when the next observation confirms it (lies within [0.5, 2]× of
    /// the held one), and then both count, in order. One absurd usage report would otherwise
    /// drive the scale to its clamp, and the proxy persists it.
    pub fn observe(
        &mut self,
        model: &str,
        prior: f64,
        real: u64,
        starting_scale: Option<f64>,
        config: &CascadeConfig,
    ) -> f64 {
        let calibrated = self
            .get(model)
            .filter(|s| s.observations > 0)
            .map(|s| s.scale);
        if prior <= 0.0 || real == 0 {
            return calibrated.unwrap_or(1.0);
        }
        self.make_room(model);
        let (lo, hi) = config.calibration.observation_clamp;
        let obs = (real as f64 / prior).clamp(lo, hi);
        let held = self.held.remove(model);
        if let Some(held) = held.filter(|h| near(obs, h.obs)) {
            self.fold(model, held.prior, held.obs, starting_scale, config);
        } else if let Some(scale) = calibrated.filter(|scale| !near(obs, *scale)) {
            tracing::debug!(
                model = ?crate::logged::clipped(model),
                prior,
                real,
                scale,
                "token count far from the calibrated scale: held until confirmed"
            );
            self.held.insert(model.to_owned(), Held { prior, obs });
            return scale;
        }
        self.fold(model, prior, obs, starting_scale, config)
    }

    /// Before a model not seen yet is added: at [`MODELS_KEPT`] models (their names come
    /// from clients), the one with the fewest observations goes.
    fn make_room(&mut self, model: &str) {
        if self.models.len() < MODELS_KEPT || self.models.contains_key(model) {
            return;
        }
        let fewest = (self.models.iter())
            .min_by_key(|(_, s)| s.observations)
            .map(|(name, _)| name.clone());
        if let Some(name) = fewest {
            self.models.remove(&name);
            self.held.remove(&name);
        }
    }

    /// Applies one (clamped) observation to the model's scale, by the configured rule.
    fn fold(
        &mut self,
        model: &str,
        prior: f64,
        obs: f64,
        starting_scale: Option<f64>,
        config: &CascadeConfig,
    ) -> f64 {
        let pseudo_tokens = config.calibration.prior_tokens;
        let entry = self.models.entry(model.to_owned()).or_insert(Scale {
            scale: if pseudo_tokens > 0.0 {
                starting_scale.unwrap_or(1.0)
            } else {
                obs
            },
            observations: 0,
            weight: 0.0,
        });
        if pseudo_tokens > 0.0 {
            // Σ real / Σ prior with the (clamped) observation standing for `real`.
            let keep = 1.0 - config.calibration.ema_alpha;
            let weight = if entry.weight > 0.0 {
                entry.weight
            } else {
                pseudo_tokens
            };
            let real_sum = keep * entry.scale * weight + obs * prior;
            entry.weight = keep * weight + prior;
            entry.scale = real_sum / entry.weight;
        } else if entry.observations > 0 {
            entry.scale = config.calibration.ema_alpha * obs
                + (1.0 - config.calibration.ema_alpha) * entry.scale;
        }
        entry.observations += 1;
        tracing::debug!(
            model = ?crate::logged::clipped(model),
            prior,
            ratio = obs,
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
        self.held.remove(model);
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
            None => starting_scale.unwrap_or(1.0) * config.calibration.uncalibrated_margin,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// SPEC's rule: the first observation, then an EMA (no prior tokens).
    fn ema() -> CascadeConfig {
        let mut config = CascadeConfig::default();
        config.calibration.prior_tokens = 0.0;
        config
    }

    #[test]
    fn first_observation_is_taken_then_smoothed() {
        let config = ema();
        let mut c = Calibration::new();
        assert!((c.observe("m", 1000.0, 1200, None, &config) - 1.2).abs() < 1e-12);
        // 0.3·1.5 + 0.7·1.2 = 1.29
        assert!((c.observe("m", 1000.0, 1500, None, &config) - 1.29).abs() < 1e-12);
        assert_eq!(c.get("m").map(|s| s.observations), Some(2));
    }

    #[test]
    fn observations_are_clamped() {
        let config = ema();
        let mut c = Calibration::new();
        assert_eq!(c.observe("m", 100.0, 100_000, None, &config), 4.0);
        let mut d = Calibration::new();
        assert_eq!(d.observe("m", 100_000.0, 1, None, &config), 0.25);
    }

    #[test]
    fn converges_to_the_true_ratio() {
        let config = CascadeConfig::default();
        let mut c = Calibration::new();
        c.observe("m", 1000.0, 800, None, &config);
        for _ in 0..20 {
            c.observe("m", 1000.0, 1190, None, &config);
        }
        assert!((c.get("m").unwrap().scale - 1.19).abs() < 0.01);
    }

    fn weighted() -> CascadeConfig {
        let mut config = CascadeConfig::default();
        config.calibration.prior_tokens = 10_000.0;
        config
    }

    #[test]
    fn size_weighted_rule_barely_moves_on_a_tiny_request() {
        let config = weighted();
        let mut c = Calibration::new();
        // 100 tokens at ratio 2 against a starting scale of 1 worth 10,000 tokens.
        let scale = c.observe("m", 100.0, 200, None, &config);
        assert!((scale - (10_000.0 * 0.7 + 200.0) / (10_000.0 * 0.7 + 100.0)).abs() < 1e-12);
        assert!(scale < 1.02);
        // A large request moves it most of the way.
        let scale = c.observe("m", 100_000.0, 130_000, None, &config);
        assert!(scale > 1.25 && scale < 1.3, "{scale}");
    }

    #[test]
    fn size_weighted_rule_starts_from_the_catalog_scale_and_converges() {
        let config = weighted();
        let mut c = Calibration::new();
        let first = c.observe("claude", 500.0, 500, Some(1.6), &config);
        assert!(first > 1.55, "{first}");
        for _ in 0..30 {
            c.observe("claude", 20_000.0, 25_000, Some(1.6), &config);
        }
        assert!((c.get("claude").unwrap().scale - 1.25).abs() < 0.01);
    }

    #[test]
    fn a_scale_read_back_folds_the_next_observation_as_the_live_one() {
        let config = weighted();
        let mut live = Calibration::new();
        live.observe("m", 2_000.0, 2_600, None, &config);
        live.observe("m", 50_000.0, 61_000, None, &config);
        // Persisted and restored elsewhere (a restart, another replica): the whole state.
        let mut restored = Calibration::new();
        restored.set("m", live.get("m").unwrap());
        let a = live.observe("m", 8_000.0, 9_000, None, &config);
        let b = restored.observe("m", 8_000.0, 9_000, None, &config);
        assert_eq!(a, b);
        assert!(live.get("m").unwrap().weight > 0.0);
    }

    #[test]
    fn restored_scale_weighs_as_the_starting_scale() {
        let config = weighted();
        let mut c = Calibration::new();
        c.set(
            "m",
            Scale {
                scale: 1.5,
                observations: 9,
                weight: 0.0,
            },
        );
        let scale = c.observe("m", 10_000.0, 10_000, None, &config);
        // (0.7·10,000·1.5 + 10,000) / (0.7·10,000 + 10,000)
        assert!((scale - 20_500.0 / 17_000.0).abs() < 1e-12);
        assert_eq!(c.get("m").map(|s| s.observations), Some(10));
    }

    /// Both rules: the EMA (SPEC's default) and the size-weighted one.
    fn both_rules() -> [CascadeConfig; 2] {
        [ema(), weighted()]
    }

    #[test]
    fn one_outlier_is_ignored() {
        for config in both_rules() {
            let mut c = Calibration::new();
            c.observe("m", 10_000.0, 12_000, None, &config);
            let calibrated = c.get("m").unwrap();
            // One absurd usage report (×40, clamped to 4): held back, the scale stays.
            let held = c.observe("m", 10_000.0, 400_000, None, &config);
            assert_eq!(held, calibrated.scale);
            assert_eq!(c.get("m"), Some(calibrated));
            // The next observation does not confirm it: it counts, the outlier never does.
            let next = c.observe("m", 10_000.0, 12_000, None, &config);
            let mut without = Calibration::new();
            without.observe("m", 10_000.0, 12_000, None, &config);
            let expected = without.observe("m", 10_000.0, 12_000, None, &config);
            assert_eq!(next, expected);
            assert_eq!(c.get("m").unwrap().observations, 2);
            // Far below counts as far too.
            assert_eq!(c.observe("m", 10_000.0, 3_000, None, &config), expected);
        }
    }

    #[test]
    fn two_consistent_outliers_move_the_scale() {
        for config in both_rules() {
            let mut c = Calibration::new();
            c.observe("m", 10_000.0, 10_000, None, &config);
            assert_eq!(c.observe("m", 10_000.0, 30_000, None, &config), 1.0);
            // Confirmed (within [0.5, 2]× of the held one): both count, in order. EMA:
            // 0.3·3 + 0.7·1 = 1.6, then 0.3·2.8 + 0.7·1.6 = 1.96. Size-weighted (10,000
            // pseudo-tokens at 1, then 1.0 over 10,000): Σ real 57,330 / Σ prior 25,330.
            let moved = c.observe("m", 10_000.0, 28_000, None, &config);
            let expected = if config.calibration.prior_tokens > 0.0 {
                57_330.0 / 25_330.0
            } else {
                1.96
            };
            assert!((moved - expected).abs() < 1e-9, "{moved} vs {expected}");
            assert!(moved > 1.5, "{moved}");
            assert_eq!(c.get("m").unwrap().observations, 3);
        }
    }

    #[test]
    fn an_outlier_replaced_by_another_is_not_confirmed() {
        for config in both_rules() {
            let mut c = Calibration::new();
            c.observe("m", 10_000.0, 10_000, None, &config);
            c.observe("m", 10_000.0, 40_000, None, &config);
            // Far the other way: not a confirmation, and itself held back.
            assert_eq!(c.observe("m", 10_000.0, 2_500, None, &config), 1.0);
            assert_eq!(c.observe("m", 10_000.0, 10_000, None, &config), 1.0);
            assert_eq!(c.get("m").unwrap().observations, 2);
        }
    }

    #[test]
    fn the_first_observation_is_never_held_back() {
        for config in both_rules() {
            let mut c = Calibration::new();
            let first = c.observe("m", 1_000.0, 3_000, Some(1.0), &config);
            assert!(first > 1.0, "{first}");
            assert_eq!(c.get("m").unwrap().observations, 1);
        }
    }

    #[test]
    fn the_serialized_form_reads_old_and_new() {
        let old = r#"{"models":{"m":{"scale":1.5,"observations":3}}}"#;
        let c: Calibration = serde_json::from_str(old).unwrap();
        assert_eq!(c.get("m").map(|s| s.scale), Some(1.5));
        let mut held = c.clone();
        held.observe("m", 1_000.0, 4_000, None, &CascadeConfig::default());
        let text = serde_json::to_string(&held).unwrap();
        let back: Calibration = serde_json::from_str(&text).unwrap();
        assert_eq!(back, held);
    }

    #[test]
    fn uncalibrated_estimates_carry_the_margin() {
        let config = CascadeConfig::default();
        let c = Calibration::new();
        assert!((c.multiplier("x", None, &config) - 1.1).abs() < 1e-12);
        assert!((c.multiplier("claude", Some(1.6), &config) - 1.76).abs() < 1e-12);
    }

    #[test]
    fn models_are_bounded_and_the_least_observed_goes_first() {
        let config = CascadeConfig::default();
        let mut c = Calibration::new();
        for _ in 0..3 {
            c.observe("kept", 1000.0, 1200, None, &config);
        }
        for i in 0..MODELS_KEPT + 10 {
            c.observe(&format!("junk-{i}"), 1000.0, 1100, None, &config);
        }
        assert!(c.models.len() <= MODELS_KEPT);
        assert!(c.get("kept").is_some(), "the most observed model stays");
    }
}
