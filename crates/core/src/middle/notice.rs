//! A notice in place of the middle (③, and ⑤'s last level): `[context compacted: X
//! earlier messages removed]` with the trail of what went on the lines after it.

use super::replace::{replace_middle, trail_of};
use super::split::{self, Fate, KeepRules, Split};
use crate::conversation::{Conversation, Message, Role};
use crate::estimate::ClassCounts;
use crate::report::{Step, Strategy};
use crate::step::{Stamp, StepContext};
use crate::trail::{Rendered, notice_with_trail, render_for};

/// Tokens a trail may take however little a removal frees, at the least: the `Left out
/// for space: ...` line that counts what did not fit (longer when it counts many kinds).
const MIN_TRAIL_TOKENS: u64 = 24;

/// At most this many shorter tails are tried to make room for the trail.
const TRAIL_TRIES: usize = 16;

/// One way to take out the middle: the split for a tail length, and the trail it leaves.
struct Candidate {
    split: Split,
    marker: String,
    rendered: Rendered,
    /// The room the trail had, and what it would take within its own budget.
    room: u64,
    wanted: u64,
    /// Trail entries written (not only counted as left out).
    shown: usize,
}

/// ③'s removal with a given notice text (⑤ level 3 writes the "summary unavailable" one),
/// the trail of what it removes on the lines after the notice.
///
/// At ⑤ level 3 the trail comes before the oldest kept recent messages: when the room left
/// under E cannot hold the trail (the irreducible part takes most of it), fewer recent
/// messages are kept, down to none (SPEC's last resort keeps only system, first user, pins,
/// summary and current), as long as that writes more trail entries: a message's
/// files, commands and errors take far fewer tokens in the trail than the message itself
/// (SPEC: every removal leaves its trail; a removed recent message is in it).
pub(crate) fn prune_with(
    conversation: &mut Conversation,
    cx: &StepContext<'_>,
    rules: KeepRules,
    stamp: Stamp,
    notice: fn(usize) -> String,
) -> Option<Step> {
    let starts = split::exchange_starts(conversation);
    let protected = split::irreducible(conversation, &starts);
    let first = candidate(
        conversation,
        cx,
        (&starts, &protected),
        rules,
        stamp,
        notice,
    )?;
    let mut best = first;
    // Only ⑤ level 3, the last resort, may keep fewer recent messages than asked for: ③
    // keeps SPEC's N (its longest tail already leaves the trail its budget).
    let last_resort = stamp.strategy == Strategy::Degrade;
    if last_resort && cx.config.trail.enabled && best.room < best.wanted {
        for recent in (0..rules.recent).rev().take(TRAIL_TRIES) {
            let rules = KeepRules { recent, ..rules };
            let parts = (&starts[..], &protected[..]);
            let Some(next) = candidate(conversation, cx, parts, rules, stamp, notice) else {
                continue;
            };
            let done = next.room >= next.wanted;
            if next.shown > best.shown {
                best = next;
            }
            if done {
                break;
            }
        }
    }
    let Candidate {
        split,
        marker,
        rendered,
        ..
    } = best;
    let estimator = &cx.estimator;
    let bare = estimator.message_tokens(&Message::text(Role::User, marker.clone()));
    let replacement = Message::text(Role::User, notice_with_trail(marker, &rendered));
    let tokens = estimator.message_tokens(&replacement).saturating_sub(bare);
    let stats = cx.config.trail.enabled.then(|| rendered.stats(tokens));
    let what = format!("a notice ({} removed)", split.removed);
    Some(replace_middle(
        conversation,
        cx,
        &split,
        (replacement, stats),
        stamp,
        &what,
    ))
}

/// The split keeping `rules.recent` messages and its trail within the room it leaves.
/// `None` when the split removes nothing, or nothing larger than its own notice.
fn candidate(
    conversation: &Conversation,
    cx: &StepContext<'_>,
    (starts, protected): (&[usize], &[bool]),
    rules: KeepRules,
    stamp: Stamp,
    notice: fn(usize) -> String,
) -> Option<Candidate> {
    let split = split::split(conversation, starts, protected, rules);
    if !split.is_effective() {
        return None;
    }
    let estimator = &cx.estimator;
    let marker = notice(split.total_removed());
    let bare = estimator.message_tokens(&Message::text(Role::User, marker.clone()));
    // A notice as large as what it stands for only loses information.
    let removed = (conversation.messages.iter().zip(&split.fates))
        .filter(|(_, fate)| **fate != Fate::Keep)
        .fold(ClassCounts::default(), |acc, (m, _)| acc + m.counts());
    let removed = estimator.tokens_of(&removed);
    if removed <= bare {
        return None;
    }
    // The trail takes the room the kept messages leave under the target.
    let kept: u64 = (conversation.messages.iter().zip(&split.fates))
        .filter(|(_, fate)| **fate == Fate::Keep)
        .map(|(m, _)| estimator.message_tokens(m))
        .sum::<u64>()
        + conversation
            .tools()
            .map_or(0, |t| estimator.tokens_of(&ClassCounts::of_json(t)))
        + (split.bridge_messages().iter())
            .map(|m| estimator.message_tokens(m))
            .sum::<u64>();
    // The trail's room is counted against the window, not the step's target (SPEC: "it
    // uses what the window leaves before anything is left out for space"): when what must
    // stay and the kept tail fill the target, the trail still takes its budget from the room
    // above it, up to ②'s trigger (headroom·E), so that the next call's Layer 1 finds
    // nothing to do and a second compaction changes nothing. ③'s tail is sized to leave
    // the trail's budget under the target, so this only matters when the tail alone (SPEC's
    // N recent messages, pins) fills it. ⑤ level 3 is the last resort: E itself.
    let limit = if stamp.strategy == Strategy::Degrade || kept + bare > stamp.target {
        cx.budget.effective()
    } else {
        (stamp.target).max(cx.budget.share(cx.config.layer1.headroom_ratio))
    };
    let config = &cx.config.trail;
    let trail = trail_of(conversation, &split, cx);
    // At most half of what the removal frees (a step must still free room), but room for
    // at least the line counting what was left out: every removal leaves a trail, also
    // when what must stay leaves no room under E (the result is over E either way).
    let floor = trail.count_line_tokens(estimator).max(MIN_TRAIL_TOKENS);
    let room = (limit.saturating_sub(kept + bare))
        .min(((removed - bare) / 2).max(floor))
        .max(floor);
    let effective = cx.budget.effective();
    let rendered = render_for(&trail, config, effective, room, estimator);
    // What the trail takes within its own budget alone (the room aside).
    let wanted = render_for(&trail, config, effective, u64::MAX, estimator).text();
    let wanted = if wanted.is_empty() {
        0
    } else {
        estimator.text_tokens(&wanted)
    };
    let shown = rendered.shown();
    Some(Candidate {
        split,
        marker,
        rendered,
        room,
        wanted,
        shown,
    })
}
