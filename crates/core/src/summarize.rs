//! Strategy ④ — summarize the middle of the history in nine sections.
//!
//! The messages ③ would remove are handed to the injected [`Summarizer`], and the summary
//! (a user message starting `[context summary]`) takes their place. An earlier summary in
//! that range is passed along as the previous summary to update. Input over the chunking
//! threshold is split at exchange boundaries into at most `max_chunks` chunks of similar
//! size, summarized concurrently, then merged by one more call. The tail kept after the
//! summary is chosen in one step so that the result lands at the target.
//!
//! A summary that is empty, cut off, larger than what it replaces or too large for the
//! room left is a failure, returned with whatever chunk summaries succeeded so that
//! ⑤ (degrade.rs) can fall back level by level.

use std::future::Future;
use std::pin::Pin;
use std::task::Poll;

use crate::BoxFuture;
use crate::conversation::{Conversation, Message};
use crate::estimate::{ClassCounts, Weights};
use crate::middle::{self, Fate, KeepRules, Split, Summaries};
use crate::prune::replace_middle;
use crate::report::{Step, Strategy};
use crate::step::{Stamp, StepContext, chars_in};
use crate::summarizer::{Summarizer, SummaryError, SummaryRequest, validate};
use crate::trail::{Rendered, Trail, complete_summary, render_for};

/// Below this many tokens of room, a summary cannot say anything useful: the tail shrinks.
const MIN_SUMMARY_TOKENS: u64 = 200;

/// The range ④ (or ⑤) replaces, the tail it keeps and the room left for the summary.
#[derive(Debug, Clone)]
pub(crate) struct Plan {
    pub split: Split,
    pub rules: KeepRules,
    /// Tokens the replacement message may take so that the result stays at the target.
    pub room: u64,
    /// Tokens of everything the replacement stands for.
    pub replaced_tokens: u64,
    pub target: u64,
    /// The trail of the replaced range, which the summary's sections 3, 4 and 6 carry.
    pub trail: Rendered,
    /// Tokens the trail takes of the room.
    pub trail_tokens: u64,
}

impl Plan {
    /// The trail, extracted from what the plan replaces and rendered within its share of
    /// the room (at most half: the summary needs the rest).
    fn with_trail(mut self, conversation: &Conversation, cx: &StepContext<'_>) -> Plan {
        let config = &cx.config.trail;
        let trail = Trail::of_split(conversation, &self.split, config);
        let room = (self.room / 2).min(self.replaced_tokens / 2);
        self.trail = render_for(&trail, config, cx.budget.effective(), room, &cx.estimator);
        let text = self.trail.text();
        self.trail_tokens = if text.is_empty() {
            0
        } else {
            cx.estimator.text_tokens(&text)
        };
        self
    }

    /// A summary body completed with the trail (SPEC: sections 3, 4 and 6 always carry it).
    pub(crate) fn complete(&self, body: &str) -> String {
        complete_summary(body, &self.trail)
    }
}

/// Why ④ failed, with the chunk summaries that did succeed (for ⑤ level 1).
#[derive(Debug, Clone)]
pub(crate) struct Failure {
    pub error: SummaryError,
    /// One entry per chunk, in order (empty when the input was not chunked).
    pub chunks: Vec<Option<String>>,
}

/// Chooses the longest tail, at most `max_recent` messages, that leaves room for a summary
/// within `target` tokens. When even no tail leaves that room (the irreducible part is
/// large), the target is relaxed to the preemptive threshold, then to the whole budget E:
/// a summary over the target beats none within E. (Landing under the preemptive threshold
/// keeps a second compaction from firing again: compacting is idempotent.) `None` when there is nothing new to replace.
pub(crate) fn plan(
    conversation: &Conversation,
    cx: &StepContext<'_>,
    max_recent: usize,
    target: u64,
    summaries: Summaries,
) -> Option<Plan> {
    let starts = middle::exchange_starts(conversation);
    let protected = middle::irreducible(conversation, &starts);
    let tokens: Vec<f64> = conversation
        .messages
        .iter()
        .map(|m| prior(cx, &m.counts()))
        .collect();
    let tools = conversation
        .tools()
        .map_or(0.0, |t| prior(cx, &ClassCounts::of_json(t)));
    let mut fallback = None;
    let relaxed = cx
        .budget
        .share(cx.config.recovery.preemptive_ratio)
        .max(target);
    for target in [target, relaxed, cx.budget.effective().max(target)] {
        for recent in (0..=max_recent).rev() {
            let rules = KeepRules { recent, summaries };
            let split = middle::split(conversation, &starts, &protected, rules);
            if !split.is_effective() {
                continue;
            }
            // The notices that keep turns alternating across later gaps stay beside it.
            let bridges: f64 = (split.bridge_messages().iter())
                .map(|m| cx.estimator.message_tokens(m) as f64)
                .sum();
            let (mut kept, mut replaced) = (tools + bridges, 0.0);
            for (t, fate) in tokens.iter().zip(&split.fates) {
                match fate {
                    Fate::Keep => kept += t,
                    _ => replaced += t,
                }
            }
            let room = (target as f64 - kept.ceil()).max(0.0) as u64;
            let plan = Plan {
                split,
                rules,
                room,
                replaced_tokens: replaced.ceil() as u64,
                target,
                trail: Rendered::default(),
                trail_tokens: 0,
            };
            if room >= MIN_SUMMARY_TOKENS {
                return Some(plan.with_trail(conversation, cx));
            }
            fallback.get_or_insert(plan);
        }
    }
    fallback.map(|plan| plan.with_trail(conversation, cx))
}

fn prior(cx: &StepContext<'_>, counts: &ClassCounts) -> f64 {
    cx.estimator.weights.prior(counts) * cx.estimator.multiplier
}

/// Applies ④ along `plan`. On failure the conversation is unchanged.
pub(crate) async fn summarize_history(
    conversation: &mut Conversation,
    cx: &StepContext<'_>,
    summarizer: &dyn Summarizer,
    plan: &Plan,
) -> Result<Step, Failure> {
    let messages: Vec<Message> = plan
        .split
        .removed_messages(conversation)
        .map(|(_, m)| m.clone())
        .collect();
    let previous = plan.split.previous_summary(conversation);
    let boundaries = chunk_boundaries(conversation, &plan.split);
    let body = summarize_messages(cx, summarizer, messages, &boundaries, previous, plan).await?;
    let stamp = Stamp::of(Strategy::Summarize, plan.target);
    Ok(write_summary(
        conversation,
        cx,
        plan,
        &body,
        stamp,
        "summary",
    ))
}

/// Puts a summary body in place of the planned range and accounts for it.
pub(crate) fn write_summary(
    conversation: &mut Conversation,
    cx: &StepContext<'_>,
    plan: &Plan,
    body: &str,
    stamp: Stamp,
    what: &str,
) -> Step {
    let body = plan.complete(body);
    let what = format!("a {what} of {} chars", chars_in(&body));
    let message = middle::summary_message(&body);
    let trail = (cx.config.trail.enabled).then(|| plan.trail.stats(plan.trail_tokens));
    replace_middle(
        conversation,
        cx,
        &plan.split,
        (message, trail),
        stamp,
        &what,
    )
}

/// Where chunks may be cut: before a removed message that opens its own exchange.
fn chunk_boundaries(conversation: &Conversation, split: &Split) -> Vec<bool> {
    let starts = middle::exchange_starts(conversation);
    split
        .removed_messages(conversation)
        .map(|(i, _)| starts[i] == i || split.fates[starts[i]] != Fate::Remove)
        .collect()
}

/// Summarizes `messages` (chunked when large) and checks the result against the plan.
pub(crate) async fn summarize_messages(
    cx: &StepContext<'_>,
    summarizer: &dyn Summarizer,
    messages: Vec<Message>,
    boundaries: &[bool],
    previous: Option<String>,
    plan: &Plan,
) -> Result<String, Failure> {
    let fail = |error| Failure {
        error,
        chunks: Vec::new(),
    };
    // The room left for the body, in the prior's units (see `SummaryRequest::max_tokens`).
    let overhead = cx.estimator.message_tokens(&middle::summary_message(""));
    let room = plan
        .room
        .min(plan.replaced_tokens.saturating_sub(1))
        .saturating_sub(overhead + plan.trail_tokens);
    let room = (room as f64 / cx.estimator.multiplier).floor() as u64;
    if room == 0 {
        let why = "no room is left for a summary within the budget";
        return Err(fail(SummaryError::Unavailable(why.into())));
    }
    let chunks = split_chunks(
        messages,
        boundaries,
        cx.config.recovery.chunk_threshold_chars,
        cx.config.recovery.max_chunks,
    );
    if chunks.len() <= 1 {
        let messages = chunks.into_iter().next().unwrap_or_default();
        let request = SummaryRequest::Summarize {
            messages,
            previous_summary: previous,
            max_tokens: room,
        };
        let body = summarizer.summarize(&request).await.map_err(fail)?;
        return check(cx, &body, plan).map(|()| body).map_err(fail);
    }
    let count = chunks.len();
    let requests: Vec<SummaryRequest> = chunks
        .into_iter()
        .enumerate()
        .map(|(i, messages)| {
            let chunk_tokens: u64 = messages
                .iter()
                .map(|m| cx.estimator.message_tokens(m))
                .sum();
            SummaryRequest::Summarize {
                messages,
                previous_summary: if i == 0 { previous.clone() } else { None },
                max_tokens: room
                    .min((chunk_tokens.saturating_sub(1) as f64 / cx.estimator.multiplier) as u64),
            }
        })
        .collect();
    let futures: Vec<BoxFuture<'_, Result<String, SummaryError>>> =
        requests.iter().map(|r| summarizer.summarize(r)).collect();
    let results = join_all(futures).await;
    let mut chunks: Vec<Option<String>> = Vec::with_capacity(count);
    let mut first_error = None;
    for (result, request) in results.into_iter().zip(&requests) {
        let replaced: u64 = request
            .messages()
            .iter()
            .map(|m| cx.estimator.message_tokens(m))
            .sum();
        match result.and_then(|body| {
            validate(&body, cx.estimator.text_tokens(&body), replaced).map(|()| body)
        }) {
            Ok(body) => chunks.push(Some(body)),
            Err(e) => {
                first_error.get_or_insert(e);
                chunks.push(None);
            }
        }
    }
    if let Some(error) = first_error {
        return Err(Failure { error, chunks });
    }
    let partials: Vec<String> = chunks.iter().flatten().cloned().collect();
    let merge = SummaryRequest::Merge {
        partials,
        max_tokens: room,
    };
    match summarizer
        .summarize(&merge)
        .await
        .and_then(|body| check(cx, &body, plan).map(|()| body))
    {
        Ok(body) => Ok(body),
        Err(error) => Err(Failure { error, chunks }),
    }
}

/// A summary may go in only if it is not empty, smaller than what it replaces, and fits
/// the room the plan left for it.
pub(crate) fn check(cx: &StepContext<'_>, body: &str, plan: &Plan) -> Result<(), SummaryError> {
    let tokens = cx
        .estimator
        .message_tokens(&middle::summary_message(&plan.complete(body)));
    validate(body, tokens, plan.replaced_tokens)?;
    if tokens > plan.room {
        return Err(SummaryError::TooLarge {
            summary: tokens,
            replaced: plan.room,
        });
    }
    Ok(())
}

/// Splits messages into at most `max` chunks of similar size when they hold more than
/// `threshold` characters, cutting only where `boundaries` allows.
fn split_chunks(
    messages: Vec<Message>,
    boundaries: &[bool],
    threshold: usize,
    max: usize,
) -> Vec<Vec<Message>> {
    let sizes: Vec<u64> = messages
        .iter()
        .map(|m| Weights::chars(&m.counts()))
        .collect();
    let total: u64 = sizes.iter().sum();
    if total <= threshold as u64 || max <= 1 {
        return vec![messages];
    }
    let wanted = (total.div_ceil(threshold.max(1) as u64) as usize).clamp(2, max);
    let per_chunk = total.div_ceil(wanted as u64);
    // Cut where the running total passes the next chunk's share, so chunks stay similar
    // even when a boundary is missing here and there.
    let mut chunks: Vec<Vec<Message>> = vec![Vec::new()];
    let mut running = 0u64;
    let allowed = boundaries.iter().copied().chain(std::iter::repeat(true));
    for ((message, size), boundary) in messages.into_iter().zip(sizes).zip(allowed) {
        let due = per_chunk * chunks.len() as u64;
        if boundary && running >= due && chunks.len() < wanted {
            chunks.push(Vec::new());
        }
        running += size;
        if let Some(chunk) = chunks.last_mut() {
            chunk.push(message);
        }
    }
    chunks
}

/// Polls every future to completion concurrently, without a runtime; results in order.
pub(crate) async fn join_all<T>(futures: Vec<BoxFuture<'_, T>>) -> Vec<T> {
    let mut pending: Vec<Option<Pin<Box<dyn Future<Output = T> + Send + '_>>>> =
        futures.into_iter().map(Some).collect();
    let mut done: Vec<Option<T>> = pending.iter().map(|_| None).collect();
    std::future::poll_fn(|cx| {
        for (slot, out) in pending.iter_mut().zip(done.iter_mut()) {
            if let Some(future) = slot
                && let Poll::Ready(value) = future.as_mut().poll(cx)
            {
                *out = Some(value);
                *slot = None;
            }
        }
        if pending.iter().all(Option::is_none) {
            Poll::Ready(())
        } else {
            Poll::Pending
        }
    })
    .await;
    done.into_iter().flatten().collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunks_are_similar_and_cut_only_at_boundaries() {
        let messages: Vec<Message> = (0..10)
            .map(|_| Message::text(crate::Role::User, "x".repeat(20_000)))
            .collect();
        let mut boundaries = vec![true; 10];
        boundaries[3] = false;
        let chunks = split_chunks(messages, &boundaries, 50_000, 4);
        assert_eq!(chunks.len(), 4);
        assert_eq!(chunks.iter().map(Vec::len).sum::<usize>(), 10);
        // The cut before message 3 is not allowed, so the first chunk runs on past it.
        assert_eq!(chunks[0].len(), 4);
    }

    #[test]
    fn small_input_is_one_chunk() {
        let messages = vec![Message::text(crate::Role::User, "hello")];
        assert_eq!(split_chunks(messages, &[true], 50_000, 4).len(), 1);
    }

    #[test]
    fn join_all_keeps_order() {
        let futures: Vec<BoxFuture<'_, usize>> = (0..5usize)
            .map(|i| Box::pin(std::future::ready(i)) as BoxFuture<'_, usize>)
            .collect();
        assert_eq!(pollster::block_on(join_all(futures)), vec![0, 1, 2, 3, 4]);
    }
}
