//! Strategy ① — cut one oversized tool result.
//!
//! A tool result whose estimate exceeds `single_tool_result_share`·E is cut to that budget:
//! the head is kept, cut at the last newline when it lies past `newline_cut_ratio` of the
//! budget, else at the budget — never inside a UTF-8 character or a grapheme — and
//! [`TRUNCATED`] is appended. Results with several parts keep their structure: the text
//! part that crosses the budget is cut, later text parts are dropped, other parts stay.
//! Pinned results are never cut.

use unicode_segmentation::GraphemeCursor;

use crate::conversation::{Block, Conversation};
use crate::estimate::{ClassCounts, Estimator};
use crate::markers::{COMPACTED, TRUNCATED};
use crate::recall::{Handle, Removal, handle_line};
use crate::report::{Step, Strategy};
use crate::step::{Changes, Measure, Stamp, StepContext};

/// Applies ① to every oversized tool result. Returns the step, or `None` when nothing was cut.
pub(crate) fn truncate_tool_results(
    conversation: &mut Conversation,
    cx: &StepContext<'_>,
) -> Option<Step> {
    let limit = cx.budget.share(cx.config.layer1.single_tool_result_share);
    truncate_over(conversation, cx, limit)
}

/// The last resort of the recovery (attempt 4): when what must stay still overflows
/// because the current turn's parallel results add up to more than the budget (each under
/// ①'s share), ① cuts every unpinned result to an equal share of the room left, so that
/// the request fits. `None` when cutting cannot make it fit or nothing needs cutting.
pub(crate) fn truncate_to_fit(
    conversation: &mut Conversation,
    cx: &StepContext<'_>,
    target: u64,
) -> Option<Step> {
    let total = cx.tokens(conversation);
    if total <= target {
        return None;
    }
    let results: Vec<u64> = (conversation.messages.iter())
        .filter(|m| !m.is_pinned())
        .flat_map(|m| m.tool_results())
        .map(|r| cx.estimator.tokens_of(&ClassCounts::of_blocks(&r.content)))
        .collect();
    let in_results: u64 = results.iter().sum();
    let others = total.saturating_sub(in_results);
    let count = results.len() as u64;
    let room = target.checked_sub(others)?;
    let limit = room.checked_div(count)?;
    (limit > cx.estimator.text_tokens(TRUNCATED) * 2).then_some(())?;
    truncate_over(conversation, cx, limit)
}

/// Cuts every unpinned tool result over `limit` tokens to that limit.
fn truncate_over(
    conversation: &mut Conversation,
    cx: &StepContext<'_>,
    limit: u64,
) -> Option<Step> {
    let estimator = cx.estimator;
    let oversized: Vec<usize> = conversation
        .messages
        .iter()
        .enumerate()
        .filter(|(_, m)| !m.is_pinned())
        // A message's cached estimate bounds each of its results': most need no recount.
        .filter(|(_, m)| estimator.message_tokens(m) > limit)
        .filter(|(_, m)| {
            m.tool_results()
                .any(|r| estimator.tokens_of(&ClassCounts::of_blocks(&r.content)) > limit)
        })
        .map(|(i, _)| i)
        .collect();
    if oversized.is_empty() {
        return None;
    }
    let measure = Measure::before(cx, conversation);
    let mut cut = 0usize;
    let mut added = 0u64;
    let mut removed = Vec::new();
    for &index in &oversized {
        for block in conversation.messages[index].blocks_mut() {
            let Block::ToolResult(result) = block else {
                continue;
            };
            if estimator.tokens_of(&ClassCounts::of_blocks(&result.content)) <= limit {
                continue;
            }
            // ②'s placeholder is never cut (its marker stays exact): its note line goes,
            // its handle stays.
            if let [Block::Text(t)] = result.content.as_slice()
                && t.text.starts_with(COMPACTED)
            {
                let handle = (t.text.lines()).find(|l| l.starts_with(HANDLE_PREFIX));
                let kept = match handle {
                    Some(line) => format!("{COMPACTED}\n{line}"),
                    None => COMPACTED.to_owned(),
                };
                result.content = vec![Block::text(kept)];
                cut += 1;
                continue;
            }
            // Recall: the cut tail is kept under a handle, written after the marker.
            let handle = cx
                .recall
                .then(|| Handle::of_result("truncated", &result.call_id, &result.joined_text()));
            let suffix = match handle {
                Some(handle) => format!("{TRUNCATED}\n{}", handle_line(handle)),
                None => TRUNCATED.to_owned(),
            };
            let ratio = cx.config.layer1.newline_cut_ratio;
            if let Some(tail) = cut_blocks(&mut result.content, limit, &estimator, ratio, &suffix) {
                cut += 1;
                added += suffix.chars().count() as u64;
                if let Some(handle) = handle {
                    let tool = result.tool_name.as_deref().unwrap_or("tool");
                    let text = format!("[result of {tool}: the part cut by truncation]\n{tail}");
                    removed.push(Removal { handle, text });
                }
            }
        }
    }
    tracing::info!(results = cut, limit, "① truncated oversized tool results");
    let mut step = measure.finish(
        cx,
        conversation,
        Stamp::of(Strategy::TruncateToolResult, limit),
        Changes {
            messages_affected: oversized.len(),
            messages_removed: 0,
            chars_added: added,
        },
        format!("{cut} tool result(s) cut to {limit} tokens"),
    );
    step.removed = removed;
    Some(step)
}

/// How a handle line starts (recall's, after a marker).
const HANDLE_PREFIX: &str = "recall handle: ";

/// Cuts the text parts of a result's content to `limit` tokens in all, `suffix` (the
/// marker, and recall's handle line) appended where it cut. Returns what was cut away,
/// `None` when nothing was.
fn cut_blocks(
    content: &mut Vec<Block>,
    limit: u64,
    estimator: &Estimator,
    newline_ratio: f64,
    suffix: &str,
) -> Option<String> {
    let fixed: u64 = content
        .iter()
        .filter(|b| !matches!(b, Block::Text(_)))
        .map(|b| estimator.tokens_of(&ClassCounts::of_blocks(std::slice::from_ref(b))))
        .sum();
    let marker = estimator.text_tokens(suffix);
    // One token of slack for the rounding up of each estimate.
    let mut budget = limit.saturating_sub(fixed + marker + 2) as f64;
    let mut done = false;
    let mut cut_any = false;
    let mut tail = String::new();
    content.retain_mut(|block| {
        let Block::Text(text) = block else {
            return true;
        };
        if done {
            cut_any = true;
            tail.push('\n');
            tail.push_str(&text.text);
            return false;
        }
        match cut_point(&text.text, budget, estimator, newline_ratio) {
            None => {
                budget -= estimator.text_tokens(&text.text) as f64;
                true
            }
            Some(at) => {
                tail.push_str(&text.text[at..]);
                text.text.truncate(at);
                text.text.push_str(suffix);
                done = true;
                cut_any = true;
                true
            }
        }
    });
    cut_any.then_some(tail)
}

/// Where to cut `text` so that its head costs at most `budget` tokens: `None` if it fits.
/// The cut lands on a grapheme boundary, moved back to the last newline when that newline
/// lies past `newline_ratio` of the cut.
pub(crate) fn cut_point(
    text: &str,
    budget: f64,
    estimator: &Estimator,
    newline_ratio: f64,
) -> Option<usize> {
    let mut spent = 0.0;
    let mut at = None;
    for (index, ch) in text.char_indices() {
        spent += estimator.char_tokens(ch);
        if spent > budget {
            at = Some(index);
            break;
        }
    }
    let at = at?;
    let at = grapheme_floor(text, at);
    match text[..at].rfind('\n') {
        Some(newline) if newline as f64 >= newline_ratio * at as f64 => Some(newline),
        _ => Some(at),
    }
}

/// The last grapheme boundary at or before `at` (a char boundary).
fn grapheme_floor(text: &str, at: usize) -> usize {
    let mut cursor = GraphemeCursor::new(at, text.len(), true);
    match cursor.is_boundary(text, 0) {
        Ok(true) => at,
        _ => cursor.prev_boundary(text, 0).ok().flatten().unwrap_or(0),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fitting_text_is_not_cut() {
        let e = Estimator::default();
        assert_eq!(cut_point("short", 100.0, &e, 0.7), None);
    }

    #[test]
    fn cuts_at_a_late_newline() {
        let e = Estimator::default();
        let text = format!("{}\n{}", "a".repeat(90), "b".repeat(100));
        // 0.23 per letter: a budget of 23 tokens covers 100 chars; the newline at 90 is past 70%.
        assert_eq!(cut_point(&text, 23.0, &e, 0.7), Some(90));
    }

    #[test]
    fn ignores_an_early_newline() {
        let e = Estimator::default();
        let text = format!("{}\n{}", "a".repeat(10), "b".repeat(200));
        let at = cut_point(&text, 23.0, &e, 0.7).unwrap();
        assert!(at > 50, "{at}");
    }

    #[test]
    fn never_splits_a_grapheme() {
        let e = Estimator::default();
        // family emoji: several code points joined by ZWJ
        let text = "👨‍👩‍👧‍👦".repeat(20);
        for budget in 1..40 {
            if let Some(at) = cut_point(&text, budget as f64, &e, 0.7) {
                assert!(text.is_char_boundary(at));
                assert_eq!(at % "👨‍👩‍👧‍👦".len(), 0, "cut inside a grapheme at {at}");
            }
        }
    }
}
