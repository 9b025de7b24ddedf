//! The exact counter sees what is sent, never what a plan drops; what is sent fits by the
//! exact count.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failure is a test failure

use std::sync::Mutex;

use super::*;
use crate::conversation::Message;
use crate::estimate::{TokenCounter, Weights};
use crate::{CascadeConfig, Report};

/// A tokenizer that counts like a real one, a few percent off the prior class by class,
/// and remembers every message it was asked to count.
#[derive(Debug)]
struct Recording {
    seen: Mutex<Vec<Message>>,
}

const OFF_PRIOR: Weights = Weights {
    letter: 0.21,
    digit: 0.8,
    whitespace: 0.13,
    punctuation: 0.6,
    non_ascii: 1.25,
    per_message: 4.0,
    per_binary_block: 1600.0,
};

impl TokenCounter for Recording {
    fn name(&self) -> &str {
        "recording"
    }
    fn message(&self, message: &Message) -> u64 {
        self.seen.lock().unwrap().push(message.clone());
        OFF_PRIOR.prior(&message.counts()).ceil() as u64
    }
    fn request_overhead(&self, _: &Conversation) -> u64 {
        3
    }
    fn text(&self, text: &str) -> u64 {
        OFF_PRIOR
            .prior(&crate::estimate::ClassCounts::of_str(text))
            .ceil() as u64
    }
}

fn manager(counter: &'static Recording) -> ContextManager {
    ContextManager::new(CascadeConfig::default()).with_token_counters(Arc::new(move |_: &str| {
        Some(counter as &'static dyn TokenCounter)
    }))
}

/// The request's tokens as `counter` counts them, from scratch.
fn counted(counter: &Recording, conversation: &Conversation) -> u64 {
    let messages: u64 = conversation
        .messages
        .iter()
        .map(|m| counter.message(m))
        .sum();
    messages + counter.request_overhead(conversation)
}

/// Runs `compact` and `compact_with_summary` on every fixture far over its window and checks
/// that no message the request lost was counted, and that the result fits by the count.
#[test]
fn the_counter_never_sees_a_message_the_request_drops() {
    let prior = ContextManager::new(CascadeConfig::default());
    let mut runs = 0;
    for (name, conversation) in crate::trail::fixture_tests::fixtures() {
        let tokens = prior.estimate(&conversation);
        for window in [tokens / 3, tokens / 8].into_iter().filter(|w| *w >= 4_000) {
            let budget = Budget::new(window, 0);
            for sync in [true, false] {
                let counter: &'static Recording = Box::leak(Box::new(Recording {
                    seen: Mutex::new(Vec::new()),
                }));
                let manager = manager(counter);
                let planner = manager.prior_planner(&conversation, budget).unwrap();
                let mut sent = conversation.clone();
                let report: Report = if sync {
                    manager.compact(&mut sent, budget)
                } else {
                    pollster::block_on(manager.compact_with_summary(&mut sent, budget))
                };
                let seen = std::mem::take(&mut *counter.seen.lock().unwrap());
                // The plan is what the planner (no counter) does; the exact run on its
                // result may cut further (then it counted what it cut: it was to be sent),
                // but what the plan dropped is never counted.
                let mut plan = conversation.clone();
                if sync {
                    planner.compact(&mut plan, budget);
                } else {
                    pollster::block_on(planner.compact_with_summary(&mut plan, budget));
                }
                assert!(
                    counter.seen.lock().unwrap().is_empty(),
                    "the planner counted"
                );
                let dropped: Vec<&Message> = (conversation.messages.iter())
                    .filter(|m| !plan.messages.contains(m))
                    .collect();
                assert!(!dropped.is_empty(), "{name} in {window}: nothing dropped");
                let counted_dropped = dropped.iter().filter(|m| seen.contains(m)).count();
                assert_eq!(counted_dropped, 0, "{name} in {window} (sync {sync})");
                // What is sent was counted, and fits by that count.
                assert!(!seen.is_empty(), "{name} in {window}");
                assert_eq!(report.tokens_after, counted(counter, &sent), "{name}");
                if report.fits {
                    assert!(
                        report.tokens_after <= budget.effective(),
                        "{name} in {window}"
                    );
                }
                assert_eq!(report.estimated_messages, conversation.messages.len());
                // The scale reported is the manager's, as when a request is counted whole.
                let scale = manager.estimator("gpt-4o").multiplier;
                assert_eq!(report.token_scale, scale, "{name}");
                runs += 1;
            }
        }
    }
    assert!(runs >= 8, "{runs} runs");
}

/// Near the threshold, or without a counter, the request is counted as before.
#[test]
fn a_request_near_the_threshold_is_counted_whole() {
    static COUNTER: Recording = Recording {
        seen: Mutex::new(Vec::new()),
    };
    let counting = manager(&COUNTER);
    let prior = ContextManager::new(CascadeConfig::default());
    let (_, conversation) = crate::trail::fixture_tests::fixtures().swap_remove(0);
    let tokens = prior.estimate(&conversation);
    let preemptive = CascadeConfig::default().recovery.preemptive_ratio;
    // The prior a little over the preemptive threshold: it could be under it by count.
    let near = Budget::new((tokens as f64 / preemptive / 1.1) as u64, 0);
    assert!(counting.prior_planner(&conversation, near).is_none());
    let far = Budget::new(
        (tokens as f64 / preemptive / (CLEARLY_OVER + 0.05)) as u64,
        0,
    );
    assert!(counting.prior_planner(&conversation, far).is_some());
    assert!(prior.prior_planner(&conversation, far).is_none());
}
