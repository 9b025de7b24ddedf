//! The cascade's constants (SPEC.md "Budget"), as one configurable struct, and the budget.

use crate::estimate::Weights;
use crate::remember::RememberPolicy;
use crate::tool_names::ToolPolicy;
use crate::trail::TrailConfig;

/// Every tunable of the cascade. `Default` gives SPEC.md's values.
#[derive(Debug, Clone)]
pub struct CascadeConfig {
    /// ① a single tool result may take at most this share of E.
    pub single_tool_result_share: f64,
    /// ② triggers when the estimate exceeds this share of E.
    pub headroom_ratio: f64,
    /// ② compacts down to this share of E (hysteresis).
    pub low_watermark: f64,
    /// ② compacts even when all it may compact cannot bring the total down to the low
    /// watermark (SPEC's rule). `false` (the default): ② then compacts nothing while the
    /// request is under the preemptive threshold, and leaves the history to ③ there (over
    /// it, Layer 2/3 rewrites the history anyway and ② runs as SPEC's), so that it does not
    /// rewrite the prefix on every call: with [`CascadeConfig::preemptive_target`] at the low
    /// watermark, it keeps more of a provider's prompt cache at equal fit over every
    /// fixture at 32K, 64K and 128K (issue 15; `cargo run --release -p cascade-bench
    /// --bin cache_rules`, BENCHMARKS.md). SPEC's behaviour: `true` and a
    /// `preemptive_target` of 0.75.
    pub compact_short_of_watermark: bool,
    /// shouldPreemptiveCompact: Layer 2/3 before calling when above this share of E.
    pub preemptive_ratio: f64,
    /// The target, as a share of E, of the first recovery attempt when it runs before a
    /// call (shouldPreemptiveCompact), not after an overflow: the low watermark by default,
    /// so that ③ cuts once to where ② would have, and fires half as often as at SPEC's
    /// first recovery target (0.75, `recovery_targets[0]`), each time rewriting the prefix.
    /// The recovery after an overflow keeps `recovery_targets`.
    pub preemptive_target: f64,
    /// Above this share of E (below `preemptive_ratio`), ④'s summaries for the next
    /// request may be prepared ahead, between turns (`ContextManager::summarize_ahead`).
    pub background_summary_ratio: f64,
    /// How many distinct next requests (④ ranges) `ContextManager::summarize_ahead`
    /// prepares summaries for at most, each costing one compaction's summarizer calls.
    pub background_forecasts: usize,
    /// A summary prepared ahead for a shorter range may stand in for ④'s when the messages
    /// past it are at most this share of the range (`PreparedSummaries::with_gap_share`):
    /// the turn does not wait, and those messages are named by the trail alone. 0, the
    /// default: only the exact range's summary, so the output is the synchronous run's.
    pub prepared_summary_gap: f64,
    /// ① cuts at the last newline when it lies past this share of the cut budget.
    pub newline_cut_ratio: f64,
    /// ③ keeps at most this many recent messages (and at most a third of the history).
    pub recent_messages: usize,
    /// ④ splits summarizer input above this many characters.
    pub chunk_threshold_chars: usize,
    /// ④ uses at most this many chunks.
    pub max_chunks: usize,
    /// The retry loop makes at most this many LLM calls.
    pub max_calls: usize,
    /// A recovery step counts only if it frees at least this share of the estimate.
    pub min_gain: f64,
    /// Targets of the recovery attempts 1, 2 and 3, as shares of E.
    pub recovery_targets: [f64; 3],
    /// EMA smoothing factor.
    pub ema_alpha: f64,
    /// 0 (SPEC's rule, the default): the first observation is the scale, later ones are an
    /// EMA with `ema_alpha`. Above 0: the scale is the size-weighted `Σ real / Σ prior`
    /// (decaying by `1 − ema_alpha` per observation) in which the starting scale counts as
    /// this many prior tokens, so a small request moves it little (32,000 measured best;
    /// see calibrate.rs).
    pub calibration_prior_tokens: f64,
    /// Observations (real / prior) are clamped to this range.
    pub ema_clamp: (f64, f64),
    /// Multiplier applied to estimates until the first calibration.
    pub uncalibrated_margin: f64,
    /// The per-class prior.
    pub weights: Weights,
    /// Which tool results ② may compact.
    pub tools: ToolPolicy,
    /// Which user messages are remember requests (pinned automatically).
    pub remember: RememberPolicy,
    /// What every removal leaves behind: the trail's budget and limits.
    pub trail: TrailConfig,
}

impl Default for CascadeConfig {
    fn default() -> Self {
        CascadeConfig {
            single_tool_result_share: 0.50,
            headroom_ratio: 0.75,
            low_watermark: 0.60,
            compact_short_of_watermark: false,
            preemptive_ratio: 0.90,
            preemptive_target: 0.60,
            background_summary_ratio: 0.80,
            background_forecasts: 4,
            prepared_summary_gap: 0.0,
            newline_cut_ratio: 0.70,
            recent_messages: 6,
            chunk_threshold_chars: 50_000,
            max_chunks: 4,
            max_calls: 5,
            min_gain: 0.10,
            recovery_targets: [0.75, 0.60, 0.50],
            ema_alpha: 0.3,
            calibration_prior_tokens: 0.0,
            ema_clamp: (0.25, 4.0),
            uncalibrated_margin: 1.1,
            weights: Weights::default(),
            tools: ToolPolicy::default(),
            remember: RememberPolicy::default(),
            trail: TrailConfig::default(),
        }
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
