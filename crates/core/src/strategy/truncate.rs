//! Strategy ① — cut one oversized tool result.
//!
//! A tool result whose estimate exceeds `single_tool_result_share`·E is cut to that budget:
//! the head is kept, cut at the last newline when it lies past `newline_cut_ratio` of the
//! budget, else at the budget — never inside a UTF-8 character or a grapheme — and
//! [`TRUNCATED`] is appended. Results with several parts keep their structure: the text
//! part that crosses the budget is cut, later text parts are dropped, other parts stay.
//! Pinned results are never cut. ① leaves a trail too: after the marker, on lines of their
//! own, the error identifiers of the part it cut and the output's last line when it states
//! an outcome (`extract::CutNote`), within a tenth of the budget, so that a truncated test
//! run still says which test failed and how it ended. With recall on, the cut part is kept
//! under a handle whose line comes right after the marker, before the note.

use unicode_segmentation::GraphemeCursor;

use crate::conversation::{Block, Conversation};
use crate::estimate::{ClassCounts, Estimator};
use crate::extract::CutNote;
use crate::markers::{COMPACTED, TRUNCATED};
use crate::recall::{HANDLE_PREFIX, Handle, Removal, handle_line};
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
            // Recall: the cut part is kept under a handle, its line right after the marker.
            let handle = cx
                .recall
                .then(|| Handle::of_result("truncated", &result.call_id, &result.joined_text()));
            let marker = match handle {
                Some(handle) => format!("{TRUNCATED}\n{}", handle_line(handle)),
                None => TRUNCATED.to_owned(),
            };
            let ratio = cx.config.layer1.newline_cut_ratio;
            let Some(done) = cut_blocks(&mut result.content, limit, &estimator, ratio, &marker)
            else {
                continue;
            };
            cut += 1;
            added += done.written;
            if let Some(handle) = handle {
                let tool = result.tool_name.as_deref().unwrap_or("tool");
                let text = format!(
                    "[result of {tool}: the part cut by truncation]\n{}",
                    done.tail
                );
                removed.push(Removal { handle, text });
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

/// At most this share of a cut result's budget goes to the note on what was cut...
const NOTE_SHARE: u64 = 10;
/// ... and at most this many tokens.
const NOTE_TOKENS: u64 = 150;

/// What [`cut_blocks`] did to a result.
struct Cut {
    /// Characters written: the marker (with recall's handle line) and the note.
    written: u64,
    /// The text cut away (the text parts after the cut, joined by newlines).
    tail: String,
}

/// Cuts the text parts of a result's content to `limit` tokens in all, `marker` (the
/// marker, and recall's handle line) where it cut and the note on what was cut (its
/// errors, its stated outcome: `extract::CutNote`) after it. `None` when nothing was cut.
fn cut_blocks(
    content: &mut Vec<Block>,
    limit: u64,
    estimator: &Estimator,
    newline_ratio: f64,
    marker: &str,
) -> Option<Cut> {
    let fixed: u64 = content
        .iter()
        .filter(|b| !matches!(b, Block::Text(_)))
        .map(|b| estimator.tokens_of(&ClassCounts::of_blocks(std::slice::from_ref(b))))
        .sum();
    // One token of slack for the rounding up of each estimate.
    let budget = limit.saturating_sub(fixed + estimator.text_tokens(marker) + 2);
    let reserve = (budget / NOTE_SHARE).min(NOTE_TOKENS);
    // The note is on what goes: where the cut falls with room kept for it.
    let (block, at) = find_cut(content, (budget - reserve) as f64, estimator, newline_ratio)?;
    let note = note_on(content, (block, at), reserve, estimator);
    // Nothing to say: the room kept for the note goes to the head.
    let (block, at) = match note.is_empty() {
        true => find_cut(content, budget as f64, estimator, newline_ratio).unwrap_or((block, at)),
        false => (block, at),
    };
    let tail = cut_part(content, (block, at));
    let mut index = 0;
    content.retain_mut(|b| {
        let Block::Text(text) = b else {
            return true;
        };
        index += 1;
        match (index - 1).cmp(&block) {
            std::cmp::Ordering::Less => true,
            std::cmp::Ordering::Greater => false,
            std::cmp::Ordering::Equal => {
                text.text.truncate(at);
                text.text.push_str(marker);
                text.text.push_str(&note);
                true
            }
        }
    });
    let written = (marker.chars().count() + note.chars().count()) as u64;
    Some(Cut { written, tail })
}

/// The text a cut at (`block`, `at`) takes away: the rest of that text part, then each
/// later text part on a line of its own.
fn cut_part(content: &[Block], (block, at): (usize, usize)) -> String {
    let texts: Vec<&str> = content.iter().filter_map(Block::as_text).collect();
    let mut cut = texts[block][at..].to_owned();
    for later in &texts[block + 1..] {
        cut.push('\n');
        cut.push_str(later);
    }
    cut
}

/// The text part (counted among text parts) and the byte where the text parts of `content`
/// must be cut to cost at most `budget` tokens; `None` when they fit.
fn find_cut(
    content: &[Block],
    mut budget: f64,
    estimator: &Estimator,
    newline_ratio: f64,
) -> Option<(usize, usize)> {
    for (i, text) in content.iter().filter_map(Block::as_text).enumerate() {
        match cut_point(text, budget, estimator, newline_ratio) {
            None => budget -= estimator.text_tokens(text) as f64,
            Some(at) => return Some((i, at)),
        }
    }
    None
}

/// The note on what a cut at (`block`, `at`) takes away, within `room` tokens ("" when
/// there is nothing to say or no room).
fn note_on(
    content: &[Block],
    (block, at): (usize, usize),
    room: u64,
    estimator: &Estimator,
) -> String {
    let cut = cut_part(content, (block, at));
    let mut chars = 400;
    while chars >= 50 {
        let note = CutNote::of(&cut, chars).text();
        if note.is_empty() || estimator.text_tokens(&note) <= room {
            return note;
        }
        chars /= 2;
    }
    String::new()
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

    #[test]
    fn a_cut_test_run_still_says_which_test_failed_and_how_it_ended() {
        let e = Estimator::default();
        let mut output = String::from("Compiling spotter\n");
        for i in 0..400 {
            output.push_str(&format!("  line {i} of a long log that goes on and on\n"));
        }
        output.push_str("  1) test mount excludes closed annotations (SpotterWeb.ReviewTest)\n");
        output.push_str("     ** (RuntimeError) no key found\n\nFinished in 2.1 seconds\n");
        output.push_str("87 tests, 1 failure\n");
        let mut content = vec![Block::text(output.clone())];
        let limit = 800;
        let done = cut_blocks(&mut content, limit, &e, 0.7, TRUNCATED).unwrap();
        let text = content[0].as_text().unwrap();
        assert!(e.tokens_of(&ClassCounts::of_blocks(&content)) <= limit);
        let (head, note) = text.split_once(TRUNCATED).unwrap();
        assert!(output.starts_with(head));
        assert_eq!(
            note,
            "\nerrors: failing test: test mount excludes closed annotations (SpotterWeb.ReviewTest); \
             RuntimeError: no key found\nlast line: 87 tests, 1 failure"
        );
        assert_eq!(
            done.written as usize,
            TRUNCATED.chars().count() + note.chars().count()
        );
        assert_eq!(format!("{head}{}", done.tail), output);
        // With recall on: the marker, the handle on the next line, then the same note, which
        // still reads back (the trail and ② find the cut part's errors).
        let handle = handle_line(Handle::of_result("truncated", "1", &output));
        let mut content = vec![Block::text(output.clone())];
        let marker = format!("{TRUNCATED}\n{handle}");
        cut_blocks(&mut content, limit, &e, 0.7, &marker).unwrap();
        let text = content[0].as_text().unwrap();
        assert!(e.tokens_of(&ClassCounts::of_blocks(&content)) <= limit);
        let (_, after) = text.split_once(&marker).unwrap();
        assert_eq!(after, note);
        let ids = crate::extract::error_ids(text, crate::extract::Output::Shell, false);
        assert!(
            ids.contains(&"RuntimeError: no key found".to_owned()),
            "{ids:?}"
        );
        // Nothing to say about the cut part: the marker alone, as SPEC writes it.
        let mut plain = vec![Block::text("word ".repeat(2_000))];
        cut_blocks(&mut plain, limit, &e, 0.7, TRUNCATED).unwrap();
        assert!(plain[0].as_text().unwrap().ends_with(TRUNCATED));
    }
}
