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
//! Recovery walks the ladder of [`crate::escalation`], one walk for the whole call: after
//! each overflow the next attempts run until one earns its rewrite (frees at least
//! `min_gain` of the refused request's estimate, counting the attempts before it that did
//! not); a step that frees less does not earn a call, the next one runs at once.

use crate::config::Budget;
use crate::conversation::Conversation;
use crate::engine::{ContextManager, model_of};
use crate::escalation::{Escalation, Goal};
use crate::llm::{Llm, LlmError};
use crate::report::Report;
use crate::summarizer::Summarizer;

/// A successful call, with everything the cascade did to get it through.
#[derive(Debug)]
pub struct Called<T> {
    /// What the LLM returned.
    pub output: T,
    /// What the cascade did, calls and overflows included.
    pub report: Report,
}

/// Why [`ContextManager::call`] gave up.
#[derive(Debug, thiserror::Error)]
pub enum CallError {
    /// Every call overflowed, or no strategy could free more: the report lists each step.
    #[error("the request still overflows after {} call(s): {}", report.calls, report.reason.as_deref().unwrap_or("no strategy could free enough"))]
    Exhausted {
        /// Every step tried, with the reason.
        report: Report,
    },
    /// The provider failed for another reason (rate limit, auth, ...): passed on untouched.
    #[error("{error}")]
    Llm {
        /// The provider's error, untouched.
        error: LlmError,
        /// What the cascade did before it.
        report: Report,
    },
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
    /// Prepares the conversation and calls `llm`, recovering from overflows, at most
    /// `max_calls` calls in all. The conversation is left as it was last sent.
    pub async fn call<L: Llm>(
        &self,
        llm: &L,
        conversation: &mut Conversation,
        budget: Budget,
    ) -> Result<Called<L::Output>, CallError> {
        (self.call_with_summarizer(llm, conversation, budget, self.summarizer())).await
    }

    /// [`ContextManager::call`] with `summarizer` for ④ in place of the manager's, for this
    /// call only: a server summarizes each request on behalf of its caller (the proxy's
    /// summary cache bound to the request's tenant).
    pub async fn call_with_summarizer<L: Llm>(
        &self,
        llm: &L,
        conversation: &mut Conversation,
        budget: Budget,
        summarizer: &dyn Summarizer,
    ) -> Result<Called<L::Output>, CallError> {
        let mut budget = budget;
        let mut report = self.prepare_using(summarizer, conversation, budget).await;
        // One walk up the ladder for the whole call: every overflow resumes it.
        let mut escalation = Escalation::new(self.config(), Goal::Earned);
        let mut floor = 0.0_f64;
        loop {
            let prior = self.prior(conversation);
            // What the engine counted for this request: an exact count is checked against
            // the provider's.
            let counted = self.estimate(conversation);
            report.calls += 1;
            let error = match llm.call(conversation).await {
                Ok(completion) => {
                    if let Some(real) = completion.prompt_tokens {
                        self.observe_sent(model_of(conversation), prior, counted, real);
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
                self.observe_sent(model_of(conversation), prior, counted, real);
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
            if report.calls >= self.config().recovery.max_calls {
                self.finish(conversation, budget, &mut report);
                report
                    .reason
                    .get_or_insert_with(|| format!("{} calls overflowed", report.calls));
                return Err(CallError::Exhausted { report });
            }
            // A run that earns nothing rolls back its steps: the conversation is then as
            // it was last sent, and the report holds no step that never reached the provider.
            if !self
                .escalate(
                    summarizer,
                    conversation,
                    budget,
                    &mut escalation,
                    &mut report,
                    floor,
                )
                .await
            {
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
}
