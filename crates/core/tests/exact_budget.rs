//! Under gpt-4o (exact o200k_base counts), what the cascade sends fits its budget by the
//! exact count on every fixture at 8K–128K, whether the request was counted whole or
//! planned with the prior and only its result counted (issue 27).
#![cfg(feature = "exact")]
// A panic is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use context_cascade::estimate::TokenCounter;
use context_cascade::estimate::exact::{Encoding, ExactCounter};
use context_cascade::format;
use context_cascade::{Budget, CascadeConfig, ContextManager, Conversation};

const WINDOWS: [u64; 5] = [8_000, 16_000, 32_000, 64_000, 128_000];

fn gpt_4o(messages: &serde_json::Value) -> Conversation {
    let body = serde_json::json!({"model": "gpt-4o", "messages": messages});
    format::parse(body.to_string().as_bytes(), None).unwrap()
}

#[test]
fn what_is_sent_fits_by_the_exact_count() {
    let manager = ContextManager::new(CascadeConfig::default()).with_exact_counts();
    let (mut fitted, mut planned) = (0, 0);
    for (name, fixture) in common::transcripts() {
        let conversation = gpt_4o(&fixture["messages"]);
        for window in WINDOWS {
            let budget = Budget::new(window, 0);
            for sync in [true, false] {
                let mut sent = conversation.clone();
                let report = if sync {
                    manager.compact(&mut sent, budget)
                } else {
                    pollster::block_on(manager.compact_with_summary(&mut sent, budget))
                };
                // A fresh counter: nothing memoized from the engine's counts.
                let fresh = ExactCounter::new(Encoding::O200kBase).unwrap();
                let exact = fresh.request(&sent);
                assert_eq!(
                    report.tokens_after, exact,
                    "{name} in {window} (sync {sync})"
                );
                if report.fits {
                    assert!(exact <= budget.effective(), "{name} in {window}: {exact}");
                    fitted += 1;
                }
                if report.estimated_messages == conversation.messages.len() {
                    planned += 1;
                }
            }
        }
    }
    eprintln!("{fitted} of 100 fit, {planned} planned with the prior");
    // Most fixtures fit at most windows, and the large ones were planned with the prior.
    assert_eq!(fitted, 100, "{fitted} of 100 fit");
    assert!(planned >= 40, "{planned} of 100 planned with the prior");
}
