//! Strategy ② — replace old tool results with a placeholder.
//!
//! Above `headroom_ratio`·E, results of compactable tools (reads, searches, shell output,
//! fetches, edits: what the agent can get again) are replaced with [`COMPACTED`], oldest
//! first, down to the low watermark — hysteresis, so that this fires once every several
//! calls and the prompt-cache prefix survives in between. Never compacted: results of
//! write/create tools, pinned results, the results of the latest assistant turn (the model
//! is acting on them), results already shorter than the placeholder.

use std::collections::{HashMap, HashSet};

use crate::conversation::{Block, Conversation, Role, Shape, ToolCall};
use crate::estimate::ClassCounts;
use crate::markers::COMPACTED;
use crate::report::{Step, Strategy};
use crate::step::{Changes, Measure, Stamp, StepContext};

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
            if total <= cx.budget.share(cx.config.headroom_ratio) {
                return None;
            }
            cx.budget.share(cx.config.low_watermark)
        }
        CompactMode::All => 0,
    };
    let candidates = candidates(conversation, cx);
    if candidates.is_empty() {
        return None;
    }
    if mode == CompactMode::Watermark
        && !cx.config.compact_short_of_watermark
        && !reaches(conversation, cx, &candidates, total, target)
    {
        // Compacting a little on every call rewrites an early message each time and
        // throws the prompt cache away; leave it to ③ at the preemptive threshold.
        return None;
    }
    let measure = Measure::before(cx, conversation);
    let placeholder = ClassCounts::of_str(COMPACTED);
    let placeholder_tokens = cx.estimator.tokens_of(&placeholder);
    let mut running = total;
    let mut affected = HashSet::new();
    let mut compacted = 0usize;
    for (index, block) in candidates {
        if running <= target {
            break;
        }
        let Block::ToolResult(result) = &mut conversation.messages[index].blocks_mut()[block]
        else {
            continue;
        };
        let freed = cx
            .estimator
            .tokens_of(&ClassCounts::of_blocks(&result.content));
        result.content = vec![Block::text(COMPACTED)];
        result.shape = Shape::String;
        running = running.saturating_sub(freed.saturating_sub(placeholder_tokens));
        affected.insert(index);
        compacted += 1;
    }
    if compacted == 0 {
        return None;
    }
    tracing::info!(results = compacted, target, "② compacted old tool results");
    let chars_added = COMPACTED.len() as u64 * compacted as u64;
    Some(measure.finish(
        cx,
        conversation,
        Stamp::of(Strategy::CompactToolResults, target),
        Changes {
            messages_affected: affected.len(),
            messages_removed: 0,
            chars_added,
        },
        format!("{compacted} tool result(s) compacted"),
    ))
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
    candidates: &[(usize, usize)],
    total: u64,
    target: u64,
) -> bool {
    let placeholder = cx.estimator.tokens_of(&ClassCounts::of_str(COMPACTED));
    let freed: u64 = (candidates.iter())
        .filter_map(
            |&(message, block)| match &conversation.messages[message].blocks()[block] {
                Block::ToolResult(result) => Some(
                    cx.estimator
                        .tokens_of(&ClassCounts::of_blocks(&result.content)),
                ),
                _ => None,
            },
        )
        .map(|tokens| tokens.saturating_sub(placeholder))
        .sum();
    total.saturating_sub(freed) <= target
}

/// The results ② may compact, oldest first, as (message index, block index).
fn candidates(conversation: &Conversation, cx: &StepContext<'_>) -> Vec<(usize, usize)> {
    let calls: HashMap<&str, &ToolCall> = conversation
        .messages
        .iter()
        .flat_map(|m| m.tool_calls())
        .map(|c| (c.id.as_str(), c))
        .collect();
    // The latest assistant turn: the model is acting on its results now.
    let latest: HashSet<&str> = conversation
        .messages
        .iter()
        .rev()
        .find(|m| m.role() == Role::Assistant)
        .map(|m| m.tool_calls().map(|c| c.id.as_str()).collect())
        .unwrap_or_default();
    let placeholder_chars = COMPACTED.chars().count();
    let mut out = Vec::new();
    for (index, message) in conversation.messages.iter().enumerate() {
        if message.is_pinned() {
            continue;
        }
        for (block_index, block) in message.blocks().iter().enumerate() {
            let Block::ToolResult(result) = block else {
                continue;
            };
            if latest.contains(result.call_id.as_str()) {
                continue;
            }
            let has_binary = result.content.iter().any(|b| !matches!(b, Block::Text(_)));
            if !has_binary && at_most_chars(&result.content, placeholder_chars) {
                continue;
            }
            let compactable = match calls.get(result.call_id.as_str()) {
                Some(call) => cx.config.tools.is_compactable(&call.name, &call.arguments),
                None => result.tool_name.as_deref().is_some_and(|name| {
                    cx.config
                        .tools
                        .is_compactable(name, &serde_json::Value::Null)
                }),
            };
            if compactable {
                out.push((index, block_index));
            }
        }
    }
    out
}
