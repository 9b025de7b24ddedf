//! The engine: composes the strategies into the cascade.
//!
//! [`ContextManager::prepare`] is what an agent runs before every call (Layer 1, then the
//! preemptive check); [`ContextManager::call`] (in retry.rs) runs the whole loop
//! against an [`crate::llm::Llm`]. The engine only decides which strategy runs when, with
//! which target; the strategies do the work and report it. Here: the entry points and
//! Layer 1; `estimates.rs`: the estimate in force and the calibration; `ladder.rs`: the
//! walk up the escalation ladder (Layer 2/3).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};

mod estimates;
mod ladder;
mod planned;
mod recall;

use crate::calibrate::Calibration;
use crate::catalog::Catalog;
use crate::config::{Budget, CascadeConfig};
use crate::conversation::Conversation;
use crate::escalation::{Escalation, Goal};
use crate::estimate::CounterFor;
use crate::estimate::counter::Counters;
use crate::middle;
use crate::offline::OfflineSummarizer;
use crate::report::{Report, Step};
use crate::strategy::compact_tools::{CompactMode, compact_tool_results};
use crate::strategy::truncate::truncate_tool_results;
use crate::summarizer::Summarizer;

/// Keeps conversations inside their budget: the cascade, its configuration, the injected
/// summarizer and the per-model calibration of the token estimate.
///
/// ```
/// use context_cascade::{Budget, CascadeConfig, ContextManager, format};
///
/// let body = br#"{"model": "gpt-4o", "messages": [{"role": "user", "content": "hello"}]}"#;
/// let mut conversation = format::parse(body, None)?;
/// let manager = ContextManager::new(CascadeConfig::default());
/// let report = pollster::block_on(manager.prepare(&mut conversation, Budget::new(8_000, 0)));
/// assert!(report.fits && report.steps.is_empty());
/// # Ok::<(), context_cascade::ParseError>(())
/// ```
pub struct ContextManager {
    config: CascadeConfig,
    catalog: Catalog,
    summarizer: Arc<dyn Summarizer>,
    calibration: Mutex<Calibration>,
    starting_scales: Mutex<HashMap<String, Option<f64>>>,
    /// Exact token counters by model, and the models whose provider contradicted them.
    counters: Counters,
    /// Recall: handles in markers, and where removed originals are kept (`None`: off).
    recall: Option<recall::Recall>,
}

/// Locks a mutex even if a panicking thread poisoned it: the data are plain numbers.
fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

impl ContextManager {
    /// A manager with the offline summarizer and the built-in catalog.
    pub fn new(config: CascadeConfig) -> Self {
        ContextManager {
            config,
            catalog: Catalog::builtin(),
            summarizer: Arc::new(OfflineSummarizer::default()),
            calibration: Mutex::new(Calibration::new()),
            starting_scales: Mutex::new(HashMap::new()),
            counters: Counters::default(),
            recall: None,
        }
    }

    /// Counts exactly with the counter `counters` gives for a model (e.g.
    /// `Arc::new(estimate::exact::counter_for_model)`, feature `exact`); other models keep
    /// the prior.
    pub fn with_token_counters(mut self, counters: CounterFor) -> Self {
        self.counters = Counters::new(counters);
        self
    }

    /// Uses another summarizer for ④ (an LLM, a cache around one, ...).
    pub fn with_summarizer(mut self, summarizer: Arc<dyn Summarizer>) -> Self {
        self.summarizer = summarizer;
        self
    }

    /// Uses another catalog for the starting token scales of models.
    pub fn with_catalog(mut self, catalog: Catalog) -> Self {
        self.catalog = catalog;
        lock(&self.starting_scales).clear();
        self
    }

    /// A manager like this one (configuration, catalog, calibration as it is now) with
    /// another summarizer: to run the cascade on a forecast without touching this one.
    pub(crate) fn shadow(&self, summarizer: Arc<dyn Summarizer>) -> ContextManager {
        let mut shadow = ContextManager::new(self.config.clone())
            .with_catalog(self.catalog.clone())
            .with_summarizer(summarizer);
        // It must count as this one does (exact counts included), or it forecasts ranges
        // the real compaction does not take.
        shadow.counters = self.counters.copy();
        shadow.restore_calibration(self.calibration());
        shadow
    }

    /// The configuration in force.
    pub fn config(&self) -> &CascadeConfig {
        &self.config
    }

    /// The summarizer ④ uses unless a call names another.
    pub(crate) fn summarizer(&self) -> &dyn Summarizer {
        self.summarizer.as_ref()
    }

    /// The identity of the summarizer in use (part of summary cache keys).
    pub fn summarizer_id(&self) -> String {
        self.summarizer.id()
    }

    pub(crate) fn start_report(&self, conversation: &mut Conversation, budget: Budget) -> Report {
        self.pin_remember_requests(conversation);
        let cx = self.context(conversation, budget);
        let tokens = cx.tokens(conversation);
        let format = conversation.format;
        Report {
            estimated_messages: cx.estimator.estimated_messages(conversation),
            ..Report::start(
                format,
                budget,
                tokens,
                conversation.messages.len(),
                cx.estimator.multiplier,
            )
        }
    }

    /// Pins every user message that asks to remember something, so that no strategy
    /// removes it. Returns how many were pinned.
    pub fn pin_remember_requests(&self, conversation: &mut Conversation) -> usize {
        self.config.remember.pin_requests(conversation)
    }

    /// Sync compaction, without a summarizer: what `prepare` does, on the same escalation
    /// ladder, with ④ replaced by what can be had without one (every old tool result
    /// compacted, then ③ down to the tail a summary would keep).
    ///
    /// A request far over the budget under a model counted exactly is planned with the
    /// prior and only its result is counted exactly (see `planned.rs`).
    pub fn compact(&self, conversation: &mut Conversation, budget: Budget) -> Report {
        match self.prior_planner(conversation, budget) {
            Some(planner) => {
                let planned = planner.compact_counted(conversation, budget);
                let settled = self.compact_counted(conversation, budget);
                self.settle(planned, settled, conversation, budget)
            }
            None => self.compact_counted(conversation, budget),
        }
    }

    /// [`ContextManager::compact`] with this manager's estimates throughout.
    fn compact_counted(&self, conversation: &mut Conversation, budget: Budget) -> Report {
        let mut report = self.start_report(conversation, budget);
        if self.would_change(conversation, budget) {
            self.layer1(conversation, budget, &mut report);
            if self.should_preemptive_compact(conversation, budget) {
                let mut escalation = Escalation::before_call(&self.config, Goal::Under(1.0));
                self.escalate_without_summarizer(
                    conversation,
                    budget,
                    &mut escalation,
                    &mut report,
                );
                self.layer1(conversation, budget, &mut report);
            }
        }
        self.finish(conversation, budget, &mut report);
        report
    }

    /// Layer 1, then the preemptive check → Layer 2/3: what an agent runs before each call.
    /// A request still over E would be refused for sure, so the escalation goes on until it
    /// fits (the retry loop's later attempts, without the calls).
    pub async fn prepare(&self, conversation: &mut Conversation, budget: Budget) -> Report {
        self.prepare_using(self.summarizer(), conversation, budget)
            .await
    }

    /// [`ContextManager::prepare`] with `summarizer` for ④ instead of the manager's.
    pub(crate) async fn prepare_using(
        &self,
        summarizer: &dyn Summarizer,
        conversation: &mut Conversation,
        budget: Budget,
    ) -> Report {
        let mut escalation = Escalation::before_call(&self.config, Goal::Under(1.0));
        self.prepare_with(summarizer, conversation, budget, &mut escalation)
            .await
    }

    /// The whole cascade, escalating through the recovery attempts until the request is
    /// under the preemptive threshold (what `cascade compact` runs). Stopping there, not
    /// merely under E, makes the result a fixed point: `prepare` or a second compaction
    /// leaves it as it is. A request far over the budget under a model counted exactly is
    /// planned with the prior and only its result is counted exactly (see `planned.rs`).
    pub async fn compact_with_summary(
        &self,
        conversation: &mut Conversation,
        budget: Budget,
    ) -> Report {
        match self.prior_planner(conversation, budget) {
            Some(planner) => {
                let planned = (planner.compact_with_summary_counted(conversation, budget)).await;
                let settled = (self.compact_with_summary_counted(conversation, budget)).await;
                self.settle(planned, settled, conversation, budget)
            }
            None => (self.compact_with_summary_counted(conversation, budget)).await,
        }
    }

    /// [`ContextManager::compact_with_summary`] with this manager's estimates throughout.
    async fn compact_with_summary_counted(
        &self,
        conversation: &mut Conversation,
        budget: Budget,
    ) -> Report {
        let summarizer = self.summarizer();
        let mut escalation = Escalation::before_call(&self.config, Goal::Under(1.0));
        let mut report = self
            .prepare_with(summarizer, conversation, budget, &mut escalation)
            .await;
        if report.tokens_after > budget.share(self.config.recovery.preemptive_ratio) {
            escalation.towards(Goal::Under(self.config.recovery.preemptive_ratio));
            let escalation = &mut escalation;
            (self.escalate_then_layer1(summarizer, escalation, conversation, budget, &mut report))
                .await;
            self.finish(conversation, budget, &mut report);
        }
        report
    }

    /// Layer 1, then the first run of `escalation` when the preemptive check fires.
    async fn prepare_with(
        &self,
        summarizer: &dyn Summarizer,
        conversation: &mut Conversation,
        budget: Budget,
        escalation: &mut Escalation<'_>,
    ) -> Report {
        let mut report = self.start_report(conversation, budget);
        // Most calls need nothing: then no strategy is even tried.
        if self.would_change(conversation, budget) {
            self.layer1(conversation, budget, &mut report);
            if self.should_preemptive_compact(conversation, budget) {
                (self.escalate_then_layer1(
                    summarizer,
                    escalation,
                    conversation,
                    budget,
                    &mut report,
                ))
                .await;
            }
        }
        self.finish(conversation, budget, &mut report);
        report
    }

    /// One run of the escalation ladder through `summarizer`, then Layer 1 again: ② may
    /// reach its watermark now where it could not before Layer 2/3 (when it does not compact
    /// short of it), so that the next call's Layer 1 finds nothing left to do and a second
    /// compaction changes nothing.
    async fn escalate_then_layer1(
        &self,
        summarizer: &dyn Summarizer,
        escalation: &mut Escalation<'_>,
        conversation: &mut Conversation,
        budget: Budget,
        report: &mut Report,
    ) {
        (self.escalate(summarizer, conversation, budget, escalation, report, 0.0)).await;
        self.layer1(conversation, budget, report);
    }

    /// ① then ②.
    fn layer1(&self, conversation: &mut Conversation, budget: Budget, report: &mut Report) {
        let cx = self.context(conversation, budget);
        // ① and ② only shorten messages in place, so a changed message has other counts
        // than before (cached: no copy of the request to find where they changed it).
        let counts = |c: &Conversation| c.messages.iter().map(|m| m.counts()).collect::<Vec<_>>();
        let before = counts(conversation);
        let steps = report.steps.len();
        report
            .steps
            .extend(truncate_tool_results(conversation, &cx));
        report.steps.extend(compact_tool_results(
            conversation,
            &cx,
            CompactMode::Watermark,
        ));
        if report.steps.len() > steps {
            report.changed_between(&before, &counts(conversation));
        }
    }

    pub(crate) fn finish(&self, conversation: &Conversation, budget: Budget, report: &mut Report) {
        let cx = self.context(conversation, budget);
        let messages = &conversation.messages;
        report.finish(cx.tokens(conversation), messages, budget, &cx.estimator);
        report.reason = (!report.fits).then(|| middle::why_it_cannot_fit(conversation, &cx));
        self.keep_removed(report);
    }
}

/// The calibration key of a conversation: its model, or "" for a bare message array.
pub(crate) fn model_of(conversation: &Conversation) -> &str {
    conversation.model().unwrap_or("")
}

/// Logs the Layer 2/3 steps that stay in the conversation (never one that was rolled back):
/// a log line says what the request really lost.
fn log_kept(steps: &[Step]) {
    for step in steps {
        tracing::info!(
            strategy = step.strategy.as_str(),
            messages_removed = step.messages_removed,
            tokens_freed = step.tokens_freed,
            detail = %step.detail,
            "history replaced"
        );
    }
}
