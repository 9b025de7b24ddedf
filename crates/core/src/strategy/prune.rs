//! Strategy ③ — prune the middle of the history.
//!
//! Keeps every system message, the first user message, pinned messages, the last N
//! messages before the current one (moved back so that no tool exchange is split) and the
//! current message; everything else in the middle is removed and one notice,
//! `[context compacted: X earlier messages removed]`, takes its place. Tool pairs are then
//! repaired so the request stays valid. The cut is made in one step to its target, so a
//! conversation that is carried forward is not trimmed again on every call.

use crate::conversation::Conversation;
use crate::estimate::ClassCounts;
use crate::middle::{self, KeepRules};
use crate::report::{Step, Strategy};
use crate::step::{Stamp, StepContext};

/// SPEC's N for a conversation: min(`recent`, ⌊total/3⌋).
pub(crate) fn recent_messages(conversation: &Conversation, recent: usize) -> usize {
    recent.min(conversation.messages.len() / 3)
}

/// Applies ③ keeping at least `rules.recent` messages before the current one, and as many
/// more as fit within `target` tokens. Returns `None` when there is nothing to remove.
pub(crate) fn prune_history(
    conversation: &mut Conversation,
    cx: &StepContext<'_>,
    rules: KeepRules,
    target: u64,
) -> Option<Step> {
    let starts = middle::exchange_starts(conversation);
    let protected = middle::irreducible(conversation, &starts);
    let estimator = &cx.estimator;
    let tokens: Vec<f64> = (conversation.messages.iter())
        .map(|m| estimator.weights.prior(&m.counts()) * estimator.multiplier)
        .collect();
    let tools = conversation
        .tools()
        .map_or(0, |t| estimator.tokens_of(&ClassCounts::of_json(t)));
    let notice = estimator.message_tokens(&middle::notice_message(usize::MAX));
    // Room for the trail that will follow the notice.
    let trail = cx.config.trail.budget(cx.budget.effective());
    let fixed = (tools + notice + trail) as f64;
    let recent = middle::longest_tail(&starts, &protected, &tokens, fixed, rules.recent, target);
    let rules = KeepRules { recent, ..rules };
    let notice = crate::markers::pruned_notice;
    let stamp = Stamp::of(Strategy::PruneHistory, target);
    middle::prune_with(conversation, cx, rules, stamp, notice)
}
