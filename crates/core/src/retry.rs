//! The retry loop (SPEC's getRetryStrategy): call, and on a context overflow calibrate,
//! recover and call again — at most `max_calls` calls in all.
//!
//! ```text
//! prepare: Layer 1, then shouldPreemptiveCompact → Layer 2/3
//! call LLM
//!   ok             → calibrate from the reported usage, done
//!   overflow error → calibrate from the count it quotes, recover (escalating), call again
//!   other error    → returned untouched (rate limits are not overflows)
//! ```
//!
//! Recovery escalates with the attempt: ③ (④ if ③ falls short) at 0.75·E; ④ at 0.6·E; ④
//! at 0.5·E with half the recent messages and every old tool result compacted; ⑤'s bare
//! notice keeping only the irreducible messages. A step that frees less than `min_gain` of
//! the estimate does not earn a call: the next one runs at once.

use crate::config::Budget;
use crate::conversation::Conversation;
use crate::engine::{ContextManager, model_of};
use crate::llm::{Llm, LlmError};
use crate::report::Report;

/// What one recovery attempt does.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Recovery {
    /// ③ keeping N recent messages; ④ at the same target when ③ does not reach it.
    PruneThenSummarize { target: f64 },
    /// ④ down to `target` (a share of E), optionally with half the recent messages and
    /// every old tool result compacted first.
    Summarize {
        target: f64,
        halve_recent: bool,
        compact_all: bool,
    },
    /// ⑤ level 3, keeping only system, first user, pinned, summary and current messages.
    BareNotice,
}

/// A successful call, with everything the cascade did to get it through.
#[derive(Debug)]
pub struct Called<T> {
    pub output: T,
    pub report: Report,
}

/// Why [`ContextManager::call`] gave up.
#[derive(Debug, thiserror::Error)]
pub enum CallError {
    /// Every call overflowed, or no strategy could free more: the report lists each step.
    #[error("the request still overflows after {} call(s): {}", report.calls, report.reason.as_deref().unwrap_or("no strategy could free enough"))]
    Exhausted { report: Report },
    /// The provider failed for another reason (rate limit, auth, ...): passed on untouched.
    #[error("{error}")]
    Llm { error: LlmError, report: Report },
}

impl CallError {
    /// The report of every step tried.
    pub fn report(&self) -> &Report {
        match self {
            CallError::Exhausted { report } | CallError::Llm { report, .. } => report,
        }
    }
}

impl ContextManager {
    /// What recovery attempt `attempt` (1-based) does; `None` past the last one.
    pub fn retry_strategy(&self, attempt: usize) -> Option<Recovery> {
        let [first, second, third] = self.config().recovery_targets;
        match attempt {
            1 => Some(Recovery::PruneThenSummarize { target: first }),
            2 => Some(Recovery::Summarize {
                target: second,
                halve_recent: false,
                compact_all: false,
            }),
            3 => Some(Recovery::Summarize {
                target: third,
                halve_recent: true,
                compact_all: true,
            }),
            4 => Some(Recovery::BareNotice),
            _ => None,
        }
    }

    /// Prepares the conversation and calls `llm`, recovering from overflows, at most
    /// `max_calls` calls in all. The conversation is left as it was last sent.
    pub async fn call<L: Llm>(
        &self,
        llm: &L,
        conversation: &mut Conversation,
        budget: Budget,
    ) -> Result<Called<L::Output>, CallError> {
        let mut budget = budget;
        let mut report = self.prepare(conversation, budget).await;
        let mut attempt = 0;
        let mut floor = 0.0_f64;
        loop {
            let prior = self.prior(conversation);
            report.calls += 1;
            let error = match llm.call(conversation).await {
                Ok(completion) => {
                    if let Some(real) = completion.prompt_tokens {
                        self.observe(model_of(conversation), prior, real);
                    }
                    return Ok(Called {
                        output: completion.output,
                        report,
                    });
                }
                Err(error) => error,
            };
            let Some(overflow) = error.overflow() else {
                return Err(CallError::Llm { error, report });
            };
            report.overflows += 1;
            tracing::warn!(call = report.calls, observed = ?overflow.observed_tokens, limit = ?overflow.limit_tokens, "context overflow");
            if let Some(real) = overflow.observed_tokens {
                self.observe(model_of(conversation), prior, real);
            }
            // A provider that quotes a smaller window than ours knows better.
            if let Some(limit) = overflow.limit_tokens
                && limit < budget.window
            {
                budget.window = limit;
            }
            // The smoothed scale moves only part of the way (α): for this request, the
            // estimate must be at least what the provider counted, or more than E when it
            // quoted nothing, else recovery would think the request already fits.
            let counted = (overflow.observed_tokens)
                .map_or(budget.effective() as f64 + 1.0, |real| real as f64);
            if prior > 0.0 {
                floor = floor.max(counted / prior);
            }
            if report.calls >= self.config().max_calls {
                self.finish(conversation, budget, &mut report);
                report
                    .reason
                    .get_or_insert_with(|| format!("{} calls overflowed", report.calls));
                return Err(CallError::Exhausted { report });
            }
            // Kept so that giving up leaves the conversation as it was last sent, and the
            // report without the steps that never reached the provider.
            let (sent, steps_sent) = (conversation.clone(), report.steps.len());
            if !self
                .recover_enough(conversation, budget, (&mut attempt, floor), &mut report)
                .await
            {
                *conversation = sent;
                report.steps.truncate(steps_sent);
                self.finish(conversation, budget, &mut report);
                let reason = format!("no strategy could free more after {} call(s)", report.calls);
                report.reason = Some(
                    report
                        .reason
                        .take()
                        .map_or(reason.clone(), |r| format!("{reason}: {r}")),
                );
                return Err(CallError::Exhausted { report });
            }
            self.finish(conversation, budget, &mut report);
        }
    }

    /// Runs recovery attempts until, together, they free at least `min_gain` of the refused
    /// request's estimate: a step that frees less does not earn a call, the next one runs at
    /// once. Returns false when none is left.
    async fn recover_enough(
        &self,
        conversation: &mut Conversation,
        budget: Budget,
        (attempt, floor): (&mut usize, f64),
        report: &mut Report,
    ) -> bool {
        let estimate = |c: &Conversation| self.context_at_least(c, budget, floor).tokens(c);
        // Measured from the request that was refused: the steps since then add up.
        let sent = estimate(conversation);
        loop {
            *attempt += 1;
            if self.retry_strategy(*attempt).is_none() {
                return false;
            }
            self.recover_at_least(conversation, budget, *attempt, report, floor)
                .await;
            let freed = sent.saturating_sub(estimate(conversation));
            if freed as f64 >= self.config().min_gain * sent as f64 {
                return true;
            }
            tracing::info!(
                attempt = *attempt,
                freed,
                "recovery step freed too little; escalating without a call"
            );
        }
    }
}
