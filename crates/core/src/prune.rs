//! Strategy ③ — prune the middle of the history.
//!
//! Keeps every system message, the first user message, pinned messages, the last N
//! messages before the current one (moved back so that no tool exchange is split) and the
//! current message; everything else in the middle is removed and one notice,
//! `[context compacted: X earlier messages removed]`, takes its place. Tool pairs are then
//! repaired so the request stays valid. The cut is made in one step to its target, so a
//! conversation that is carried forward is not trimmed again on every call.

use crate::conversation::{Conversation, Message, Role};
use crate::estimate::{ClassCounts, Weights};
use crate::middle::{self, Fate, KeepRules, Split};
use crate::repair::repair_tool_pairs;
use crate::report::{Step, Strategy};
use crate::step::{Changes, Measure, Stamp, StepContext};

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
    let fixed = (tools + notice) as f64;
    let recent = middle::longest_tail(&starts, &protected, &tokens, fixed, rules.recent, target);
    let rules = KeepRules { recent, ..rules };
    let notice = crate::markers::pruned_notice;
    let stamp = Stamp::of(Strategy::PruneHistory, target);
    prune_with(conversation, cx, rules, stamp, notice)
}

/// ③'s removal with a given notice text (⑤ level 3 writes the "summary unavailable" one).
pub(crate) fn prune_with(
    conversation: &mut Conversation,
    cx: &StepContext<'_>,
    rules: KeepRules,
    stamp: Stamp,
    notice: fn(usize) -> String,
) -> Option<Step> {
    let starts = middle::exchange_starts(conversation);
    let protected = middle::irreducible(conversation, &starts);
    let split = middle::split(conversation, &starts, &protected, rules);
    if !split.is_effective() {
        return None;
    }
    let replacement = Message::text(Role::User, notice(split.total_removed()));
    // A notice as large as what it stands for only loses information.
    let removed = (conversation.messages.iter().zip(&split.fates))
        .filter(|(_, fate)| **fate != Fate::Keep)
        .fold(ClassCounts::default(), |acc, (m, _)| acc + m.counts());
    if cx.estimator.tokens_of(&removed) <= cx.estimator.message_tokens(&replacement) {
        return None;
    }
    let what = format!("a notice ({} removed)", split.removed);
    Some(replace_middle(
        conversation,
        cx,
        &split,
        replacement,
        stamp,
        &what,
    ))
}

/// Puts `replacement` where the split takes messages out, repairs the tool pairs, and
/// accounts for all of it as one step (③, ④ and ⑤ all end here).
pub(crate) fn replace_middle(
    conversation: &mut Conversation,
    cx: &StepContext<'_>,
    split: &Split,
    replacement: Message,
    stamp: Stamp,
    what: &str,
) -> Step {
    let measure = Measure::before(cx, conversation);
    let chars_added = Weights::chars(&replacement.counts());
    let replaced = split.fates.iter().filter(|f| **f != Fate::Keep).count();
    split.apply(conversation, replacement);
    let repair = repair_tool_pairs(conversation);
    tracing::info!(
        strategy = stamp.strategy.as_str(),
        replaced,
        what,
        "history replaced"
    );
    let detail = format!(
        "{replaced} message(s) replaced by {what}; {} orphan result(s) dropped, {} synthetic result(s) added",
        repair.results_dropped, repair.results_added
    );
    measure.finish(
        cx,
        conversation,
        stamp,
        Changes {
            messages_affected: replaced + repair.results_dropped,
            messages_removed: replaced + repair.messages_removed,
            chars_added: chars_added + repair.chars_added,
        },
        detail,
    )
}
