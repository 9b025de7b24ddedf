//! Putting a replacement where a split takes messages out, and the trail of what it takes:
//! where ③, ④ and ⑤ all end.

use super::split::{self, Fate, Split};
use crate::conversation::{Block, Conversation, Message};
use crate::estimate::Weights;
use crate::recall::{Removal, handle_line};
use crate::repair::repair_tool_pairs;
use crate::report::Step;
use crate::step::{Changes, Measure, Stamp, StepContext};
use crate::trail::{Trail, TrailStats};

/// The messages `split` takes out of `conversation` (the notices and summaries it folds
/// included): what recall keeps under one handle.
fn taken<'c>(conversation: &'c Conversation, split: &Split) -> Vec<&'c Message> {
    (conversation.messages.iter().zip(&split.fates))
        .filter(|(_, fate)| **fate != Fate::Keep)
        .map(|(message, _)| message)
        .collect()
}

/// The trail of what `split` takes out of `conversation`: the trails of the earlier
/// notices and summaries it folds, merged with what the removed messages leave (the
/// messages kept after them can show its errors fixed). With recall on, the entries read
/// from the removed messages name the handle [`replace_middle`] keeps them under.
pub(crate) fn trail_of(conversation: &Conversation, split: &Split, cx: &StepContext<'_>) -> Trail {
    let config = &cx.config.trail;
    let removal = cx
        .recall
        .then(|| Removal::of_messages(&taken(conversation, split)));
    let handle = removal.as_ref().map(|r| r.handle);
    let mut trail = Trail::default();
    for (message, fate) in conversation.messages.iter().zip(&split.fates) {
        if matches!(fate, Fate::FoldNotice | Fate::PreviousSummary) {
            trail = trail.merge(Trail::parse(&message.text_content()));
        }
    }
    let removed = split.removed_messages(conversation).map(|(_, m)| m);
    let later = (conversation.messages.iter().enumerate())
        .filter(|(i, _)| *i > split.insert_at && split.fates[*i] == Fate::Keep)
        .map(|(_, m)| m);
    let mut trail = trail.merge(Trail::extract_kept(removed, later, config, handle));
    if let Some(removal) = &removal {
        trail.point_into(removal);
    }
    trail
}

/// Puts `replacement` where the split takes messages out, repairs the tool pairs, and
/// accounts for all of it as one step (③, ④ and ⑤ all end here).
pub(crate) fn replace_middle(
    conversation: &mut Conversation,
    cx: &StepContext<'_>,
    split: &Split,
    (mut replacement, trail): (Message, Option<TrailStats>),
    stamp: Stamp,
    what: &str,
) -> Step {
    let measure = Measure::before(cx, conversation);
    // Recall: what goes is kept under a handle, written on the line after the marker.
    let removal = cx.recall.then(|| {
        let removal = Removal::of_messages(&taken(conversation, split));
        put_handle_line(&mut replacement, &handle_line(removal.handle));
        removal
    });
    // The turn alone was over the budget: its older tool exchanges went.
    let inside_current_turn = split::current_turn(conversation).is_some_and(|(at, _)| {
        (split.fates.iter().enumerate()).any(|(i, f)| i > at && *f != Fate::Keep)
    });
    let chars_added = Weights::chars(&replacement.counts())
        + (split.bridge_messages().iter())
            .map(|m| Weights::chars(&m.counts()))
            .sum::<u64>();
    let replaced = split.fates.iter().filter(|f| **f != Fate::Keep).count();
    split.apply(conversation, replacement);
    let repair = repair_tool_pairs(conversation);
    // Tentative: the engine may roll this step back; it logs what it keeps (engine/ladder.rs).
    tracing::debug!(
        strategy = stamp.strategy.as_str(),
        replaced,
        what,
        "history step applied"
    );
    let mut detail = format!(
        "{replaced} message(s) replaced by {what}; {} orphan result(s) dropped, {} synthetic result(s) added",
        repair.results_dropped, repair.results_added
    );
    if inside_current_turn {
        detail
            .push_str("; the current turn alone was over budget: its older tool exchanges removed");
    }
    let mut step = measure.finish(
        cx,
        conversation,
        stamp,
        Changes {
            messages_affected: replaced + repair.results_dropped,
            messages_removed: replaced + repair.messages_removed,
            chars_added: chars_added + repair.chars_added,
        },
        detail,
    );
    step.trail = trail;
    step.inside_current_turn = inside_current_turn;
    step.removed.extend(removal);
    step
}

/// Puts `line` after the first line of the replacement's first text (its marker), so
/// that the marker stays the first line exactly as specified.
fn put_handle_line(replacement: &mut Message, line: &str) {
    let first_text = (replacement.blocks_mut().iter_mut()).find_map(|block| match block {
        Block::Text(text) => Some(text),
        _ => None,
    });
    if let Some(text) = first_text {
        let at = text.text.find('\n').unwrap_or(text.text.len());
        text.text.insert_str(at, &format!("\n{line}"));
    }
}
