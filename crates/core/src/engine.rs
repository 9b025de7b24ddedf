//! The engine: composes the strategies into the cascade, and keeps the calibration.
//!
//! [`ContextManager::prepare`] is what an agent runs before every call (Layer 1, then the
//! preemptive check); [`ContextManager::call`] (in retry.rs) runs the whole loop
//! against an [`crate::llm::Llm`]. The engine only decides which strategy runs when, with
//! which target; the strategies do the work and report it.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};

use crate::calibrate::Calibration;
use crate::catalog::Catalog;
use crate::compact_tools::{CompactMode, compact_tool_results};
use crate::config::{Budget, CascadeConfig};
use crate::conversation::{Block, Conversation};
use crate::escalation::{self, Escalation, Goal, OldResults, Progress, Recovery};
use crate::estimate::counter::{Counters, MODELS_KEPT};
use crate::estimate::{ClassCounts, CounterFor, Estimator};
use crate::middle::{KeepRules, Summaries};
use crate::offline::OfflineSummarizer;
use crate::prune::{prune_history, recent_messages};
use crate::report::{Report, Step, tokens_from};
use crate::step::StepContext;
use crate::summarizer::Summarizer;
use crate::truncate::{truncate_to_fit, truncate_tool_results};
use crate::{degrade, middle, summarize};

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

    /// The identity of the summarizer in use (part of summary cache keys).
    pub fn summarizer_id(&self) -> String {
        self.summarizer.id()
    }

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
        self.estimate(conversation) > budget.share(self.config.preemptive_ratio)
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
        StepContext::new(&self.config, budget, estimator)
    }

    pub(crate) fn start_report(&self, conversation: &mut Conversation, budget: Budget) -> Report {
        self.pin_remember_requests(conversation);
        let cx = self.context(conversation, budget);
        let tokens = cx.tokens(conversation);
        let format = conversation.format;
        Report::start(
            format,
            budget,
            tokens,
            conversation.messages.len(),
            cx.estimator.multiplier,
        )
    }

    /// Pins every user message that asks to remember something, so that no strategy
    /// removes it. Returns how many were pinned.
    pub fn pin_remember_requests(&self, conversation: &mut Conversation) -> usize {
        let policy = &self.config.remember;
        let mut pinned = 0;
        for message in &mut conversation.messages {
            if message.role() == crate::Role::User
                && !message.is_pinned()
                && policy.is_remember_request(&message.text_content())
            {
                message.pin();
                pinned += 1;
            }
        }
        pinned
    }

    /// Sync compaction, without a summarizer: Layer 1, then, when the preemptive check
    /// fires, one summarizer-free pass at the preemptive target: ③, every old tool
    /// result compacted, then ③ down to the shortest tail a summary would keep.
    pub fn compact(&self, conversation: &mut Conversation, budget: Budget) -> Report {
        let mut report = self.start_report(conversation, budget);
        self.layer1(conversation, budget, &mut report);
        let first = report.steps.len();
        if self.should_preemptive_compact(conversation, budget) {
            let before = conversation.messages.clone();
            let cx = self.context(conversation, budget).in_attempt(1);
            let target = budget.share(self.config.preemptive_target);
            let recent = recent_messages(conversation, self.config.recent_messages);
            let rules = KeepRules::keeping(recent);
            report
                .steps
                .extend(prune_history(conversation, &cx, rules, target));
            if cx.tokens(conversation) > target {
                report
                    .steps
                    .extend(compact_tool_results(conversation, &cx, CompactMode::All));
            }
            if cx.tokens(conversation) > target
                && let Some(plan) = middle::plan(conversation, &cx, recent, target, Summaries::Keep)
            {
                report
                    .steps
                    .extend(prune_history(conversation, &cx, plan.rules, target));
            }
            report.changed_between(&before, &conversation.messages);
        }
        log_kept(&report.steps[first..]);
        self.finish(conversation, budget, &mut report);
        report
    }

    /// Layer 1, then the preemptive check → Layer 2/3: what an agent runs before each call.
    /// A request still over E would be refused for sure, so the escalation goes on until it
    /// fits (the retry loop's later attempts, without the calls).
    pub async fn prepare(&self, conversation: &mut Conversation, budget: Budget) -> Report {
        let mut escalation = Escalation::before_call(&self.config, Goal::Under(1.0));
        self.prepare_with(conversation, budget, &mut escalation)
            .await
    }

    /// The whole cascade, escalating through the recovery attempts until the request is
    /// under the preemptive threshold (what `cascade compact` runs). Stopping there, not
    /// merely under E, makes the result a fixed point: `prepare` or a second compaction
    /// leaves it as it is.
    pub async fn compact_with_summary(
        &self,
        conversation: &mut Conversation,
        budget: Budget,
    ) -> Report {
        let mut escalation = Escalation::before_call(&self.config, Goal::Under(1.0));
        let mut report = self
            .prepare_with(conversation, budget, &mut escalation)
            .await;
        if report.tokens_after > budget.share(self.config.preemptive_ratio) {
            escalation.towards(Goal::Under(self.config.preemptive_ratio));
            self.escalate(conversation, budget, &mut escalation, &mut report, 0.0)
                .await;
            self.layer1(conversation, budget, &mut report);
            self.finish(conversation, budget, &mut report);
        }
        report
    }

    /// Layer 1, then the first run of `escalation` when the preemptive check fires.
    async fn prepare_with(
        &self,
        conversation: &mut Conversation,
        budget: Budget,
        escalation: &mut Escalation<'_>,
    ) -> Report {
        let mut report = self.start_report(conversation, budget);
        self.layer1(conversation, budget, &mut report);
        if self.should_preemptive_compact(conversation, budget) {
            self.escalate(conversation, budget, escalation, &mut report, 0.0)
                .await;
            // ② may reach its watermark now where it could not before Layer 2/3 (when it
            // does not compact short of it): it runs again, so that the next call's Layer 1
            // finds nothing left to do and a second compaction changes nothing.
            self.layer1(conversation, budget, &mut report);
        }
        self.finish(conversation, budget, &mut report);
        report
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

    /// One run of `escalation`: applies the attempts it hands out and keeps what earns its
    /// rewrite by its rule, rolling back what never does (see [`crate::escalation`]).
    /// Estimates use a multiplier of at least `floor`. Returns whether an attempt earned.
    pub(crate) async fn escalate(
        &self,
        conversation: &mut Conversation,
        budget: Budget,
        escalation: &mut Escalation<'_>,
        report: &mut Report,
        floor: f64,
    ) -> bool {
        let measure = |c: &Conversation| self.context_at_least(c, budget, floor).tokens(c);
        let mut progress = Progress {
            kept_tokens: measure(conversation),
            ran: 0,
            earned: false,
        };
        let first = report.steps.len();
        let initial = conversation.clone();
        let mut kept = None;
        while let Some((attempt, recovery)) = escalation.next(progress, budget) {
            let cx = self
                .context_at_least(conversation, budget, floor)
                .in_attempt(attempt);
            self.apply(conversation, &cx, recovery, report).await;
            progress.ran += 1;
            let now = measure(conversation);
            if escalation.earns(progress.kept_tokens, now, budget) {
                progress.kept_tokens = now;
                progress.earned = true;
                kept = Some((conversation.clone(), report.steps.len()));
            } else {
                tracing::info!(
                    attempt,
                    freed = progress.kept_tokens.saturating_sub(now),
                    "recovery step freed too little; escalating without a call"
                );
            }
        }
        // What never earned its rewrite is undone.
        match kept {
            Some((state, steps)) => {
                if report.steps.len() != steps {
                    *conversation = state;
                    report.steps.truncate(steps);
                }
                report.changed_between(&initial.messages, &conversation.messages);
            }
            None => {
                if report.steps.len() != first {
                    *conversation = initial;
                    report.steps.truncate(first);
                }
            }
        }
        log_kept(&report.steps[first.min(report.steps.len())..]);
        progress.earned
    }

    /// What recovery attempt `attempt` (1-based) does; `None` past the last one (SPEC's
    /// getRetryStrategy).
    pub fn retry_strategy(&self, attempt: usize) -> Option<Recovery> {
        escalation::rung(&self.config, attempt)
    }

    /// Applies recovery attempt `attempt` (see [`ContextManager::retry_strategy`]) once,
    /// whatever it frees, appending what it did to `report`.
    pub async fn recover(
        &self,
        conversation: &mut Conversation,
        budget: Budget,
        attempt: usize,
        report: &mut Report,
    ) {
        let Some(recovery) = self.retry_strategy(attempt) else {
            return;
        };
        let attempt = u8::try_from(attempt).unwrap_or(u8::MAX);
        let cx = self.context(conversation, budget).in_attempt(attempt);
        let before = conversation.messages.clone();
        self.apply(conversation, &cx, recovery, report).await;
        report.changed_between(&before, &conversation.messages);
    }

    /// Applies one recovery step in the context of its attempt.
    async fn apply(
        &self,
        conversation: &mut Conversation,
        cx: &StepContext<'_>,
        recovery: Recovery,
        report: &mut Report,
    ) {
        let budget = cx.budget;
        let recent = recent_messages(conversation, self.config.recent_messages);
        match recovery {
            Recovery::PruneThenSummarize { target } => {
                // Before a call ③ may cut deeper than SPEC's first target (preemptive_target);
                // when it cannot get there, the attempt is SPEC's: ③, else ④, at that target.
                let spec = budget.share(self.config.recovery_targets[0]);
                let mut target = budget.share(target);
                let rules = KeepRules::keeping(recent);
                let mut pruned = conversation.clone();
                let mut step = prune_history(&mut pruned, cx, rules, target);
                if target < spec && (step.is_none() || cx.tokens(&pruned) > target) {
                    target = spec;
                    pruned = conversation.clone();
                    step = prune_history(&mut pruned, cx, KeepRules::keeping(recent), target);
                }
                if step.is_some() && cx.tokens(&pruned) <= target {
                    *conversation = pruned;
                    report.steps.extend(step);
                } else {
                    self.summarize(conversation, cx, recent, target, report)
                        .await;
                }
            }
            Recovery::Summarize {
                target,
                tail,
                old_results,
            } => {
                if old_results == OldResults::Compact {
                    report
                        .steps
                        .extend(compact_tool_results(conversation, cx, CompactMode::All));
                }
                let target = budget.share(target);
                self.summarize(conversation, cx, tail.of(recent), target, report)
                    .await;
            }
            Recovery::BareNotice => {
                let target = budget.effective();
                // What is left of the current turn's results is cut to share the room under
                // the first recovery target, not at the edge of E: after an overflow the
                // estimate is only a lower bound of what the provider counts.
                let cut_to = budget.share(self.config.recovery_targets[0]);
                report
                    .steps
                    .extend(degrade::bare_notice(conversation, cx, 0, target));
                report
                    .steps
                    .extend(truncate_to_fit(conversation, cx, cut_to));
            }
        }
    }

    /// ④ keeping at most `recent` messages, down to `target` tokens, with the longest tail
    /// that fits; falls back through ⑤ when it fails.
    async fn summarize(
        &self,
        conversation: &mut Conversation,
        cx: &StepContext<'_>,
        recent: usize,
        target: u64,
        report: &mut Report,
    ) {
        let summarizer = self.summarizer.as_ref();
        let Some(plan) = middle::plan(conversation, cx, recent, target, Summaries::Update) else {
            return;
        };
        match summarize::summarize_history(conversation, cx, summarizer, &plan).await {
            Ok(step) => report.steps.push(step),
            Err(failure) => {
                report
                    .steps
                    .extend(degrade::degrade(conversation, cx, summarizer, &plan, failure).await);
            }
        }
    }

    pub(crate) fn finish(&self, conversation: &Conversation, budget: Budget, report: &mut Report) {
        let cx = self.context(conversation, budget);
        let messages = &conversation.messages;
        report.finish(cx.tokens(conversation), messages, budget, &cx.estimator);
        report.reason = (!report.fits).then(|| self.why_it_cannot_fit(conversation, &cx));
    }

    /// Explains a result over budget: how much the irreducible part takes.
    fn why_it_cannot_fit(&self, conversation: &Conversation, cx: &StepContext<'_>) -> String {
        let starts = middle::exchange_starts(conversation);
        let protected = middle::irreducible(conversation, &starts);
        let mut counts = conversation
            .tools()
            .map(ClassCounts::of_json)
            .unwrap_or_default();
        for (message, _) in conversation
            .messages
            .iter()
            .zip(&protected)
            .filter(|(_, keep)| **keep)
        {
            counts += message.counts();
        }
        let pinned_results = conversation
            .messages
            .iter()
            .filter(|m| m.is_pinned())
            .flat_map(|m| m.blocks())
            .filter(|b| matches!(b, Block::ToolResult(_)))
            .count();
        format!(
            "the part no strategy may remove (system, first user message, pinned and current messages{}, tool definitions) takes ~{} tokens, the budget is {} (window {} − reserve {})",
            if pinned_results > 0 {
                ", pinned tool results"
            } else {
                ""
            },
            cx.estimator.tokens_of(&counts),
            cx.budget.effective(),
            cx.budget.window,
            cx.budget.reserve,
        )
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
