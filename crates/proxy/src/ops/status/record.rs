//! The recorder behind the status page: per conversation, a bounded timeline of what the
//! cascade did to each request, in memory.
//!
//! Only numbers and names the proxy chose are kept: the strategy, token and message counts,
//! the trail's entry counts per kind, whether the request extended the previous one, and
//! the model name when it is an admitted label. No message text, file name, command or
//! request text is ever copied in here (a step's `detail` is left out for that reason), so
//! the page cannot show content whatever it renders. Conversations are known by a short
//! hash of their tenancy key, which is itself a keyed hash: never a credential.
//!
//! Memory is bounded: at most [`Bounds::conversations`] conversations (the least recently
//! used one goes first), at most [`Bounds::calls`] requests each, at most [`MAX_STEPS`]
//! steps per request, and one prefix digest per conversation (not the messages).

use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;
use std::time::{SystemTime, UNIX_EPOCH};

use context_cascade::TrailStats;
use context_cascade::replay::PrefixStability;
#[cfg(test)]
use context_cascade::{CallError, Called, Conversation};
use context_cascade::{Report, Step, Strategy};
use sha2::{Digest, Sha256};

use super::digest::{PrefixDigest, RequestDigest};

/// Steps kept per request (the cascade runs a handful; a longer list is cut).
pub(crate) const MAX_STEPS: usize = 16;
/// Hex characters of the conversation id shown (48 bits: distinct among 50 conversations).
const ID_CHARS: usize = 12;

/// How much the recorder keeps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Bounds {
    /// Conversations kept; beyond it the least recently seen one is dropped.
    pub conversations: usize,
    /// Requests kept per conversation (the latest ones).
    pub calls: usize,
}

impl Default for Bounds {
    /// The last 50 conversations, the last 200 requests of each.
    fn default() -> Self {
        Bounds {
            conversations: 50,
            calls: 200,
        }
    }
}

/// How a request on a cascade route ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Outcome {
    /// The upstream answered.
    Answered,
    /// The conversation still overflowed after every recovery step.
    Exhausted,
    /// The upstream failed with something other than an overflow.
    Failed,
}

impl Outcome {
    /// The outcome's name on the page.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Outcome::Answered => "answered",
            Outcome::Exhausted => "exhausted",
            Outcome::Failed => "upstream error",
        }
    }
}

/// One strategy applied, as counts.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct StepRecord {
    /// The strategy.
    pub strategy: Strategy,
    /// The recovery attempt that ran it (`None`: before the call, Layer 1).
    pub attempt: Option<u8>,
    /// ⑤'s level.
    pub level: Option<u8>,
    /// Messages whose content changed or that were removed.
    pub messages_affected: usize,
    /// Messages removed.
    pub messages_removed: usize,
    /// Estimated tokens before and after the step.
    pub tokens_before: u64,
    /// Estimated tokens after the step.
    pub tokens_after: u64,
    /// What the step's trail lists, per kind, and what it costs.
    pub trail: Option<TrailStats>,
    /// The step removed part of the current turn.
    pub inside_current_turn: bool,
}

impl StepRecord {
    fn of(step: &Step) -> Self {
        StepRecord {
            strategy: step.strategy,
            attempt: step.attempt,
            level: step.level,
            messages_affected: step.messages_affected,
            messages_removed: step.messages_removed,
            tokens_before: step.tokens_before,
            tokens_after: step.tokens_after,
            trail: step.trail,
            inside_current_turn: step.inside_current_turn,
        }
    }
}

/// One request of a conversation.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct CallRecord {
    /// 1-based number of the request in its conversation (as seen by this replica).
    pub number: u64,
    /// When it was recorded, seconds since the Unix epoch.
    pub at: u64,
    /// The window of the budget.
    pub window: u64,
    /// The output reserve of the budget.
    pub reserve: u64,
    /// Estimated tokens of the request as it came in.
    pub tokens_before: u64,
    /// Estimated tokens of the request as it went upstream.
    pub tokens_after: u64,
    /// Messages as it came in.
    pub messages_before: usize,
    /// Messages as it went upstream.
    pub messages_after: usize,
    /// The steps, in order (at most [`MAX_STEPS`]).
    pub steps: Vec<StepRecord>,
    /// Upstream calls made for it.
    pub calls: usize,
    /// Of those, how many the upstream refused as an overflow.
    pub overflows: usize,
    /// The request went up within the budget.
    pub fits: bool,
    /// How it ended.
    pub outcome: Outcome,
    /// Whether the request sent upstream extended the previous one (`None`: the first).
    pub extends_previous: Option<bool>,
}

/// One conversation's timeline.
#[derive(Debug, Clone)]
pub(crate) struct Timeline {
    /// A short hash of the conversation's tenancy key.
    pub id: String,
    /// The model of its latest request, when it is an admitted label.
    pub model: Option<String>,
    /// When it was first seen here, seconds since the Unix epoch.
    pub first_seen: u64,
    /// Requests seen (also those no longer kept).
    pub requests: u64,
    /// The latest requests, oldest first.
    pub calls: VecDeque<CallRecord>,
    /// How many requests extended the previous one, over every request seen.
    pub stability: PrefixStability,
    /// The previous upstream request: its part count and their digest.
    prefix: Option<PrefixDigest>,
    /// Recency, for the LRU bound.
    used: u64,
}

impl Timeline {
    /// When the latest request was recorded.
    pub(crate) fn last_seen(&self) -> u64 {
        self.calls.back().map_or(self.first_seen, |c| c.at)
    }

    /// Requests kept that ran at least one strategy.
    pub(crate) fn compactions(&self) -> usize {
        self.calls.iter().filter(|c| !c.steps.is_empty()).count()
    }
}

/// What every conversation shares: totals over all requests, kept or not.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Totals {
    /// Requests recorded.
    pub requests: u64,
    /// Requests that ran at least one strategy.
    pub compacted: u64,
    /// Prefix stability over every conversation.
    pub stability: PrefixStability,
    /// Conversations dropped to stay within the bounds.
    pub evicted: u64,
}

#[derive(Default)]
struct Inner {
    conversations: HashMap<String, Timeline>,
    totals: Totals,
    tick: u64,
}

/// The bounded, in-memory timelines of the conversations this replica served.
pub(crate) struct Recorder {
    bounds: Bounds,
    inner: Mutex<Inner>,
}

impl Recorder {
    /// An empty recorder keeping at most `bounds`.
    pub(crate) fn new(bounds: Bounds) -> Self {
        Recorder {
            bounds,
            inner: Mutex::new(Inner::default()),
        }
    }

    /// The bounds it keeps.
    pub(crate) fn bounds(&self) -> Bounds {
        self.bounds
    }

    /// Records one request of the conversation `key` (its tenancy key): how the engine's
    /// call ended (`result`) and `sent`, the conversation as it last went upstream. `model`
    /// is the request's model when it is an admitted label (else not shown).
    #[cfg(test)]
    pub(crate) fn record<T>(
        &self,
        key: &str,
        model: Option<&str>,
        result: &Result<Called<T>, CallError>,
        sent: &Conversation,
    ) {
        let (report, outcome) = match result {
            Ok(called) => (&called.report, Outcome::Answered),
            Err(e @ CallError::Exhausted { .. }) => (e.report(), Outcome::Exhausted),
            Err(e @ CallError::Llm { .. }) => (e.report(), Outcome::Failed),
        };
        self.record_report(key, model, report, outcome, &RequestDigest::of(sent));
    }

    /// Records one request from its report and the digest of what went upstream (the fast
    /// path's way: it has no parsed conversation, only the hashes of its parts).
    pub(crate) fn record_report(
        &self,
        key: &str,
        model: Option<&str>,
        report: &Report,
        outcome: Outcome,
        sent: &RequestDigest,
    ) {
        let id = short_id(key);
        let now = unix_now();
        // The digests are chained outside the lock.
        let previous = self.previous_parts(&id);
        let (at_previous, digest) = sent.chained(previous);
        let mut inner = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        inner.tick += 1;
        let tick = inner.tick;
        if !inner.conversations.contains_key(&id) {
            self.make_room(&mut inner);
            let timeline = Timeline {
                id: id.clone(),
                model: None,
                first_seen: now,
                requests: 0,
                calls: VecDeque::new(),
                stability: PrefixStability::default(),
                prefix: None,
                used: tick,
            };
            inner.conversations.insert(id.clone(), timeline);
        }
        let Some(timeline) = inner.conversations.get_mut(&id) else {
            return;
        };
        // Another request of the conversation may have raced in between: compare only
        // against the prefix the digest was taken for.
        let extends = timeline.prefix.map(|p| {
            Some(p.parts) == previous && at_previous == Some(p.hash) && p.parts <= digest.parts
        });
        if let Some(extended) = extends {
            timeline.stability.record(extended);
        }
        timeline.prefix = Some(digest);
        timeline.used = tick;
        timeline.requests += 1;
        if model.is_some() {
            timeline.model = model.map(str::to_owned);
        }
        let call = call_record(timeline.requests, now, report, outcome, extends);
        timeline.calls.push_back(call);
        while timeline.calls.len() > self.bounds.calls {
            timeline.calls.pop_front();
        }
        inner.totals.requests += 1;
        if !report.steps.is_empty() {
            inner.totals.compacted += 1;
        }
        if let Some(extended) = extends {
            inner.totals.stability.record(extended);
        }
    }

    /// The timelines, most recently seen first, and the totals.
    pub(crate) fn snapshot(&self) -> (Vec<Timeline>, Totals) {
        let inner = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        let mut timelines: Vec<Timeline> = inner.conversations.values().cloned().collect();
        timelines.sort_by_key(|t| std::cmp::Reverse(t.used));
        (timelines, inner.totals)
    }

    fn previous_parts(&self, id: &str) -> Option<usize> {
        let inner = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        inner
            .conversations
            .get(id)
            .and_then(|t| t.prefix)
            .map(|p| p.parts)
    }

    /// Drops least recently seen conversations until one more fits.
    fn make_room(&self, inner: &mut Inner) {
        while inner.conversations.len() >= self.bounds.conversations.max(1) {
            let oldest = (inner.conversations.values())
                .min_by_key(|t| t.used)
                .map(|t| t.id.clone());
            let Some(oldest) = oldest else { return };
            inner.conversations.remove(&oldest);
            inner.totals.evicted += 1;
        }
    }
}

fn call_record(
    number: u64,
    at: u64,
    report: &Report,
    outcome: Outcome,
    extends_previous: Option<bool>,
) -> CallRecord {
    CallRecord {
        number,
        at,
        window: report.window,
        reserve: report.reserve,
        tokens_before: report.tokens_before,
        tokens_after: report.tokens_after,
        messages_before: report.messages_before,
        messages_after: report.messages_after,
        steps: (report.steps.iter().take(MAX_STEPS))
            .map(StepRecord::of)
            .collect(),
        calls: report.calls,
        overflows: report.overflows,
        fits: report.fits,
        outcome,
        extends_previous,
    }
}

/// The id shown for a tenancy key: the start of its SHA-256 (the key is already a keyed
/// hash; hashing again keeps the store key itself off the page).
pub(crate) fn short_id(key: &str) -> String {
    let digest = Sha256::digest(key.as_bytes());
    let mut id = hex::encode(digest);
    id.truncate(ID_CHARS);
    id
}

fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

#[cfg(test)]
mod tests {
    use super::*;
    use context_cascade::{Budget, CascadeConfig, ContextManager, Format, Message, Role};

    fn conversation(texts: &[&str]) -> Conversation {
        let mut c = Conversation::new(Format::OpenAi);
        c.messages = texts
            .iter()
            .map(|t| Message::text(Role::User, *t))
            .collect();
        c
    }

    fn report(sent: &Conversation) -> Report {
        let manager = ContextManager::new(CascadeConfig::default());
        let mut copy = sent.clone();
        pollster::block_on(manager.prepare(&mut copy, Budget::new(100_000, 0)))
    }

    #[allow(clippy::result_large_err)] // the engine's own result type, as the proxy gets it
    fn ok(sent: &Conversation) -> Result<Called<()>, CallError> {
        Ok(Called {
            output: (),
            report: report(sent),
        })
    }

    #[test]
    fn conversations_and_calls_are_bounded_least_recent_first() {
        let recorder = Recorder::new(Bounds {
            conversations: 3,
            calls: 5,
        });
        let sent = conversation(&["a"]);
        for i in 0..4 {
            recorder.record(&format!("key-{i}"), None, &ok(&sent), &sent);
        }
        // key-1 is used again: key-2 becomes the least recent.
        recorder.record("key-1", None, &ok(&sent), &sent);
        recorder.record("key-4", None, &ok(&sent), &sent);
        let (timelines, totals) = recorder.snapshot();
        let ids: Vec<String> = timelines.iter().map(|t| t.id.clone()).collect();
        let expected: Vec<String> = ["key-4", "key-1", "key-3"]
            .iter()
            .map(|k| short_id(k))
            .collect();
        assert_eq!(ids, expected);
        assert_eq!(totals.evicted, 2);
        for _ in 0..12 {
            recorder.record("key-4", None, &ok(&sent), &sent);
        }
        let (timelines, totals) = recorder.snapshot();
        let latest = &timelines[0];
        assert_eq!(latest.calls.len(), 5);
        assert_eq!(latest.requests, 13);
        assert_eq!(latest.calls.back().map(|c| c.number), Some(13));
        assert_eq!(totals.requests, 18);
    }

    #[test]
    fn stability_counts_requests_that_extend_the_previous_one() {
        let recorder = Recorder::new(Bounds::default());
        let steps = [
            conversation(&["a"]),
            conversation(&["a", "b"]),
            conversation(&["a", "b", "c"]),
            // Rewritten: "a" went (as a compaction would do).
            conversation(&["b", "c", "d"]),
            conversation(&["b", "c", "d", "e"]),
        ];
        for sent in &steps {
            recorder.record("k", Some("gpt-4o"), &ok(sent), sent);
        }
        let (timelines, totals) = recorder.snapshot();
        let t = &timelines[0];
        assert_eq!((t.stability.compared, t.stability.extending), (4, 3));
        assert_eq!(totals.stability, t.stability);
        let flags: Vec<Option<bool>> = t.calls.iter().map(|c| c.extends_previous).collect();
        assert_eq!(
            flags,
            vec![None, Some(true), Some(true), Some(false), Some(true)]
        );
        assert_eq!(t.model.as_deref(), Some("gpt-4o"));
        // A changed envelope (another model) breaks the prefix too.
        let mut other = conversation(&["b", "c", "d", "e", "f"]);
        other
            .envelope
            .insert("model".into(), serde_json::json!("other"));
        recorder.record("k", None, &ok(&other), &other);
        let (timelines, _) = recorder.snapshot();
        assert_eq!(
            timelines[0].calls.back().unwrap().extends_previous,
            Some(false)
        );
    }

    #[test]
    fn ids_are_short_hashes_of_the_key() {
        let id = short_id("0123456789abcdef0123456789abcdef");
        assert_eq!(id.len(), ID_CHARS);
        assert!(!"0123456789abcdef0123456789abcdef".contains(&id));
    }
}
