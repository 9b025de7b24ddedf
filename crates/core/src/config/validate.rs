//! [`CascadeConfig::validate`]: every value the cascade cannot work with, named by its key
//! path, checked in one place for the library, the proxy's file and the CLI's flags.

use super::CascadeConfig;

/// A setting the cascade cannot work with: where (its key path, `recovery.targets[1]`), the
/// value, and what was expected.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{key} = {value}: expected {expected}")]
pub struct ConfigError {
    /// The key path, as in a file: `layer1.headroom_ratio`, `recovery.targets[1]`.
    pub key: String,
    /// The value found, as written in a file.
    pub value: String,
    /// What the key accepts.
    pub expected: String,
}

/// Collects the first problem found.
struct Check(Result<(), ConfigError>);

impl Check {
    fn require(&mut self, ok: bool, key: impl Into<String>, value: impl ToString, expected: &str) {
        if self.0.is_ok() && !ok {
            self.0 = Err(ConfigError {
                key: key.into(),
                value: value.to_string(),
                expected: expected.to_owned(),
            });
        }
    }

    /// A share of E: above 0, at most 1.
    fn share(&mut self, key: impl Into<String>, value: f64) {
        self.require(
            value > 0.0 && value <= 1.0,
            key,
            value,
            "a share of E in (0, 1]",
        );
    }

    fn at_least_one(&mut self, key: &str, value: usize) {
        self.require(value >= 1, key, value, "at least 1");
    }
}

impl CascadeConfig {
    /// Checks every setting and returns the first that cannot work, by its key path
    /// (`recovery.targets[1] = 1.3: expected a share of E in (0, 1]`). Call it on a
    /// configuration read from outside; `Default` passes.
    ///
    /// ```
    /// let mut config = context_cascade::CascadeConfig::default();
    /// config.recovery.targets[1] = 1.3;
    /// let error = config.validate().unwrap_err();
    /// assert_eq!(error.to_string(), "recovery.targets[1] = 1.3: expected a share of E in (0, 1]");
    /// ```
    pub fn validate(&self) -> Result<(), ConfigError> {
        let mut check = Check(Ok(()));
        let l1 = &self.layer1;
        check.share(
            "layer1.single_tool_result_share",
            l1.single_tool_result_share,
        );
        let newline = l1.newline_cut_ratio;
        check.require(
            (0.0..=1.0).contains(&newline),
            "layer1.newline_cut_ratio",
            newline,
            "a share of the cut budget in [0, 1]",
        );
        check.share("layer1.headroom_ratio", l1.headroom_ratio);
        check.share("layer1.low_watermark", l1.low_watermark);
        check.require(
            l1.low_watermark <= l1.headroom_ratio,
            "layer1.low_watermark",
            l1.low_watermark,
            "at most layer1.headroom_ratio",
        );
        let recovery = &self.recovery;
        check.share("recovery.preemptive_ratio", recovery.preemptive_ratio);
        check.share("recovery.preemptive_target", recovery.preemptive_target);
        for (i, target) in recovery.targets.iter().enumerate() {
            check.share(format!("recovery.targets[{i}]"), *target);
        }
        check.at_least_one("recovery.recent_messages", recovery.recent_messages);
        check.require(
            (0.0..1.0).contains(&recovery.min_gain),
            "recovery.min_gain",
            recovery.min_gain,
            "a share of the estimate in [0, 1)",
        );
        check.at_least_one("recovery.max_calls", recovery.max_calls);
        check.at_least_one(
            "recovery.chunk_threshold_chars",
            recovery.chunk_threshold_chars,
        );
        check.at_least_one("recovery.max_chunks", recovery.max_chunks);
        let trail = &self.trail;
        check.require(
            (0.0..=1.0).contains(&trail.max_share),
            "trail.max_share",
            trail.max_share,
            "a share of E in [0, 1]",
        );
        self.check_calibration(&mut check);
        let background = &self.background;
        check.require(
            background.summary_ratio > 0.0 && background.summary_ratio <= recovery.preemptive_ratio,
            "background.summary_ratio",
            background.summary_ratio,
            "a share of E above 0 and at most recovery.preemptive_ratio",
        );
        check.require(
            background.forecasts >= 1,
            "background.forecasts",
            background.forecasts,
            "at least 1 (the proxy's summarizer.background = false turns them off)",
        );
        let gap = self.experimental.prepared_summary_gap;
        check.require(
            (0.0..1.0).contains(&gap),
            "experimental.prepared_summary_gap",
            gap,
            "a share of the summarized range from 0 (off) to below 1",
        );
        let weights = [
            ("letter", self.weights.letter),
            ("digit", self.weights.digit),
            ("whitespace", self.weights.whitespace),
            ("punctuation", self.weights.punctuation),
            ("non_ascii", self.weights.non_ascii),
            ("per_message", self.weights.per_message),
            ("per_binary_block", self.weights.per_binary_block),
        ];
        for (name, weight) in weights {
            check.require(
                weight.is_finite() && weight >= 0.0,
                format!("weights.{name}"),
                weight,
                "0 or a positive number of tokens",
            );
        }
        check.0
    }

    fn check_calibration(&self, check: &mut Check) {
        let calibration = &self.calibration;
        let tokens = calibration.prior_tokens;
        check.require(
            tokens.is_finite() && tokens >= 0.0,
            "calibration.prior_tokens",
            tokens,
            "0 (SPEC's EMA) or a positive number of tokens",
        );
        check.require(
            calibration.ema_alpha > 0.0 && calibration.ema_alpha <= 1.0,
            "calibration.ema_alpha",
            calibration.ema_alpha,
            "a smoothing factor in (0, 1]",
        );
        let (lo, hi) = calibration.observation_clamp;
        check.require(
            lo > 0.0 && lo <= hi && hi.is_finite(),
            "calibration.observation_clamp",
            format!("[{lo}, {hi}]"),
            "[low, high] with 0 < low <= high",
        );
        let margin = calibration.uncalibrated_margin;
        check.require(
            margin.is_finite() && margin > 0.0,
            "calibration.uncalibrated_margin",
            margin,
            "a positive multiplier",
        );
    }
}
