//! Recall after the engine's call: what the cascade removed is kept for the request's
//! tenant, and an answer that calls the recall tool is answered from the store and sent
//! upstream again with the call and its result appended — at most [`MAX_ROUNDS`] times per
//! client request. The client gets one answer: the recall calls taken out, usage summed.
//! A streamed answer's rounds run in `route::splice`, while the client reads.

use axum::http::header::CONTENT_LENGTH;
use bytes::Bytes;
use context_cascade::{CallError, Called, Conversation, Format, Report};
use serde_json::Value;

use crate::recall::turn::{self, Asked};
use crate::recall::{Recaller, offered_tool};
use crate::route::inbound::Inbound;
use crate::route::splice::{Resend, Splice};
use crate::route::upstream::{UpstreamCall, UpstreamOutput};

use crate::recall::MAX_ROUNDS;

/// What a recall round needs: the store, whose request it is, and the call to repeat.
pub(crate) struct Round<'a> {
    pub(crate) recaller: &'a Recaller,
    pub(crate) inbound: &'a Inbound,
    /// The tenant's conversation key.
    pub(crate) scoped: &'a str,
    /// A call like the engine's, offering the tool, for the follow-ups.
    pub(crate) call: UpstreamCall<'a>,
}

impl Round<'_> {
    /// The engine's `result` with recall's part done when `round` is on: what was removed
    /// kept, the recall rounds run. A failed call, or recall off, is left as it is.
    pub(crate) async fn after(
        round: Option<&Round<'_>>,
        result: Result<Called<UpstreamOutput>, CallError>,
        conversation: &Conversation,
    ) -> Result<Called<UpstreamOutput>, CallError> {
        match (result, round) {
            (Ok(mut called), Some(round)) => {
                round.keep(&called.report).await;
                called.output = match called.output {
                    UpstreamOutput::Stream(response) => round.splice(conversation, response),
                    output => round.answer(conversation, output).await,
                };
                Ok(called)
            }
            (result, _) => result,
        }
    }

    /// Keeps what `report`'s steps removed (sealed under the request's key).
    pub(crate) async fn keep(&self, report: &Report) {
        let removals: Vec<_> = report.steps.iter().flat_map(|s| &s.removed).collect();
        if removals.is_empty() {
            return;
        }
        let key = &self.inbound.recall_key;
        if let Err(error) = self.recaller.keep(key, self.scoped, &removals).await {
            // The answer goes on without it: a later recall says nothing is kept.
            tracing::warn!(%error, "recall: removed content not kept");
        }
    }

    /// A streamed answer to a request that offered the recall tool, as a [`Splice`] that
    /// runs the rounds while the client reads; as it is when the tool was not offered.
    fn splice(&self, conversation: &Conversation, first: reqwest::Response) -> UpstreamOutput {
        let request = (self.call.body(conversation).ok())
            .and_then(|sent| serde_json::from_slice::<Value>(&sent).ok());
        let Some((request, tool)) = request.and_then(|r| offered_tool(&r).map(|tool| (r, tool)))
        else {
            return UpstreamOutput::Stream(first);
        };
        let call = &self.call;
        let splice = Splice {
            format: conversation.format,
            tool,
            request,
            recaller: self.recaller.clone(),
            key: self.inbound.recall_key.clone(),
            scoped: self.scoped.to_owned(),
            resend: Resend {
                client: call.client.clone(),
                url: call.url.clone(),
                headers: call.headers.clone(),
                timeout: call.timeout,
            },
        };
        UpstreamOutput::Recalling(first, Box::new(splice))
    }

    /// The client's answer for `output`: recall rounds run while the model calls only
    /// the recall tool, then its calls taken out. Anything unexpected (an answer that is
    /// not JSON, a failed follow-up) leaves the last answer as it is.
    pub(crate) async fn answer(
        &self,
        conversation: &Conversation,
        output: UpstreamOutput,
    ) -> UpstreamOutput {
        let UpstreamOutput::Full {
            status,
            mut headers,
            body,
        } = output
        else {
            return output;
        };
        let request = (self.call.body(conversation).ok())
            .and_then(|sent| serde_json::from_slice::<Value>(&sent).ok());
        let parsed = serde_json::from_slice::<Value>(&body).ok();
        let (Some(mut request), Some(mut answer)) = (request, parsed) else {
            return UpstreamOutput::Full {
                status,
                headers,
                body,
            };
        };
        let Some(tool) = offered_tool(&request) else {
            return UpstreamOutput::Full {
                status,
                headers,
                body,
            };
        };
        let format = conversation.format;
        let mut usage = answer.get("usage").cloned();
        let mut rounds = 0;
        while rounds < MAX_ROUNDS {
            let asked = turn::asked(format, &answer, &tool);
            if asked.recall.is_empty() || asked.client_calls > 0 {
                break;
            }
            let Some(next) = self.follow_up(format, &mut request, &answer, &asked).await else {
                break;
            };
            if let (Some(total), Some(round)) = (&mut usage, next.get("usage")) {
                turn::add_usage(total, round);
            }
            answer = next;
            rounds += 1;
        }
        let before = answer.clone();
        turn::strip_recall(format, &mut answer, &tool);
        if rounds == 0 && answer == before {
            return UpstreamOutput::Full {
                status,
                headers,
                body,
            };
        }
        if let (Some(total), Some(slot)) = (usage, answer.get_mut("usage")) {
            *slot = total;
        }
        tracing::info!(rounds, "recall: answered from the store");
        headers.remove(CONTENT_LENGTH);
        let body = serde_json::to_vec(&answer).map(Bytes::from).unwrap_or(body);
        UpstreamOutput::Full {
            status,
            headers,
            body,
        }
    }

    /// One round: the recall calls answered, appended with the turn to `request`, sent.
    /// `None` when the follow-up did not come back as a complete JSON answer.
    async fn follow_up(
        &self,
        format: Format,
        request: &mut Value,
        answer: &Value,
        asked: &Asked,
    ) -> Option<Value> {
        let (key, scoped) = (&self.inbound.recall_key, self.scoped);
        let results = self.recaller.answer_all(key, scoped, asked).await;
        turn::follow_up(format, request, answer, &results);
        let body = Bytes::from(serde_json::to_vec(request).ok()?);
        match self.call.send_body(Ok(body)).await.ok()?.output {
            UpstreamOutput::Full { body, .. } => serde_json::from_slice(&body).ok(),
            UpstreamOutput::Stream(_) | UpstreamOutput::Recalling(..) => None,
        }
    }
}
