//! Strategies ④ and ⑤ with scripted summarizers: a summarizer that fails, times out,
//! returns nothing, returns more than it replaces or is cut off gives the right level of ⑤;
//! an earlier summary is handed over as the previous summary; pins survive every level
//! (chunked input: `chunking.rs`). Every output keeps SPEC.md's invariants.

#![allow(clippy::unwrap_used, clippy::expect_used, unreachable_pub)] // test code: a failure is a test failure

mod common;

use common::degraded::{
    MODEL, WINDOW, compact, mentions, notice_markers, parse, recovery_steps, session_messages,
    sessions, small_sessions, summaries,
};
use common::scripted::{FAULTS, SummaryAnswer, all_text, faulty, nine_sections};
use context_cascade::SUMMARY_PREFIX;
use context_cascade::summarizer::{SummaryError, SummaryRequest};
use context_cascade::{Block, CascadeConfig, ContextManager, Role, Strategy};
use serde_json::json;

#[test]
fn a_clean_summary_is_not_degraded() {
    for original in small_sessions() {
        let outcome = compact(&original, WINDOW, |_, _| Ok(nine_sections("CLEAN")));
        let format = original.format.as_str();
        assert_eq!(
            recovery_steps(&outcome.report),
            [(Strategy::Summarize, Some(1), None)],
            "{format}"
        );
        assert!(!outcome.report.degraded, "{format}");
        assert_eq!(outcome.requests.len(), 1, "{format}");
        assert_eq!(
            summaries(&outcome.output),
            [format!("{SUMMARY_PREFIX}\n{}", nine_sections("CLEAN"))],
            "{format}"
        );
        // The summarizer saw the tool outputs it summarizes (④ is not level 2).
        assert!(
            outcome.requests[0]
                .messages()
                .iter()
                .any(|m| m.tool_results().next().is_some()),
            "{format}"
        );
    }
}

#[test]
fn a_fault_then_a_summary_of_the_small_messages_is_level_2() {
    let omitted = regex::Regex::new(
        r"^\[large (user|assistant|tool) message \(~\d+ tokens\) omitted from summary\]$",
    )
    .unwrap();
    for fault in FAULTS {
        for original in small_sessions() {
            let what = format!("{fault:?}, {}", original.format.as_str());
            let outcome = compact(&original, WINDOW, move |i, request| {
                if i == 0 {
                    faulty(fault, request)
                } else {
                    Ok(nine_sections("SMALL"))
                }
            });
            assert_eq!(
                recovery_steps(&outcome.report),
                [(Strategy::Degrade, Some(1), Some(2))],
                "{what}"
            );
            assert!(outcome.report.degraded, "{what}");
            assert_eq!(outcome.requests.len(), 2, "{what}");
            assert_eq!(
                summaries(&outcome.output),
                [format!("{SUMMARY_PREFIX}\n{}", nine_sections("SMALL"))],
                "{what}"
            );
            // The second request left out every tool output and the pasted log, each as
            // its notice.
            let small = &outcome.requests[1];
            assert!(
                small
                    .messages()
                    .iter()
                    .all(|m| m.tool_results().next().is_none()),
                "{what}"
            );
            let notices: Vec<String> = small
                .messages()
                .iter()
                .map(|m| m.text_content())
                .filter(|t| t.starts_with("[large "))
                .collect();
            assert!(
                notices.iter().all(|t| omitted.is_match(t)),
                "{what}: {notices:?}"
            );
            assert!(
                notices.iter().any(|t| t.starts_with("[large user message")),
                "{what}: the pasted log is over half the window: {notices:?}"
            );
            let tool_outputs = outcome.requests[0]
                .messages()
                .iter()
                .filter(|m| m.tool_results().next().is_some())
                .count();
            let tool_notices = notices
                .iter()
                .filter(|t| t.starts_with("[large tool message"))
                .count();
            // One notice per message holding outputs (Anthropic carries parallel results in
            // one user message, OpenAI in one tool message each).
            assert_eq!(tool_notices, tool_outputs, "{what}");
            assert!(!all_text(small).contains("ticket 0: checked"), "{what}");
            assert!(!mentions(&outcome.output.messages, "OVERSIZED"));
        }
    }
}

#[test]
fn faults_everywhere_leave_the_bare_notice() {
    for fault in FAULTS {
        for original in small_sessions() {
            let what = format!("{fault:?}, {}", original.format.as_str());
            let outcome = compact(&original, WINDOW, move |_, request| faulty(fault, request));
            assert_eq!(
                recovery_steps(&outcome.report),
                [(Strategy::Degrade, Some(1), Some(3))],
                "{what}"
            );
            assert!(outcome.report.degraded, "{what}");
            assert!(summaries(&outcome.output).is_empty(), "{what}");
            // One notice stands for the messages removed, exactly as SPEC.md writes it.
            let removed = original.messages.len() - (outcome.output.messages.len() - 1);
            let notice = format!(
                "[context compacted: {removed} earlier messages removed; summary unavailable]"
            );
            let notices: Vec<String> = notice_markers(&outcome.output);
            assert_eq!(notices, [notice], "{what}");
            let step = outcome.report.steps.last().unwrap();
            assert_eq!(step.messages_removed, removed, "{what}");
            assert_eq!(step.messages_added, 1, "{what}");
            // ④ then level 2: two calls, and nothing either answered went in.
            assert_eq!(outcome.requests.len(), 2, "{what}");
            assert!(!mentions(&outcome.output.messages, "OVERSIZED"));
        }
    }
}

#[test]
fn a_previous_summary_is_handed_over_not_summarized_again() {
    for original in sessions(10, 800, 5_000, true) {
        let format = original.format.as_str();
        let outcome = compact(&original, WINDOW, |_, _| Ok(nine_sections("NEW")));
        assert_eq!(outcome.requests.len(), 1, "{format}");
        let request = &outcome.requests[0];
        assert_eq!(
            request.previous_summary(),
            Some("## 1. User intent and goals\n- OLD-SUMMARY: fix the parser"),
            "{format}"
        );
        assert!(
            !mentions(request.messages(), "OLD-SUMMARY"),
            "{format}: the earlier summary went in as a message"
        );
        // The new summary replaces the old one.
        assert_eq!(
            summaries(&outcome.output),
            [format!("{SUMMARY_PREFIX}\n{}", nine_sections("NEW"))],
            "{format}"
        );
        assert!(!outcome.report.degraded);
    }
}

#[test]
fn level_2_hands_over_the_previous_summary_too() {
    for original in sessions(10, 800, 5_000, true) {
        let format = original.format.as_str();
        let outcome = compact(&original, WINDOW, |i, _| {
            if i == 0 {
                Err(SummaryError::Timeout)
            } else {
                Ok(nine_sections("SMALL"))
            }
        });
        assert_eq!(outcome.requests.len(), 2, "{format}");
        for request in &outcome.requests {
            assert!(
                request
                    .previous_summary()
                    .is_some_and(|p| p.contains("OLD-SUMMARY")),
                "{format}"
            );
            assert!(!mentions(request.messages(), "OLD-SUMMARY"), "{format}");
        }
        assert_eq!(
            recovery_steps(&outcome.report),
            [(Strategy::Degrade, Some(1), Some(2))]
        );
    }
}

#[test]
fn the_omitted_notice_counts_with_the_estimate() {
    // Level 2 stands a large message in as `[large <role> message (~N tokens) …]` with N
    // its estimate at the manager's scale.
    let original = &small_sessions()[0];
    let outcome = compact(original, WINDOW, |i, _| {
        if i == 0 {
            Err(SummaryError::Empty)
        } else {
            Ok(nine_sections("SMALL"))
        }
    });
    let manager = ContextManager::new(CascadeConfig::default());
    let estimator = manager.estimator(MODEL);
    let log = original
        .messages
        .iter()
        .find(|m| m.role() == Role::User && m.text_content().starts_with("pasted log"))
        .unwrap();
    let expected = format!(
        "[large user message (~{} tokens) omitted from summary]",
        estimator.message_tokens(log)
    );
    let small = &outcome.requests[1];
    assert!(
        small
            .messages()
            .iter()
            .any(|m| m.text_content() == expected),
        "{expected} not among {:?}",
        small
            .messages()
            .iter()
            .map(|m| m.text_content())
            .filter(|t| t.starts_with('['))
            .collect::<Vec<_>>()
    );
    assert!(small.messages().iter().all(|m| {
        m.blocks()
            .iter()
            .all(|b| !matches!(b, Block::ToolResult(_)))
    }));
}

#[test]
fn the_bare_notice_counts_what_earlier_compactions_removed() {
    // An earlier ③ left its notice in the middle: the new notice says how many went in all.
    let mut messages = session_messages(10, 800, 5_000, false);
    messages.insert(
        2,
        json!({"role": "user", "content": "[context compacted: 5 earlier messages removed]"}),
    );
    messages.insert(3, json!({"role": "assistant", "content": "Noted."}));
    let openai = parse(&json!({"model": MODEL, "messages": messages}));
    for original in [openai, parse(&common::to_anthropic(&messages))] {
        let what = original.format.as_str();
        let outcome = compact(&original, WINDOW, |_, _| Err(SummaryError::Timeout));
        // Everything gone but the new notice, less the old notice itself, plus its five.
        let removed_now = original.messages.len() - (outcome.output.messages.len() - 1) - 1;
        let notices: Vec<String> = notice_markers(&outcome.output);
        assert_eq!(
            notices,
            [format!(
                "[context compacted: {} earlier messages removed; summary unavailable]",
                removed_now + 5
            )],
            "{what}"
        );
        // The old notice is no message to summarize either.
        assert!(
            outcome.requests[0]
                .messages()
                .iter()
                .all(|m| !m.text_content().starts_with("[context compacted")),
            "{what}"
        );
    }
}

#[test]
fn pins_and_remember_requests_survive_every_level() {
    let mut messages = session_messages(10, 800, 5_000, false);
    messages.insert(
        2,
        json!({"role": "user", "content": "Please remember: only ever run the tests with --release."}),
    );
    messages.insert(3, json!({"role": "assistant", "content": "Noted."}));
    let openai = parse(&json!({"model": MODEL, "messages": messages}));
    for mut original in [openai, parse(&common::to_anthropic(&messages))] {
        let what = original.format.as_str();
        // Pin a plain user message in the middle of the history.
        let middle = (original.messages.iter())
            .position(|m| m.text_content().starts_with("user 5:"))
            .unwrap();
        original.messages[middle].pin();
        type Script = fn(usize, &SummaryRequest) -> SummaryAnswer;
        // (strategy, ⑤'s level): every one of them runs in attempt 1.
        let scripts: [(Script, (Strategy, Option<u8>)); 3] = [
            (
                |_, _| Ok(nine_sections("CLEAN")),
                (Strategy::Summarize, None),
            ),
            (
                |i, _| match i {
                    0 => Err(SummaryError::Truncated),
                    _ => Ok(nine_sections("SMALL")),
                },
                (Strategy::Degrade, Some(2)),
            ),
            (
                |_, _| Err(SummaryError::Timeout),
                (Strategy::Degrade, Some(3)),
            ),
        ];
        for (script, (strategy, level)) in scripts {
            // `compact` checks invariant 1: system, first user, pinned (the remember request
            // included) and current messages are all there, unchanged.
            let outcome = compact(&original, WINDOW, script);
            assert_eq!(
                recovery_steps(&outcome.report),
                [(strategy, Some(1), level)],
                "{what}"
            );
            let texts: Vec<String> = (outcome.output.messages.iter())
                .map(|m| m.text_content())
                .collect();
            assert!(texts.iter().any(|t| t.starts_with("user 5:")), "{what}");
            assert!(texts.iter().any(|t| t.contains("--release")), "{what}");
            // The pinned messages stand for themselves: no summary was asked to cover them.
            for request in &outcome.requests {
                assert!(!all_text(request).contains("--release"), "{what}");
            }
        }
    }
}
