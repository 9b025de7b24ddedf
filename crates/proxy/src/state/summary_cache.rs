//! A [`Summarizer`] wrapper that caches summaries in the store.
//!
//! An agent behind the proxy resends its whole history every turn; without a cache each
//! turn that needs strategy ④ would pay for the same summary again. The key is a SHA-256
//! of the summarizer's identity and the exact messages it replaces (written as JSON), plus
//! the earlier summary and chunk summaries it merges. A cached summary is reused when it was
//! made under a token limit no larger than the one asked for, so it always fits.
//!
//! With `prepared_summary_gap` above 0, a request the cache has no summary for may be
//! answered by the summary of its first messages (a range prepared in the background a
//! turn earlier, or summarized before), when the messages left out are at most that share
//! of the range: the turn does not wait, and the compaction's trail names what they did
//! (see `SummaryRequest::stand_in_lengths`). Background jobs summarize through this cache
//! too, so they reuse summaries the same way: that keeps their summarizer calls near the
//! default's, and means that with a share g a compaction's summary covers at least 1 − g
//! of its range even when the range was forecast.

use std::sync::Arc;

use context_cascade::BoxFuture;
use context_cascade::estimate::Estimator;
use context_cascade::format::{WriteOptions, to_vec};
use context_cascade::summarizer::{Summarizer, SummaryError, SummaryRequest};
use context_cascade::{Conversation, Format, Message};
use sha2::{Digest, Sha256};

use crate::ops::metrics::Metrics;
use crate::state::store::StateStore;
use crate::state::tenancy::Tenant;

/// At most this many shorter ranges are looked up for a stand-in (a turn adds a few
/// messages; parallel calls, a dozen)...
const STAND_IN_LOOKUPS: usize = 16;

/// ...and at most this many tokens of messages written and hashed for their keys in all
/// (a 1M-token range gets 4 lookups).
const STAND_IN_LOOKUP_TOKENS: u64 = 4_000_000;

/// Caches another summarizer's answers in the state store (SQLite, or Redis shared by
/// replicas: a summary one replica paid for is one the others reuse).
///
/// Summaries are the tenant's own, like the rest of a conversation's state: the cache is
/// used through [`CachingSummarizer::for_tenant`], a view bound to the request's tenant that
/// the engine gets for that call. Used without a tenant (as the engine's default summarizer),
/// it fails closed: an error, no read and no write, never a shared default tenant.
pub(crate) struct CachingSummarizer {
    inner: Arc<dyn Summarizer>,
    store: Arc<dyn StateStore>,
    metrics: Arc<Metrics>,
    gap_share: f64,
}

impl CachingSummarizer {
    /// Wraps `inner`; hits and misses are counted in `metrics`.
    pub(crate) fn new(
        inner: Arc<dyn Summarizer>,
        store: Arc<dyn StateStore>,
        metrics: Arc<Metrics>,
    ) -> Self {
        CachingSummarizer {
            inner,
            store,
            metrics,
            gap_share: 0.0,
        }
    }

    /// Lets the summary of a request's first messages stand in for it when the messages
    /// left out are at most `gap_share` of it (`ExperimentalConfig::prepared_summary_gap`).
    pub(crate) fn with_gap_share(mut self, gap_share: f64) -> Self {
        self.gap_share = gap_share;
        self
    }

    /// The cache bound to `tenant`: what a request (or a background job) of that tenant
    /// gives the engine as its summarizer.
    pub(crate) fn for_tenant(self: &Arc<Self>, tenant: &Tenant) -> TenantSummaries {
        TenantSummaries {
            cache: self.clone(),
            tenant: tenant.clone(),
        }
    }

    /// The cache key of a request, or `None` if its messages cannot be written as JSON.
    fn key(&self, tenant: &Tenant, request: &SummaryRequest) -> Option<String> {
        self.key_of(tenant, request.messages(), request)
    }

    /// The cache key of `messages` with the rest of `request` (its earlier summary and
    /// chunk summaries): `key` when they are the request's own.
    fn key_of(
        &self,
        tenant: &Tenant,
        messages: &[Message],
        request: &SummaryRequest,
    ) -> Option<String> {
        let mut conversation = Conversation::new(Format::Bare);
        conversation.messages = messages.to_vec();
        let messages = to_vec(&conversation, WriteOptions::default()).ok()?;
        let mut hasher = Sha256::new();
        let mut field = |bytes: &[u8]| {
            // Length-prefixed, so that no two different inputs concatenate alike.
            hasher.update((bytes.len() as u64).to_le_bytes());
            hasher.update(bytes);
        };
        field(tenant.as_bytes());
        field(self.inner.id().as_bytes());
        field(&messages);
        field(request.previous_summary().unwrap_or("").as_bytes());
        for partial in request.partials() {
            field(partial.as_bytes());
        }
        Some(hex::encode(hasher.finalize()))
    }
}

impl CachingSummarizer {
    /// Whether a cached `summary`, made under the limit `made_for`, may answer `request`:
    /// made under its limit or a stricter one (what the summarizer would write for it);
    /// with stand-ins allowed, also one no longer than its limit anyway, as summaries
    /// prepared ahead are used in the library (the forecast that prepared it may have left
    /// more room than the turn that came: ④ checks the summary like any other).
    fn fits(&self, summary: &str, made_for: u64, request: &SummaryRequest) -> bool {
        request.fits(summary, made_for, self.gap_share > 0.0)
    }

    /// A cached summary of `request`'s longest first messages allowed to stand in for it,
    /// of the few longest (each lookup writes and hashes the messages: on a range of
    /// several MB, many would cost more than the summary they save waiting for).
    async fn stand_in(&self, tenant: &Tenant, request: &SummaryRequest) -> Option<String> {
        let all = request.messages().len();
        let lengths = request.stand_in_lengths(self.gap_share);
        if lengths.is_empty() {
            return None;
        }
        let estimator = Estimator::default();
        let range: u64 = request
            .messages()
            .iter()
            .map(|m| estimator.message_tokens(m))
            .sum();
        let lookups = (STAND_IN_LOOKUP_TOKENS / range.max(1)).clamp(1, STAND_IN_LOOKUPS as u64);
        for length in lengths.into_iter().take(lookups as usize) {
            let key = self.key_of(tenant, &request.messages()[..length], request)?;
            match self.store.summary(&key).await {
                Ok(Some((summary, made_for))) if self.fits(&summary, made_for, request) => {
                    self.metrics.summary_stand_in();
                    tracing::info!(
                        summarized = length,
                        left_out = all - length,
                        "a summary of the range's first messages stands in; the trail names the rest"
                    );
                    return Some(summary);
                }
                Ok(_) => {}
                Err(e) => {
                    tracing::warn!(error = %e, "summary cache unavailable");
                    return None;
                }
            }
        }
        None
    }
}

/// The summary cache of one tenant (see [`CachingSummarizer::for_tenant`]).
pub(crate) struct TenantSummaries {
    cache: Arc<CachingSummarizer>,
    tenant: Tenant,
}

impl CachingSummarizer {
    /// Answers `request` for `tenant`: from the cache, a stand-in, or the inner summarizer
    /// (whose answer is cached).
    async fn summarize_for(
        &self,
        tenant: &Tenant,
        request: &SummaryRequest,
    ) -> Result<String, SummaryError> {
        let key = self.key(tenant, request);
        if let Some(key) = &key {
            match self.store.summary(key).await {
                Ok(Some((summary, made_for))) if self.fits(&summary, made_for, request) => {
                    self.metrics.summary_cache(true);
                    tracing::debug!("summary cache hit");
                    return Ok(summary);
                }
                Ok(_) => {}
                Err(e) => tracing::warn!(error = %e, "summary cache unavailable"),
            }
        }
        self.metrics.summary_cache(false);
        if let Some(summary) = self.stand_in(tenant, request).await {
            return Ok(summary);
        }
        let summary = self.inner.summarize(request).await?;
        if let Some(key) = &key
            && let Err(e) = (self.store)
                .put_summary(key, request.max_tokens(), &summary)
                .await
        {
            tracing::warn!(error = %e, "could not cache a summary");
        }
        Ok(summary)
    }
}

impl Summarizer for TenantSummaries {
    fn id(&self) -> String {
        self.cache.inner.id()
    }

    fn summarize<'a>(
        &'a self,
        request: &'a SummaryRequest,
    ) -> BoxFuture<'a, Result<String, SummaryError>> {
        Box::pin(self.cache.summarize_for(&self.tenant, request))
    }
}

/// The cache without a tenant: refuses (see [`CachingSummarizer`]). The engine then falls
/// back as for any failed summary (⑤), and nothing of any tenant is read or written.
impl Summarizer for CachingSummarizer {
    fn id(&self) -> String {
        self.inner.id()
    }

    fn summarize<'a>(
        &'a self,
        _request: &'a SummaryRequest,
    ) -> BoxFuture<'a, Result<String, SummaryError>> {
        tracing::error!("summary asked for without a tenant: refused");
        Box::pin(std::future::ready(Err(SummaryError::Failed(
            "the summary cache was asked without a tenant".into(),
        ))))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use context_cascade::{Message, Role};
    use std::path::Path;
    use std::sync::atomic::{AtomicUsize, Ordering};

    struct Counting(AtomicUsize);

    /// The tenant of requests without credentials (one tenant like any other).
    fn tenant() -> Tenant {
        let tenancy = crate::state::tenancy::Tenancy::open(Path::new(crate::config::IN_MEMORY_DB));
        tenancy.unwrap().tenant(&axum::http::HeaderMap::new())
    }

    /// A cache over an in-memory SQLite store and a summarizer that counts its calls.
    fn counted_cache() -> (
        Arc<crate::state::store::SqliteStore>,
        Arc<Metrics>,
        Arc<Counting>,
        Arc<CachingSummarizer>,
    ) {
        let store = crate::state::store::SqliteStore::open(
            Path::new(crate::config::IN_MEMORY_DB),
            Default::default(),
        );
        let store = Arc::new(store.unwrap());
        let metrics = Arc::new(Metrics::default());
        let inner = Arc::new(Counting(AtomicUsize::new(0)));
        let cache = CachingSummarizer::new(inner.clone(), store.clone(), metrics.clone());
        (store, metrics, inner, Arc::new(cache))
    }

    #[test]
    fn without_a_tenant_nothing_is_read_or_written_and_tenants_do_not_share() {
        let (store, _, inner, cache) = counted_cache();
        let request = SummaryRequest::summarize(vec![Message::text(Role::User, "hello")], 100);
        // The cache as the engine's default, asked without a tenant: refused, no read (the
        // inner summarizer is not asked either) and no write.
        assert!(pollster::block_on(cache.summarize(&request)).is_err());
        assert_eq!(inner.0.load(Ordering::SeqCst), 0);
        assert_eq!(store.stored_bytes().unwrap(), 0);
        // Bound to a tenant: summarized and cached, for that tenant only.
        let mine = cache.for_tenant(&tenant());
        pollster::block_on(mine.summarize(&request)).unwrap();
        pollster::block_on(mine.summarize(&request)).unwrap();
        assert_eq!(inner.0.load(Ordering::SeqCst), 1);
        let mut headers = axum::http::HeaderMap::new();
        headers.insert(
            "x-api-key",
            axum::http::HeaderValue::from_static("sk-other"),
        );
        let tenancy = crate::state::tenancy::Tenancy::open(Path::new(crate::config::IN_MEMORY_DB));
        let theirs = cache.for_tenant(&tenancy.unwrap().tenant(&headers));
        pollster::block_on(theirs.summarize(&request)).unwrap();
        assert_eq!(
            inner.0.load(Ordering::SeqCst),
            2,
            "another tenant's summary is not shared"
        );
    }

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
        let (_, metrics, inner, cache) = counted_cache();
        let cache = cache.for_tenant(&tenant());
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

    #[test]
    fn a_cached_summary_of_the_first_messages_stands_in_when_allowed() {
        let store = crate::state::store::SqliteStore::open(
            Path::new(crate::config::IN_MEMORY_DB),
            Default::default(),
        );
        let store: Arc<dyn StateStore> = Arc::new(store.unwrap());
        let metrics = Arc::new(Metrics::default());
        let inner = Arc::new(Counting(AtomicUsize::new(0)));
        let tolerant = CachingSummarizer::new(inner.clone(), store.clone(), metrics.clone())
            .with_gap_share(0.5);
        let tolerant = Arc::new(tolerant).for_tenant(&tenant());
        let exact = Arc::new(CachingSummarizer::new(
            inner.clone(),
            store,
            metrics.clone(),
        ));
        let exact = exact.for_tenant(&tenant());
        let text = |t: &str| Message::text(Role::User, t.repeat(40));
        let first = vec![text("read src/a.rs "), text("ran cargo test ")];
        let prepared = SummaryRequest::summarize(first.clone(), 100);
        let made = pollster::block_on(tolerant.summarize(&prepared)).unwrap();
        assert_eq!(inner.0.load(Ordering::SeqCst), 1);

        // One message more, a third of the range: the prepared summary stands in.
        let mut longer = first.clone();
        longer.push(text("edited src/b.rs "));
        let asked = SummaryRequest::summarize(longer.clone(), 100);
        assert_eq!(
            pollster::block_on(tolerant.summarize(&asked)).unwrap(),
            made
        );
        assert_eq!(inner.0.load(Ordering::SeqCst), 1);
        // A stricter limit than it was made for, which the summary fits anyway: it serves.
        let stricter = SummaryRequest::summarize(longer.clone(), 50);
        assert_eq!(
            pollster::block_on(tolerant.summarize(&stricter)).unwrap(),
            made
        );
        assert_eq!(inner.0.load(Ordering::SeqCst), 1);
        // Not with the gap at 0, nor for a limit the summary does not fit, nor past half
        // the range.
        pollster::block_on(exact.summarize(&asked)).unwrap();
        assert_eq!(inner.0.load(Ordering::SeqCst), 2);
        let tiny =
            SummaryRequest::summarize(first.iter().chain(&longer[2..]).cloned().collect(), 2);
        pollster::block_on(tolerant.summarize(&tiny)).unwrap();
        assert_eq!(inner.0.load(Ordering::SeqCst), 3);
        let mut far = first.clone();
        far.extend([
            text("ran the build "),
            text("fixed a test "),
            text("ran it again "),
        ]);
        pollster::block_on(tolerant.summarize(&SummaryRequest::summarize(far, 100))).unwrap();
        assert_eq!(inner.0.load(Ordering::SeqCst), 4);
        let rendered = metrics.render(&context_cascade::Calibration::new());
        assert!(
            rendered.contains("cascade_summary_stand_ins_total 2"),
            "{rendered}"
        );
    }
}
