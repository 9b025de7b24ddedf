//! Issue 15, "the cache-friendly default": replaying the example session at 64K with the
//! default configuration, ② never fires on more than two consecutive calls and at least
//! 90% of the calls extend the previous request (the provider's cached prefix survives).
//! The table over every fixture and window is `cargo run --release -p cascade-bench --bin
//! cache_rules` (docs/benchmarks.md).
// Helpers beside the tests unwrap what a test would: a panic is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use context_cascade::replay::{Replay, replay};
use context_cascade::{Budget, CascadeConfig, ContextManager, Conversation, Strategy, format};

fn example_session() -> Conversation {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../examples/claude-code-session.json");
    let bytes = std::fs::read(&path).unwrap();
    format::parse(&bytes, None).unwrap()
}

fn replayed(config: CascadeConfig, window: u64) -> Replay {
    let session = example_session();
    let manager = ContextManager::new(config);
    let budget = Budget::new(window, session.output_reserve());
    pollster::block_on(replay(&session, &manager, budget, |_, _| {}))
}

/// The longest run of consecutive calls on which ② fired.
fn longest_compaction_run(run: &Replay) -> usize {
    let mut longest = 0;
    let mut current = 0;
    for call in &run.calls {
        let fired = (call.report.steps.iter()).any(|s| s.strategy == Strategy::CompactToolResults);
        current = if fired { current + 1 } else { 0 };
        longest = longest.max(current);
    }
    longest
}

#[test]
fn the_default_keeps_the_example_sessions_cache_at_64k() {
    let run = replayed(CascadeConfig::default(), 64_000);
    let longest = longest_compaction_run(&run);
    let share = run.stability.share();
    eprintln!(
        "example session at 64K: {} calls, ② at most {longest} calls in a row, {:.1}% extend, {} tokens re-billed",
        run.calls.len(),
        share * 100.0,
        run.rebilled_tokens
    );
    assert!(longest <= 2, "② fired on {longest} consecutive calls");
    assert!(share >= 0.90, "only {:.1}% of calls extend", share * 100.0);
    assert!(run.calls.iter().all(|c| c.report.fits));
}

#[test]
fn a_reports_uncached_tokens_are_what_the_replay_counts_as_re_billed() {
    let run = replayed(CascadeConfig::default(), 64_000);
    let mut broken = 0;
    for call in &run.calls {
        let report = &call.report;
        if report.steps.is_empty() {
            assert_eq!((report.first_changed, report.uncached_tokens), (None, 0));
        }
        if call.extends_previous == Some(false) {
            // The change lies in what was sent before: the report and the replay agree.
            broken += 1;
            assert!(report.first_changed.is_some(), "call {}", call.number);
            assert_eq!(
                report.uncached_tokens, call.rebilled_tokens,
                "call {}",
                call.number
            );
        } else {
            assert_eq!(call.rebilled_tokens, 0);
        }
    }
    assert!(broken > 0);
    let sum: u64 = run.calls.iter().map(|c| c.rebilled_tokens).sum();
    assert_eq!(sum, run.rebilled_tokens);
}
