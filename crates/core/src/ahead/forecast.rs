//! The next requests an agent loop may send, for [`super`] to prepare ④'s summaries for.
//!
//! ④'s range is where its kept tail starts, and the tail is the longest (at most N
//! recent messages) that leaves a summary room under the target. The next request is this
//! one plus an exchange — the assistant's calls and their results — and the size of those
//! results decides how much tail fits: a large new tool output leaves room for a short
//! tail only, so ④ removes more. One forecast made a turn early cannot know that size, so
//! [`Forecasts`] makes several: named ones (like the latest exchange; its output past
//! ①'s cap — ① cuts anything larger to `single_tool_result_share`·E, so no output is
//! larger than that once ① ran; like the largest output still in the recent history; no
//! output; two exchanges ahead) and one more exchange with an output of any size up to the
//! cap, which the caller searches. Many of them lead ④ to the same range; the caller keeps
//! the distinct ones.

use std::collections::{HashMap, HashSet};
use std::ops::Range;

use crate::config::{Budget, CascadeConfig};
use crate::conversation::{Block, Conversation, Message, Role};
use crate::estimate::{ClassCounts, Estimator};
use crate::middle::exchange_starts;

/// How many of the latest messages are searched for the largest tool output seen lately.
const RECENT_MESSAGES: usize = 24;

/// The next requests of one conversation: the named forecasts, and one more exchange
/// shaped like the latest with a new output of any size.
pub(crate) struct Forecasts<'a> {
    conversation: &'a Conversation,
    estimator: &'a Estimator,
    template: Range<usize>,
    /// The text a sized output repeats: the template's largest result (none: no results).
    source: Option<String>,
    cap: u64,
    effective: u64,
}

impl<'a> Forecasts<'a> {
    /// The forecasts of `conversation`; `None` when it has no assistant message to take an
    /// exchange's shape from.
    pub(crate) fn new(
        conversation: &'a Conversation,
        estimator: &'a Estimator,
        budget: Budget,
        config: &CascadeConfig,
    ) -> Option<Self> {
        let template = template_of(conversation)?;
        let source =
            largest_result_in(&conversation.messages[template.clone()]).map(|(_, text)| text);
        Some(Forecasts {
            conversation,
            estimator,
            template,
            source,
            cap: budget.share(config.layer1.single_tool_result_share),
            effective: budget.effective(),
        })
    }

    /// ①'s cap: no new output is larger once ① ran.
    pub(crate) fn cap(&self) -> u64 {
        self.cap
    }

    /// The named forecasts, most likely first: the latest exchange again; then, when it
    /// has results, every result past ①'s cap (parallel calls only), the largest result
    /// past the cap, its calls made at once several times over, the largest output of the
    /// latest messages, no output; and two exchanges like the latest.
    pub(crate) fn named(&self) -> Vec<Conversation> {
        let mut next = vec![self.extend(None, false)];
        if self.source.is_some() {
            next.extend(self.past_cap());
            let room = self
                .effective
                .saturating_sub(self.estimator.tokens(self.conversation));
            for share in [0.9, 1.0, 1.2] {
                next.extend(self.flood((room as f64 * share) as u64));
            }
            if let Some(largest) = recent_largest(self.conversation) {
                next.push(self.extend(Some(&largest), false));
            }
            next.push(self.extend(Some(""), false));
        }
        if let Some(template) = template_of(&next[0]) {
            next.push(extend(&next[0], &template, None, false));
        }
        next
    }

    /// One more exchange like the latest, every result past ①'s cap (parallel calls only),
    /// then its largest result only: the largest request one exchange can make once ①
    /// cut them. Empty when the latest exchange has no result.
    fn past_cap(&self) -> Vec<Conversation> {
        let mut next = Vec::new();
        if self.source.is_some() {
            let over = self.text_of(self.cap + self.cap / 4);
            if results_in(&self.conversation.messages[self.template.clone()]) > 1 {
                next.push(self.extend(Some(&over), true));
            }
            next.push(self.extend(Some(&over), false));
        }
        next
    }

    /// The latest exchange's calls made at once, as many times as it takes for their
    /// results (each within ①'s cap) to bring about `total` new tokens: one turn of
    /// parallel calls, which an agent makes from any size (three file reads at 30% of E)
    /// and no single output forecasts, since ① caps each. `None` when the latest exchange
    /// has no result.
    fn flood(&self, total: u64) -> Option<Conversation> {
        self.source.as_ref()?;
        // Every copy brings one result per call of the latest exchange.
        let per_copy = results_in(&self.conversation.messages[self.template.clone()]).max(1) as u64;
        let copies = total.div_ceil(self.cap.max(1) * per_copy).max(2);
        let each = self.text_of(total / (copies * per_copy));
        let mut next = self.extend(Some(&each), true);
        let first = self.conversation.messages.len();
        let single = next.messages[first..].to_vec();
        let copy_end = next.messages.len();
        for _ in 1..copies {
            // One more copy of the exchange, with ids no message uses yet.
            let mut probe = next.clone();
            let at = probe.messages.len();
            probe.messages.extend(single.iter().cloned());
            let more = extend(&probe, &(at..at + single.len()), None, false);
            let added = more.messages[at + single.len()..].to_vec();
            for (offset, message) in added.into_iter().enumerate() {
                let into = first + offset;
                if offset == 0 {
                    // The calls join the first copy's assistant message: one turn.
                    let calls = (message.blocks().iter())
                        .filter(|b| matches!(b, Block::ToolCall(_)))
                        .cloned();
                    let calls: Vec<Block> = calls.collect();
                    next.messages[into].blocks_mut().extend(calls);
                } else if message.role() != Role::Tool && into < copy_end {
                    // Results as blocks of one message (Anthropic): the same message, with
                    // the results only (not its other text again).
                    let results = (message.blocks().iter())
                        .filter(|b| matches!(b, Block::ToolResult(_)))
                        .cloned();
                    let results: Vec<Block> = results.collect();
                    next.messages[into].blocks_mut().extend(results);
                } else {
                    next.messages.push(message);
                }
            }
        }
        Some(next)
    }

    /// One more exchange like the latest whose largest result has about `tokens` tokens;
    /// `None` when the latest exchange has no result.
    pub(crate) fn sized(&self, tokens: u64) -> Option<Conversation> {
        self.source.as_ref()?;
        Some(self.extend(Some(&self.text_of(tokens)), false))
    }

    fn extend(&self, output: Option<&str>, all: bool) -> Conversation {
        extend(self.conversation, &self.template, output, all)
    }

    fn text_of(&self, tokens: u64) -> String {
        text_of(self.source.as_deref().unwrap_or(""), tokens, self.estimator)
    }
}

/// The latest exchange of `conversation` (the assistant message that made calls and their
/// results), or without one the latest assistant message and the message after it.
fn template_of(conversation: &Conversation) -> Option<Range<usize>> {
    let messages = &conversation.messages;
    let starts = exchange_starts(conversation);
    let exchange = (0..messages.len())
        .rev()
        .find(|&i| {
            messages[i].role() == Role::Assistant && messages[i].tool_calls().next().is_some()
        })
        .map(|start| {
            let end = (start + 1..messages.len())
                .take_while(|&i| starts[i] == start)
                .last()
                .unwrap_or(start);
            start..end + 1
        });
    exchange.or_else(|| {
        let at = messages.iter().rposition(|m| m.role() == Role::Assistant)?;
        Some(at..(at + 2).min(messages.len()))
    })
}

fn results_in(messages: &[Message]) -> usize {
    messages.iter().map(|m| m.tool_results().count()).sum()
}

/// The largest tool result among `messages`, as (tokens by the prior's character count,
/// text).
fn largest_result_in(messages: &[Message]) -> Option<(u64, String)> {
    (messages.iter())
        .flat_map(|m| m.tool_results())
        .map(|r| {
            let chars = crate::estimate::Weights::chars(&ClassCounts::of_blocks(&r.content));
            (chars, r.joined_text())
        })
        .max_by_key(|(chars, _)| *chars)
}

/// The text of the largest tool output among the latest messages.
fn recent_largest(conversation: &Conversation) -> Option<String> {
    let messages = &conversation.messages;
    let from = messages.len().saturating_sub(RECENT_MESSAGES);
    largest_result_in(&messages[from..]).map(|(_, text)| text)
}

/// `source` repeated or cut to about `tokens` tokens (the same kind of text, so that it
/// estimates alike); filler when there is no source.
fn text_of(source: &str, tokens: u64, estimator: &Estimator) -> String {
    let source = if source.trim().is_empty() {
        "output line\n"
    } else {
        source
    };
    let mut chars =
        tokens as f64 * source.len() as f64 / estimator.text_tokens(source).max(1) as f64;
    let mut text = String::new();
    // Short texts estimate with a different ratio than long ones: a few corrections.
    for _ in 0..3 {
        let wanted = chars.ceil() as usize;
        text = source.repeat(wanted / source.len() + 1);
        let mut cut = wanted.min(text.len());
        while !text.is_char_boundary(cut) {
            cut -= 1;
        }
        text.truncate(cut);
        let got = estimator.text_tokens(&text).max(1);
        chars *= tokens as f64 / got as f64;
    }
    text
}

/// `conversation`, then a copy of `template` with fresh call ids of the same length; with
/// `output`, the copy's largest tool result (every one with `all`) holds that text
/// instead of its own.
fn extend(
    conversation: &Conversation,
    template: &Range<usize>,
    output: Option<&str>,
    all: bool,
) -> Conversation {
    let mut next = conversation.clone();
    let messages = &conversation.messages;
    let mut taken: HashSet<String> = messages.iter().flat_map(ids_of).collect();
    let mut renamed = HashMap::new();
    let target = output.and_then(|_| largest_result_at(&messages[template.clone()]));
    for (offset, message) in messages[template.clone()].iter().enumerate() {
        let mut copy = message.clone();
        for (index, block) in copy.blocks_mut().iter_mut().enumerate() {
            let id = match block {
                Block::ToolCall(call) => &mut call.id,
                Block::ToolResult(result) => {
                    if let Some(text) = output
                        && (all || target == Some((offset, index)))
                    {
                        result.content = vec![Block::text(text)];
                    }
                    &mut result.call_id
                }
                _ => continue,
            };
            let fresh = renamed
                .entry(id.clone())
                .or_insert_with(|| fresh_id(id, &mut taken))
                .clone();
            *id = fresh;
        }
        next.messages.push(copy);
    }
    next
}

/// Where the largest tool result of `messages` is: (message, block).
fn largest_result_at(messages: &[Message]) -> Option<(usize, usize)> {
    let mut best: Option<((usize, usize), u64)> = None;
    for (m, message) in messages.iter().enumerate() {
        for (b, block) in message.blocks().iter().enumerate() {
            if let Block::ToolResult(result) = block {
                let chars =
                    crate::estimate::Weights::chars(&ClassCounts::of_blocks(&result.content));
                if best.is_none_or(|(_, most)| chars > most) {
                    best = Some(((m, b), chars));
                }
            }
        }
    }
    best.map(|(at, _)| at)
}

/// The call ids a message names (its calls' and its results').
fn ids_of(message: &Message) -> Vec<String> {
    (message.blocks().iter())
        .filter_map(|b| match b {
            Block::ToolCall(call) => Some(call.id.clone()),
            Block::ToolResult(result) => Some(result.call_id.clone()),
            _ => None,
        })
        .collect()
}

/// An id of the same length as `id` (so that the forecast estimates alike) that no
/// message uses; `id` itself when none can be found.
fn fresh_id(id: &str, taken: &mut HashSet<String>) -> String {
    const ALPHABET: &str = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ";
    let chars: Vec<char> = id.chars().collect();
    for at in (0..chars.len()).rev() {
        // Only ASCII alphanumerics are swapped, so the byte length stays the same.
        if !chars[at].is_ascii_alphanumeric() {
            continue;
        }
        for c in ALPHABET.chars() {
            let mut candidate = chars.clone();
            candidate[at] = c;
            let candidate: String = candidate.into_iter().collect();
            if taken.insert(candidate.clone()) {
                return candidate;
            }
        }
    }
    id.to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn conversation() -> Conversation {
        let body = serde_json::json!({"model": "m", "messages": [
            {"role": "user", "content": "go"},
            {"role": "assistant", "content": null, "tool_calls": [
                {"id": "a1", "type": "function", "function": {"name": "bash", "arguments": "{}"}}]},
            {"role": "tool", "tool_call_id": "a1", "content": "out"},
        ]});
        crate::format::parse(body.to_string().as_bytes(), None).unwrap()
    }

    #[test]
    fn fresh_ids_keep_their_length_and_differ() {
        let mut taken: HashSet<String> = ["call_1".to_owned(), "call_2".to_owned()].into();
        let id = fresh_id("call_1", &mut taken);
        assert_eq!(id.len(), 6);
        assert!(id != "call_1" && id != "call_2");
        assert_ne!(fresh_id("call_1", &mut taken), id);
    }

    #[test]
    fn the_first_forecast_repeats_the_latest_exchange_with_new_ids() {
        let conversation = conversation();
        let config = CascadeConfig::default();
        let estimator = Estimator::default();
        let forecasts =
            Forecasts::new(&conversation, &estimator, Budget::new(1_000, 0), &config).unwrap();
        let all = forecasts.named();
        let next = &all[0];
        assert_eq!(next.messages.len(), 5);
        let ids: Vec<String> = next.messages[3..].iter().flat_map(ids_of).collect();
        assert_eq!(ids.len(), 2);
        assert_eq!(ids[0], ids[1]);
        assert_ne!(ids[0], "a1");
        let result = next.messages[4].tool_results().next().unwrap();
        assert_eq!(result.joined_text(), "out");
    }

    #[test]
    fn a_flood_makes_the_latest_call_several_times_at_once() {
        let conversation = conversation();
        let (config, estimator) = (CascadeConfig::default(), Estimator::default());
        let budget = Budget::new(1_000, 0);
        let forecasts = Forecasts::new(&conversation, &estimator, budget, &config).unwrap();
        let next = forecasts.flood(1_300).unwrap();
        // One assistant message with three calls (1,300 tokens within a cap of 500), then
        // their three results, every id new and answered.
        assert_eq!(next.messages.len(), 3 + 1 + 3);
        let calls: Vec<&str> = (next.messages[3].tool_calls())
            .map(|c| c.id.as_str())
            .collect();
        let results: Vec<&str> = (next.messages[4..].iter())
            .flat_map(|m| m.tool_results())
            .map(|r| r.call_id.as_str())
            .collect();
        assert_eq!(calls.len(), 3);
        assert_eq!(calls, results);
        assert_eq!(calls.iter().collect::<HashSet<_>>().len(), 3);
        assert!(!calls.contains(&"a1"));
        for message in &next.messages[4..] {
            let text = message.tool_results().next().unwrap().joined_text();
            let tokens = estimator.text_tokens(&text);
            assert!(tokens.abs_diff(433) <= 43, "{tokens} tokens");
        }
    }

    #[test]
    fn a_flood_of_parallel_calls_brings_the_total_asked() {
        // The latest exchange already makes two calls: each copy brings two results.
        let body = serde_json::json!({"model": "m", "messages": [
            {"role": "user", "content": "go"},
            {"role": "assistant", "content": null, "tool_calls": [
                {"id": "a1", "type": "function", "function": {"name": "bash", "arguments": "{}"}},
                {"id": "a2", "type": "function", "function": {"name": "bash", "arguments": "{}"}}]},
            {"role": "tool", "tool_call_id": "a1", "content": "out"},
            {"role": "tool", "tool_call_id": "a2", "content": "out"},
        ]});
        let conversation = crate::format::parse(body.to_string().as_bytes(), None).unwrap();
        let (config, estimator) = (CascadeConfig::default(), Estimator::default());
        let budget = Budget::new(1_000, 0);
        let forecasts = Forecasts::new(&conversation, &estimator, budget, &config).unwrap();
        let next = forecasts.flood(1_300).unwrap();
        let results: Vec<u64> = (next.messages[4..].iter())
            .flat_map(|m| m.tool_results())
            .map(|r| estimator.text_tokens(&r.joined_text()))
            .collect();
        assert_eq!(results.len(), 4, "two copies of two calls");
        let total: u64 = results.iter().sum();
        assert!(total.abs_diff(1_300) <= 130, "{total} tokens in all");
        assert!(results.iter().all(|&t| t <= forecasts.cap()));
    }

    #[test]
    fn the_outputs_range_from_none_to_past_the_cap_and_two_exchanges_ahead() {
        let conversation = conversation();
        let config = CascadeConfig::default();
        let estimator = Estimator::default();
        let budget = Budget::new(1_000, 0);
        let forecasts = Forecasts::new(&conversation, &estimator, budget, &config).unwrap();
        let all = forecasts.named();
        let output = |c: &Conversation| {
            let text = c.messages[4].tool_results().next().unwrap().joined_text();
            estimator.text_tokens(&text)
        };
        let cap = budget.share(config.layer1.single_tool_result_share);
        assert_eq!(forecasts.cap(), cap);
        assert!(output(&all[1]) > cap, "past ①'s cap: {}", output(&all[1]));
        // Three floods (every share of the room), each one assistant message of calls.
        for flood in &all[2..5] {
            assert!(flood.messages[3].tool_calls().count() >= 2);
        }
        assert_eq!(
            output(&all[5]),
            output(&all[0]),
            "the largest lately is the latest"
        );
        let empty = all[6].messages[4]
            .tool_results()
            .next()
            .unwrap()
            .joined_text();
        assert_eq!(empty, "");
        assert_eq!(all[7].messages.len(), 7);
        for tokens in [cap / 4, cap / 2] {
            let sized = output(&forecasts.sized(tokens).unwrap());
            assert!(
                sized.abs_diff(tokens) <= tokens / 10,
                "{sized} for {tokens}"
            );
        }
    }
}
