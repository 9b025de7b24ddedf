//! Stage 4, the upstream call: the engine's retry loop ([`ContextManager::call`]) over the
//! watched upstream, which answers an overflow by compacting further (at most
//! `max_calls` calls), and keeps the limit an overflow error states.

use std::sync::{Arc, Mutex};

use context_cascade::{CallError, ContextManager};

use crate::ops::metrics::CallOutcome;
use crate::route::answer::Answer;
use crate::route::heavy::Turn;
use crate::route::inbound::Inbound;
use crate::route::outcome::{Cascaded, Outcome, Sent};
use crate::route::preparation::Prepared;
use crate::route::responses::Watched;
use crate::route::upstream::Upstream;
use crate::state::StateStore;
use crate::state::summary_cache::CachingSummarizer;
use crate::window::shared;

/// What the call needs.
pub(crate) struct Calling<'s> {
    pub(crate) manager: &'s ContextManager,
    /// Where other replicas' calibration is read from before the call.
    pub(crate) store: &'s dyn StateStore,
    pub(crate) upstream: &'s Upstream,
    /// The summary cache, used through a view bound to the request's tenant.
    pub(crate) summaries: &'s Arc<CachingSummarizer>,
}

impl Calling<'_> {
    /// Runs the engine's call for `prepared`: how the request ended, and the answer.
    pub(crate) async fn call<'r>(
        &self,
        inbound: &'r Inbound,
        prepared: Prepared<'r>,
        turn: &Turn,
    ) -> (Outcome<'r>, Answer) {
        let format = inbound.format;
        let Prepared {
            key,
            model,
            stream,
            mut conversation,
            hashes,
            budget,
            stitched,
            untouched,
            headers,
            overflowed,
        } = prepared;
        let original = untouched.then(|| (inbound.bytes.clone(), conversation.clone()));
        let call = (self.upstream).call(format, inbound.path(), headers, stream, original);
        let call = call.ending(Some(turn));
        let call = Watched::new(call, format).answered_already(overflowed);
        shared::before_call(self.store, self.manager).await;
        // The summary cache below the engine, bound to the request's tenant.
        let summaries = self.summaries.for_tenant(&inbound.tenant);
        let result = (self.manager)
            .call_with_summarizer(&call, &mut conversation, budget, &summaries)
            .await;
        let (report, ended, answer) = match result {
            Ok(called) => {
                let sent = (
                    self.manager.prior(&conversation),
                    self.manager.estimate(&conversation),
                );
                let output = called.output;
                let answer = Answer::Upstream { output, sent };
                (called.report, CallOutcome::Answered, answer)
            }
            Err(CallError::Exhausted { report }) => {
                (report, CallOutcome::Exhausted, Answer::Exhausted)
            }
            Err(CallError::Llm { error, report }) => {
                (report, CallOutcome::Failed, Answer::Failed(error))
            }
        };
        let cascaded = Cascaded {
            conversation,
            bytes: inbound.bytes.clone(),
            hashes: Mutex::new(Some(hashes)),
            stitched,
            untouched,
            learned: call.learned(),
        };
        let outcome = Outcome {
            format,
            key,
            tenant: &inbound.tenant,
            model,
            report,
            ended,
            budget,
            sent: Sent::Cascade(cascaded),
        };
        (outcome, answer)
    }
}
