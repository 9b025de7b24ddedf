//! A cascade route's request through its stages: inbound → admission (the fast path, or
//! parsed) → preparation → the upstream call → outcome, then the observers, then the
//! answer. The chat, messages and responses routes all go this way.

use axum::response::Response;

use crate::route::admission::{Admission, Admitted};
use crate::route::answer::Answering;
use crate::route::call::Calling;
use crate::route::heavy::HeavyStages;
use crate::route::inbound::Inbound;
use crate::route::outcome::Observer;
use crate::route::preparation::Preparation;

/// The stages, each with the services it uses.
pub(crate) struct Stages<'s> {
    /// Turns at the heavy stages: admission up to the first upstream body written.
    pub(crate) heavy: &'s HeavyStages,
    pub(crate) admission: Admission<'s>,
    pub(crate) preparation: Preparation<'s>,
    pub(crate) calling: Calling<'s>,
    pub(crate) answering: Answering<'s>,
    /// What runs after the answer, in order.
    pub(crate) observers: &'s [Box<dyn Observer>],
}

impl Stages<'_> {
    /// One request, read, through to its answer.
    pub(crate) async fn run(&self, inbound: Inbound) -> Response {
        // Waiting here holds only the body's bytes; the turn ends once the upstream body is
        // written (or with this function).
        let turn = self.heavy.turn().await;
        let (outcome, answer) = match self.admission.admit(&inbound, &turn).await {
            Admitted::Refused(refusal) => return refusal,
            Admitted::Fast(ended) => *ended,
            Admitted::Parsed(parsed) => {
                let prepared = match self.preparation.prepare(&inbound, parsed).await {
                    Ok(prepared) => prepared,
                    Err(refusal) => return refusal,
                };
                self.calling.call(&inbound, prepared, &turn).await
            }
        };
        turn.end();
        for observer in self.observers {
            observer.after(&outcome).await;
        }
        self.answering.respond(&outcome, answer)
    }
}
