//! The sessions, managers and checks the retry-loop tests share (`retry_loop.rs`,
//! `retry_escalation.rs`).

use std::sync::Arc;

use context_cascade::format::{self, WriteOptions};
use context_cascade::{Budget, CascadeConfig, ContextManager, Conversation, Report, Strategy};
use serde_json::json;

use super::invariants;
use super::scripted::{ScriptedSummarizer, count_of, nine_sections};

pub const MODEL: &str = "gpt-4o";
/// The window every provider double enforces (and quotes).
pub const LIMIT: u64 = 8_192;
/// How many more tokens the provider doubles count than the prior: a tokenizer the
/// estimate has to learn.
pub const PROVIDER_SCALE: f64 = 1.3;

/// A coding-agent session: system, the first request, `turns` exchanges of about `chars`
/// characters per message (some through a tool the cascade may not compact), and the
/// current request.
pub fn session(turns: usize, chars: usize, current: &str) -> Conversation {
    session_in(turns, chars, current, false)
}

/// [`session`] in OpenAI form, or in Anthropic form (for the same model, so that both
/// forms are estimated alike).
pub fn session_in(turns: usize, chars: usize, current: &str, anthropic: bool) -> Conversation {
    let mut messages = vec![
        json!({"role": "system", "content": "You are a careful coding agent. Explain before you edit."}),
        json!({"role": "user", "content": "The CI is red: fix the failing test in src/parser.rs without changing the public API."}),
    ];
    for turn in 0..turns {
        let filler = |who: &str| {
            let line = format!(
                "{who} {turn}: looked at src/module_{turn}.rs, line {}, and the parser state. ",
                turn * 7
            );
            line.repeat(chars / line.len() + 1)[..chars].to_owned()
        };
        if turn % 4 == 3 {
            let id = format!("call_{turn}");
            messages.push(json!({"role": "assistant", "content": filler("plan"), "tool_calls": [
                {"id": id, "type": "function", "function": {"name": "lookup_ticket", "arguments": format!("{{\"ticket\": {turn}}}")}}]}));
            messages.push(json!({"role": "tool", "tool_call_id": id, "content": filler("ticket")}));
        } else {
            messages.push(json!({"role": "assistant", "content": filler("assistant")}));
            messages.push(json!({"role": "user", "content": filler("user")}));
        }
    }
    messages.push(json!({"role": "user", "content": current}));
    let body = if anthropic {
        let mut body = super::to_anthropic(&messages);
        body["model"] = json!(MODEL);
        body
    } else {
        json!({"model": MODEL, "messages": messages})
    };
    format::parse(body.to_string().as_bytes(), None).unwrap()
}

/// The session the overflow tests send: the manager's uncalibrated estimate (prior × 1.1)
/// stays under the preemptive threshold of LIMIT, so the first call goes out unchanged,
/// while the provider (prior × 1.3) counts more than LIMIT.
pub fn overflowing_session() -> Conversation {
    overflowing_session_in(false)
}

pub fn overflowing_session_in(anthropic: bool) -> Conversation {
    let current = "Now run the whole suite and tell me what is still red.";
    let conversation = (1..)
        .map(|turns| session_in(turns, 600, current, anthropic))
        .find(|c| count_of(c, PROVIDER_SCALE) > LIMIT)
        .unwrap();
    let manager = ContextManager::new(CascadeConfig::default());
    assert!(!manager.should_preemptive_compact(&conversation, Budget::new(LIMIT, 0)));
    assert!(count_of(&conversation, PROVIDER_SCALE) > LIMIT);
    conversation
}

pub fn manager_with_summaries() -> ContextManager {
    manager_with_summaries_for(CascadeConfig::default())
}

/// [`manager_with_summaries`] calibrating by SPEC's EMA (`calibration.prior_tokens = 0`), for
/// the tests that follow that rule's arithmetic.
pub fn manager_with_summaries_and_spec_ema() -> ContextManager {
    let mut config = CascadeConfig::default();
    config.calibration.prior_tokens = 0.0;
    manager_with_summaries_for(config)
}

fn manager_with_summaries_for(config: CascadeConfig) -> ContextManager {
    let summarizer = ScriptedSummarizer::new(|i, _| Ok(nine_sections(&format!("summary {i}"))));
    ContextManager::new(config).with_summarizer(Arc::new(summarizer))
}

pub fn bytes(conversation: &Conversation) -> usize {
    format::to_vec(conversation, WriteOptions::default())
        .unwrap()
        .len()
}

/// The first user message and the current message went out unchanged in every request, and
/// every retried request is smaller than the one before, in bytes and in the estimate.
pub fn check_requests(
    manager: &ContextManager,
    original: &Conversation,
    received: &[Conversation],
) {
    let first_user = &original.messages[original.first_user_index().unwrap()];
    let current = original.messages.last().unwrap();
    for (i, sent) in received.iter().enumerate() {
        assert!(
            sent.messages.contains(first_user),
            "call {i}: first user message lost"
        );
        assert_eq!(
            sent.messages.last(),
            Some(current),
            "call {i}: current message lost"
        );
        invariants::tool_pairs(sent).unwrap_or_else(|e| panic!("call {i}: {e}"));
        invariants::role_order(sent).unwrap_or_else(|e| panic!("call {i}: {e}"));
        invariants::markers_exact(sent).unwrap_or_else(|e| panic!("call {i}: {e}"));
    }
    let estimator = manager.estimator(MODEL);
    for pair in received.windows(2) {
        assert!(
            bytes(&pair[1]) < bytes(&pair[0]),
            "a retried request is not smaller"
        );
        assert!(estimator.tokens(&pair[1]) < estimator.tokens(&pair[0]));
    }
}

/// (strategy, recovery attempt, ⑤'s level) of every step, in order.
pub fn steps(report: &Report) -> Vec<(Strategy, Option<u8>, Option<u8>)> {
    report
        .steps
        .iter()
        .map(|s| (s.strategy, s.attempt, s.level))
        .collect()
}

/// Every recovery attempt, in order, as the report lists it: ③ at 0.75·E, ④ at 0.6·E, ④ at
/// 0.5·E, ⑤'s bare notice.
pub const EVERY_RECOVERY: [(Strategy, Option<u8>, Option<u8>); 4] = [
    (Strategy::PruneHistory, Some(1), None),
    (Strategy::Summarize, Some(2), None),
    (Strategy::Summarize, Some(3), None),
    (Strategy::Degrade, Some(4), Some(3)),
];
