//! What happens after a request is answered, one observer each: learned windows, the
//! status page, the fast path's memory of clean conversations, the metrics, the sticky
//! prefix, the calibration and background summaries. [`registered`] lists them in the
//! order they run.

use std::sync::Arc;

use context_cascade::BoxFuture;
use context_cascade::logged::clipped;

use crate::ahead::background::{self, Background};
use crate::ops::metrics::{CallOutcome, Metrics};
use crate::ops::status::Status;
use crate::ops::status::digest::RequestDigest;
use crate::ops::status::record;
use crate::route::fastpath::FastPath;
use crate::route::outcome::{Observer, Outcome, Sent};
use crate::state::{StateStore, Sticky};
use crate::window::calibration::Calibrator;
use crate::window::discovery::Windows;
use crate::window::labels::ModelLabels;

/// The services the observers write to.
pub(crate) struct Observed {
    pub(crate) windows: Arc<Windows>,
    pub(crate) store: Arc<dyn StateStore>,
    pub(crate) status: Arc<Status>,
    pub(crate) labels: Arc<ModelLabels>,
    pub(crate) fastpath: Arc<FastPath>,
    pub(crate) metrics: Arc<Metrics>,
    pub(crate) sticky: Option<Arc<Sticky>>,
    pub(crate) calibrator: Arc<Calibrator>,
    pub(crate) background: Option<Arc<Background>>,
}

/// The observers of `services`, in the order they run.
pub(crate) fn registered(services: Observed) -> Vec<Box<dyn Observer>> {
    let mut observers: Vec<Box<dyn Observer>> = vec![
        Box::new(WindowLearning {
            windows: services.windows,
            store: services.store,
        }),
        Box::new(StatusRecording {
            status: services.status,
            labels: services.labels,
        }),
        Box::new(CleanConversations(services.fastpath)),
        Box::new(Counting(services.metrics)),
    ];
    if let Some(sticky) = services.sticky {
        observers.push(Box::new(StickyRecording(sticky)));
    }
    observers.push(Box::new(CalibrationSaving(services.calibrator)));
    if let Some(background) = services.background {
        observers.push(Box::new(PreparingAhead(background)));
    }
    observers
}

/// Keeps the limit an overflow error stated for the model, here and in the store.
struct WindowLearning {
    windows: Arc<Windows>,
    store: Arc<dyn StateStore>,
}

impl Observer for WindowLearning {
    fn after<'a>(&'a self, outcome: &'a Outcome<'_>) -> BoxFuture<'a, ()> {
        Box::pin(async move {
            let Some(learned) = outcome.cascaded().and_then(|c| c.learned) else {
                return;
            };
            let model = outcome.model.as_str();
            if self.windows.learn(model, learned)
                && let Err(e) = (self.store)
                    .save_learned_window(model, learned.limit, learned.counts_reserve)
                    .await
            {
                let model = clipped(model);
                tracing::warn!(?model, error = %e, "could not persist a learned window");
            }
        })
    }
}

/// Adds the request to its conversation's timeline on the status page.
struct StatusRecording {
    status: Arc<Status>,
    labels: Arc<ModelLabels>,
}

impl Observer for StatusRecording {
    fn after<'a>(&'a self, outcome: &'a Outcome<'_>) -> BoxFuture<'a, ()> {
        let model = outcome.model.as_str();
        let admitted = self.labels.is_known(model).then_some(model);
        let shown = match outcome.ended {
            CallOutcome::Answered => record::Outcome::Answered,
            CallOutcome::Exhausted => record::Outcome::Exhausted,
            CallOutcome::Failed => record::Outcome::Failed,
        };
        let parsed;
        let digest = match &outcome.sent {
            Sent::Fast(fast) => &fast.digest,
            Sent::Cascade(cascaded) => {
                parsed = RequestDigest::of(&cascaded.conversation);
                &parsed
            }
        };
        let recorder = &self.status.recorder;
        recorder.record_report(&outcome.key, admitted, &outcome.report, shown, digest);
        Box::pin(async {})
    }
}

/// Tells the fast path whether the conversation went upstream untouched (only such a
/// conversation's next request may take it).
struct CleanConversations(Arc<FastPath>);

impl Observer for CleanConversations {
    fn after<'a>(&'a self, outcome: &'a Outcome<'_>) -> BoxFuture<'a, ()> {
        if let Some(cascaded) = outcome.cascaded() {
            let changed = !(outcome.answered() && outcome.report.steps.is_empty());
            self.0.settle(&outcome.key, cascaded.untouched && !changed);
        }
        Box::pin(async {})
    }
}

/// Counts the request in the metrics.
struct Counting(Arc<Metrics>);

impl Observer for Counting {
    fn after<'a>(&'a self, outcome: &'a Outcome<'_>) -> BoxFuture<'a, ()> {
        self.0.report(&outcome.report, outcome.ended);
        Box::pin(async {})
    }
}

/// Remembers what went upstream for an answered conversation (the sticky prefix).
struct StickyRecording(Arc<Sticky>);

impl Observer for StickyRecording {
    fn after<'a>(&'a self, outcome: &'a Outcome<'_>) -> BoxFuture<'a, ()> {
        Box::pin(async move {
            let Some(cascaded) = outcome.cascaded().filter(|_| outcome.answered()) else {
                return;
            };
            let taken = (cascaded.hashes.lock().unwrap_or_else(|p| p.into_inner())).take();
            let Some(mut hashes) = taken else {
                return;
            };
            let changed = cascaded.stitched || !outcome.report.steps.is_empty();
            let (conversation, bytes) = (&cascaded.conversation, cascaded.bytes.clone());
            (self
                .0
                .record(&outcome.key, &mut hashes, conversation, changed, bytes))
            .await;
        })
    }
}

/// Persists the model's calibration in the background after an answer (or an exhausted
/// recovery, whose calls observed it too).
struct CalibrationSaving(Arc<Calibrator>);

impl Observer for CalibrationSaving {
    fn after<'a>(&'a self, outcome: &'a Outcome<'_>) -> BoxFuture<'a, ()> {
        Box::pin(async move {
            if matches!(
                outcome.ended,
                CallOutcome::Answered | CallOutcome::Exhausted
            ) {
                self.0.persist(&outcome.model);
            }
        })
    }
}

/// Starts a background job that prepares the next request's summaries, past the
/// pre-threshold.
struct PreparingAhead(Arc<Background>);

impl Observer for PreparingAhead {
    fn after<'a>(&'a self, outcome: &'a Outcome<'_>) -> BoxFuture<'a, ()> {
        if outcome.answered() {
            let (key, tenant, budget) = (&outcome.key, outcome.tenant, outcome.budget);
            let sent = match &outcome.sent {
                Sent::Fast(fast) => fast
                    .prepare_ahead
                    .then(|| background::Sent::Raw(outcome.format, fast.bytes.clone())),
                Sent::Cascade(cascaded) => {
                    let past = self.0.past_threshold(outcome.report.tokens_after, budget);
                    let conversation = || Arc::new(cascaded.conversation.clone());
                    past.then(|| background::Sent::Parsed(conversation()))
                }
            };
            if let Some(sent) = sent {
                self.0.prepare_after(key, tenant, sent, budget);
            }
        }
        Box::pin(async {})
    }
}
