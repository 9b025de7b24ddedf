//! Strategy ⑤ — degrade gracefully when the summary fails.
//!
//! Three levels, each tried when the one before cannot be had:
//! 1. the chunk summaries that succeeded (a leading run of them), marked
//!    `[partial summary: chunks 1-k of n summarized; the rest could not be processed]`;
//! 2. a summary of the small messages only: every message over
//!    `single_tool_result_share`·E and every tool output stands as
//!    `[large <role> message (~N tokens) omitted from summary]`;
//! 3. the bare notice `[context compacted: X earlier messages removed; summary
//!    unavailable]`, which cannot fail.
//!
//! Every level is reported as degraded: a partial summary is never passed off as a clean one.

use crate::conversation::{Block, Conversation, Message, Role};
use crate::markers;
use crate::middle::{self, Failure, KeepRules, Plan};
use crate::report::Step;
use crate::step::{Stamp, StepContext};
use crate::summarizer::Summarizer;

/// Applies the first level of ⑤ that works, after ④ failed with `failure` on `plan`.
pub(crate) async fn degrade(
    conversation: &mut Conversation,
    cx: &StepContext<'_>,
    summarizer: &dyn Summarizer,
    plan: &Plan,
    failure: Failure,
) -> Option<Step> {
    tracing::warn!(error = %failure.error, "④ summary failed; degrading");
    if let Some(body) = partial_summary(&failure)
        && middle::check(cx, &body, plan).is_ok()
    {
        let stamp = Stamp::degraded(1, plan.target);
        let step = middle::write_summary(conversation, cx, plan, &body, stamp, "partial summary");
        return Some(step);
    }
    let (messages, boundaries) = small_messages(conversation, cx, plan);
    let previous = plan.split.previous_summary(conversation);
    if let Ok(body) =
        middle::summarize_messages(cx, summarizer, messages, &boundaries, previous, plan).await
    {
        let what = "summary of the small messages";
        let stamp = Stamp::degraded(2, plan.target);
        return Some(middle::write_summary(
            conversation,
            cx,
            plan,
            &body,
            stamp,
            what,
        ));
    }
    bare_notice(conversation, cx, plan.rules.recent, plan.target)
}

/// ⑤ level 3: the bare notice in place of the middle, keeping `recent` messages (and any
/// earlier summary, which is all that is left of what came before).
pub(crate) fn bare_notice(
    conversation: &mut Conversation,
    cx: &StepContext<'_>,
    recent: usize,
    target: u64,
) -> Option<Step> {
    let rules = KeepRules::keeping(recent);
    let stamp = Stamp::degraded(3, target);
    middle::prune_with(conversation, cx, rules, stamp, markers::bare_notice)
}

/// Level 1: the leading chunk summaries that succeeded, with the partial notice.
fn partial_summary(failure: &Failure) -> Option<String> {
    let total = failure.chunks.len();
    let done: Vec<&str> = failure.chunks.iter().map_while(|c| c.as_deref()).collect();
    if done.is_empty() {
        return None;
    }
    let mut body = done.join("\n\n");
    body.push_str("\n\n");
    body.push_str(&markers::partial_notice(done.len(), total));
    Some(body)
}

/// Level 2's input: the replaced messages with large ones and tool outputs left out.
fn small_messages(
    conversation: &Conversation,
    cx: &StepContext<'_>,
    plan: &Plan,
) -> (Vec<Message>, Vec<bool>) {
    let large = cx.budget.share(cx.config.layer1.single_tool_result_share);
    let mut messages = Vec::new();
    for (_, message) in plan.split.removed_messages(conversation) {
        let tokens = cx.estimator.message_tokens(message);
        let is_tool_output =
            message.role().is_tool_result() || message.tool_results().next().is_some();
        if tokens > large || is_tool_output {
            let role = if is_tool_output {
                "tool"
            } else {
                message.role().as_str()
            };
            let notice = markers::omitted_notice(role, tokens);
            let role = if message.role().is_tool_result() {
                Role::User
            } else {
                message.role()
            };
            messages.push(Message::text(role, notice));
        } else {
            // Keep the text and the calls (what was asked and done), not the outputs.
            let blocks: Vec<Block> = message
                .blocks()
                .iter()
                .filter(|b| !matches!(b, Block::ToolResult(_)))
                .cloned()
                .collect();
            messages.push(Message::new(
                message.role(),
                blocks,
                message.shape(),
                message.fields().clone(),
            ));
        }
    }
    // With the outputs gone, every message stands alone: chunks may be cut anywhere.
    let boundaries = vec![true; messages.len()];
    (messages, boundaries)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::summarizer::SummaryError;

    #[test]
    fn partial_summary_keeps_the_leading_successes() {
        let failure = Failure {
            error: SummaryError::Timeout,
            chunks: vec![Some("a".into()), Some("b".into()), None, Some("d".into())],
        };
        let body = partial_summary(&failure).unwrap();
        let notice =
            "[partial summary: chunks 1-2 of 4 summarized; the rest could not be processed]";
        assert_eq!(body, format!("a\n\nb\n\n{notice}"));
    }

    #[test]
    fn no_partial_summary_without_a_first_chunk() {
        let failure = Failure {
            error: SummaryError::Empty,
            chunks: vec![None, Some("b".into())],
        };
        assert!(partial_summary(&failure).is_none());
    }
}
