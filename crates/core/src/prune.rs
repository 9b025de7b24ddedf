//! Strategy ③ — prune the middle of the history.
//!
//! Keeps every system message, the first user message, pinned messages, the last N
//! messages before the current one (moved back so that no tool exchange is split) and the
//! current message; everything else in the middle is removed and one notice,
//! `[context compacted: X earlier messages removed]`, takes its place. Tool pairs are then
//! repaired so the request stays valid. The cut is made in one step to its target, so a
//! conversation that is carried forward is not trimmed again on every call.

use crate::conversation::{Conversation, Message, Role};
use crate::estimate::ClassCounts;
use crate::middle::{self, KeepRules};
use crate::repair::repair_tool_pairs;
use crate::report::{Step, Strategy};
use crate::step::{Measure, StepContext, chars_in};

/// SPEC's N for a conversation: min(`recent`, ⌊total/3⌋).
pub fn recent_messages(conversation: &Conversation, recent: usize) -> usize {
    recent.min(conversation.messages.len() / 3)
}

/// Applies ③ keeping at least `rules.recent` messages before the current one, and as many
/// more as fit within `target` tokens. `level` is the recovery attempt that asked for it.
/// Returns `None` when there is nothing to remove.
pub fn prune_history(
    conversation: &mut Conversation,
    cx: &StepContext<'_>,
    rules: KeepRules,
    level: Option<u8>,
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
    let fixed = (tools + notice) as f64;
    let recent = middle::longest_tail(&starts, &protected, &tokens, fixed, rules.recent, target);
    let rules = KeepRules { recent, ..rules };
    let notice = crate::markers::pruned_notice;
    prune_with(
        conversation,
        cx,
        rules,
        (level, target),
        Strategy::PruneHistory,
        notice,
    )
}

/// ③'s removal with a given notice text (⑤ level 3 writes the "summary unavailable" one).
pub(crate) fn prune_with(
    conversation: &mut Conversation,
    cx: &StepContext<'_>,
    rules: KeepRules,
    (level, target): (Option<u8>, u64),
    strategy: Strategy,
    notice: fn(usize) -> String,
) -> Option<Step> {
    let starts = middle::exchange_starts(conversation);
    let protected = middle::irreducible(conversation, &starts);
    let split = middle::split(conversation, &starts, &protected, rules);
    if !split.is_effective() {
        return None;
    }
    let measure = Measure::before(cx, conversation);
    let text = notice(split.total_removed());
    let chars_added = chars_in(&text);
    let replaced = split
        .fates
        .iter()
        .filter(|f| **f != middle::Fate::Keep)
        .count();
    split.apply(conversation, Message::text(Role::User, text));
    let repair = repair_tool_pairs(conversation);
    tracing::info!(
        removed = split.removed,
        kept_recent = rules.recent,
        "③ pruned history"
    );
    Some(measure.finish(
        cx,
        conversation,
        strategy,
        level,
        replaced + repair.results_dropped,
        replaced + repair.messages_removed,
        chars_added + repair.chars_added,
        target,
        format!(
            "{} message(s) removed, {} recent kept; {} orphan result(s) dropped, {} synthetic result(s) added",
            split.removed, rules.recent, repair.results_dropped, repair.results_added
        ),
    ))
}
