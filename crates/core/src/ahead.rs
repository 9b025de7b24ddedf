//! Summaries prepared ahead: ④'s summarizer calls made between turns, so that the turn
//! that crosses the preemptive threshold does not wait for them.
//!
//! When a conversation's estimate passes `background_summary_ratio`·E (0.8 by default,
//! below the preemptive 0.9), [`ContextManager::summarize_ahead`] forecasts the next
//! request — this one followed by one more exchange shaped like the latest one (see
//! [`forecast`]) — and, if that request would cross the threshold and need ④, runs the
//! engine's own `prepare` on it with a recording summarizer. Nothing here chooses a range
//! or builds a request: the range ③/④ remove, the chunks and the merge are the engine's,
//! so the prepared [`SummaryRequest`]s are byte for byte the ones the synchronous run will
//! make when the forecast holds.
//!
//! [`PreparedSummaries`] hands them over: a [`Summarizer`] that answers a request it was
//! prepared for at once and passes any other to the real summarizer (the history diverged
//! from the forecast: the synchronous path, as before).

use std::collections::HashSet;
use std::sync::{Arc, Mutex, MutexGuard};

use tracing::instrument::WithSubscriber;

use crate::BoxFuture;
use crate::config::Budget;
use crate::conversation::{Block, Conversation, Message, Role};
use crate::engine::ContextManager;
use crate::estimate::Estimator;
use crate::middle::exchange_starts;
use crate::summarizer::{Summarizer, SummaryError, SummaryRequest};

/// At most this many summaries are kept by [`PreparedSummaries`]: one compaction needs at
/// most the chunks, their merge and ⑤'s fallbacks; older ones belong to forecasts that
/// did not come true.
const KEPT_REQUESTS: usize = 32;

/// What [`ContextManager::summarize_ahead`] prepared: every summarizer request the forecast
/// compaction made, with its answer.
#[derive(Debug, Clone, PartialEq)]
pub struct PreparedSummary {
    answers: Vec<(SummaryRequest, String)>,
}

impl PreparedSummary {
    /// The requests prepared, in the order the engine made them.
    pub fn requests(&self) -> impl Iterator<Item = &SummaryRequest> {
        self.answers.iter().map(|(request, _)| request)
    }

    /// The answer prepared for `request`, if it was prepared for it (see
    /// [`PreparedSummaries`] for when an answer serves a request).
    pub fn answer(&self, request: &SummaryRequest) -> Option<&str> {
        (self.answers.iter())
            .find(|(prepared, answer)| serves(prepared, answer, request))
            .map(|(_, answer)| answer.as_str())
    }

    /// How many summarizer requests were prepared.
    pub fn len(&self) -> usize {
        self.answers.len()
    }

    /// Whether nothing was prepared (never the case for a value `summarize_ahead` returns).
    pub fn is_empty(&self) -> bool {
        self.answers.is_empty()
    }
}

/// Whether an answer prepared for `prepared` serves `asked`: the same input (messages,
/// previous summary, chunk summaries), and a summary that fits the limit asked for — made
/// under that limit or a stricter one, or no longer than it anyway (the proxy's summary
/// cache applies the first rule; a prepared answer is checked by ④ like any other).
fn serves(prepared: &SummaryRequest, answer: &str, asked: &SummaryRequest) -> bool {
    let same_input = prepared.messages() == asked.messages()
        && prepared.previous_summary() == asked.previous_summary()
        && prepared.partials() == asked.partials()
        && prepared.is_merge() == asked.is_merge();
    same_input
        && (prepared.max_tokens() <= asked.max_tokens()
            || Estimator::default().text_tokens(answer) <= asked.max_tokens())
}

/// Records every request a summarizer answers (the forecast compaction's calls).
struct Recording {
    inner: Arc<dyn Summarizer>,
    log: Mutex<Vec<(SummaryRequest, Result<String, SummaryError>)>>,
}

impl Summarizer for Recording {
    fn id(&self) -> String {
        self.inner.id()
    }

    fn summarize<'a>(
        &'a self,
        request: &'a SummaryRequest,
    ) -> BoxFuture<'a, Result<String, SummaryError>> {
        Box::pin(async move {
            let result = self.inner.summarize(request).await;
            lock(&self.log).push((request.clone(), result.clone()));
            result
        })
    }
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

impl ContextManager {
    /// Prepares, between turns, the summaries the next request's compaction will ask for.
    ///
    /// Below `background_summary_ratio`·E nothing is forecast (`Ok(None)`). Above it, the
    /// next request is forecast as `conversation` followed by one more exchange shaped like
    /// its latest one, and the engine's `prepare` runs on that forecast with `summarizer`
    /// recording every ④ request; `Ok(None)` when the forecast does not cross the
    /// preemptive threshold or ③ alone would bring it down. The first summarizer error is
    /// returned (the caller may try again; the synchronous path will anyway).
    ///
    /// The conversation is not changed and the calibration is only read. Hand the result
    /// to [`PreparedSummaries::add`] behind the manager's summarizer: when the forecast
    /// holds, the synchronous ④ makes no summarizer call and writes the same bytes.
    pub async fn summarize_ahead(
        &self,
        conversation: &Conversation,
        budget: Budget,
        summarizer: Arc<dyn Summarizer>,
    ) -> Result<Option<PreparedSummary>, SummaryError> {
        let config = self.config();
        if self.estimate(conversation) <= budget.share(config.background_summary_ratio) {
            return Ok(None);
        }
        let mut next = forecast(conversation);
        let recording = Arc::new(Recording {
            inner: summarizer,
            log: Mutex::new(Vec::new()),
        });
        let shadow = self.shadow(recording.clone());
        // The forecast's compaction is not the conversation's: its log lines would say a
        // history was replaced when none was.
        shadow
            .prepare(&mut next, budget)
            .with_subscriber(tracing::subscriber::NoSubscriber::default())
            .await;
        let log = std::mem::take(&mut *lock(&recording.log));
        let mut answers = Vec::with_capacity(log.len());
        for (request, result) in log {
            answers.push((request, result?));
        }
        tracing::debug!(requests = answers.len(), "summaries prepared ahead");
        Ok((!answers.is_empty()).then_some(PreparedSummary { answers }))
    }
}

/// The next request as the agent loop will likely send it: `conversation`, then a copy of
/// its latest tool exchange (the assistant message that made calls and their results),
/// with fresh call ids of the same length, standing for the reply and tool output to come.
/// Without a tool exchange, a copy of the latest assistant message and the user message
/// after it. Only the copy's shape and size matter: what ④ removes lies before the tail.
pub(crate) fn forecast(conversation: &Conversation) -> Conversation {
    let mut next = conversation.clone();
    let messages = &conversation.messages;
    let starts = exchange_starts(conversation);
    let exchange = (0..messages.len())
        .rev()
        .find(|&i| {
            messages[i].role() == Role::Assistant && messages[i].tool_calls().next().is_some()
        })
        .map(|start| {
            let end = (start + 1..messages.len())
                .take_while(|&i| starts[i] == start)
                .last()
                .unwrap_or(start);
            start..end + 1
        });
    let template = match exchange {
        Some(range) => range,
        None => match messages.iter().rposition(|m| m.role() == Role::Assistant) {
            Some(at) => at..(at + 2).min(messages.len()),
            None => return next,
        },
    };
    let mut taken: HashSet<String> = messages.iter().flat_map(ids_of).collect();
    let mut renamed = std::collections::HashMap::new();
    for message in &messages[template] {
        let mut copy = message.clone();
        for block in copy.blocks_mut() {
            let id = match block {
                Block::ToolCall(call) => &mut call.id,
                Block::ToolResult(result) => &mut result.call_id,
                _ => continue,
            };
            let fresh = renamed
                .entry(id.clone())
                .or_insert_with(|| fresh_id(id, &mut taken))
                .clone();
            *id = fresh;
        }
        next.messages.push(copy);
    }
    next
}

/// The call ids a message names (its calls' and its results').
fn ids_of(message: &Message) -> Vec<String> {
    (message.blocks().iter())
        .filter_map(|b| match b {
            Block::ToolCall(call) => Some(call.id.clone()),
            Block::ToolResult(result) => Some(result.call_id.clone()),
            _ => None,
        })
        .collect()
}

/// An id of the same length as `id` (so that the forecast estimates alike) that no
/// message uses; `id` itself when none can be found.
fn fresh_id(id: &str, taken: &mut HashSet<String>) -> String {
    const ALPHABET: &str = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ";
    let chars: Vec<char> = id.chars().collect();
    for at in (0..chars.len()).rev() {
        // Only ASCII alphanumerics are swapped, so the byte length stays the same.
        if !chars[at].is_ascii_alphanumeric() {
            continue;
        }
        for c in ALPHABET.chars() {
            let mut candidate = chars.clone();
            candidate[at] = c;
            let candidate: String = candidate.into_iter().collect();
            if taken.insert(candidate.clone()) {
                return candidate;
            }
        }
    }
    id.to_owned()
}

/// A [`Summarizer`] that answers the requests prepared ahead at once and passes any other
/// to the real summarizer. Share it (`Arc`) between the manager that compacts
/// ([`ContextManager::with_summarizer`]) and the code that prepares.
pub struct PreparedSummaries {
    inner: Arc<dyn Summarizer>,
    prepared: Mutex<Vec<(SummaryRequest, String)>>,
    served: std::sync::atomic::AtomicU64,
}

impl PreparedSummaries {
    /// Answers from what is prepared, else from `inner`.
    pub fn new(inner: Arc<dyn Summarizer>) -> Self {
        PreparedSummaries {
            inner,
            prepared: Mutex::new(Vec::new()),
            served: std::sync::atomic::AtomicU64::new(0),
        }
    }

    /// The real summarizer (what [`ContextManager::summarize_ahead`] should prepare with).
    pub fn inner(&self) -> Arc<dyn Summarizer> {
        self.inner.clone()
    }

    /// Makes `summary`'s answers available; the oldest go beyond a few dozen.
    pub fn add(&self, summary: PreparedSummary) {
        let mut prepared = lock(&self.prepared);
        prepared.extend(summary.answers);
        let excess = prepared.len().saturating_sub(KEPT_REQUESTS);
        prepared.drain(..excess);
    }

    /// How many requests were answered from what was prepared.
    pub fn served(&self) -> u64 {
        self.served.load(std::sync::atomic::Ordering::Relaxed)
    }
}

impl Summarizer for PreparedSummaries {
    fn id(&self) -> String {
        self.inner.id()
    }

    fn summarize<'a>(
        &'a self,
        request: &'a SummaryRequest,
    ) -> BoxFuture<'a, Result<String, SummaryError>> {
        let found = (lock(&self.prepared).iter())
            .find(|(prepared, answer)| serves(prepared, answer, request))
            .map(|(_, answer)| answer.clone());
        match found {
            Some(answer) => {
                self.served
                    .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                Box::pin(std::future::ready(Ok(answer)))
            }
            None => self.inner.summarize(request),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fresh_ids_keep_their_length_and_differ() {
        let mut taken: HashSet<String> = ["call_1".to_owned(), "call_2".to_owned()].into();
        let id = fresh_id("call_1", &mut taken);
        assert_eq!(id.len(), 6);
        assert!(id != "call_1" && id != "call_2");
        assert_ne!(fresh_id("call_1", &mut taken), id);
    }

    #[test]
    fn the_forecast_repeats_the_latest_exchange_with_new_ids() {
        let body = serde_json::json!({"model": "m", "messages": [
            {"role": "user", "content": "go"},
            {"role": "assistant", "content": null, "tool_calls": [
                {"id": "a1", "type": "function", "function": {"name": "bash", "arguments": "{}"}}]},
            {"role": "tool", "tool_call_id": "a1", "content": "out"},
        ]});
        let conversation = crate::format::parse(body.to_string().as_bytes(), None).unwrap();
        let next = forecast(&conversation);
        assert_eq!(next.messages.len(), 5);
        let ids: Vec<String> = next.messages[3..].iter().flat_map(ids_of).collect();
        assert_eq!(ids.len(), 2);
        assert_eq!(ids[0], ids[1]);
        assert_ne!(ids[0], "a1");
        let result = next.messages[4].tool_results().next().unwrap();
        assert_eq!(result.joined_text(), "out");
    }
}
