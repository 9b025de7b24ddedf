//! Recall on a streamed answer: the upstream's events go to the client as they arrive,
//! except a call of the recall tool, which is held back (its name comes first in every
//! format, so nothing of it has reached the client). When a round ends having called only
//! the recall tool, the proxy answers the calls from the store, streams the follow-up
//! (the call and its result appended) and splices it into the same client stream: one
//! message / choice / response, indices renumbered, the ending (stop reason, usage summed)
//! held until the last round. At most [`MAX_ROUNDS`] rounds; a round that also calls the
//! client's tools is the last, and reaches the client with the client's calls only.
//!
//! The format's part is a [`Splicer`] (`chat`, `messages`, `responses`); this module runs
//! the rounds.

mod chat;
mod event;
mod messages;
mod responses;

use std::convert::Infallible;
use std::time::Duration;

use axum::http::HeaderMap;
use axum::http::header::CONTENT_TYPE;
use bytes::Bytes;
use context_cascade::Format;
use futures::stream::BoxStream;
use futures::{Stream, StreamExt};
use serde_json::Value;

use crate::recall::turn::{self, Asked};
use crate::recall::{MAX_ROUNDS, Recaller};
use crate::route::cut::complete_events;
use crate::state::sealing::RecallKey;

pub(crate) use event::Event;

/// One format's handling of a spliced stream.
pub(crate) trait Splicer: Send {
    /// Writes to `out` what the client gets of `event` (an event of the current round).
    fn event(&mut self, event: &Event, out: &mut Vec<u8>);
    /// Ends the current round: what it asked, and its turn as a non-streaming answer
    /// (what [`turn::follow_up`] appends to the next request).
    fn end_round(&mut self) -> (Asked, Value);
    /// Writes the held ending of the last round (recall calls gone, usage summed).
    fn finish(&mut self, out: &mut Vec<u8>);
}

/// The splicer of `format` for the recall tool named `tool`.
fn splicer(format: Format, tool: String) -> Box<dyn Splicer> {
    match format {
        Format::OpenAi | Format::Bare => Box::new(chat::Chat::new(tool)),
        Format::Anthropic => Box::new(messages::Messages::new(tool)),
        Format::Responses => Box::new(responses::Responses::new(tool)),
    }
}

/// Where a follow-up goes: the engine's call, owned, so that the stream outlives the route.
pub(crate) struct Resend {
    pub(crate) client: reqwest::Client,
    pub(crate) url: String,
    pub(crate) headers: HeaderMap,
    pub(crate) timeout: Duration,
}

impl Resend {
    /// POSTs `request`; the response when it came back with a success status.
    async fn post(&self, request: &Value) -> Option<reqwest::Response> {
        let body = serde_json::to_vec(request).ok()?;
        let mut outgoing = self.client.post(&self.url).headers(self.headers.clone());
        if !self.headers.contains_key(CONTENT_TYPE) {
            outgoing = outgoing.header(CONTENT_TYPE, "application/json");
        }
        let sent = tokio::time::timeout(self.timeout, outgoing.body(body).send()).await;
        match sent {
            Ok(Ok(response)) if response.status().is_success() => Some(response),
            Ok(Ok(response)) => {
                tracing::warn!(status = %response.status(), "recall: streamed follow-up refused");
                None
            }
            Ok(Err(error)) => {
                tracing::warn!(%error, "recall: streamed follow-up failed");
                None
            }
            Err(_) => {
                tracing::warn!("recall: streamed follow-up timed out");
                None
            }
        }
    }
}

/// What a streamed request with the recall tool needs after its first round.
pub(crate) struct Splice {
    pub(crate) format: Format,
    /// The recall tool's name in this request.
    pub(crate) tool: String,
    /// The request as first sent (tool offered), extended by each round.
    pub(crate) request: Value,
    pub(crate) recaller: Recaller,
    pub(crate) key: RecallKey,
    /// The tenant's conversation key.
    pub(crate) scoped: String,
    pub(crate) resend: Resend,
}

/// The run of a spliced stream.
struct Run {
    splice: Splice,
    splicer: Box<dyn Splicer>,
    events: BoxStream<'static, Result<Bytes, Infallible>>,
    /// Bytes of an event not yet complete (a chunk may end inside one).
    partial: Vec<u8>,
    rounds: usize,
    done: bool,
    /// An error event went to the client: the stream ends there, with no ending of its own.
    broken: bool,
    /// How long a follow-up's stream may stay idle.
    idle: Duration,
}

impl Splice {
    /// The client's stream: `first` (the first round's events, cut at event boundaries)
    /// and every follow-up round's (each may stay idle for `idle`), spliced into one.
    pub(crate) fn run<S>(
        self,
        first: S,
        idle: Duration,
    ) -> impl Stream<Item = Result<Bytes, Infallible>> + Send
    where
        S: Stream<Item = Result<Bytes, Infallible>> + Send + 'static,
    {
        let run = Run {
            splicer: splicer(self.format, self.tool.clone()),
            splice: self,
            events: first.boxed(),
            partial: Vec::new(),
            rounds: 0,
            done: false,
            broken: false,
            idle,
        };
        futures::stream::unfold(run, |mut run| async move {
            let bytes = run.next().await?;
            Some((Ok(bytes), run))
        })
    }
}

impl Run {
    /// The next bytes for the client; `None` once the last round's ending went out.
    async fn next(&mut self) -> Option<Bytes> {
        let mut out = Vec::new();
        while !self.done {
            match self.events.next().await {
                Some(Ok(chunk)) => {
                    self.feed(&chunk, &mut out);
                    if !out.is_empty() {
                        return Some(Bytes::from(out));
                    }
                }
                Some(Err(never)) => match never {},
                None => {
                    // The last event may lack its blank line.
                    let rest = std::mem::take(&mut self.partial);
                    if let Some(event) = Event::parse(&rest) {
                        self.pass(&event, &mut out);
                    }
                    if self.broken {
                        // What the client has is all it gets: no ending after an error.
                        self.done = true;
                    } else if !self.next_round().await {
                        self.splicer.finish(&mut out);
                        self.done = true;
                    }
                    if !out.is_empty() {
                        return Some(Bytes::from(out));
                    }
                }
            }
        }
        None
    }

    /// Passes the complete events of `chunk` to the splicer.
    fn feed(&mut self, chunk: &[u8], out: &mut Vec<u8>) {
        self.partial.extend_from_slice(chunk);
        while let Some((block, rest)) = event::split_first(&self.partial) {
            if let Some(event) = Event::parse(block) {
                self.pass(&event, out);
            }
            self.partial.drain(..rest);
        }
    }

    /// Passes `event` to the splicer, noting an error event (the upstream's, or the one
    /// `complete_events` ends a cut stream with).
    fn pass(&mut self, event: &Event, out: &mut Vec<u8>) {
        if !self.broken {
            self.splicer.event(event, out);
        }
        let error =
            (event.json.as_ref()).is_some_and(|j| j.get("error").is_some_and(|e| !e.is_null()));
        if event.kind() == "error" || (error && event.kind().is_empty()) {
            self.broken = true;
        }
    }

    /// Starts the next round when the one that ended called only the recall tool (and
    /// rounds are left): `false` when the stream ends here.
    async fn next_round(&mut self) -> bool {
        let (asked, answer) = self.splicer.end_round();
        if self.rounds >= MAX_ROUNDS || asked.recall.is_empty() || asked.client_calls > 0 {
            return false;
        }
        let splice = &mut self.splice;
        let (key, scoped) = (&splice.key, &splice.scoped);
        let results = splice.recaller.answer_all(key, scoped, &asked).await;
        turn::follow_up(splice.format, &mut splice.request, &answer, &results);
        let Some(response) = splice.resend.post(&splice.request).await else {
            return false;
        };
        let events = complete_events(splice.format, response.bytes_stream(), self.idle);
        self.events = events.boxed();
        self.rounds += 1;
        tracing::info!(
            rounds = self.rounds,
            "recall: streamed round answered from the store"
        );
        true
    }
}
