//! The estimate in force: the prior scaled by each model's calibration (or its catalog
//! starting scale and the safety margin), exact counts where a counter is set, and what the
//! provider reports folded back in.

use super::{ContextManager, lock, model_of};
use crate::calibrate::Calibration;
use crate::config::Budget;
use crate::conversation::Conversation;
use crate::estimate::counter::MODELS_KEPT;
use crate::estimate::{ClassCounts, Estimator};
use crate::report::tokens_from;
use crate::step::StepContext;

impl ContextManager {
    /// The estimate in force for a model: the prior times its calibrated scale, or before
    /// any observation its catalog starting scale times the safety margin.
    pub fn estimator(&self, model: &str) -> Estimator {
        let starting = self.starting_scale(model);
        let multiplier = lock(&self.calibration).multiplier(model, starting, &self.config);
        let counter = self.counters.for_model(model);
        Estimator::new(self.config.weights, multiplier).with_counter(counter)
    }

    fn starting_scale(&self, model: &str) -> Option<f64> {
        if model.is_empty() {
            return None;
        }
        let mut scales = lock(&self.starting_scales);
        // Model names come from clients: a full cache of catalog lookups starts over.
        if scales.len() >= MODELS_KEPT && !scales.contains_key(model) {
            scales.clear();
        }
        *scales
            .entry(model.to_owned())
            .or_insert_with(|| self.catalog.lookup(model).token_scale)
    }

    /// The calibrated token estimate of a request.
    pub fn estimate(&self, conversation: &Conversation) -> u64 {
        self.estimator(model_of(conversation)).tokens(conversation)
    }

    /// The calibrated estimate of a request's messages from index `from` to the end: what
    /// a provider bills uncached when the request changed at `from` (see
    /// [`crate::replay`]).
    pub fn estimate_from(&self, conversation: &Conversation, from: usize) -> u64 {
        let estimator = self.estimator(model_of(conversation));
        tokens_from(&estimator, &conversation.messages, from)
    }

    /// The uncalibrated prior of a request, to pair with the usage the provider reports.
    pub fn prior(&self, conversation: &Conversation) -> f64 {
        self.config
            .weights
            .prior(&ClassCounts::of_conversation(conversation))
    }

    /// Folds in what the provider counted for a request whose prior was `prior` and whose
    /// estimate was `counted` ([`ContextManager::estimate`] of what was sent): an exact count
    /// the provider contradicts is dropped for the model (see `Counters`). Returns the
    /// model's new scale.
    pub fn observe_sent(&self, model: &str, prior: f64, counted: u64, real: u64) -> f64 {
        self.counters.check(model, counted, real);
        self.observe(model, prior, real)
    }

    /// Folds in what the provider counted for a request whose prior was `prior`; returns
    /// the model's new scale.
    pub fn observe(&self, model: &str, prior: f64, real_prompt_tokens: u64) -> f64 {
        let starting = self.starting_scale(model);
        lock(&self.calibration).observe(model, prior, real_prompt_tokens, starting, &self.config)
    }

    /// A snapshot of every model's calibration (to persist it).
    pub fn calibration(&self) -> Calibration {
        lock(&self.calibration).clone()
    }

    /// Restores a persisted calibration.
    pub fn restore_calibration(&self, calibration: Calibration) {
        *lock(&self.calibration) = calibration;
    }

    /// Whether the request, after Layer 1, still takes more than the preemptive share of E.
    pub fn should_preemptive_compact(&self, conversation: &Conversation, budget: Budget) -> bool {
        self.estimate(conversation) > budget.share(self.config.recovery.preemptive_ratio)
    }

    pub(crate) fn context(&self, conversation: &Conversation, budget: Budget) -> StepContext<'_> {
        self.context_at_least(conversation, budget, 0.0)
    }

    /// The step context with the estimate's multiplier raised to at least `floor`: after an
    /// overflow, what the provider counted for this very request outranks the smoothed scale.
    pub(crate) fn context_at_least(
        &self,
        conversation: &Conversation,
        budget: Budget,
        floor: f64,
    ) -> StepContext<'_> {
        let mut estimator = self.estimator(model_of(conversation));
        estimator.multiplier = estimator.multiplier.max(floor);
        if floor > 0.0 {
            // After an overflow the provider's count outranks an exact count too: the floor
            // applies to the prior.
            estimator.counter = None;
        }
        StepContext {
            recall: self.recall.is_some(),
            ..StepContext::new(&self.config, budget, estimator)
        }
    }
}

/// Exact counts (feature `exact`): the one way to set them up.
#[cfg(feature = "exact")]
impl ContextManager {
    /// Counts the requests of OpenAI models exactly, each with its model's tokenizer
    /// (o200k_base, cl100k_base); other models keep the prior. The tokenizers' tables are in
    /// the binary: nothing loads, the first count reads the pages it touches.
    pub fn with_exact_counts(self) -> Self {
        self.with_token_counters(std::sync::Arc::new(
            crate::estimate::exact::counter_for_model,
        ))
    }

    /// Counts every request with the tokenizer of `model`, whatever model the request names
    /// (a command line's `--model`); the prior when `model` has no public tokenizer.
    pub fn with_exact_counts_as(self, model: &str) -> Self {
        let model = model.to_owned();
        self.with_token_counters(std::sync::Arc::new(move |_: &str| {
            crate::estimate::exact::counter_for_model(&model)
        }))
    }
}
