//! The fast path: a request the cascade would leave exactly as it is goes upstream without
//! being parsed into a conversation (issue 15, "≤ 1 ms added at 100K tokens").
//!
//! An agent resends its whole history on every call, and most calls need nothing. Parsing
//! 400 kB into a `serde_json::Value` alone takes about 1 ms, so the fast path never does:
//! it scans the body into borrowed raw messages (a validating scan, no allocation per
//! string), and looks every message up by a hash of its bytes in a memo of the facts the
//! decision needs (class counts, the largest tool result, the exact count, whether it is a
//! remember request or carries a pin). Only messages not seen before are parsed, each on
//! its own; a request that extends the previous one of its conversation is scanned only
//! from the last message the two share, found by hashing (see [`scan`]), so it costs its
//! new messages and a hash of the rest.
//!
//! It takes a request only when the slow path provably changes nothing: OpenAI Chat,
//! Anthropic Messages, or the Responses API with an `input` list (its items grouped into
//! messages as the parser groups them, see [`items`]); the conversation's previous request went
//! through untouched (no sticky prefix to stitch, nothing compacted) — [`FastPath::settle`]
//! records that; no remember request, no pin, no stored fact to put back; and by the
//! engine's own numbers (the same counts, the same estimator) no strategy fires, as the
//! core answers it ([`CascadeConfig::leaves_untouched`]: no tool result over ①'s share,
//! the total under ②'s headroom and the preemptive threshold). Then the client's bytes go upstream
//! as they came, which is what the slow path sends for an untouched request. An upstream
//! overflow goes to the slow path as the answer to its first call: it recovers from there
//! without sending the request a second time.

use std::borrow::Cow;
use std::collections::{HashMap, HashSet};
use std::sync::Mutex;

use axum::http::HeaderMap;
use context_cascade::estimate::{ClassCounts, Estimator};
use context_cascade::format::message_facts::{role, user_text};
use context_cascade::format::parse_value;
use context_cascade::{Budget, CascadeConfig, Conversation, Format, Load, MessageId, Role};
use serde_json::Value;

use crate::ops::status::digest::{RequestDigest, envelope_hash};

/// At most this many messages' facts are kept; a full memo starts over.
const FACTS_CAPACITY: usize = 1 << 18;
/// At most this many conversations are remembered as clean; a full set starts over.
const CLEAN_CAPACITY: usize = 1 << 16;
/// How much of a body's start stands for its conversation when declining early: enough for
/// the system prompt and the first user message of most requests (their conversation key).
const PREFIX_BYTES: usize = 64 * 1024;

/// What the decision needs to know about one message, from its bytes alone.
#[derive(Debug, Clone, Copy)]
struct Facts {
    role: Option<Role>,
    /// A user message with non-blank text (the first one names the conversation).
    user_text: bool,
    /// A remember request, or a `_pin` marker: the slow path must see it.
    blocks: bool,
    counts: ClassCounts,
    /// The prior of the message's largest tool result (①'s check).
    largest_result: f64,
    /// The exact count under one counter (its key, the count).
    exact: Option<(usize, u64)>,
    /// The parsed message's identity, for the status page's prefix digest.
    digest: MessageId,
}

/// The fast path's memory: facts per message bytes, and which conversations are clean.
pub(crate) struct FastPath {
    pub(crate) enabled: bool,
    facts: Mutex<HashMap<MemoKey, Facts>>,
    /// How each Responses input item groups with its neighbours, by the item's bytes.
    kinds: Mutex<HashMap<MessageId, items::Kind>>,
    clean: Mutex<HashSet<String>>,
    /// The conversation key of bodies that started with these bytes (a hash of the tenant,
    /// the format and the first [`PREFIX_BYTES`]), remembered when one was declined because
    /// its conversation is not clean: the next request of a compacted conversation is
    /// declined before its body is scanned. Two conversations that share those bytes share
    /// a key too, or lose only the fast path: a prefix never admits a request.
    declined: Mutex<HashMap<u64, String>>,
    /// Where the last body of each conversation had its messages, to scan only what the
    /// next one adds.
    layouts: scan::Layouts,
}

/// A request the fast path can send as it is.
pub(crate) struct Decision {
    /// The request without its messages (model, tools, limits).
    pub(crate) skeleton: Conversation,
    /// The budget it was checked against.
    pub(crate) budget: Budget,
    /// The engine's estimate of the whole request.
    pub(crate) tokens: u64,
    /// Its uncalibrated prior (to pair with the usage the provider reports).
    pub(crate) prior: f64,
    /// How many messages it holds.
    pub(crate) messages: usize,
    /// The estimator used.
    pub(crate) estimator: Estimator,
    /// The conversation's tenancy key (as the slow path computes it).
    pub(crate) key: String,
    /// What went upstream, as the status page digests it.
    pub(crate) digest: RequestDigest,
    /// Past the pre-threshold with background summaries on: a job prepares ahead.
    pub(crate) prepare_ahead: bool,
}

/// A message's memo key: its format and the identity of its bytes.
type MemoKey = (Format, MessageId);

impl FastPath {
    /// A fast path, taken only when `enabled` (`fast_path` in the configuration).
    pub(crate) fn new(enabled: bool) -> Self {
        FastPath {
            enabled,
            facts: Mutex::default(),
            kinds: Mutex::default(),
            clean: Mutex::default(),
            declined: Mutex::default(),
            layouts: scan::Layouts::new(),
        }
    }

    /// Records how the slow path left a conversation: only one that went upstream
    /// untouched (nothing stitched, injected, pinned or compacted) may take the fast path.
    pub(crate) fn settle(&self, key: &str, untouched: bool) {
        let mut clean = self.clean.lock().unwrap_or_else(|p| p.into_inner());
        if !untouched {
            clean.remove(key);
            return;
        }
        if clean.len() >= CLEAN_CAPACITY {
            clean.clear();
        }
        clean.insert(key.to_owned());
    }

    /// The hash of a body's start that [`FastPath::declined`] keys by.
    fn prefix(format: Format, tenant: &str, bytes: &[u8]) -> u64 {
        let mut hasher = xxhash_rust::xxh3::Xxh3::new();
        hasher.update(format.as_str().as_bytes());
        hasher.update(&[0xff]);
        hasher.update(tenant.as_bytes());
        hasher.update(&[0xff]);
        hasher.update(&bytes[..bytes.len().min(PREFIX_BYTES)]);
        hasher.digest()
    }

    /// Whether a body starting like one of a conversation that is not clean (still) belongs
    /// to a conversation that is not clean.
    fn declined_before(&self, prefix: u64) -> bool {
        let known = (self.declined.lock().unwrap_or_else(|p| p.into_inner()))
            .get(&prefix)
            .cloned();
        known.is_some_and(|key| !self.is_clean(&key))
    }

    fn remember_declined(&self, prefix: u64, key: &str) {
        let mut declined = self.declined.lock().unwrap_or_else(|p| p.into_inner());
        if declined.len() >= CLEAN_CAPACITY {
            declined.clear();
        }
        declined.insert(prefix, key.to_owned());
    }

    /// Whether a conversation went upstream untouched last time.
    fn is_clean(&self, key: &str) -> bool {
        (self.clean.lock().unwrap_or_else(|p| p.into_inner())).contains(key)
    }

    /// The facts of one message, from the memo or by parsing it alone. `None` when it does
    /// not parse on its own (the slow path will say why).
    fn facts(
        &self,
        format: Format,
        (raw, id): (&str, MessageId),
        config: &CascadeConfig,
        estimator: &Estimator,
    ) -> Option<Facts> {
        self.facts_of((format, id), || Cow::Borrowed(raw), config, estimator)
    }

    /// The facts of every message of `scan` (whose identities are `ids`): one per message,
    /// or for the Responses API one per group of items.
    fn all_facts(
        &self,
        format: Format,
        (scan, ids): (&Scan<'_>, &[MessageId]),
        config: &CascadeConfig,
        estimator: &Estimator,
    ) -> Option<Vec<Facts>> {
        match format {
            Format::Responses => self.item_facts((&scan.messages, ids), config, estimator),
            _ => (scan.messages.iter().zip(ids))
                .map(|(raw, id)| self.facts(format, (raw, *id), config, estimator))
                .collect(),
        }
    }

    /// The facts memoized under `key`, or read from the message's JSON (`json`: one
    /// message, or for the Responses API the array of a message's items).
    fn facts_of<'j>(
        &self,
        key: MemoKey,
        json: impl FnOnce() -> Cow<'j, str>,
        config: &CascadeConfig,
        estimator: &Estimator,
    ) -> Option<Facts> {
        let counter_key = estimator.counter.map(|c| c.key());
        let cached = (self.facts.lock().unwrap_or_else(|p| p.into_inner()))
            .get(&key)
            .copied();
        if let Some(facts) = cached.filter(|f| f.exact.map(|e| e.0) == counter_key) {
            return Some(facts);
        }
        let facts = read_facts(key.0, &json(), config, estimator)?;
        let mut memo = self.facts.lock().unwrap_or_else(|p| p.into_inner());
        if memo.len() >= FACTS_CAPACITY {
            memo.clear();
        }
        memo.insert(key, facts);
        Some(facts)
    }
}

/// The facts of one message read from its JSON. For the Responses API `json` is the array
/// of the items that make one message; items the parser reads as more than one message
/// give `None`.
fn read_facts(
    format: Format,
    json: &str,
    config: &CascadeConfig,
    estimator: &Estimator,
) -> Option<Facts> {
    let value: Value = serde_json::from_str(json).ok()?;
    // The user texts a remember request may be in (each item's, for the Responses API).
    let texts: Vec<String> = match (format, &value) {
        (Format::Responses, Value::Array(items)) => items.iter().filter_map(user_text).collect(),
        _ => user_text(&value).into_iter().collect(),
    };
    let body = match format {
        Format::Responses => serde_json::json!({ "input": value }),
        _ => serde_json::json!({ "messages": [value] }),
    };
    let parsed = parse_value(body, Some(format)).ok()?;
    let message = match parsed.messages.as_slice() {
        [message] => message,
        [message, ..] if format != Format::Responses => message,
        _ => return None,
    };
    let remember = message.role() == Role::User
        && (config.remember.is_remember_request(&message.text_content())
            || texts.iter().any(|t| config.remember.is_remember_request(t)));
    let largest_result = (message.tool_results())
        .map(|r| config.weights.prior(&ClassCounts::of_blocks(&r.content)))
        .fold(0.0, f64::max);
    let (role, named_by_user) = match format {
        Format::Responses => (
            Some(message.role()),
            message.role() == Role::User && !message.text_content().trim().is_empty(),
        ),
        _ => (role(&value), !texts.is_empty()),
    };
    Some(Facts {
        role,
        user_text: named_by_user,
        blocks: remember || message.is_pinned() || message.fields().contains_key("_pin"),
        counts: message.counts(),
        largest_result,
        // As the engine counts it: a message too long to count exactly is estimated.
        exact: (estimator.counter).map(|c| (c.key(), estimator.message_tokens(message))),
        digest: MessageId::of(message),
    })
}

/// The request without its messages, parsed: model, tools, output limits (and for
/// Anthropic the top-level `system`, which becomes a leading system message).
fn skeleton(format: Format, scan: &Scan<'_>) -> Option<Conversation> {
    let field = match format {
        Format::Responses => "input",
        _ => "messages",
    };
    // A second `messages` (`input`) key: which one the slow path reads is its parser's.
    if scan.rest.iter().any(|(key, _)| key == field) {
        return None;
    }
    let mut body = serde_json::Map::new();
    for (at, (key, raw)) in scan.rest.iter().enumerate() {
        // In its place: the Responses envelope keeps the emptied `input` where it was.
        if at == scan.messages_at {
            body.insert(field.into(), Value::Array(Vec::new()));
        }
        body.insert(key.clone(), serde_json::from_str(raw).ok()?);
    }
    if scan.messages_at == scan.rest.len() {
        body.insert(field.into(), Value::Array(Vec::new()));
    }
    parse_value(Value::Object(body), Some(format)).ok()
}

/// The conversation key the slow path computes ([`crate::state::memory::conversation_key`]),
/// from what it reads: the system prompt (OpenAI: the system messages; Anthropic: the
/// top-level `system`) and the first user message.
fn conversation_key(
    format: Format,
    headers: &HeaderMap,
    scan: &Scan<'_>,
    facts: &[Facts],
) -> Option<String> {
    let mut body = serde_json::Map::new();
    if format == Format::Responses {
        return responses_key(headers, scan);
    }
    let mut named = Vec::new();
    let mut first_user = None;
    for (raw, f) in scan.messages.iter().zip(facts) {
        if format == Format::OpenAi && f.role.is_some_and(Role::is_system) {
            named.push(serde_json::from_str::<Value>(raw).ok()?);
        } else if first_user.is_none() && f.user_text {
            first_user = Some(serde_json::from_str::<Value>(raw).ok()?);
        }
    }
    named.extend(first_user);
    if format == Format::Anthropic
        && let Some((_, system)) = scan.rest.iter().find(|(k, _)| k == "system")
    {
        body.insert("system".into(), serde_json::from_str(system).ok()?);
    }
    body.insert("messages".into(), Value::Array(named));
    let body = Value::Object(body);
    Some(crate::state::memory::conversation_key(
        headers, &body, format,
    ))
}

/// A Responses conversation's key from what the slow path reads of it: the
/// `prompt_cache_key`, the `instructions`, and the items up to the first user item (read
/// one by one until it comes).
fn responses_key(headers: &HeaderMap, scan: &Scan<'_>) -> Option<String> {
    let mut body = serde_json::Map::new();
    for key in ["prompt_cache_key", "instructions"] {
        if let Some((_, raw)) = scan.rest.iter().find(|(k, _)| k == key) {
            body.insert(key.into(), serde_json::from_str(raw).ok()?);
        }
    }
    let mut leading = Vec::new();
    if !body.contains_key("prompt_cache_key") {
        for raw in &scan.messages {
            let item: Value = serde_json::from_str(raw).ok()?;
            let user = context_cascade::format::message_facts::user_text(&item).is_some();
            leading.push(item);
            if user {
                break;
            }
        }
    }
    body.insert("input".into(), Value::Array(leading));
    Some(crate::state::memory::conversation_key(
        headers,
        &Value::Object(body),
        Format::Responses,
    ))
}

/// The engine's count of the whole request: exact when the model has a counter (the
/// messages' memoized counts, the skeleton's leading messages and the request's overhead),
/// else the estimate of its class counts.
fn request_tokens(
    estimator: &Estimator,
    skeleton: &Conversation,
    facts: &[Facts],
    counts: &ClassCounts,
) -> u64 {
    match estimator.counter {
        Some(counter) => {
            let messages: u64 = facts.iter().filter_map(|f| f.exact.map(|e| e.1)).sum();
            let leading: u64 = (skeleton.messages.iter())
                .map(|m| estimator.message_tokens(m))
                .sum();
            messages + leading + counter.request_overhead(skeleton)
        }
        None => estimator.tokens_of(counts),
    }
}

/// One request as the fast path receives it.
pub(crate) struct Incoming<'a> {
    pub(crate) format: Format,
    pub(crate) headers: &'a HeaderMap,
    /// The tenancy of its credentials.
    pub(crate) tenant: &'a str,
    pub(crate) bytes: &'a [u8],
}

/// Whether the request needs nothing from the cascade, and if so what the slow path's
/// engine would have said about it. `background`: background summaries are on; `budget`
/// resolves the window for the model.
pub(crate) async fn decide<B, F>(
    fast: &FastPath,
    manager: &context_cascade::ContextManager,
    request: Incoming<'_>,
    background: bool,
    budget: B,
) -> Option<Decision>
where
    B: FnOnce(String, u64) -> F,
    F: std::future::Future<Output = Budget>,
{
    let Incoming {
        format,
        headers,
        tenant,
        bytes,
    } = request;
    let prefix = FastPath::prefix(format, tenant, bytes);
    if fast.declined_before(prefix) {
        tracing::debug!("fast path: a conversation whose last request was changed");
        return None;
    }
    let scan = fast.layouts.scan(format, prefix, bytes)?;
    let ids = scan.ids();
    fast.layouts.keep(prefix, &scan, bytes, &ids);
    let skeleton = skeleton(format, &scan)?;
    let model = skeleton.model().unwrap_or("").to_owned();
    let config = manager.config();
    let estimator = manager.estimator(&model);
    let facts = fast.all_facts(format, (&scan, &ids), config, &estimator)?;
    if facts.iter().any(|f| f.blocks) {
        tracing::debug!("fast path: a remember request or a pin");
        return None;
    }
    let key = conversation_key(format, headers, &scan, &facts)?;
    let key = crate::state::Tenancy::scoped(tenant, &key);
    if !fast.is_clean(&key) {
        fast.remember_declined(prefix, &key);
        let conversation = crate::ops::status::record::short_id(&key);
        tracing::debug!(%conversation, "fast path: the conversation's last request was changed, or is new");
        return None;
    }
    // The skeleton holds the tools and, for Anthropic, the system prompt as a message.
    let counts = (facts.iter()).fold(ClassCounts::of_conversation(&skeleton), |acc, f| {
        acc + f.counts
    });
    let tokens = request_tokens(&estimator, &skeleton, &facts, &counts);
    let largest = facts.iter().map(|f| f.largest_result).fold(0.0, f64::max);
    let budget = budget(model, skeleton.output_reserve()).await;
    let largest_tokens = (largest * estimator.multiplier).ceil() as u64;
    let load = Load {
        tokens,
        largest_result: largest_tokens,
    };
    let nothing_fires = config.leaves_untouched(load, budget);
    // Past the pre-threshold a background job prepares ④'s summaries (when on), from the
    // request parsed after it is answered: the request itself does not wait for that.
    let prepare_ahead = background && tokens > budget.share(config.background.summary_ratio);
    if !nothing_fires {
        tracing::debug!(tokens, largest_tokens, "fast path: a strategy would run");
    }
    let envelope = envelope_hash(format, &skeleton.envelope);
    let leading = skeleton.messages.iter().map(MessageId::of);
    let digest = RequestDigest::from_parts(envelope, leading.chain(facts.iter().map(|f| f.digest)));
    nothing_fires.then(|| Decision {
        budget,
        prior: config.weights.prior(&counts),
        messages: skeleton.messages.len() + facts.len(),
        skeleton,
        tokens,
        estimator,
        key,
        digest,
        prepare_ahead,
    })
}

/// The engine with exact counts for OpenAI models (feature `exact`).
#[cfg(feature = "exact")]
pub(crate) fn exact_counts(
    manager: context_cascade::ContextManager,
) -> context_cascade::ContextManager {
    // Nothing to preload: the tokenizers' tables are in the binary and paged in as counting
    // touches them, so an idle proxy holds none of them (issue 27).
    manager.with_exact_counts()
}

/// Without the feature every model is estimated.
#[cfg(not(feature = "exact"))]
pub(crate) fn exact_counts(
    manager: context_cascade::ContextManager,
) -> context_cascade::ContextManager {
    manager
}

mod items;
mod scan;
use scan::Scan;
#[cfg(test)]
mod tests;
