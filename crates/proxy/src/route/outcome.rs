//! Stage 5, outcome: how a request ended, as the observers see it once it is answered, and
//! the trait they implement. Everything that happens after the answer (metrics, the status
//! page, the sticky prefix, the calibration, learned windows, background summaries) is an
//! observer registered at startup ([`crate::route::observers`]).

use std::sync::Mutex;

use bytes::Bytes;
use context_cascade::{BoxFuture, Budget, Conversation, Format, Report};

use crate::ops::metrics::CallOutcome;
use crate::ops::status::digest::RequestDigest;
use crate::state::LazyHashes;
use crate::state::Tenant;
use crate::window::discovery::Learned;

/// How one request on a cascade route ended.
pub(crate) struct Outcome<'r> {
    pub(crate) format: Format,
    /// The conversation's key under its tenant.
    pub(crate) key: String,
    /// The keyed hash of the request's credentials.
    pub(crate) tenant: &'r Tenant,
    /// The model the client named (any string: see `ModelLabels` before showing it).
    pub(crate) model: String,
    /// What the engine did and measured.
    pub(crate) report: Report,
    pub(crate) ended: CallOutcome,
    /// The budget the request was fitted to.
    pub(crate) budget: Budget,
    /// What went upstream, and how.
    pub(crate) sent: Sent<'r>,
}

/// What went upstream for a request.
pub(crate) enum Sent<'r> {
    /// The fast path forwarded the client's bytes as they came.
    Fast(FastSent),
    /// The cascade parsed the request and sent what it made of it.
    Cascade(Cascaded<'r>),
}

/// A request the fast path forwarded.
pub(crate) struct FastSent {
    /// The client's body.
    pub(crate) bytes: Bytes,
    /// Its digest for the status page.
    pub(crate) digest: RequestDigest,
    /// Past the pre-threshold with background summaries on.
    pub(crate) prepare_ahead: bool,
}

/// A request the cascade went through.
pub(crate) struct Cascaded<'r> {
    /// The conversation as it last went upstream.
    pub(crate) conversation: Conversation,
    /// The client's body.
    pub(crate) bytes: Bytes,
    /// The hashes of the client's messages, for the sticky prefix (taken by the one
    /// observer that records it).
    pub(crate) hashes: Mutex<Option<LazyHashes<'r>>>,
    /// A prefix sent before was stitched in.
    pub(crate) stitched: bool,
    /// The request went upstream as the client wrote it (nothing stitched, injected or
    /// pinned).
    pub(crate) untouched: bool,
    /// The smallest limit an overflow error stated.
    pub(crate) learned: Option<Learned>,
}

impl<'r> Outcome<'r> {
    /// The cascade's part of the outcome, when the request went through the cascade.
    pub(crate) fn cascaded(&self) -> Option<&Cascaded<'r>> {
        match &self.sent {
            Sent::Cascade(cascaded) => Some(cascaded),
            Sent::Fast(_) => None,
        }
    }

    /// Whether the upstream answered.
    pub(crate) fn answered(&self) -> bool {
        self.ended == CallOutcome::Answered
    }
}

/// Something that happens after a request is answered, before the answer goes back (so
/// that the next request of the conversation finds what it recorded).
pub(crate) trait Observer: Send + Sync {
    /// Sees how a request ended.
    fn after<'a>(&'a self, outcome: &'a Outcome<'_>) -> BoxFuture<'a, ()>;
}
