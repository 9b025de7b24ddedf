//! What a replica picks up from the others through a shared store (Redis): the per-model
//! calibration and the windows learned from overflow errors. Conversation state needs no
//! following: it is read from the store when a request needs it.
//!
//! The calibration is read on use, before each call ([`before_call`]: one read of a hash
//! with an entry per model, a loopback round trip), because it moves with every answer and
//! decides where the cascade cuts: a replica that continued with its own, staler scale
//! would compact a conversation differently from the replica before it and break the
//! provider's prompt-cache prefix. Learned windows change rarely and are read every
//! [`FOLLOW_EVERY`]; both are also read at startup (here, in the background: an unreachable
//! Redis must not delay it).

use std::sync::{Arc, Weak};
use std::time::Duration;

use context_cascade::ContextManager;

use crate::state::StateStore;
use crate::window::discovery::{Learned, Windows};

/// How often a replica reads the shared calibration and learned windows.
pub(crate) const FOLLOW_EVERY: Duration = Duration::from_secs(2);

/// Reads the shared model-level state now and every [`FOLLOW_EVERY`], for as long as the
/// proxy's windows and engine live.
pub(crate) async fn follow(
    store: Arc<dyn StateStore>,
    windows: Weak<Windows>,
    manager: Weak<ContextManager>,
) {
    loop {
        let (Some(windows), Some(manager)) = (windows.upgrade(), manager.upgrade()) else {
            return;
        };
        refresh(store.as_ref(), &windows, &manager).await;
        drop((windows, manager));
        tokio::time::sleep(FOLLOW_EVERY).await;
    }
}

/// Before a call through a shared store: adopts the scales other replicas persisted.
pub(crate) async fn before_call(store: &dyn StateStore, manager: &ContextManager) {
    if store.shared() {
        adopt_calibration(store, manager).await;
    }
}

/// Merges the store's calibration and learned windows into this replica's: a learned window
/// is kept when it is smaller, as when learned here (`Windows::learn`).
pub(crate) async fn refresh(store: &dyn StateStore, windows: &Windows, manager: &ContextManager) {
    match store.learned_windows().await {
        Ok(learned) => {
            for (model, limit, counts_reserve) in learned {
                let learned = Learned {
                    limit,
                    counts_reserve,
                };
                windows.learn(&model, learned);
            }
        }
        Err(e) => tracing::debug!(error = %e, "shared learned windows unavailable"),
    }
    adopt_calibration(store, manager).await;
}

/// Adopts each stored scale that rests on more observations than the one held here (another
/// replica has seen more answers).
async fn adopt_calibration(store: &dyn StateStore, manager: &ContextManager) {
    let scales = match store.calibration().await {
        Ok(scales) => scales,
        Err(e) => {
            tracing::debug!(error = %e, "shared calibration unavailable");
            return;
        }
    };
    let mut calibration = manager.calibration();
    let mut adopted = false;
    for (model, scale) in scales {
        if calibration
            .get(&model)
            .is_none_or(|local| scale.observations > local.observations)
        {
            calibration.set(&model, scale);
            adopted = true;
        }
    }
    // An observation made here between the snapshot and the restore is lost; the next
    // answer observes again (the scale is a moving average, not a tally).
    if adopted {
        manager.restore_calibration(calibration);
    }
}
