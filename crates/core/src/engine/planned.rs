//! Counting exactly only where a count can change a decision (issue 27).
//!
//! An exact count costs about 20 ms per 313K tokens on one core, against about 1 ns a
//! character for the prior; on a request far over its window most of those tokens are
//! dropped, and only what is sent needs its exact count. So a request the prior puts
//! clearly over the preemptive threshold is planned with the calibrated prior alone (the
//! multiplier ③ already plans its cut with: the cut lands where it lands today), then the
//! result, at most about E tokens, is counted exactly by running the exact cascade on it.
//! That second run is the guard: the cascade is a fixed point of itself, so on a result the
//! prior planned well it changes nothing, and where the prior was off by more than its
//! margin it escalates with exact counts, as after an overflow. What is sent is therefore
//! always judged by its exact count; the messages the plan dropped are never counted.

use std::sync::{Arc, Mutex};

use super::{ContextManager, lock, model_of};
use crate::config::Budget;
use crate::conversation::Conversation;
use crate::estimate::counter::Counters;
use crate::report::Report;

/// How far over the preemptive threshold the prior must put a request before it is planned
/// with the prior: the prior is within 10% of o200k_base on every fixture
/// (docs/benchmarks.md §3), so a request a quarter over is over by any count, and the
/// escalation runs either way. Nearer the threshold most of the request is sent, and is
/// counted anyway.
pub(crate) const CLEARLY_OVER: f64 = 1.25;

impl ContextManager {
    /// The manager that plans `conversation` with the prior: this one without its exact
    /// counters, when the model has one and the prior puts the request clearly over the
    /// preemptive threshold (`None`: count as usual).
    pub(super) fn prior_planner(
        &self,
        conversation: &Conversation,
        budget: Budget,
    ) -> Option<ContextManager> {
        let estimator = self.estimator(model_of(conversation));
        estimator.counter?;
        let prior = estimator.with_counter(None).tokens(conversation) as f64;
        let threshold = budget.share(self.config.recovery.preemptive_ratio) as f64;
        (prior > threshold * CLEARLY_OVER).then(|| self.without_counters())
    }

    /// This manager (configuration, catalog, calibration, summarizer, recall) estimating
    /// every model with the calibrated prior, without the margin an uncalibrated model's
    /// estimate carries: the exact count of the result stands guard instead.
    fn without_counters(&self) -> ContextManager {
        let mut config = self.config.clone();
        config.calibration.uncalibrated_margin = 1.0;
        ContextManager {
            config,
            catalog: self.catalog.clone(),
            summarizer: Arc::clone(&self.summarizer),
            calibration: Mutex::new(self.calibration()),
            starting_scales: Mutex::new(lock(&self.starting_scales).clone()),
            counters: Counters::default(),
            recall: self.recall.clone(),
        }
    }

    /// One report of a plan made with the prior (`planned`) and the exact run on its
    /// result (`settled`): every step of both, the tokens after as counted exactly. The
    /// tokens before are the plan's estimate: the request as received was not counted,
    /// so every one of its messages is an estimated one.
    pub(super) fn settle(
        &self,
        planned: Report,
        settled: Report,
        conversation: &Conversation,
        budget: Budget,
    ) -> Report {
        // The prefix the plan left alone and the prefix the exact run left alone of the
        // plan's result: the shorter one is unchanged from the request as received.
        let first_changed = match (planned.first_changed, settled.first_changed) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        let mut steps = planned.steps;
        steps.extend(settled.steps);
        let mut report = Report {
            steps,
            first_changed,
            reason: settled.reason,
            calls: planned.calls + settled.calls,
            overflows: planned.overflows + settled.overflows,
            estimated_messages: planned.messages_before,
            // The model's multiplier as this manager holds it (the plan's lacks the margin of
            // an uncalibrated model): the same field whichever way a request was counted.
            token_scale: settled.token_scale,
            ..planned
        };
        let estimator = self.estimator(model_of(conversation));
        report.finish(
            settled.tokens_after,
            &conversation.messages,
            budget,
            &estimator,
        );
        report
    }
}

#[cfg(test)]
mod tests;
