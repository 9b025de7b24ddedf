//! Replaying a transcript as an agent loop: before each assistant turn, the request the
//! agent would send is the conversation it carried forward (already compacted by earlier
//! calls) plus the messages new since its last call; `prepare` runs on it and the result is
//! carried forward, as a library user does.

use context_cascade::estimate::ClassCounts;
use context_cascade::{Budget, ContextManager, Conversation, Role, Step, Strategy};

/// What happened on one simulated call.
#[derive(Debug, Clone, PartialEq)]
pub struct CallRecord {
    /// 1-based call number.
    pub call: usize,
    /// Index, in the transcript, of the assistant message this call produced.
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
    pub fits: bool,
    pub degraded: bool,
    /// The request sent begins with the previous request sent, unchanged (a provider's
    /// prompt cache still hits).
    pub extends_previous: bool,
}

/// The whole replay.
#[derive(Debug, Clone, PartialEq)]
pub struct Timeline {
    pub budget: Budget,
    pub calls: Vec<CallRecord>,
}

impl Timeline {
    /// Calls in which at least one strategy fired.
    pub fn calls_compacted(&self) -> usize {
        self.calls
            .iter()
            .filter(|c| !c.strategies.is_empty())
            .count()
    }

    /// How many times each strategy fired (calls in which it fired), in cascade order.
    pub fn strategy_counts(&self) -> Vec<(Strategy, usize)> {
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

/// Indices of the assistant messages that end a model call: an assistant message with
/// something before it, not directly after another assistant message (one reply written
/// as several messages is one call).
pub fn call_turns(conversation: &Conversation) -> Vec<usize> {
    let messages = &conversation.messages;
    (1..messages.len())
        .filter(|&i| {
            messages[i].role() == Role::Assistant && messages[i - 1].role() != Role::Assistant
        })
        .collect()
}

/// Replays `conversation` call by call; `on_call` runs after each call (progress).
pub fn replay(
    conversation: &Conversation,
    manager: &ContextManager,
    budget: Budget,
    mut on_call: impl FnMut(&CallRecord),
) -> Timeline {
    let estimator = manager.estimator(conversation.model().unwrap_or(""));
    let tools = conversation
        .tools()
        .map(ClassCounts::of_json)
        .unwrap_or_default();
    let mut carried = Conversation {
        format: conversation.format,
        messages: Vec::new(),
        envelope: conversation.envelope.clone(),
    };
    let mut history = tools;
    let mut next = 0;
    let mut calls = Vec::new();
    for (n, turn) in call_turns(conversation).into_iter().enumerate() {
        let new = &conversation.messages[next..turn];
        for message in new {
            history += message.counts();
        }
        let previous_sent = carried.messages.clone();
        carried.messages.extend(new.iter().cloned());
        next = turn;

        let report = pollster::block_on(manager.prepare(&mut carried, budget));
        let mut strategies: Vec<Strategy> = Vec::new();
        for step in &report.steps {
            if !strategies.contains(&step.strategy) {
                strategies.push(step.strategy);
            }
        }
        let record = CallRecord {
            call: n + 1,
            turn,
            messages: carried.messages.len(),
            tokens_in: report.tokens_before,
            tokens_sent: report.tokens_after,
            uncompacted: estimator.tokens_of(&history),
            label: label(&report.steps),
            strategies,
            fits: report.fits,
            degraded: report.degraded,
            extends_previous: carried.messages.starts_with(&previous_sent),
        };
        on_call(&record);
        calls.push(record);
    }
    Timeline { budget, calls }
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
pub fn label(steps: &[Step]) -> String {
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

    fn tool_session(turns: usize, output_chars: usize) -> Conversation {
        let mut messages = vec![
            serde_json::json!({"role": "system", "content": "You are a coding agent."}),
            serde_json::json!({"role": "user", "content": "Read every file and fix the bug."}),
        ];
        for i in 0..turns {
            let id = format!("call_{i}");
            messages.push(serde_json::json!({"role": "assistant", "content": null,
                "tool_calls": [{"id": id, "type": "function", "function": {
                    "name": "read_file", "arguments": format!("{{\"path\":\"src/f{i}.rs\"}}")}}]}));
            messages.push(serde_json::json!({"role": "tool", "tool_call_id": id,
                "content": format!("// file {i}\n{}", "let x = 1;\n".repeat(output_chars / 11))}));
        }
        messages.push(serde_json::json!({"role": "assistant", "content": "Fixed."}));
        let body = serde_json::json!({"model": "gpt-4o", "messages": messages});
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
        assert!(first.strategies.is_empty() && first.extends_previous);
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
            if call.strategies.is_empty() {
                assert!(call.extends_previous, "call {}", call.call);
            }
        }
    }

    #[test]
    fn consecutive_assistant_messages_are_one_call() {
        let body = serde_json::json!([
            {"role": "user", "content": "hi"},
            {"role": "assistant", "content": "thinking"},
            {"role": "assistant", "content": "answer"},
            {"role": "user", "content": "more"},
            {"role": "assistant", "content": "ok"}
        ]);
        let conversation = context_cascade::format::parse_value(body, None).expect("valid");
        assert_eq!(call_turns(&conversation), vec![1, 4]);
    }
}
