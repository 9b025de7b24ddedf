//! The replay as `cascade replay` shows it: `context_cascade::replay` carries the
//! transcript forward call by call through `prepare` (the agent loop and its call points
//! live there, shared with the benchmark and the tests); this adds what the timeline
//! prints: the estimate of the whole history an agent without the cascade would send, and
//! short labels of what fired.

use context_cascade::estimate::ClassCounts;
use context_cascade::replay::{self, PrefixStability};
use context_cascade::{Budget, ContextManager, Conversation, Step, Strategy};

/// What happened on one simulated call.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct CallRecord {
    /// 1-based call number.
    pub call: usize,
    /// Messages of the transcript before the call (the call point); the reply, when the
    /// transcript records one, is the message at this index.
    pub turn: usize,
    /// Messages in the request as sent (after `prepare`).
    pub messages: usize,
    /// Estimate of the request before `prepare` (carried forward + new messages).
    pub tokens_in: u64,
    /// Estimate of the request as sent.
    pub tokens_sent: u64,
    /// Estimate of the whole history up to this call, as an agent without the cascade
    /// would send it.
    pub uncompacted: u64,
    /// Strategies that fired, in order, without repeats.
    pub strategies: Vec<Strategy>,
    /// What fired, short: `compact 3 · prune 160 · degrade L3` (messages affected per
    /// strategy; ⑤ with its level).
    pub label: String,
    /// The request as sent fits the effective budget.
    pub fits: bool,
    /// ⑤ degradation was needed.
    pub degraded: bool,
    /// The request sent begins with the previous request sent, unchanged (a provider's
    /// prompt cache still hits); `None` on the first call.
    pub extends_previous: Option<bool>,
}

/// The whole replay.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Timeline {
    /// The budget every call was prepared for.
    pub budget: Budget,
    /// One record per call, in order.
    pub calls: Vec<CallRecord>,
    /// Calls after the first whose request extended the previous one.
    pub stability: PrefixStability,
}

impl Timeline {
    /// Calls in which at least one strategy fired.
    pub(crate) fn calls_compacted(&self) -> usize {
        self.calls
            .iter()
            .filter(|c| !c.strategies.is_empty())
            .count()
    }

    /// How many times each strategy fired (calls in which it fired), in cascade order.
    pub(crate) fn strategy_counts(&self) -> Vec<(Strategy, usize)> {
        let mut counts: Vec<(Strategy, usize)> = Vec::new();
        for strategy in self.calls.iter().flat_map(|c| &c.strategies) {
            match counts.iter_mut().find(|(s, _)| s == strategy) {
                Some((_, n)) => *n += 1,
                None => counts.push((*strategy, 1)),
            }
        }
        counts.sort_by_key(|(s, _)| *s as u8);
        counts
    }
}

/// How many calls replaying `conversation` makes.
pub(crate) fn call_count(conversation: &Conversation) -> usize {
    replay::call_points(conversation.messages.iter().map(|m| m.role())).len()
}

/// Replays `conversation` call by call; `on_call` runs after each call (progress).
pub(crate) fn replay(
    conversation: &Conversation,
    manager: &ContextManager,
    budget: Budget,
    mut on_call: impl FnMut(&CallRecord),
) -> Timeline {
    let estimator = manager.estimator(conversation.model().unwrap_or(""));
    let mut history = conversation
        .tools()
        .map(ClassCounts::of_json)
        .unwrap_or_default();
    let mut counted = 0;
    let mut calls = Vec::new();
    let run = replay::replay(conversation, manager, budget, |call, sent| {
        for message in &conversation.messages[counted..call.end] {
            history += message.counts();
        }
        counted = call.end;
        let report = &call.report;
        let mut strategies: Vec<Strategy> = Vec::new();
        for step in &report.steps {
            if !strategies.contains(&step.strategy) {
                strategies.push(step.strategy);
            }
        }
        let record = CallRecord {
            call: call.number,
            turn: call.end,
            messages: sent.messages.len(),
            tokens_in: report.tokens_before,
            tokens_sent: report.tokens_after,
            uncompacted: estimator.tokens_of(&history),
            label: label(&report.steps),
            strategies,
            fits: report.fits,
            degraded: report.degraded,
            extends_previous: call.extends_previous,
        };
        on_call(&record);
        calls.push(record);
    });
    let stability = pollster::block_on(run).stability;
    Timeline {
        budget,
        calls,
        stability,
    }
}

/// Short names for the timeline's narrow column.
fn short_name(strategy: Strategy) -> &'static str {
    match strategy {
        Strategy::TruncateToolResult => "truncate",
        Strategy::CompactToolResults => "compact",
        Strategy::PruneHistory => "prune",
        Strategy::Summarize => "summarize",
        Strategy::Degrade => "degrade",
    }
}

/// `compact 3 · prune 160 · degrade L3`: per strategy in the order they ran, the messages
/// affected (⑤: its highest level).
pub(crate) fn label(steps: &[Step]) -> String {
    let mut parts: Vec<(Strategy, usize, u8)> = Vec::new();
    for step in steps {
        let level = step.level.unwrap_or(0);
        match parts.iter_mut().find(|(s, _, _)| *s == step.strategy) {
            Some((_, n, l)) => {
                *n += step.messages_affected;
                *l = (*l).max(level);
            }
            None => parts.push((step.strategy, step.messages_affected, level)),
        }
    }
    parts
        .iter()
        .map(|&(strategy, n, level)| match strategy {
            Strategy::Degrade => format!("degrade L{level}"),
            _ => format!("{} {n}", short_name(strategy)),
        })
        .collect::<Vec<_>>()
        .join(" · ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use context_cascade::CascadeConfig;

    /// The shared tool-reading session, ending with the agent's final answer.
    fn tool_session(turns: usize, output_chars: usize) -> Conversation {
        let mut body = cascade_test_support::tool_session_body(turns, output_chars);
        let messages = body["messages"].as_array_mut().expect("a messages array");
        messages.push(serde_json::json!({"role": "assistant", "content": "Fixed."}));
        context_cascade::format::parse_value(body, None).expect("valid test body")
    }

    #[test]
    fn one_call_per_assistant_turn_carrying_the_compacted_context() {
        let conversation = tool_session(30, 4_000);
        let manager = ContextManager::new(CascadeConfig::default());
        let budget = Budget::new(8_000, 0);
        let mut seen = 0;
        let timeline = replay(&conversation, &manager, budget, |_| seen += 1);
        assert_eq!(timeline.calls.len(), 31);
        assert_eq!(seen, 31);
        let first = &timeline.calls[0];
        assert_eq!((first.turn, first.messages), (2, 2));
        assert!(first.strategies.is_empty() && first.extends_previous.is_none());
        // The full history grows past the window; what is sent stays inside it.
        let last = &timeline.calls[30];
        assert!(last.uncompacted > budget.window);
        assert!(
            timeline
                .calls
                .iter()
                .all(|c| c.tokens_sent <= budget.window)
        );
        assert!(timeline.calls_compacted() > 0);
        // A call that compacted rewrote its prefix; one that did not extends it.
        for call in &timeline.calls {
            if call.strategies.is_empty() && call.call > 1 {
                assert_eq!(call.extends_previous, Some(true), "call {}", call.call);
            }
        }
        let extending = timeline
            .calls
            .iter()
            .filter(|c| c.extends_previous == Some(true));
        assert_eq!(extending.count(), timeline.stability.extending);
        assert_eq!(timeline.stability.compared, 30);
    }

    #[test]
    fn a_transcript_waiting_for_a_reply_ends_with_one_more_call() {
        let body = serde_json::json!([
            {"role": "user", "content": "hi"},
            {"role": "assistant", "content": "thinking"},
            {"role": "assistant", "content": "answer"},
            {"role": "user", "content": "more"}
        ]);
        let conversation = context_cascade::format::parse_value(body, None).expect("valid");
        assert_eq!(call_count(&conversation), 2);
        let manager = ContextManager::new(CascadeConfig::default());
        let timeline = replay(&conversation, &manager, Budget::new(8_000, 0), |_| {});
        let turns: Vec<usize> = timeline.calls.iter().map(|c| c.turn).collect();
        assert_eq!(turns, vec![1, 4]);
    }
}
