//! What the cascade did, as data: one [`Step`] per strategy applied.

use crate::config::Budget;
use crate::conversation::{Format, Message};
use crate::estimate::{ClassCounts, Estimator};
use crate::trail::TrailStats;

/// The five strategies, cheapest first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Strategy {
    /// ① cut one oversized tool result.
    TruncateToolResult,
    /// ② replace old tool results with a placeholder.
    CompactToolResults,
    /// ③ remove the middle of the history.
    PruneHistory,
    /// ④ summarize the middle of the history.
    Summarize,
    /// ⑤ degraded summary (levels 1–3).
    Degrade,
}

impl Strategy {
    /// The strategy's name in reports (`truncate_tool_result`, ...).
    pub fn as_str(self) -> &'static str {
        match self {
            Strategy::TruncateToolResult => "truncate_tool_result",
            Strategy::CompactToolResults => "compact_tool_results",
            Strategy::PruneHistory => "prune_history",
            Strategy::Summarize => "summarize",
            Strategy::Degrade => "degrade",
        }
    }
}

/// One strategy applied once.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Step {
    /// The strategy applied.
    pub strategy: Strategy,
    /// The recovery attempt (1–4) that ran the step; `None` in Layer 1.
    pub attempt: Option<u8>,
    /// ⑤'s level (1 partial summary, 2 summary of the small messages, 3 bare notice);
    /// `None` for the other strategies.
    pub level: Option<u8>,
    /// Messages whose content changed or that were removed.
    pub messages_affected: usize,
    /// Messages removed from the conversation.
    pub messages_removed: usize,
    /// Messages added (notices, summaries, synthetic tool results).
    pub messages_added: usize,
    /// Characters of content removed (text of cut, compacted or removed content).
    pub chars_removed: u64,
    /// Characters added (markers, notices, summaries).
    pub chars_added: u64,
    /// Estimated tokens of the conversation before the step.
    pub tokens_before: u64,
    /// Estimated tokens after it.
    pub tokens_after: u64,
    /// `tokens_before − tokens_after`.
    pub tokens_freed: u64,
    /// The target of the step, in tokens.
    pub target_tokens: u64,
    /// A short human-readable account.
    pub detail: String,
    /// The trail the step wrote (③, ④, ⑤): entries per kind and the tokens it costs.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub trail: Option<TrailStats>,
    /// The step removed messages of the current turn (its older tool exchanges): the turn
    /// alone was over the budget.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub inside_current_turn: bool,
    /// What the step removed, under the handles its markers carry, when recall is on
    /// ([`crate::ContextManager::with_recall`]): the originals a recall store keeps. Not
    /// serialized: a report says what was done, not the content.
    #[serde(skip)]
    pub removed: Vec<crate::recall::Removal>,
}

/// Everything the cascade did to one conversation.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Report {
    /// The wire format of the conversation (serialized as `"openai"`, `"anthropic"`,
    /// `"bare"`).
    pub format: Format,
    /// W of the budget (the provider's, when it quoted a smaller one).
    pub window: u64,
    /// R of the budget.
    pub reserve: u64,
    /// Estimated tokens before the cascade.
    pub tokens_before: u64,
    /// Estimated tokens after it.
    pub tokens_after: u64,
    /// Messages before the cascade.
    pub messages_before: usize,
    /// Messages after it.
    pub messages_after: usize,
    /// Every step, in the order they ran.
    pub steps: Vec<Step>,
    /// The result fits E.
    pub fits: bool,
    /// A step degraded (summary unavailable or partial): never a clean success.
    pub degraded: bool,
    /// LLM calls made by [`crate::ContextManager::call`].
    pub calls: usize,
    /// Of those calls, how many the provider refused as a context overflow.
    pub overflows: usize,
    /// The calibration multiplier the estimates used.
    pub token_scale: f64,
    /// Index of the first message of the request as sent that differs from the request
    /// as received: rewritten, removed, or preceded by an inserted message. `None` when
    /// the cascade changed no message, so that the request as sent is the one received.
    /// Recorded by `prepare`, `compact`, `compact_with_summary`, `call` and `recover`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub first_changed: Option<usize>,
    /// Estimated tokens of the request as sent from `first_changed` to its end: what the
    /// provider bills uncached because of this compaction, when it had the request as
    /// received cached up to that point (the tokens a replay counts as re-billed for this
    /// call, see `context_cascade::replay`). They include any new messages after the
    /// change, which are uncached anyway. 0 when nothing changed.
    pub uncached_tokens: u64,
    /// Why it cannot fit, when it cannot.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Messages of the request as received whose tokens are the calibrated estimate
    /// although the model's tokenizer is public: each longer than
    /// [`crate::estimate::EXACT_COUNT_MAX_CHARS`], past which an exact count costs more
    /// than it is worth; or every message, when the request was so far over the budget
    /// that it was planned with the prior and only what is sent was counted (then
    /// `tokens_before` is the calibrated estimate). Not serialized when 0 (every message
    /// counted as usual).
    #[serde(skip_serializing_if = "is_zero")]
    pub estimated_messages: usize,
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

impl Report {
    /// The report of a request that went upstream as it came after one call: what
    /// [`ContextManager::call`](crate::ContextManager::call) reports when no strategy ran.
    /// For a caller that decided so without the engine (the proxy's fast path).
    pub fn untouched(
        format: Format,
        budget: Budget,
        tokens: u64,
        messages: usize,
        scale: f64,
    ) -> Self {
        Report {
            calls: 1,
            ..Report::start(format, budget, tokens, messages, scale)
        }
    }

    pub(crate) fn start(
        format: Format,
        budget: Budget,
        tokens: u64,
        messages: usize,
        scale: f64,
    ) -> Self {
        Report {
            format,
            window: budget.window,
            reserve: budget.reserve,
            tokens_before: tokens,
            tokens_after: tokens,
            messages_before: messages,
            messages_after: messages,
            steps: Vec::new(),
            fits: tokens <= budget.effective(),
            degraded: false,
            calls: 0,
            overflows: 0,
            token_scale: scale,
            first_changed: None,
            uncached_tokens: 0,
            reason: None,
            estimated_messages: 0,
        }
    }

    /// Records the final state: sizes after the steps, whether it fits, whether any step
    /// degraded, and the tokens from the first changed message of `messages` (the request
    /// as sent) on, estimated with `estimator`.
    pub(crate) fn finish(
        &mut self,
        tokens: u64,
        messages: &[Message],
        budget: Budget,
        estimator: &Estimator,
    ) {
        self.window = budget.window;
        self.tokens_after = tokens;
        self.messages_after = messages.len();
        self.fits = tokens <= budget.effective();
        self.degraded = self.steps.iter().any(|s| s.strategy == Strategy::Degrade);
        self.uncached_tokens = self
            .first_changed
            .map_or(0, |from| tokens_from(estimator, messages, from));
    }

    /// Records that a step changed the request from message `index` on, `before` being
    /// the messages before the step and `after` after it (nothing when they are equal).
    /// Several changes keep the earliest: a later one at a higher index leaves the
    /// messages before the earlier one as they were, and one at a lower index is the
    /// earlier one.
    pub(crate) fn changed_between<T: PartialEq>(&mut self, before: &[T], after: &[T]) {
        if before == after {
            return;
        }
        let index = crate::prefix::matching_prefix(before, after);
        self.first_changed = Some(self.first_changed.map_or(index, |i| i.min(index)));
    }

    /// Characters removed by every step, in all.
    pub fn chars_removed(&self) -> u64 {
        self.steps.iter().map(|s| s.chars_removed).sum()
    }

    /// Messages removed by every step, in all.
    pub fn messages_removed(&self) -> usize {
        self.steps.iter().map(|s| s.messages_removed).sum()
    }

    /// The trail of the latest step that wrote one (it holds the earlier ones, merged).
    pub fn trail(&self) -> Option<TrailStats> {
        self.steps.iter().rev().find_map(|s| s.trail)
    }

    /// Total tokens freed by every step.
    pub fn tokens_freed(&self) -> u64 {
        self.tokens_before.saturating_sub(self.tokens_after)
    }

    /// `compact_tool_results=3; prune_history=1`: steps per strategy, in cascade order.
    pub fn summary_line(&self) -> String {
        let mut counts: Vec<(Strategy, usize)> = Vec::new();
        for step in &self.steps {
            match counts.iter_mut().find(|(s, _)| *s == step.strategy) {
                Some((_, n)) => *n += step.messages_affected.max(1),
                None => counts.push((step.strategy, step.messages_affected.max(1))),
            }
        }
        counts.sort_by_key(|(s, _)| *s as u8);
        counts
            .iter()
            .map(|(s, n)| format!("{}={n}", s.as_str()))
            .collect::<Vec<_>>()
            .join("; ")
    }
}

/// Estimated tokens of `messages[from..]` (nothing when `from` is past the end).
pub(crate) fn tokens_from(estimator: &Estimator, messages: &[Message], from: usize) -> u64 {
    let tail = messages.get(from..).unwrap_or_default();
    estimator.tokens_of(
        &tail
            .iter()
            .fold(ClassCounts::default(), |acc, m| acc + m.counts()),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_format_serializes_as_its_wire_name() {
        for (format, name) in [
            (Format::OpenAi, "openai"),
            (Format::Anthropic, "anthropic"),
            (Format::Bare, "bare"),
        ] {
            let report = Report::start(format, Budget::new(100, 10), 5, 1, 1.0);
            let json = serde_json::to_value(&report).unwrap();
            assert_eq!(json["format"], name);
            assert_eq!(format.as_str(), name);
        }
    }

    /// A tokenizer that counts one token per character.
    #[derive(Debug)]
    struct PerChar;

    impl crate::estimate::TokenCounter for PerChar {
        fn name(&self) -> &str {
            "per-char"
        }
        fn message(&self, message: &Message) -> u64 {
            message.text_content().chars().count() as u64
        }
        fn request_overhead(&self, _: &crate::Conversation) -> u64 {
            0
        }
        fn text(&self, text: &str) -> u64 {
            text.chars().count() as u64
        }
    }

    static PER_CHAR: PerChar = PerChar;

    /// Compacts a request for gpt-4o (counted by [`PerChar`]) whose tool result is `result`.
    fn compact_with_exact_counts(result: &str) -> serde_json::Value {
        use crate::{CascadeConfig, ContextManager};
        let manager = ContextManager::new(CascadeConfig::default()).with_token_counters(
            std::sync::Arc::new(|model: &str| {
                (model == "gpt-4o")
                    .then_some(&PER_CHAR as &'static dyn crate::estimate::TokenCounter)
            }),
        );
        let body = serde_json::json!({"model": "gpt-4o", "messages": [
            {"role": "user", "content": "print the file"},
            {"role": "assistant", "content": null, "tool_calls": [{"id": "c1", "type": "function",
                "function": {"name": "read_file", "arguments": "{}"}}]},
            {"role": "tool", "tool_call_id": "c1", "content": result},
            {"role": "user", "content": "what is in it?"},
        ]});
        let mut conversation = crate::format::parse(body.to_string().as_bytes(), None).unwrap();
        let report = manager.compact(&mut conversation, Budget::new(1_000_000, 0));
        serde_json::to_value(&report).unwrap()
    }

    #[test]
    fn the_report_says_when_a_message_was_too_long_to_count_exactly() {
        let limit = crate::estimate::EXACT_COUNT_MAX_CHARS as usize;
        let report = compact_with_exact_counts(&"x".repeat(limit + 1));
        assert_eq!(report["estimated_messages"], 1);
        // Otherwise the report is what it always was: no such key.
        let report = compact_with_exact_counts("a short file");
        assert!(report.get("estimated_messages").is_none(), "{report}");
    }

    #[test]
    fn the_earliest_change_counts() {
        let mut report = Report::start(Format::OpenAi, Budget::new(100, 10), 5, 1, 1.0);
        report.changed_between(&[1, 2, 3], &[1, 2, 3]);
        assert_eq!(report.first_changed, None);
        report.changed_between(&[1, 2, 3, 4], &[1, 2, 9, 4]);
        assert_eq!(report.first_changed, Some(2));
        report.changed_between(&[1, 2, 9, 4], &[1, 2, 9]);
        assert_eq!(report.first_changed, Some(2));
        report.changed_between(&[1, 2, 9], &[5, 9]);
        assert_eq!(report.first_changed, Some(0));
    }
}
