//! A [`Summarizer`] wrapper that caches summaries in the store.
//!
//! An agent behind the proxy resends its whole history every turn; without a cache each
//! turn that needs strategy ④ would pay for the same summary again. The key is a SHA-256
//! of the summarizer's identity and the exact messages it replaces (written as JSON), plus
//! the earlier summary and chunk summaries it merges. A cached summary is reused when it was
//! made under a token limit no larger than the one asked for, so it always fits.

use std::sync::Arc;

use context_cascade::BoxFuture;
use context_cascade::format::{WriteOptions, to_vec};
use context_cascade::summarizer::{Summarizer, SummaryError, SummaryRequest};
use context_cascade::{Conversation, Format};
use sha2::{Digest, Sha256};

use crate::metrics::Metrics;
use crate::store::StateStore;

/// Caches another summarizer's answers in the state store (SQLite, or Redis shared by
/// replicas: a summary one replica paid for is one the others reuse).
pub struct CachingSummarizer {
    inner: Arc<dyn Summarizer>,
    store: Arc<dyn StateStore>,
    metrics: Arc<Metrics>,
}

impl CachingSummarizer {
    /// Wraps `inner`; hits and misses are counted in `metrics`.
    pub fn new(
        inner: Arc<dyn Summarizer>,
        store: Arc<dyn StateStore>,
        metrics: Arc<Metrics>,
    ) -> Self {
        CachingSummarizer {
            inner,
            store,
            metrics,
        }
    }

    /// The cache key of a request, or `None` if its messages cannot be written as JSON.
    fn key(&self, request: &SummaryRequest) -> Option<String> {
        let mut conversation = Conversation::new(Format::Bare);
        conversation.messages = request.messages().to_vec();
        let messages = to_vec(&conversation, WriteOptions::default()).ok()?;
        let mut hasher = Sha256::new();
        let mut field = |bytes: &[u8]| {
            // Length-prefixed, so that no two different inputs concatenate alike.
            hasher.update((bytes.len() as u64).to_le_bytes());
            hasher.update(bytes);
        };
        // Summaries are the tenant's own, like the rest of a conversation's state.
        field(crate::tenancy::current_tenant().as_bytes());
        field(self.inner.id().as_bytes());
        field(&messages);
        field(request.previous_summary().unwrap_or("").as_bytes());
        for partial in request.partials() {
            field(partial.as_bytes());
        }
        Some(hex::encode(hasher.finalize()))
    }
}

impl Summarizer for CachingSummarizer {
    fn id(&self) -> String {
        self.inner.id()
    }

    fn summarize<'a>(
        &'a self,
        request: &'a SummaryRequest,
    ) -> BoxFuture<'a, Result<String, SummaryError>> {
        Box::pin(async move {
            let key = self.key(request);
            if let Some(key) = &key {
                match self.store.summary(key).await {
                    Ok(Some((summary, made_for))) if made_for <= request.max_tokens() => {
                        self.metrics.summary_cache(true);
                        tracing::debug!("summary cache hit");
                        return Ok(summary);
                    }
                    Ok(_) => {}
                    Err(e) => tracing::warn!(error = %e, "summary cache unavailable"),
                }
            }
            self.metrics.summary_cache(false);
            let summary = self.inner.summarize(request).await?;
            if let Some(key) = &key
                && let Err(e) = (self.store)
                    .put_summary(key, request.max_tokens(), &summary)
                    .await
            {
                tracing::warn!(error = %e, "could not cache a summary");
            }
            Ok(summary)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use context_cascade::{Message, Role};
    use std::path::Path;
    use std::sync::atomic::{AtomicUsize, Ordering};

    struct Counting(AtomicUsize);

    impl Summarizer for Counting {
        fn id(&self) -> String {
            "counting".into()
        }
        fn summarize<'a>(
            &'a self,
            request: &'a SummaryRequest,
        ) -> BoxFuture<'a, Result<String, SummaryError>> {
            let n = self.0.fetch_add(1, Ordering::SeqCst);
            let len = request.messages().len();
            Box::pin(async move { Ok(format!("summary {n} of {len}")) })
        }
    }

    #[test]
    fn same_messages_hit_the_cache() {
        let store = crate::store::SqliteStore::open(
            Path::new(crate::config::IN_MEMORY_DB),
            Default::default(),
        );
        let store = Arc::new(store.unwrap());
        let metrics = Arc::new(Metrics::default());
        let inner = Arc::new(Counting(AtomicUsize::new(0)));
        let cache = CachingSummarizer::new(inner.clone(), store, metrics.clone());
        let request = SummaryRequest::summarize(vec![Message::text(Role::User, "hello")], 100);
        let a = pollster::block_on(cache.summarize(&request)).unwrap();
        let b = pollster::block_on(cache.summarize(&request)).unwrap();
        assert_eq!(a, b);
        assert_eq!(inner.0.load(Ordering::SeqCst), 1);
        // A stricter limit than the cached summary was made for: computed again.
        let strict = SummaryRequest::summarize(request.messages().to_vec(), 50);
        pollster::block_on(cache.summarize(&strict)).unwrap();
        assert_eq!(inner.0.load(Ordering::SeqCst), 2);
        let other = SummaryRequest::summarize(vec![Message::text(Role::User, "other")], 100);
        pollster::block_on(cache.summarize(&other)).unwrap();
        assert_eq!(metrics.snapshot().summary_hits, 1);
        assert_eq!(metrics.snapshot().summary_misses, 3);
    }
}
