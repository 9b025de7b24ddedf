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
//! ⑤ (degrade.rs) can fall back level by level. The plan, the summarizer's call and the
//! checks are shared with ⑤ and live in `crate::middle`.

use crate::conversation::{Conversation, Message};
use crate::middle::{self, Failure, Fate, Plan, Split};
use crate::report::{Step, Strategy};
use crate::step::{Stamp, StepContext};
use crate::summarizer::Summarizer;

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
    let body =
        middle::summarize_messages(cx, summarizer, messages, &boundaries, previous, plan).await?;
    let stamp = Stamp::of(Strategy::Summarize, plan.target);
    Ok(middle::write_summary(
        conversation,
        cx,
        plan,
        &body,
        stamp,
        "summary",
    ))
}

/// Where chunks may be cut: before a removed message that opens its own exchange.
fn chunk_boundaries(conversation: &Conversation, split: &Split) -> Vec<bool> {
    let starts = middle::exchange_starts(conversation);
    split
        .removed_messages(conversation)
        .map(|(i, _)| starts[i] == i || split.fates[starts[i]] != Fate::Remove)
        .collect()
}
