//! Stage 3, preparation: what the cascade starts from. The facts the conversation asked to
//! keep are put back, the prefix sent for it before is stitched in (the sticky prefix), the
//! model's window gives the budget, and llama.cpp may count the first request.

use axum::http::HeaderMap;
use axum::response::Response;
use bytes::Bytes;
use context_cascade::format::parse_value;
use context_cascade::logged::clipped;
use context_cascade::{Budget, ContextManager, Conversation, Format, LlmError};
use serde_json::Value;

use crate::error::{ErrorKind, error_response};
use crate::ops::metrics::Metrics;
use crate::route::admission::Parsed;
use crate::route::gauge::Gauge;
use crate::route::history::{Held, client_estimate};
use crate::route::inbound::Inbound;
use crate::route::upstream::{Upstream, forwarded_headers};
use crate::state::{Edit, LazyHashes, StateStore, Sticky, hash_at, memory};
use crate::window::budget::Budgeting;

/// What preparation needs.
pub(crate) struct Preparation<'s> {
    pub(crate) manager: &'s ContextManager,
    pub(crate) store: &'s dyn StateStore,
    /// `None` when `sticky_prefix` is off.
    pub(crate) sticky: Option<&'s Sticky>,
    pub(crate) budgeting: Budgeting<'s>,
    pub(crate) metrics: &'s Metrics,
    pub(crate) upstream: &'s Upstream,
    /// What answers tell the client its prompt took.
    pub(crate) gauge: Gauge,
}

/// A request ready for the engine's call.
pub(crate) struct Prepared<'r> {
    pub(crate) key: String,
    pub(crate) model: String,
    pub(crate) stream: bool,
    /// What the cascade starts from.
    pub(crate) conversation: Conversation,
    /// The hashes of the client's messages (for the sticky prefix).
    pub(crate) hashes: LazyHashes<'r>,
    pub(crate) budget: Budget,
    /// A prefix sent before was stitched in.
    pub(crate) stitched: bool,
    /// Nothing stitched, injected or pinned: the client's bytes may go as they came.
    pub(crate) untouched: bool,
    /// The client's headers as they go upstream.
    pub(crate) headers: HeaderMap,
    /// The fast path's overflow answer to this request, if it had one.
    pub(crate) overflowed: Option<LlmError>,
    /// What a provider's compaction supersedes, held out of the cascade.
    pub(crate) held: Option<Held>,
    /// The estimate of what the client sent, when answers report it (`gauge = "client"`).
    pub(crate) client_tokens: Option<u64>,
}

impl Preparation<'_> {
    /// Prepares `parsed`, or the error answer when its body is not a valid request.
    pub(crate) async fn prepare<'r>(
        &self,
        inbound: &'r Inbound,
        parsed: Parsed,
    ) -> Result<Prepared<'r>, Response> {
        let format = inbound.format;
        let Parsed {
            mut body,
            model,
            stream,
            key,
            overflowed,
        } = parsed;
        let injection = self.remember(&key, &mut body, format).await;
        let mut hashes = lazy_hashes(&inbound.bytes, &body, format, injection);
        let mut conversation = parse_value(body, Some(format)).map_err(|e| {
            let message = format!(
                "context-cascade: invalid request at {}: {}",
                e.path, e.problem
            );
            error_response(format, ErrorKind::InvalidRequest, &message)
        })?;
        let client_tokens = self
            .gauge
            .reports_client_size(format)
            .then(|| client_estimate(self.manager, &conversation));
        let stitched = match self.sticky {
            Some(sticky) => sticky.stitch(&key, &mut hashes, &mut conversation).await,
            None => None,
        };
        if stitched.is_some() {
            self.metrics.prefix_reused();
        }
        let headers = forwarded_headers(inbound.headers(), true);
        let reserve = conversation.output_reserve();
        let budget = self.budgeting.budget(&headers, &model, reserve).await;
        // The server counts the client's bytes: only when they are what the cascade starts
        // from (no fact put back, no known prefix stitched in).
        let as_sent = stitched.is_none() && injection.is_none();
        if format == Format::OpenAi
            && as_sent
            && self.budgeting.windows.count_first_with_llama_cpp(&model)
        {
            (self.count_with_llama_cpp(&headers, &inbound.bytes, &model, &conversation)).await;
        }
        // Untouched requests go upstream byte for byte as the client wrote them (unless they
        // carry `_pin` markers, which providers reject).
        let untouched = as_sent && !carries_pins(&conversation);
        // The provider reads the history from its newest compaction on: the cascade too.
        let held = Held::split(&mut conversation);
        Ok(Prepared {
            key,
            model,
            stream,
            conversation,
            hashes,
            budget,
            stitched: stitched.is_some(),
            untouched,
            headers,
            overflowed,
            held,
            client_tokens,
        })
    }

    /// Stores new remember requests and puts back the facts the request no longer carries.
    async fn remember(
        &self,
        key: &str,
        body: &mut Value,
        format: Format,
    ) -> Option<memory::Injection> {
        let mut stored = 0;
        for text in memory::remember_requests(body, format, &self.manager.config().remember) {
            match (self.store)
                .add_fact(key, &memory::fact_hash(&text), &text)
                .await
            {
                Ok(true) => stored += 1,
                Ok(false) => {}
                Err(e) => tracing::warn!(error = %e, "could not store a remembered fact"),
            }
        }
        let facts = match self.store.facts(key).await {
            Ok(facts) => facts,
            Err(e) => {
                tracing::warn!(error = %e, "memory store unavailable");
                Vec::new()
            }
        };
        let missing = memory::missing_facts(body, format, &facts);
        if !missing.is_empty()
            && let Err(e) = self.store.touch_facts(key).await
        {
            tracing::warn!(error = %e, "could not mark remembered facts as used");
        }
        let injection = memory::inject(body, format, &missing);
        self.metrics.facts(stored, missing.len());
        injection
    }

    /// Folds the llama.cpp server's own count of this request (its model's first) into the
    /// calibration, so that the cascade decides on it (see `window::tokenize`).
    async fn count_with_llama_cpp(
        &self,
        headers: &HeaderMap,
        bytes: &Bytes,
        model: &str,
        conversation: &Conversation,
    ) {
        let manager = self.manager;
        // A calibration restored from the store (a restart) needs no count.
        if manager.calibration().get(model).is_some() {
            return;
        }
        let (client, base) = (&self.upstream.client, &self.upstream.base);
        match crate::window::tokenize::prompt_tokens(client, base, headers, bytes).await {
            Some(tokens) => {
                let prior = manager.prior(conversation);
                let estimate = manager.estimate(conversation);
                manager.observe_sent(model, prior, estimate, tokens);
                self.metrics.llama_cpp_count();
                tracing::info!(
                    model = ?clipped(model),
                    tokens,
                    estimate,
                    "first request counted by llama.cpp"
                );
            }
            None => {
                let model = clipped(model);
                tracing::debug!(?model, "llama.cpp did not count the first request");
            }
        }
    }
}

/// Whether a message carries a `_pin` marker on the wire.
fn carries_pins(conversation: &Conversation) -> bool {
    (conversation.messages.iter()).any(|m| m.fields().contains_key("_pin"))
}

/// The message hashes of a request as it goes into the cascade: the client's bytes, with
/// the message the memory injection changed hashed again.
fn lazy_hashes<'a>(
    bytes: &'a [u8],
    body: &Value,
    format: Format,
    injection: Option<memory::Injection>,
) -> LazyHashes<'a> {
    let (index, inserted) = match injection {
        None => return LazyHashes::new(bytes, format, None),
        Some(memory::Injection::Inserted(i)) => (i, true),
        Some(memory::Injection::Changed(i)) => (i, false),
    };
    match hash_at(body, format, index) {
        Some(hash) => LazyHashes::new(
            bytes,
            format,
            Some(Edit {
                index,
                inserted,
                hash,
            }),
        ),
        None => LazyHashes::unavailable(bytes, format),
    }
}
