//! The engine: composes the strategies into the cascade, and keeps the calibration.
//!
//! [`ContextManager::prepare`] is what an agent runs before every call (Layer 1, then the
//! preemptive check); [`ContextManager::call`] (in [`crate::retry`]) runs the whole loop
//! against an [`crate::llm::Llm`]. The engine only decides which strategy runs when, with
//! which target; the strategies do the work and report it.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};

use crate::calibrate::Calibration;
use crate::catalog::Catalog;
use crate::compact_tools::{CompactMode, compact_tool_results};
use crate::config::{Budget, CascadeConfig};
use crate::conversation::{Block, Conversation};
use crate::estimate::{ClassCounts, Estimator};
use crate::offline::OfflineSummarizer;
use crate::prune::{prune_history, recent_messages};
use crate::report::Report;
use crate::retry::Recovery;
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
        }
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
        Estimator::new(self.config.weights, multiplier)
    }

    fn starting_scale(&self, model: &str) -> Option<f64> {
        if model.is_empty() {
            return None;
        }
        *lock(&self.starting_scales)
            .entry(model.to_owned())
            .or_insert_with(|| self.catalog.lookup(model).token_scale)
    }

    /// The calibrated token estimate of a request.
    pub fn estimate(&self, conversation: &Conversation) -> u64 {
        self.estimator(model_of(conversation)).tokens(conversation)
    }

    /// The uncalibrated prior of a request, to pair with the usage the provider reports.
    pub fn prior(&self, conversation: &Conversation) -> f64 {
        self.config
            .weights
            .prior(&ClassCounts::of_conversation(conversation))
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
        StepContext::new(&self.config, budget, estimator)
    }

    pub(crate) fn start_report(&self, conversation: &mut Conversation, budget: Budget) -> Report {
        self.pin_remember_requests(conversation);
        let cx = self.context(conversation, budget);
        let tokens = cx.tokens(conversation);
        let format = conversation.format.as_str();
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

    /// Sync compaction, without a summarizer: Layer 1, then ③ (escalating to the bare
    /// minimum) when the preemptive check fires.
    pub fn compact(&self, conversation: &mut Conversation, budget: Budget) -> Report {
        let mut report = self.start_report(conversation, budget);
        self.layer1(conversation, budget, &mut report);
        if self.should_preemptive_compact(conversation, budget) {
            let cx = self.context(conversation, budget);
            let target = budget.share(self.config.recovery_targets[0]);
            let recent = recent_messages(conversation, self.config.recent_messages);
            let rules = middle::KeepRules {
                recent,
                keep_summaries: true,
            };
            report
                .steps
                .extend(prune_history(conversation, &cx, rules, Some(1), target));
            if cx.tokens(conversation) > target {
                report
                    .steps
                    .extend(compact_tool_results(conversation, &cx, CompactMode::All));
            }
            if cx.tokens(conversation) > target
                && let Some(plan) = summarize::plan(conversation, &cx, recent, target, true)
            {
                report.steps.extend(prune_history(
                    conversation,
                    &cx,
                    plan.rules,
                    Some(1),
                    target,
                ));
            }
        }
        self.finish(conversation, budget, &mut report);
        report
    }

    /// Layer 1, then the preemptive check → Layer 2/3: what an agent runs before each call.
    pub async fn prepare(&self, conversation: &mut Conversation, budget: Budget) -> Report {
        let mut report = self.start_report(conversation, budget);
        self.layer1(conversation, budget, &mut report);
        if self.should_preemptive_compact(conversation, budget) {
            self.recover_if_worth(conversation, budget, 1, &mut report)
                .await;
            // A request still over E would be refused for sure: escalate now rather than
            // spend a call on it (the retry loop's later attempts, without the calls).
            let mut attempt = 2;
            while self.estimate(conversation) > budget.effective()
                && self.retry_strategy(attempt).is_some()
            {
                self.recover_if_worth(conversation, budget, attempt, &mut report)
                    .await;
                attempt += 1;
            }
        }
        self.finish(conversation, budget, &mut report);
        report
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
        let mut report = self.prepare(conversation, budget).await;
        let mut attempt = 2;
        let threshold = budget.share(self.config.preemptive_ratio);
        while report.tokens_after > threshold && self.retry_strategy(attempt).is_some() {
            self.recover_if_worth(conversation, budget, attempt, &mut report)
                .await;
            self.finish(conversation, budget, &mut report);
            attempt += 1;
        }
        report
    }

    /// ① then ②.
    fn layer1(&self, conversation: &mut Conversation, budget: Budget, report: &mut Report) {
        let cx = self.context(conversation, budget);
        report
            .steps
            .extend(truncate_tool_results(conversation, &cx));
        report.steps.extend(compact_tool_results(
            conversation,
            &cx,
            CompactMode::Watermark,
        ));
    }

    /// A recovery attempt before any call is kept only if it earns its rewrite: it frees at
    /// least `min_gain` of the estimate, or brings a request over E under it. Otherwise the
    /// conversation and the report are restored, so that shaving a few tokens never rewrites
    /// the history (and a second compaction changes nothing).
    async fn recover_if_worth(
        &self,
        conversation: &mut Conversation,
        budget: Budget,
        attempt: usize,
        report: &mut Report,
    ) {
        let before = self.estimate(conversation);
        let (saved, steps) = (conversation.clone(), report.steps.len());
        self.recover(conversation, budget, attempt, report).await;
        let after = self.estimate(conversation);
        let freed = before.saturating_sub(after);
        let fits_now = before > budget.effective() && after <= budget.effective();
        if (freed as f64) < self.config.min_gain * before as f64 && !fits_now {
            *conversation = saved;
            report.steps.truncate(steps);
        }
    }

    /// Applies recovery attempt `attempt` (see [`ContextManager::retry_strategy`]),
    /// appending what it did to `report`.
    pub async fn recover(
        &self,
        conversation: &mut Conversation,
        budget: Budget,
        attempt: usize,
        report: &mut Report,
    ) {
        self.recover_at_least(conversation, budget, attempt, report, 0.0)
            .await
    }

    /// [`ContextManager::recover`] with the estimate's multiplier at least `floor`.
    pub(crate) async fn recover_at_least(
        &self,
        conversation: &mut Conversation,
        budget: Budget,
        attempt: usize,
        report: &mut Report,
        floor: f64,
    ) {
        let Some(recovery) = self.retry_strategy(attempt) else {
            return;
        };
        let cx = self.context_at_least(conversation, budget, floor);
        let level = Some(attempt.min(u8::MAX as usize) as u8);
        let summarizer = self.summarizer.as_ref();
        let recent = recent_messages(conversation, self.config.recent_messages);
        match recovery {
            Recovery::PruneThenSummarize { target } => {
                let target = budget.share(target);
                let mut pruned = conversation.clone();
                let rules = middle::KeepRules {
                    recent,
                    keep_summaries: true,
                };
                let step = prune_history(&mut pruned, &cx, rules, level, target);
                if step.is_some() && cx.tokens(&pruned) <= target {
                    *conversation = pruned;
                    report.steps.extend(step);
                } else {
                    self.summarize(conversation, &cx, summarizer, recent, target, level, report)
                        .await;
                }
            }
            Recovery::Summarize {
                target,
                halve_recent,
                compact_all,
            } => {
                if compact_all {
                    report
                        .steps
                        .extend(compact_tool_results(conversation, &cx, CompactMode::All));
                }
                let recent = if halve_recent { recent / 2 } else { recent };
                let target = budget.share(target);
                self.summarize(conversation, &cx, summarizer, recent, target, level, report)
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
                    .extend(degrade::bare_notice(conversation, &cx, 0, target));
                report
                    .steps
                    .extend(truncate_to_fit(conversation, &cx, cut_to, level));
            }
        }
    }

    /// ④ with the longest tail that fits, falling back through ⑤ when it fails.
    #[allow(clippy::too_many_arguments)]
    async fn summarize(
        &self,
        conversation: &mut Conversation,
        cx: &StepContext<'_>,
        summarizer: &dyn Summarizer,
        recent: usize,
        target: u64,
        level: Option<u8>,
        report: &mut Report,
    ) {
        let Some(plan) = summarize::plan(conversation, cx, recent, target, false) else {
            return;
        };
        match summarize::summarize_history(conversation, cx, summarizer, &plan, level).await {
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
        report.finish(cx.tokens(conversation), conversation.messages.len(), budget);
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
