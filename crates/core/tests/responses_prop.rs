//! Property test on Responses bodies: generated Codex-like sessions of any length, any
//! output size, at any window and reserve, keep SPEC.md's invariants through the whole
//! cascade, and come out as valid Responses bodies (pairs, reasoning beside its call).
//! `PROPTEST_CASES` sets the number of cases (default 24).

#![allow(clippy::unwrap_used, clippy::expect_used, unreachable_pub)] // test code: a failure is a test failure

mod common;
mod responses_common;

use common::invariants::{self, Run};
use context_cascade::format::{self, WriteOptions};
use context_cascade::{Budget, CascadeConfig, ContextManager, Format};
use proptest::prelude::*;
use responses_common::{check_pairs, check_reasoning, generated_session, input};
use serde_json::Value;

proptest! {
    #![proptest_config(ProptestConfig::with_cases(common::proptest_cases(24)))]

    #[test]
    fn responses_bodies_keep_the_invariants(
        turns in 1usize..50,
        output_chars in 100usize..6_000,
        seed in 0u64..1_000,
        window in 1_500u64..40_000,
        reserve in prop_oneof![Just(0u64), 100u64..1_000],
    ) {
        let mut body = generated_session(turns, output_chars, seed);
        if reserve > 0 {
            body["max_output_tokens"] = Value::from(reserve);
        }
        let original = format::parse_value(body.clone(), None).unwrap();
        prop_assert_eq!(original.format, Format::Responses);
        let manager = ContextManager::new(CascadeConfig::default());
        let budget = Budget::new(window, original.output_reserve());
        let (output, report) = invariants::compact(&manager, &original, budget);
        let run = Run::new(&manager, &original, &output, &report, budget);
        if let Err(e) = invariants::hold(&run) {
            return Err(TestCaseError::fail(e));
        }
        let bytes = format::to_vec(&output, WriteOptions { strip_pins: true, pretty: false }).unwrap();
        let written: Value = serde_json::from_slice(&bytes).unwrap();
        let (items, out_items) = (input(&body), input(&written));
        if let Err(e) = check_pairs(out_items).and_then(|_| check_reasoning(items, out_items)) {
            return Err(TestCaseError::fail(format!("{e}\nreport: {}", report.summary_line())));
        }
        prop_assert_eq!(&written["instructions"], &body["instructions"]);
        prop_assert_eq!(out_items.last(), items.last());
    }
}
