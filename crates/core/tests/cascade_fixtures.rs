//! Every fixture × windows {8K, 32K, 128K} × both formats: the whole cascade gives a valid
//! request that fits, keeps SPEC.md's invariants, and is idempotent.

#![allow(clippy::unwrap_used, clippy::expect_used, unreachable_pub)] // test code: a failure is a test failure

mod common;

use common::invariants::{self, Run};
use context_cascade::format::{self, WriteOptions};
use context_cascade::{Budget, CascadeConfig, ContextManager, Conversation};
use serde_json::Value;

#[allow(clippy::unwrap_used)]
fn bodies() -> Vec<(String, Value)> {
    let mut out = Vec::new();
    for (name, fixture) in common::transcripts() {
        out.push((format!("{name} (openai)"), common::openai_body(&fixture)));
        let messages = fixture["messages"].as_array().unwrap();
        out.push((
            format!("{name} (anthropic)"),
            common::to_anthropic(messages),
        ));
    }
    out
}

#[allow(clippy::unwrap_used)]
fn parse(body: &Value) -> Conversation {
    format::parse(body.to_string().as_bytes(), None).unwrap()
}

#[test]
fn every_fixture_fits_every_window_with_the_invariants() {
    let manager = ContextManager::new(CascadeConfig::default());
    let (mut runs, mut unfit) = (0, 0);
    for (name, body) in bodies() {
        let original = parse(&body);
        for window in [8_000, 32_000, 128_000] {
            let budget = Budget::new(window, original.output_reserve());
            let (output, report) = invariants::compact(&manager, &original, budget);
            let run = Run::new(&manager, &original, &output, &report, budget);
            invariants::check(&run).unwrap_or_else(|e| panic!("{name} at {window}: {e}"));
            // The offline summarizer never fails: ⑤ only comes when there is no room left
            // for any summary, because what must stay takes (nearly) the whole budget.
            let irreducible = invariants::irreducible_tokens(&run);
            if irreducible + 400 <= budget.effective() {
                assert!(report.fits, "{name} at {window}: {:?}", report.reason);
                assert!(
                    !report.degraded,
                    "{name} at {window}: degraded: {}",
                    report.summary_line()
                );
            } else {
                unfit += 1;
            }
            invariants::idempotent(&manager, &output, budget)
                .unwrap_or_else(|e| panic!("{name} at {window}: {e}"));
            // Written back, it reads again in its format.
            let bytes = format::to_vec(
                &output,
                WriteOptions {
                    strip_pins: true,
                    pretty: false,
                },
            )
            .unwrap();
            format::parse(&bytes, Some(original.format)).unwrap_or_else(|e| panic!("{name}: {e}"));
            runs += 1;
        }
    }
    assert_eq!(runs, 60);
    eprintln!("{unfit} of {runs} runs: the irreducible part alone (nearly) fills the window");
    assert!(unfit <= 6, "{unfit} runs could not fit");
}

#[test]
fn compression_at_32k_is_reported_per_fixture() {
    let manager = ContextManager::new(CascadeConfig::default());
    for (name, fixture) in common::transcripts() {
        let original = parse(&common::openai_body(&fixture));
        let budget = Budget::new(32_000, original.output_reserve());
        let (_, report) = invariants::compact(&manager, &original, budget);
        eprintln!(
            "{name}: {} → {} tokens ({:.1}×), {} → {} messages; {}",
            report.tokens_before,
            report.tokens_after,
            report.tokens_before as f64 / report.tokens_after.max(1) as f64,
            report.messages_before,
            report.messages_after,
            report.summary_line()
        );
        assert!(report.tokens_after <= budget.effective());
    }
}
