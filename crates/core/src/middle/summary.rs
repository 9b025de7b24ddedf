//! Asking the summarizer for a summary along a plan, checking what it wrote, and putting it
//! in place (④, and ⑤'s first two levels).

use super::plan::{Failure, Plan};
use super::replace::replace_middle;
use super::split;
use crate::BoxFuture;
use crate::conversation::{Conversation, Message};
use crate::estimate::Weights;
use crate::join::join_all;
use crate::report::Step;
use crate::step::{Stamp, StepContext, chars_in};
use crate::summarizer::{Summarizer, SummaryError, SummaryRequest, validate};

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
    let message = split::summary_message(&body);
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
    let overhead = cx.estimator.message_tokens(&split::summary_message(""));
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
        .message_tokens(&split::summary_message(&plan.complete(body)));
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
    let allowed = boundaries.iter().copied().chain(std::iter::repeat(true));
    let items = (messages.into_iter().zip(sizes).zip(allowed)).map(|((m, size), at)| (m, size, at));
    crate::balance::balanced_runs(items, total, wanted)
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
}
