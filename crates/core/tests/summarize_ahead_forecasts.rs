//! Several forecasts (`ContextManager::summarize_ahead` with `background.forecasts`): the
//! request that needs ④ is often the one that brings a large new tool output, whose size
//! a forecast made a turn earlier cannot know. The forecasts at the sizes that matter (up
//! to ①'s cap) cover it: that request makes no summarizer call and comes out byte for
//! byte as the synchronous run's.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failure is a test failure

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use context_cascade::format::{self, WriteOptions};
use context_cascade::summarizer::{Summarizer, SummaryError, SummaryRequest};
use context_cascade::{
    BoxFuture, Budget, CascadeConfig, ContextManager, Conversation, PreparedSummaries, Strategy,
};
use serde_json::{Value, json};

const BUDGET: Budget = Budget {
    window: 10_000,
    reserve: 0,
};

/// A deterministic summarizer (the same answer for the same request, whatever its limit),
/// counting its calls.
#[derive(Default)]
struct Scripted(AtomicUsize);

impl Scripted {
    fn calls(&self) -> usize {
        self.0.load(Ordering::SeqCst)
    }
}

impl Summarizer for Scripted {
    fn id(&self) -> String {
        "scripted".into()
    }

    fn summarize<'a>(
        &'a self,
        request: &'a SummaryRequest,
    ) -> BoxFuture<'a, Result<String, SummaryError>> {
        self.0.fetch_add(1, Ordering::SeqCst);
        let answer = format!(
            "## 1. User intent and goals\n- audit, {} messages summarized",
            request.messages().len()
        );
        Box::pin(std::future::ready(Ok(answer)))
    }
}

/// Exchange `i`: a call of a tool ② may not compact and its result of `lines` lines.
fn exchange(i: usize, lines: usize) -> [Value; 2] {
    let id = format!("call_{i:04}");
    let output = format!("record {i:04}: status nominal, checksum {:08}\n", i * 7919).repeat(lines);
    [
        json!({"role": "assistant", "content": null, "tool_calls": [{"id": id, "type": "function",
            "function": {"name": "lookup", "arguments": format!("{{\"record\":{i:04}}}")}}]}),
        json!({"role": "tool", "tool_call_id": id, "content": output}),
    ]
}

/// A task, `exchanges` small exchanges, then one more whose output has `last` lines.
fn session(exchanges: usize, last: Option<usize>) -> Conversation {
    let mut messages = vec![
        json!({"role": "system", "content": "You are a careful agent."}),
        json!({"role": "user", "content": "Audit these records. ".repeat(800)}),
    ];
    for i in 0..exchanges {
        messages.extend(exchange(i, 12));
    }
    if let Some(lines) = last {
        messages.extend(exchange(exchanges, lines));
    }
    let body = json!({"model": "gpt-4o", "messages": messages});
    format::parse(body.to_string().as_bytes(), None).unwrap()
}

fn bytes(conversation: &Conversation) -> Vec<u8> {
    format::to_vec(conversation, WriteOptions::default()).unwrap()
}

fn manager(forecasts: usize, summarizer: Arc<dyn Summarizer>) -> ContextManager {
    let mut config = CascadeConfig::default();
    config.background.forecasts = forecasts;
    ContextManager::new(config).with_summarizer(summarizer)
}

/// The longest session past the pre-threshold whose next exchange, shaped like its
/// latest, would not cross the preemptive one: a single forecast prepares nothing there.
fn quiet_before_a_large_output(manager: &ContextManager) -> usize {
    let config = manager.config();
    let (pre, preemptive) = (
        BUDGET.share(config.background.summary_ratio),
        BUDGET.share(config.recovery.preemptive_ratio),
    );
    let k = (1..200)
        .find(|&k| manager.estimate(&session(k, None)) > pre)
        .unwrap();
    assert!(manager.estimate(&session(k + 1, None)) <= preemptive);
    k
}

/// Prepares ahead on `now`, then runs the next request (with `last` output lines) with
/// the prepared summaries and without: (summarizer calls at request time, served, whether
/// the bytes are the same, whether ④ ran).
fn compaction_turn(forecasts: usize, last: usize) -> (usize, u64, bool, bool) {
    let inner = Arc::new(Scripted::default());
    let prepared = Arc::new(PreparedSummaries::new(inner.clone()));
    let manager = manager(forecasts, prepared.clone());
    let plain = manager_alone();
    let k = quiet_before_a_large_output(&manager);
    let now = session(k, None);
    let ahead = pollster::block_on(manager.summarize_ahead(&now, BUDGET, prepared.inner()));
    let summary = ahead.unwrap().expect("a forecast needs ④");
    assert!(summary.forecasts() >= 1 && summary.forecasts() <= forecasts.max(1));
    prepared.add(summary);
    let before = inner.calls();
    let mut with = session(k, Some(last));
    let report = pollster::block_on(manager.prepare(&mut with, BUDGET));
    let calls = inner.calls() - before;
    let mut without = session(k, Some(last));
    pollster::block_on(plain.prepare(&mut without, BUDGET));
    let summarized = (report.steps.iter()).any(|s| s.strategy == Strategy::Summarize);
    (
        calls,
        prepared.served(),
        bytes(&with) == bytes(&without),
        summarized,
    )
}

fn manager_alone() -> ContextManager {
    manager(1, Arc::new(Scripted::default()))
}

#[test]
fn a_large_new_output_finds_its_summary_prepared() {
    // 150 and 200 lines: about 0.3·E and 0.4·E, under ①'s cap (0.5·E); 400 lines: past
    // it, cut by ①. The latest exchange has 12 lines: its like would not need ④.
    for last in [150, 200, 400] {
        let (calls, served, same, summarized) = compaction_turn(4, last);
        assert!(summarized, "④ ran at {last} lines");
        assert_eq!(
            calls, 0,
            "the compaction turn asked the summarizer ({last} lines)"
        );
        assert!(served >= 1);
        assert!(
            same,
            "the bytes differ from the synchronous run's ({last} lines)"
        );
    }
}

#[test]
fn the_forecasts_are_bounded_and_deduplicated() {
    let inner = Arc::new(Scripted::default());
    let manager = manager(2, inner.clone());
    let now = session(quiet_before_a_large_output(&manager), None);
    let summary = pollster::block_on(manager.summarize_ahead(&now, BUDGET, inner.clone()))
        .unwrap()
        .unwrap();
    assert!(summary.forecasts() <= 2);
    assert_eq!(inner.calls(), summary.len());
    // Every request prepared is a distinct one: a range reached by several forecasts
    // is summarized once.
    let requests: Vec<&SummaryRequest> = summary.requests().collect();
    for (i, a) in requests.iter().enumerate() {
        for b in &requests[i + 1..] {
            assert!(a.messages() != b.messages() || a.is_merge() != b.is_merge());
        }
    }
}
