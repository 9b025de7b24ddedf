//! Walking the escalation ladder: the engine applies the attempts [`crate::escalation`]
//! hands out, keeps what earns its rewrite and rolls back what never does.
//!
//! One walk serves every entry point past Layer 1. `prepare`, `compact_with_summary` and
//! the retry loop summarize through the injected summarizer ([`ContextManager::escalate`]);
//! the sync `compact` walks the same ladder without one
//! ([`ContextManager::escalate_without_summarizer`]), where ④ is what can be had without a
//! summary: every old tool result compacted, then ③ down to the tail a summary would keep.

use super::{ContextManager, log_kept};
use crate::config::Budget;
use crate::conversation::Conversation;
use crate::escalation::{self, Escalation, OldResults, Progress, Recovery};
use crate::middle::{self, KeepRules, Summaries};
use crate::report::{Report, Step};
use crate::step::StepContext;
use crate::strategy::compact_tools::{CompactMode, compact_tool_results};
use crate::strategy::prune::{prune_history, recent_messages};
use crate::strategy::truncate::truncate_to_fit;
use crate::strategy::{degrade, summarize};
use crate::summarizer::Summarizer;

/// A summary an attempt calls for: ④ keeping at most `recent` messages, down to `target`
/// tokens.
#[derive(Debug, Clone, Copy)]
struct SummaryDue {
    recent: usize,
    target: u64,
}

/// One run of an escalation: where it started, and the last state that earned its rewrite.
struct Run {
    progress: Progress,
    /// The report's steps before the run.
    first: usize,
    initial: Conversation,
    /// The last kept state and the number of steps that led to it.
    kept: Option<(Conversation, usize)>,
    budget: Budget,
    /// The estimate's multiplier is at least this (after an overflow).
    floor: f64,
    /// The attempt applied last, not yet judged.
    pending: Option<u8>,
}

impl ContextManager {
    /// One run of `escalation`: applies the attempts it hands out and keeps what earns its
    /// rewrite by its rule, rolling back what never does (see [`crate::escalation`]).
    /// Estimates use a multiplier of at least `floor`. Returns whether an attempt earned.
    /// ④ summarizes through `summarizer` (the manager's, or the one a call names).
    pub(crate) async fn escalate(
        &self,
        summarizer: &dyn Summarizer,
        conversation: &mut Conversation,
        budget: Budget,
        escalation: &mut Escalation<'_>,
        report: &mut Report,
        floor: f64,
    ) -> bool {
        let mut run = self.begin(conversation, budget, report, floor);
        while let Some((cx, due)) = self.advance(&mut run, escalation, conversation, report) {
            self.summarize(summarizer, conversation, &cx, due, report)
                .await;
        }
        self.end(run, conversation, report)
    }

    /// [`ContextManager::escalate`] without a summarizer (the sync `compact`).
    pub(super) fn escalate_without_summarizer(
        &self,
        conversation: &mut Conversation,
        budget: Budget,
        escalation: &mut Escalation<'_>,
        report: &mut Report,
    ) -> bool {
        let mut run = self.begin(conversation, budget, report, 0.0);
        while let Some((cx, due)) = self.advance(&mut run, escalation, conversation, report) {
            stand_in_for_summary(conversation, &cx, due, report);
        }
        self.end(run, conversation, report)
    }

    fn begin(
        &self,
        conversation: &Conversation,
        budget: Budget,
        report: &Report,
        floor: f64,
    ) -> Run {
        Run {
            progress: Progress {
                kept_tokens: self.measure(conversation, budget, floor),
                ran: 0,
                earned: false,
            },
            first: report.steps.len(),
            initial: conversation.clone(),
            kept: None,
            budget,
            floor,
            pending: None,
        }
    }

    /// Judges the attempt applied last (if any), then applies the next ones until one
    /// calls for a summary: that summary with the context of its attempt, or `None` when
    /// the run is done. The caller writes the summary and calls again.
    fn advance(
        &self,
        run: &mut Run,
        escalation: &mut Escalation<'_>,
        conversation: &mut Conversation,
        report: &mut Report,
    ) -> Option<(StepContext<'_>, SummaryDue)> {
        loop {
            if let Some(attempt) = run.pending.take() {
                self.judge(run, escalation, (conversation, report), attempt);
            }
            let (attempt, recovery) = escalation.next(run.progress, run.budget)?;
            let cx = self
                .context_at_least(conversation, run.budget, run.floor)
                .in_attempt(attempt);
            run.pending = Some(attempt);
            if let Some(due) = self.apply(conversation, &cx, recovery, report) {
                return Some((cx, due));
            }
        }
    }

    fn measure(&self, conversation: &Conversation, budget: Budget, floor: f64) -> u64 {
        self.context_at_least(conversation, budget, floor)
            .tokens(conversation)
    }

    /// Judges an attempt by the escalation's one gain rule: what earns is kept.
    fn judge(
        &self,
        run: &mut Run,
        escalation: &Escalation<'_>,
        (conversation, report): (&Conversation, &Report),
        attempt: u8,
    ) {
        run.progress.ran += 1;
        let now = self.measure(conversation, run.budget, run.floor);
        if escalation.earns(run.progress.kept_tokens, now, run.budget) {
            run.progress.kept_tokens = now;
            run.progress.earned = true;
            run.kept = Some((conversation.clone(), report.steps.len()));
        } else {
            tracing::info!(
                attempt,
                freed = run.progress.kept_tokens.saturating_sub(now),
                "recovery step freed too little; escalating without a call"
            );
        }
    }

    /// Ends the run: what never earned its rewrite is undone. Returns whether an attempt
    /// earned.
    fn end(&self, run: Run, conversation: &mut Conversation, report: &mut Report) -> bool {
        let Run {
            progress,
            first,
            initial,
            kept,
            ..
        } = run;
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
        if let Some(due) = self.apply(conversation, &cx, recovery, report) {
            let summarizer = self.summarizer.as_ref();
            self.summarize(summarizer, conversation, &cx, due, report)
                .await;
        }
        report.changed_between(&before, &conversation.messages);
    }

    /// Applies one recovery step in the context of its attempt, all but its summary: the
    /// summary it calls for, if any, is returned for the caller to write.
    fn apply(
        &self,
        conversation: &mut Conversation,
        cx: &StepContext<'_>,
        recovery: Recovery,
        report: &mut Report,
    ) -> Option<SummaryDue> {
        let budget = cx.budget;
        let recent = recent_messages(conversation, self.config.recovery.recent_messages);
        match recovery {
            Recovery::PruneThenSummarize { target } => {
                // Before a call ③ may cut deeper than SPEC's first target (preemptive_target);
                // when it cannot get there, the attempt is SPEC's: ③, else ④, at that target.
                let spec = budget.share(self.config.recovery.targets[0]);
                let mut target = budget.share(target);
                let rules = KeepRules::keeping(recent);
                let mut pruned = conversation.clone();
                let mut step = prune_history(&mut pruned, cx, rules, target);
                // What ③ keeps is judged against the target; its trail may take room above
                // it (middle/notice.rs: the trail's budget is counted against the window).
                let reached = |step: &Option<Step>, pruned: &Conversation, target: u64| {
                    let trail = step.as_ref().and_then(|s| s.trail).map_or(0, |t| t.tokens);
                    step.is_some() && cx.tokens(pruned).saturating_sub(trail) <= target
                };
                if target < spec && !reached(&step, &pruned, target) {
                    target = spec;
                    pruned = conversation.clone();
                    step = prune_history(&mut pruned, cx, KeepRules::keeping(recent), target);
                }
                if reached(&step, &pruned, target) {
                    *conversation = pruned;
                    report.steps.extend(step);
                    None
                } else {
                    Some(SummaryDue { recent, target })
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
                Some(SummaryDue {
                    recent: tail.of(recent),
                    target,
                })
            }
            Recovery::BareNotice => {
                let target = budget.effective();
                // What is left of the current turn's results is cut to share the room under
                // the first recovery target, not at the edge of E: after an overflow the
                // estimate is only a lower bound of what the provider counts.
                let cut_to = budget.share(self.config.recovery.targets[0]);
                report
                    .steps
                    .extend(degrade::bare_notice(conversation, cx, 0, target));
                report
                    .steps
                    .extend(truncate_to_fit(conversation, cx, cut_to));
                None
            }
        }
    }

    /// ④ keeping at most `due.recent` messages, down to `due.target` tokens, with the
    /// longest tail that fits; falls back through ⑤ when it fails.
    async fn summarize(
        &self,
        summarizer: &dyn Summarizer,
        conversation: &mut Conversation,
        cx: &StepContext<'_>,
        due: SummaryDue,
        report: &mut Report,
    ) {
        let Some(plan) = middle::plan(conversation, cx, due.recent, due.target, Summaries::Update)
        else {
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
}

/// What stands in for ④ without a summarizer: ③ at the target, then, while over it, every
/// old tool result compacted and ③ down to the tail a summary would keep.
fn stand_in_for_summary(
    conversation: &mut Conversation,
    cx: &StepContext<'_>,
    due: SummaryDue,
    report: &mut Report,
) {
    let SummaryDue { recent, target } = due;
    report.steps.extend(prune_history(
        conversation,
        cx,
        KeepRules::keeping(recent),
        target,
    ));
    if cx.tokens(conversation) > target {
        report
            .steps
            .extend(compact_tool_results(conversation, cx, CompactMode::All));
    }
    if cx.tokens(conversation) > target
        && let Some(plan) = middle::plan(conversation, cx, recent, target, Summaries::Keep)
    {
        report
            .steps
            .extend(prune_history(conversation, cx, plan.rules, target));
    }
}
