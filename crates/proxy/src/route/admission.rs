//! Stage 2, admission: the fast path sends a request the cascade would leave as it is (see
//! [`crate::route::fastpath`]); any other request is parsed for the cascade, or refused
//! with the reason when it is not valid JSON.

use std::sync::Mutex;

use context_cascade::{Budget, ContextManager, Format, Llm, LlmError, Report};
use serde_json::Value;

use crate::error::{ErrorKind, error_response};
use crate::ops::metrics::{CallOutcome, Metrics};
use crate::route::answer::Answer;
use crate::route::fastpath::{Decision, FastPath, Incoming, decide};
use crate::route::heavy::Turn;
use crate::route::inbound::Inbound;
use crate::route::outcome::{FastSent, Outcome, Sent};
use crate::route::responses::Watched;
use crate::route::upstream::{Upstream, forwarded_headers};
use crate::state::{StateStore, Tenancy, memory};
use crate::window::budget::Budgeting;
use crate::window::shared;

/// What admission needs.
pub(crate) struct Admission<'s> {
    pub(crate) fastpath: &'s FastPath,
    pub(crate) manager: &'s ContextManager,
    pub(crate) store: &'s dyn StateStore,
    pub(crate) budgeting: Budgeting<'s>,
    pub(crate) metrics: &'s Metrics,
    pub(crate) upstream: &'s Upstream,
    /// Background summaries are on.
    pub(crate) background: bool,
}

/// How admission left a request.
pub(crate) enum Admitted<'r> {
    /// The fast path sent it: how it ended and the answer.
    Fast(Box<(Outcome<'r>, Answer)>),
    /// Not a request the cascade can read: the error answer.
    Refused(axum::response::Response),
    /// The cascade runs on it.
    Parsed(Parsed),
}

/// A request parsed for the cascade.
pub(crate) struct Parsed {
    pub(crate) body: Value,
    /// The model it names (empty when none).
    pub(crate) model: String,
    /// The client asked for a streamed answer.
    pub(crate) stream: bool,
    /// The conversation's key under the request's tenant.
    pub(crate) key: String,
    /// The upstream's overflow answer to this very request on the fast path: the cascade's
    /// first call returns it rather than sending the request again.
    pub(crate) overflowed: Option<LlmError>,
}

/// What the fast path made of a request.
enum Fast<'r> {
    Answered(Box<(Outcome<'r>, Answer)>),
    Declined,
    Overflowed(LlmError),
}

impl Admission<'_> {
    /// Admits `inbound`: sent by the fast path, or parsed, or refused.
    pub(crate) async fn admit<'r>(&self, inbound: &'r Inbound, turn: &Turn) -> Admitted<'r> {
        let overflowed = match self.fast(inbound, turn).await {
            Fast::Answered(ended) => return Admitted::Fast(ended),
            Fast::Declined => None,
            Fast::Overflowed(error) => {
                turn.again().await;
                Some(error)
            }
        };
        parse(inbound, overflowed)
    }

    /// The fast path for one request.
    async fn fast<'r>(&self, inbound: &'r Inbound, turn: &Turn) -> Fast<'r> {
        let known = matches!(
            inbound.format,
            Format::OpenAi | Format::Anthropic | Format::Responses
        );
        if !known || !self.fastpath.enabled {
            return Fast::Declined;
        }
        let Some(decision) = self.decision(inbound).await else {
            return Fast::Declined;
        };
        // The client's bytes go as they came: nothing heavy is left to do.
        turn.end();
        match self.send(inbound, decision).await {
            Ok(ended) => Fast::Answered(Box::new(ended)),
            Err(overflow) => Fast::Overflowed(overflow),
        }
    }

    /// The fast path's decision, when it takes the request.
    async fn decision(&self, inbound: &Inbound) -> Option<(Decision, reqwest::header::HeaderMap)> {
        let headers = forwarded_headers(inbound.headers(), true);
        // The scales other replicas persisted count here as they would on the slow path.
        shared::before_call(self.store, self.manager).await;
        let resolved = Mutex::new(None);
        let budget = |model: String, reserve: u64| {
            let (headers, resolved) = (&headers, &resolved);
            async move {
                let (budget, source) = self.budgeting.resolve(headers, &model, reserve).await;
                *resolved.lock().unwrap_or_else(|p| p.into_inner()) = Some(source);
                budget
            }
        };
        let incoming = Incoming {
            format: inbound.format,
            headers: inbound.headers(),
            tenant: &inbound.tenant,
            bytes: &inbound.bytes,
        };
        let decision = decide(
            self.fastpath,
            self.manager,
            incoming,
            self.background,
            budget,
        );
        let decision = decision.await?;
        // A stored fact missing from the request is put back by the slow path; a store that
        // cannot answer sends the request there too (it says so in /healthz). A SQLite
        // store answers "none" from memory for a conversation it holds no facts of.
        match self.store.facts(&decision.key).await {
            Ok(facts) if facts.is_empty() => {}
            _ => return None,
        }
        let source = *resolved.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(source) = source {
            let model = decision.skeleton.model().unwrap_or("");
            self.budgeting.note(model, source);
        }
        Some((decision, headers))
    }

    /// Sends the client's bytes as they came; an overflow goes back for the cascade.
    async fn send<'r>(
        &self,
        inbound: &'r Inbound,
        (decision, headers): (Decision, reqwest::header::HeaderMap),
    ) -> Result<(Outcome<'r>, Answer), LlmError> {
        let skeleton = &decision.skeleton;
        let model = skeleton.model().unwrap_or("").to_owned();
        let stream = skeleton.envelope.get("stream").and_then(Value::as_bool) == Some(true);
        // The skeleton stands for the request: equal to itself, so its bytes go as they came.
        let original = Some((inbound.bytes.clone(), skeleton.clone()));
        let call = (self.upstream).call(inbound.format, inbound.path(), headers, stream, original);
        // Watched as the slow path's calls are: a Responses stream that fails with an
        // overflow before its first output event is an overflow here too.
        let call = Watched::new(call.ending(None), inbound.format);
        let result = call.call(skeleton).await;
        self.metrics.fast_path();
        let (ended, answer) = match result {
            Err(error) if error.overflow().is_some() => return Err(error),
            Err(error) => (CallOutcome::Failed, Answer::Failed(error)),
            Ok(completion) => {
                if let Some(real) = completion.prompt_tokens {
                    (self.manager).observe_sent(&model, decision.prior, decision.tokens, real);
                }
                let sent = (decision.prior, decision.tokens);
                let output = completion.output;
                let rescale = None; // the fast path sends what the client sent
                (
                    CallOutcome::Answered,
                    Answer::Upstream {
                        output,
                        sent,
                        rescale,
                    },
                )
            }
        };
        let outcome = fast_outcome(inbound, decision, model, ended);
        Ok((outcome, answer))
    }
}

/// How a request the fast path sent ended.
fn fast_outcome(
    inbound: &Inbound,
    decision: Decision,
    model: String,
    ended: CallOutcome,
) -> Outcome<'_> {
    let budget: Budget = decision.budget;
    let report = Report::untouched(
        inbound.format,
        budget,
        decision.tokens,
        decision.messages,
        decision.estimator.multiplier,
    );
    Outcome {
        format: inbound.format,
        key: decision.key,
        tenant: &inbound.tenant,
        model,
        report,
        ended,
        budget,
        sent: Sent::Fast(FastSent {
            bytes: inbound.bytes.clone(),
            digest: decision.digest,
            prepare_ahead: decision.prepare_ahead,
        }),
    }
}

/// Parses the body for the cascade, or refuses it with where it is not JSON.
fn parse<'r>(inbound: &Inbound, overflowed: Option<LlmError>) -> Admitted<'r> {
    let format = inbound.format;
    let body: Value = match serde_json::from_slice(&inbound.bytes) {
        Ok(body) => body,
        Err(e) => {
            let message = format!(
                "context-cascade: invalid JSON in the request body at line {}, column {}: {e}",
                e.line(),
                e.column()
            );
            return Admitted::Refused(error_response(format, ErrorKind::InvalidRequest, &message));
        }
    };
    let model = (body.get("model").and_then(Value::as_str))
        .unwrap_or("")
        .to_owned();
    let stream = body.get("stream").and_then(Value::as_bool) == Some(true);
    // Everything kept about the conversation is the credential's own (SPEC "Proxy state").
    let conversation = memory::conversation_key(inbound.headers(), &body, format);
    let key = Tenancy::scoped(&inbound.tenant, &conversation);
    Admitted::Parsed(Parsed {
        body,
        model,
        stream,
        key,
        overflowed,
    })
}
