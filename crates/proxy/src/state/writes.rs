//! The state writes the proxy started in the background and has not finished: the sticky
//! decisions of a conversation are written after its answer, off the request path. A
//! proxy that stops (SIGTERM at a deploy) must not lose them, or the conversation's next
//! request, on the restarted proxy, compacts afresh and the provider's prompt cache is
//! lost: [`Writes::flush`] awaits them, with a bound.

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use tokio::sync::Notify;

/// How long a graceful shutdown waits for pending state writes at most.
pub(crate) const FLUSH_BOUND: Duration = Duration::from_secs(10);

/// A tracker of background state writes (cheap to clone: one shared count).
#[derive(Clone, Default)]
pub(crate) struct Writes {
    inner: Arc<Inner>,
}

#[derive(Default)]
struct Inner {
    pending: AtomicUsize,
    idle: Notify,
}

/// One write in flight: counted from before it is spawned until its task ends, however it
/// ends (finished, panicked, or dropped with its runtime).
struct Pending(Arc<Inner>);

impl Pending {
    fn new(inner: &Arc<Inner>) -> Self {
        inner.pending.fetch_add(1, Ordering::SeqCst);
        Pending(inner.clone())
    }
}

impl Drop for Pending {
    fn drop(&mut self) {
        if self.0.pending.fetch_sub(1, Ordering::SeqCst) == 1 {
            self.0.idle.notify_waiters();
        }
    }
}

impl Writes {
    /// Runs `write` in the background, tracked until it ends.
    pub(crate) fn spawn(&self, write: impl Future<Output = ()> + Send + 'static) {
        let pending = Pending::new(&self.inner);
        tokio::spawn(async move {
            write.await;
            drop(pending);
        });
    }

    /// How many writes are in flight now.
    pub(crate) fn pending(&self) -> usize {
        self.inner.pending.load(Ordering::SeqCst)
    }

    /// Waits until every write started before or during the wait has ended, at most
    /// `bound`. Returns whether they all did.
    pub(crate) async fn flush(&self, bound: Duration) -> bool {
        let idle = async {
            loop {
                let notified = self.inner.idle.notified();
                let mut notified = std::pin::pin!(notified);
                // Registered before the count is read: a write ending in between wakes it.
                notified.as_mut().enable();
                if self.pending() == 0 {
                    return;
                }
                notified.await;
            }
        };
        let flushed = tokio::time::timeout(bound, idle).await.is_ok();
        if !flushed {
            tracing::warn!(
                pending = self.pending(),
                "state writes still pending at shutdown"
            );
        }
        flushed
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn flush_waits_for_every_write_within_its_bound() {
        let writes = Writes::default();
        assert!(writes.flush(Duration::from_millis(1)).await);
        let done = Arc::new(AtomicUsize::new(0));
        for delay in [20, 60] {
            let done = done.clone();
            writes.spawn(async move {
                tokio::time::sleep(Duration::from_millis(delay)).await;
                done.fetch_add(1, Ordering::SeqCst);
            });
        }
        assert_eq!(writes.pending(), 2);
        assert!(writes.flush(Duration::from_secs(5)).await);
        assert_eq!(done.load(Ordering::SeqCst), 2);
        assert_eq!(writes.pending(), 0);
        writes.spawn(std::future::pending());
        assert!(!writes.flush(Duration::from_millis(30)).await, "bounded");
    }
}
