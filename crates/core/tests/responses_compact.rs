//! The cascade on Responses bodies: a long Codex-like session compacted at small windows
//! comes out as a valid Responses body — every call with its one output after it, every
//! reasoning item byte-identical and still right before the item it preceded, the
//! instructions, the opening messages and the last item kept — that fits, and that a second
//! compaction leaves as it is.

#![allow(clippy::unwrap_used, clippy::expect_used, unreachable_pub)] // test code: a failure is a test failure

mod responses_common;

use context_cascade::format::{self, WriteOptions};
use context_cascade::{Budget, CascadeConfig, ContextManager, Format, Report, Strategy};
use responses_common::{check_pairs, check_reasoning, generated_session, input};
use serde_json::Value;

fn compact(manager: &ContextManager, body: &[u8], budget: Budget) -> (Vec<u8>, Report, u64) {
    let mut conversation = format::parse(body, None).unwrap();
    assert_eq!(conversation.format, Format::Responses);
    let report = pollster::block_on(manager.compact_with_summary(&mut conversation, budget));
    let estimate = manager.estimate(&conversation);
    let options = WriteOptions {
        strip_pins: true,
        pretty: false,
    };
    (
        format::to_vec(&conversation, options).unwrap(),
        report,
        estimate,
    )
}

#[test]
fn a_long_codex_session_compacts_into_a_valid_body_that_fits() {
    let manager = ContextManager::new(CascadeConfig::default());
    let original = generated_session(60, 3_000, 7);
    let bytes = serde_json::to_vec(&original).unwrap();
    let full = manager.estimate(&format::parse(&bytes, None).unwrap());
    let items = input(&original);
    check_pairs(items).unwrap();
    for window in [2_500, 4_000, 6_000, 12_000, 24_000] {
        assert!(full > 2 * window, "the session must be well over {window}");
        let budget = Budget::new(window, 0);
        let (out_bytes, report, estimate) = compact(&manager, &bytes, budget);
        let out: Value = serde_json::from_slice(&out_bytes).unwrap();
        let out_items = input(&out);
        assert!(report.fits, "{window}: {report:?}");
        assert!(estimate <= budget.effective(), "{window}: {estimate}");
        assert_ne!(out_bytes, bytes, "{window}: nothing compacted");
        check_pairs(out_items).unwrap_or_else(|e| panic!("{window}: {e}"));
        let reasoning =
            check_reasoning(items, out_items).unwrap_or_else(|e| panic!("{window}: {e}"));
        assert!(
            reasoning > 0,
            "{window}: the recent turns keep their reasoning"
        );
        assert_eq!(out["instructions"], original["instructions"], "{window}");
        assert_eq!(out_items[..3], items[..3], "{window}: the opening messages");
        assert_eq!(out_items.last(), items.last(), "{window}: the last item");
        for key in ["tools", "include", "reasoning", "prompt_cache_key", "store"] {
            assert_eq!(out[key], original[key], "{window}: {key}");
        }
        // The same body again, with the same budget: nothing changes.
        let (again, _, _) = compact(&manager, &out_bytes, budget);
        assert_eq!(
            String::from_utf8(again).unwrap(),
            String::from_utf8(out_bytes).unwrap(),
            "{window}: a second compaction changed the body"
        );
    }
}

#[test]
fn the_output_reserve_comes_from_max_output_tokens() {
    let manager = ContextManager::new(CascadeConfig::default());
    let mut original = generated_session(30, 2_000, 11);
    original["max_output_tokens"] = Value::from(4_000);
    let bytes = serde_json::to_vec(&original).unwrap();
    let conversation = format::parse(&bytes, None).unwrap();
    let reserve = conversation.output_reserve();
    assert_eq!(reserve, 4_000);
    let budget = Budget::new(14_000, reserve);
    let (out_bytes, report, estimate) = compact(&manager, &bytes, budget);
    assert!(report.fits);
    assert!(estimate <= 10_000);
    let out: Value = serde_json::from_slice(&out_bytes).unwrap();
    check_pairs(input(&out)).unwrap();
    assert_eq!(out["max_output_tokens"], 4_000);
}

#[test]
fn a_session_under_the_window_comes_out_unchanged() {
    let manager = ContextManager::new(CascadeConfig::default());
    let original = generated_session(5, 500, 3);
    let bytes = serde_json::to_vec(&original).unwrap();
    let (out, report, _) = compact(&manager, &bytes, Budget::new(200_000, 0));
    assert!(report.steps.is_empty());
    assert_eq!(out, bytes);
}

#[test]
fn every_recovery_attempt_leaves_a_valid_body() {
    let manager = ContextManager::new(CascadeConfig::default());
    let original = generated_session(40, 3_000, 5);
    let items = input(&original);
    let conversation = format::parse_value(original.clone(), None).unwrap();
    let budget = Budget::new(8_000, 0);
    for attempt in 1..=4 {
        let mut c = conversation.clone();
        let mut report = Report {
            format: context_cascade::Format::Responses,
            window: budget.window,
            reserve: 0,
            tokens_before: 0,
            tokens_after: 0,
            messages_before: 0,
            messages_after: 0,
            steps: Vec::new(),
            fits: false,
            degraded: false,
            calls: 0,
            overflows: 0,
            token_scale: 1.0,
            first_changed: None,
            uncached_tokens: 0,
            reason: None,
            estimated_messages: 0,
        };
        pollster::block_on(manager.recover(&mut c, budget, attempt, &mut report));
        assert!(!report.steps.is_empty(), "attempt {attempt}: nothing done");
        let bytes = format::to_vec(&c, WriteOptions::default()).unwrap();
        let out: Value = serde_json::from_slice(&bytes).unwrap();
        let reparsed = format::parse(&bytes, None).unwrap();
        assert_eq!(reparsed.format, Format::Responses);
        let out_items = input(&out);
        check_pairs(out_items).unwrap_or_else(|e| panic!("attempt {attempt}: {e}"));
        check_reasoning(items, out_items).unwrap_or_else(|e| panic!("attempt {attempt}: {e}"));
        assert_eq!(out["instructions"], original["instructions"]);
        assert_eq!(out_items[..3], items[..3], "attempt {attempt}");
        assert_eq!(out_items.last(), items.last(), "attempt {attempt}");
        // ③ on the first attempt, ④ on the next two, ⑤ last: each writes valid items.
        let expected = [
            Strategy::PruneHistory,
            Strategy::Summarize,
            Strategy::Summarize,
            Strategy::Degrade,
        ][attempt - 1];
        assert!(
            report.steps.iter().any(|s| s.strategy == expected),
            "attempt {attempt}: {:?}",
            report.steps
        );
    }
}
