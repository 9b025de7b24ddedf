//! Stage 4, the upstream call: the engine's retry loop ([`ContextManager::call`]) over the
//! watched upstream, which answers an overflow by compacting further (at most
//! `max_calls` calls), and keeps the limit an overflow error states.

use std::sync::{Arc, Mutex};

use context_cascade::{CallError, Called, ContextManager, Conversation, Report};

use crate::ops::metrics::CallOutcome;
use crate::recall::Recaller;
use crate::route::answer::Answer;
use crate::route::gauge;
use crate::route::heavy::Turn;
use crate::route::history::whole;
use crate::route::inbound::Inbound;
use crate::route::outcome::{Cascaded, Outcome, Sent};
use crate::route::preparation::Prepared;
use crate::route::recalling::Round;
use crate::route::responses::Watched;
use crate::route::upstream::{Upstream, UpstreamCall, UpstreamOutput};
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
    /// Recall's store (`None`: recall off).
    pub(crate) recaller: Option<&'s Recaller>,
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
            held,
            client_tokens,
        } = prepared;
        // The client's bytes stand for the whole request (held messages included).
        let original =
            untouched.then(|| (inbound.bytes.clone(), whole(held.as_ref(), &conversation)));
        // Recall's follow-ups: the same request offering the tool, held messages joined;
        // each gives the turn back before it waits (the engine's first call has already).
        // Read whole here; a streamed request's follow-ups stream (`route::splice`, which
        // takes this call's URL and headers).
        let round = (self.recaller).map(|recaller| Round {
            recaller,
            inbound,
            scoped: &key,
            call: UpstreamCall {
                recall_tool: true,
                held: held.clone(),
                ..(self.upstream).call(format, inbound.path(), headers.clone(), false, None)
            }
            .ending(Some(turn)),
        });
        let mut call = (self.upstream).call(format, inbound.path(), headers, stream, original);
        call.held = held.clone();
        call.recall_tool = round.is_some();
        let call = call.ending(Some(turn));
        let call = Watched::new(call, format).answered_already(overflowed);
        shared::before_call(self.store, self.manager).await;
        // The summary cache below the engine, bound to the request's tenant.
        let summaries = self.summaries.for_tenant(&inbound.tenant);
        let result = (self.manager)
            .call_with_summarizer(&call, &mut conversation, budget, &summaries)
            .await;
        let result = Round::after(round.as_ref(), result, &conversation).await;
        let (report, ended, answer) = self.ended(result, &conversation, client_tokens);
        let conversation = match &held {
            Some(held) => held.join(&conversation),
            None => conversation,
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

impl Calling<'_> {
    /// How the engine's call ended: its report, the outcome and the client's answer, whose
    /// usage is rescaled to `client_tokens` when the gauge reports the client's size.
    fn ended(
        &self,
        result: Result<Called<UpstreamOutput>, CallError>,
        sent: &Conversation,
        client_tokens: Option<u64>,
    ) -> (Report, CallOutcome, Answer) {
        match result {
            Ok(called) => {
                // Both estimates under the calibration before the answer (which it updates).
                let after = called.report.tokens_after;
                let rescale = client_tokens.and_then(|client| gauge::factor(client, after));
                let output = called.output;
                let sent = (self.manager.prior(sent), self.manager.estimate(sent));
                let answer = Answer::Upstream {
                    output,
                    sent,
                    rescale,
                };
                (called.report, CallOutcome::Answered, answer)
            }
            Err(CallError::Exhausted { report }) => {
                (report, CallOutcome::Exhausted, Answer::Exhausted)
            }
            Err(CallError::Llm { error, report }) => {
                (report, CallOutcome::Failed, Answer::Failed(error))
            }
        }
    }
}
