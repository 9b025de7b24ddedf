//! Strategy ② — replace old tool results with a placeholder.
//!
//! Above `headroom_ratio`·E, results of compactable tools (reads, searches, shell output,
//! fetches, edits: what the agent can get again) are replaced with [`COMPACTED`] —
//! superseded reads first (a read of a file that a later call changed or read again: the
//! agent must not act on it), then oldest first — down to the low watermark — hysteresis, so that this fires once every several
//! calls and the prompt-cache prefix survives in between. Never compacted: results of
//! write/create tools, pinned results, the results of the latest assistant turn (the model
//! is acting on them), results already shorter than the placeholder.
//!
//! The placeholder's first line is always [`COMPACTED`]; a second line says which later
//! call superseded a stale read, or lists the error identifiers the result held (the
//! trail's `errors: ...` line), so that dropping the output does not drop those.

use std::collections::{HashMap, HashSet};

use crate::conversation::{Block, Conversation, Message, Role, Shape, ToolCall};
use crate::estimate::ClassCounts;
use crate::markers::COMPACTED;
use crate::recall::{Handle, Removal, call_text, handle_line};
use crate::report::{Step, Strategy};
use crate::step::{Changes, Measure, Stamp, StepContext, chars_in};
use crate::tool_names::CallActivity;
use crate::trail::{StaleRead, Trail, stale_reads_and_activities};

/// When ② runs and how far it goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum CompactMode {
    /// Above the headroom ratio, down to the low watermark (Layer 1).
    Watermark,
    /// Every eligible result, whatever the estimate (recovery attempt 3).
    All,
}

/// Applies ②. Returns the step, or `None` when nothing was compacted.
pub(crate) fn compact_tool_results(
    conversation: &mut Conversation,
    cx: &StepContext<'_>,
    mode: CompactMode,
) -> Option<Step> {
    let total = cx.tokens(conversation);
    let target = match mode {
        CompactMode::Watermark => {
            if total <= cx.budget.share(cx.config.layer1.headroom_ratio) {
                return None;
            }
            cx.budget.share(cx.config.layer1.low_watermark)
        }
        CompactMode::All => 0,
    };
    let candidates = candidates(conversation, cx);
    if candidates.is_empty() {
        return None;
    }
    if mode == CompactMode::Watermark
        && !cx.config.layer1.compact_short_of_watermark
        && total <= cx.budget.share(cx.config.recovery.preemptive_ratio)
        && !reaches(conversation, cx, &candidates, total, target)
    {
        // Compacting what just left the latest turn on every call rewrites the prefix
        // each time; leave it to ③ at the preemptive threshold. Over that threshold
        // Layer 2/3 rewrites the history anyway, and ② first leaves it less to remove.
        return None;
    }
    let measure = Measure::before(cx, conversation);
    let mut running = total;
    let mut affected = HashSet::new();
    let mut compacted = 0usize;
    let mut chars_added = 0u64;
    let mut removed = Vec::new();
    for candidate in candidates {
        if running <= target {
            break;
        }
        let (index, block) = (candidate.message, candidate.block);
        let Some(counts) = result_counts(&conversation.messages[index], block) else {
            continue;
        };
        let Block::ToolResult(result) = &mut conversation.messages[index].blocks_mut()[block]
        else {
            continue;
        };
        let freed = cx.estimator.tokens_of(&counts);
        let placeholder = candidate.placeholder;
        removed.extend(candidate.removal);
        let placeholder_tokens = cx.estimator.tokens_of(&ClassCounts::of_str(&placeholder));
        chars_added += chars_in(&placeholder);
        result.content = vec![Block::text(placeholder)];
        result.shape = Shape::String;
        running = running.saturating_sub(freed.saturating_sub(placeholder_tokens));
        affected.insert(index);
        compacted += 1;
    }
    if compacted == 0 {
        return None;
    }
    tracing::info!(results = compacted, target, "② compacted old tool results");
    let mut step = measure.finish(
        cx,
        conversation,
        Stamp::of(Strategy::CompactToolResults, target),
        Changes {
            messages_affected: affected.len(),
            messages_removed: 0,
            chars_added,
        },
        format!("{compacted} tool result(s) compacted"),
    );
    step.removed = removed;
    Some(step)
}

/// Whether the texts of `blocks` hold at most `limit` characters, counting them only when
/// the byte length cannot tell (a character takes 1 to 4 bytes): the test runs on every
/// tool result of the history on every call.
fn at_most_chars(blocks: &[Block], limit: usize) -> bool {
    let bytes: usize = blocks.iter().filter_map(Block::as_text).map(str::len).sum();
    if bytes <= limit {
        return true;
    }
    if bytes > limit * 4 {
        return false;
    }
    let chars: usize = blocks
        .iter()
        .filter_map(Block::as_text)
        .map(|t| t.chars().count())
        .sum();
    chars <= limit
}

/// Whether compacting every candidate brings the total down to `target`.
fn reaches(
    conversation: &Conversation,
    cx: &StepContext<'_>,
    candidates: &[Candidate],
    total: u64,
    target: u64,
) -> bool {
    let freed: u64 = (candidates.iter())
        .filter_map(|c| {
            let counts = result_counts(&conversation.messages[c.message], c.block)?;
            Some(
                cx.estimator
                    .tokens_of(&counts)
                    .saturating_sub(cx.estimator.tokens_of(&ClassCounts::of_str(&c.placeholder))),
            )
        })
        .sum();
    total.saturating_sub(freed) <= target
}

/// The counts of the content of the tool result at `block` of `message` (`None`: not a
/// result). A message's counts are its blocks' plus one message, cached: for a result
/// that is its message's only block (most are), they are the content's counts without
/// counting every character of it again.
fn result_counts(message: &Message, block: usize) -> Option<ClassCounts> {
    let Block::ToolResult(result) = message.blocks().get(block)? else {
        return None;
    };
    if message.blocks().len() == 1 {
        return Some(ClassCounts {
            messages: 0,
            ..message.counts()
        });
    }
    Some(ClassCounts::of_blocks(&result.content))
}

/// The stale read whose result is at `message` with `call_id`, from the reads sorted by
/// both (the last of several, one per path of a read of several files).
fn stale_read<'s>(stale: &'s [StaleRead], message: usize, call_id: &str) -> Option<&'s StaleRead> {
    let after = stale.partition_point(|s| (s.message, s.call_id.as_str()) <= (message, call_id));
    let last = stale.get(after.checked_sub(1)?)?;
    (last.message == message && last.call_id == call_id).then_some(last)
}

/// A result ② may compact, and what it becomes.
struct Candidate {
    message: usize,
    block: usize,
    placeholder: String,
    /// The result's originals under the handle its placeholder carries (recall on).
    removal: Option<Removal>,
}

/// The results ② may compact: stale reads first, then the others oldest first.
fn candidates(conversation: &Conversation, cx: &StepContext<'_>) -> Vec<Candidate> {
    // The call each result answers is the latest one with its id before it: agents such
    // as Kimi-K2's reuse ids (`functions.str_replace_editor:0`) in every turn.
    // The latest assistant turn: the model is acting on its results now.
    let latest: HashSet<&str> = conversation
        .messages
        .iter()
        .rev()
        .find(|m| m.role() == Role::Assistant)
        .map(|m| m.tool_calls().map(|c| c.id.as_str()).collect())
        .unwrap_or_default();
    // Sorted by (message of the result, call id): what superseded each read.
    let (stale, activities) = stale_reads_and_activities(&conversation.messages);
    // id → the call and what it does.
    let mut calls: HashMap<&str, (&ToolCall, Option<CallActivity>)> =
        HashMap::with_capacity(activities.len());
    // The activity of each call, in the order the loop below meets the calls.
    let mut activities = activities.into_iter();
    // Tool name → whether its results are compactable, when the name alone says.
    let mut by_name: HashMap<&str, Option<bool>> = HashMap::new();
    let tools = &cx.config.tools;
    let notes = cx.config.trail.enabled;
    let placeholder_chars = COMPACTED.chars().count();
    let (mut first, mut rest) = (Vec::new(), Vec::new());
    for (index, message) in conversation.messages.iter().enumerate() {
        for call in message.tool_calls() {
            calls.insert(call.id.as_str(), (call, activities.next()));
        }
        if message.is_pinned() {
            continue;
        }
        let flagged = message
            .fields()
            .get("is_error")
            .and_then(serde_json::Value::as_bool)
            == Some(true);
        for (block_index, block) in message.blocks().iter().enumerate() {
            let Block::ToolResult(result) = block else {
                continue;
            };
            if latest.contains(result.call_id.as_str()) {
                continue;
            }
            // Already compacted (a placeholder with its second line): nothing to free.
            if matches!(result.content.as_slice(), [Block::Text(t)] if t.text.starts_with(COMPACTED))
            {
                continue;
            }
            let located = calls.get(result.call_id.as_str()).copied();
            let call = located.map(|(call, _)| call);
            let compactable = match call {
                Some(call) => (by_name.entry(call.name.as_str()))
                    .or_insert_with(|| tools.compactable_by_name(&call.name))
                    .unwrap_or_else(|| tools.is_compactable(&call.name, &call.arguments)),
                None => result.tool_name.as_deref().is_some_and(|name| {
                    cx.config
                        .tools
                        .is_compactable(name, &serde_json::Value::Null)
                }),
            };
            if !compactable {
                continue;
            }
            let superseded = stale_read(&stale, index, &result.call_id);
            let second = match superseded {
                _ if !notes => None,
                Some(read) => Some(read.note()),
                // The call's activity was read with the stale reads: not parsed again.
                None => match located.and_then(|(_, activity)| activity) {
                    Some(activity) => Trail::lines_for_errors_of(result, Some(activity), flagged),
                    None => Trail::lines_for_errors(result, call, flagged),
                },
            };
            let mut placeholder = match second {
                Some(line) => format!("{COMPACTED}\n{line}"),
                None => COMPACTED.to_owned(),
            };
            // The handle goes last: the trail reads ②'s errors from the second line.
            let removal = cx.recall.then(|| {
                let removal = result_removal(result, call);
                placeholder.push('\n');
                placeholder.push_str(&handle_line(removal.handle));
                removal
            });
            // A result no longer than what would replace it stays.
            let has_binary = result.content.iter().any(|b| !matches!(b, Block::Text(_)));
            let limit = placeholder_chars.max(placeholder.chars().count());
            if !has_binary && at_most_chars(&result.content, limit) {
                continue;
            }
            let candidate = Candidate {
                message: index,
                block: block_index,
                placeholder,
                removal,
            };
            if superseded.is_some() {
                first.push(candidate);
            } else {
                rest.push(candidate);
            }
        }
    }
    first.extend(rest);
    first
}

/// A compacted result's originals: the call that produced it, then its output.
fn result_removal(result: &crate::conversation::ToolResult, call: Option<&ToolCall>) -> Removal {
    let output = result.joined_text();
    let tool = (call.map(|c| c.name.as_str()))
        .or(result.tool_name.as_deref())
        .unwrap_or("tool");
    let mut text = String::new();
    if let Some(call) = call {
        text.push_str(&call_text(call));
        text.push('\n');
    }
    text.push_str(&format!("[result of {tool}]\n{output}"));
    Removal {
        handle: Handle::of_result("compacted", &result.call_id, &output),
        text,
    }
}
