//! The cascade's settings (SPEC.md "Budget") as one schema, grouped by the part of the
//! cascade each group tunes, and the budget every share is taken of.
//!
//! The same schema is the library's [`CascadeConfig`], the `[cascade]` table of the proxy's
//! file and what the CLI's flags set: it is read with serde (every key optional, an unknown
//! key an error naming it) and checked by [`CascadeConfig::validate`].
//!
//! ```
//! use context_cascade::CascadeConfig;
//!
//! let config: CascadeConfig = toml::from_str("[layer1]\nheadroom_ratio = 0.8").unwrap();
//! assert_eq!(config.layer1.headroom_ratio, 0.8);
//! assert!(config.validate().is_ok());
//! let typo = toml::from_str::<CascadeConfig>("[layer1]\nheadroom = 0.8");
//! assert!(typo.unwrap_err().to_string().contains("unknown field `headroom`"));
//! ```
//!
//! `Default` gives SPEC's values except where a measured choice did better; each such
//! default names SPEC's value as its alternative: `layer1.compact_short_of_watermark`
//! (SPEC: `true`), `layer1.low_watermark` (SPEC: 0.60) and `recovery.preemptive_target`
//! (SPEC: 0.75); [`CascadeConfig::spec`] sets all three back. `calibration.prior_tokens`
//! stays SPEC's (0): the size-weighted rule is better on Claude's sessions but worse on a
//! small model's short requests (see its doc).

mod policies;
mod validate;

use crate::estimate::Weights;
use crate::remember::RememberPolicy;
use crate::settings::{Documented, KeyDoc};
use crate::tool_names::ToolPolicy;
use crate::trail::TrailConfig;

pub use policies::ToolLists;
pub use validate::ConfigError;

/// Every tunable of the cascade, by group (at most ten top-level keys).
#[derive(Debug, Clone, Default, serde::Serialize, serde::Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct CascadeConfig {
    /// Layer 1, before every call: ① one tool result's cut and ② compacting old results.
    pub layer1: Layer1Config,
    /// Layer 2/3, when the request is still too large or the provider overflowed: the
    /// preemptive threshold, ③ pruning, ④ summaries, ⑤ and the retry loop.
    pub recovery: RecoveryConfig,
    /// What every removal leaves behind: the trail's budget and limits.
    pub trail: TrailConfig,
    /// How the token estimate learns each model's scale from the provider's counts.
    pub calibration: CalibrationConfig,
    /// ④'s summaries prepared ahead, between turns (`ContextManager::summarize_ahead`).
    pub background: BackgroundConfig,
    /// The per-class prior of the estimate (tokens per character class).
    pub weights: Weights,
    /// Which tool results ② may compact.
    #[serde(with = "policies::tools")]
    pub tools: ToolPolicy,
    /// Which user messages are remember requests (pinned automatically).
    #[serde(with = "policies::remember")]
    pub remember: RememberPolicy,
    /// Settings that only serve a measurement; their defaults leave the output as without
    /// them.
    pub experimental: ExperimentalConfig,
}

crate::settings_group! {
    /// Layer 1 (SPEC "Layer 1"): ① and ②, before every call.
    pub struct Layer1Config {
        /// ① a single tool result may take at most this share of E.
        pub single_tool_result_share: f64 = 0.50,
        /// ① cuts at the last newline when it lies past this share of the cut budget.
        pub newline_cut_ratio: f64 = 0.70,
        /// ② triggers when the estimate exceeds this share of E.
        pub headroom_ratio: f64 = 0.75,
        /// ② compacts down to this share of E (hysteresis). Default 0.45, measured cheaper
        /// than SPEC's 0.60: compacting deeper and less often rewrites the cached prefix
        /// fewer times, 0.90× the billed cost at 128K and 0.94× at 32K over every fixture,
        /// every session fitting (`bench_report --cost`, docs/benchmarks.md §13).
        pub low_watermark: f64 = 0.45,
        /// ② compacts even when all it may compact cannot bring the total down to the low
        /// watermark (SPEC's rule, `true`). `false` (the default, measured better): ② then
        /// compacts nothing while the request is under the preemptive threshold and leaves
        /// the history to ③ there, so that it does not rewrite the prefix on every call; with
        /// `recovery.preemptive_target` at the low watermark it keeps more of a provider's
        /// prompt cache at equal fit over every fixture at 32K, 64K and 128K (issue 15;
        /// `cargo run --release -p cascade-bench --bin cache_rules`, docs/benchmarks.md).
        pub compact_short_of_watermark: bool = false,
    }
}

crate::settings_group! {
    /// Layer 2/3 (SPEC "Layer 2", "Layer 3", "The retry loop"): ③–⑤ and the retry loop.
    pub struct RecoveryConfig {
        /// shouldPreemptiveCompact: Layer 2/3 run before the call when the estimate is
        /// above this share of E.
        pub preemptive_ratio: f64 = 0.90,
        /// The target, as a share of E, of the first recovery attempt when it runs before a
        /// call, not after an overflow. Default 0.45 (the low watermark, measured better): ③
        /// cuts once to where ② would have, and fires less often than at SPEC's value, 0.75
        /// (`targets[0]`), each time rewriting the prefix. After an overflow `targets` apply.
        pub preemptive_target: f64 = 0.45,
        /// Targets of the recovery attempts 1, 2 and 3, as shares of E.
        pub targets: [f64; 3] = [0.75, 0.60, 0.50],
        /// ③ keeps at most this many recent messages (and at most a third of the history).
        pub recent_messages: usize = 6,
        /// A recovery step counts only if it frees at least this share of the estimate.
        pub min_gain: f64 = 0.10,
        /// The retry loop makes at most this many LLM calls.
        pub max_calls: usize = 5,
        /// ④ splits summarizer input above this many characters.
        pub chunk_threshold_chars: usize = 50_000,
        /// ④ uses at most this many chunks.
        pub max_chunks: usize = 4,
    }
}

crate::settings_group! {
    /// The token scale learnt from the provider's counts (SPEC "Token estimation").
    pub struct CalibrationConfig {
        /// 0 (the default) is SPEC's rule: the first observation is the scale, later ones an
        /// EMA with `ema_alpha`. Above 0, the size-weighted scale: `Σ real / Σ prior`,
        /// decaying by `1 − ema_alpha` per observation, in which the starting scale counts as
        /// this many prior tokens, so that a small request moves it little. At 32,000 it is
        /// better on Claude's sessions (error after 3 observations, median / p95: 1.2% / 6.1%
        /// against 3.2% / 7.3%, docs/benchmarks.md §3, §11) and worse behind a small local
        /// model whose requests are short: on SmolLM2 (requests of 113–3,000 tokens, scale
        /// 1.2) it was still 10.1% low after 3 turns (EMA: 9.0%) and 2 of 8 replayed turns
        /// overflowed the server's window (EMA: none).
        pub prior_tokens: f64 = 0.0,
        /// The EMA's smoothing factor (with `prior_tokens`, the decay is `1 − ema_alpha`).
        pub ema_alpha: f64 = 0.3,
        /// Observations (real / prior) are clamped to this range.
        pub observation_clamp: (f64, f64) = (0.25, 4.0),
        /// Estimates are multiplied by this until the model's first calibration.
        pub uncalibrated_margin: f64 = 1.1,
    }
}

crate::settings_group! {
    /// ④'s summaries prepared ahead, between turns.
    pub struct BackgroundConfig {
        /// Above this share of E (and at most `recovery.preemptive_ratio`), ④'s summaries for
        /// the next request may be prepared ahead (`ContextManager::summarize_ahead`).
        pub summary_ratio: f64 = 0.80,
        /// How many distinct next requests (④ ranges) are prepared for at most, each costing
        /// one compaction's summarizer calls.
        pub forecasts: usize = 4,
    }
}

crate::settings_group! {
    /// Settings that serve a measurement; their defaults are the plain cascade's behaviour.
    pub struct ExperimentalConfig {
        /// A summary prepared ahead for a shorter range may stand in for ④'s when the
        /// messages past it are at most this share of the range
        /// (`PreparedSummaries::with_gap_share`): the turn does not wait, and those messages
        /// are named by the trail alone. 0, the default: only the exact range's summary, so
        /// the output is the synchronous run's (docs/benchmarks.md §8).
        pub prepared_summary_gap: f64 = 0.0,
    }
}

impl CascadeConfig {
    /// SPEC's values where a measured default differs from them: ② compacts even when it
    /// cannot reach its low watermark, which is 0.60, and ③ before a call cuts to
    /// `targets[0]`. Every other key keeps its default.
    ///
    /// ```
    /// use context_cascade::CascadeConfig;
    ///
    /// let spec = CascadeConfig::spec();
    /// assert_eq!(spec.layer1.low_watermark, 0.60);
    /// assert_eq!(spec.recovery.preemptive_target, 0.75);
    /// assert!(spec.validate().is_ok());
    /// ```
    pub fn spec() -> Self {
        let mut config = Self::default();
        config.layer1.compact_short_of_watermark = true;
        config.layer1.low_watermark = 0.60;
        config.recovery.preemptive_target = config.recovery.targets[0];
        config
    }
}

impl Documented for CascadeConfig {
    fn keys() -> Vec<KeyDoc> {
        vec![
            KeyDoc::group::<Layer1Config>("layer1", "① and ②, before every call."),
            KeyDoc::group::<RecoveryConfig>("recovery", "③–⑤ and the retry loop."),
            KeyDoc::group::<TrailConfig>("trail", "What every removal leaves behind."),
            KeyDoc::group::<CalibrationConfig>("calibration", "The token scale learnt per model."),
            KeyDoc::group::<BackgroundConfig>("background", "④'s summaries prepared ahead."),
            KeyDoc::group::<Weights>("weights", "The estimate's per-class prior."),
            KeyDoc::group::<policies::ToolLists>("tools", "Which tool results ② may compact."),
            KeyDoc::leaf(
                "remember",
                "Phrases that make a user message a remember request, pinned automatically \
                 (any script; case-insensitive).",
            ),
            KeyDoc::group::<ExperimentalConfig>("experimental", "Settings for measurements only."),
        ]
    }
}

impl Documented for TrailConfig {
    fn keys() -> Vec<KeyDoc> {
        vec![
            KeyDoc::leaf(
                "enabled",
                "Whether removals leave a trail at all (false: SPEC's first bare notices, \
                 what the benchmarks compare against).",
            ),
            KeyDoc::leaf("max_share", "The trail takes at most this share of E ..."),
            KeyDoc::leaf("max_tokens", "... and at most this many tokens."),
            KeyDoc::leaf(
                "request_chars",
                "A user request longer than this many characters is cut to its head.",
            ),
            KeyDoc::leaf(
                "command_chars",
                "A command is listed by its first line, cut to this many characters.",
            ),
        ]
    }
}

impl Documented for Weights {
    fn keys() -> Vec<KeyDoc> {
        vec![
            KeyDoc::leaf("letter", "Tokens per ASCII letter."),
            KeyDoc::leaf("digit", "Tokens per ASCII digit."),
            KeyDoc::leaf("whitespace", "Tokens per whitespace character."),
            KeyDoc::leaf("punctuation", "Tokens per other ASCII character."),
            KeyDoc::leaf("non_ascii", "Tokens per non-ASCII character."),
            KeyDoc::leaf("per_message", "Fixed tokens per message (role, framing)."),
            KeyDoc::leaf(
                "per_binary_block",
                "Fixed tokens per image, document or other binary block.",
            ),
        ]
    }
}

/// The window a request must fit: W (context window) less R (output reserve).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct Budget {
    /// W: the model's context window, in tokens.
    pub window: u64,
    /// R: the tokens reserved for the model's output.
    pub reserve: u64,
}

impl Budget {
    /// A budget of `window` tokens with `reserve` kept for the output.
    pub fn new(window: u64, reserve: u64) -> Self {
        Budget { window, reserve }
    }

    /// E = W − R, the effective window every ratio is a share of.
    pub fn effective(&self) -> u64 {
        self.window.saturating_sub(self.reserve)
    }

    /// `share` of E, in tokens.
    pub fn share(&self, share: f64) -> u64 {
        (self.effective() as f64 * share).floor() as u64
    }
}

#[cfg(test)]
mod tests;
