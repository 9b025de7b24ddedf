//! The fixture matrix: every fixture × formats × windows, through `compact`, `prepare` and
//! `compact_with_summary` (offline summarizer), digested byte for byte and compared with
//! `fixture_matrix.txt`. A restructuring must leave every line as it is; a change that is
//! meant to change outputs re-blesses the file (`CASCADE_BLESS=1 cargo test -p
//! context_cascade --test fixture_matrix`) and says in its commit which lines moved and why.

#![allow(clippy::unwrap_used, clippy::expect_used, unreachable_pub)] // test code: a failure is a test failure

mod common;
mod responses_common;

use std::fmt::Write as _;

use context_cascade::format::{self, WriteOptions};
use context_cascade::{Budget, CascadeConfig, ContextManager, Conversation};
use serde_json::Value;

const WINDOWS: [u64; 5] = [8_000, 16_000, 32_000, 64_000, 128_000];

fn bodies() -> Vec<(String, Value)> {
    let mut out = Vec::new();
    for (name, fixture) in common::transcripts() {
        out.push((format!("{name}.openai"), common::openai_body(&fixture)));
        let messages = fixture["messages"].as_array().unwrap();
        out.push((format!("{name}.anthropic"), common::to_anthropic(messages)));
    }
    for (name, body) in responses_common::fixtures() {
        out.push((format!("{name}.responses"), body));
    }
    for (turns, chars, seed) in [(40, 3_000, 1), (120, 6_000, 2)] {
        out.push((
            format!("generated-{turns}x{chars}.responses"),
            responses_common::generated_session(turns, chars, seed),
        ));
    }
    let example = common::fixtures_dir().join("../examples/claude-code-session.json");
    let text = std::fs::read_to_string(&example).unwrap();
    out.push((
        "claude-code-session".into(),
        serde_json::from_str(&text).unwrap(),
    ));
    out
}

fn digest(bytes: &[u8]) -> String {
    format!("{:032x}", xxhash_rust::xxh3::xxh3_128(bytes))
}

fn written(conversation: &Conversation) -> Vec<u8> {
    let options = WriteOptions {
        strip_pins: true,
        pretty: false,
    };
    format::to_vec(conversation, options).unwrap()
}

/// One line per case: `name window op output-digest report-digest tokens-after`.
fn matrix() -> String {
    let manager = ContextManager::new(CascadeConfig::default());
    let mut out = String::new();
    for (name, body) in bodies() {
        let original = format::parse(body.to_string().as_bytes(), None).unwrap();
        for window in WINDOWS {
            let budget = Budget::new(window, original.output_reserve());
            for op in ["compact", "prepare", "compact_with_summary"] {
                let mut conversation = original.clone();
                let report = match op {
                    "compact" => manager.compact(&mut conversation, budget),
                    "prepare" => pollster::block_on(manager.prepare(&mut conversation, budget)),
                    _ => {
                        pollster::block_on(manager.compact_with_summary(&mut conversation, budget))
                    }
                };
                let report_json = serde_json::to_vec(&report).unwrap();
                writeln!(
                    out,
                    "{name} {window} {op} {} {} {}",
                    digest(&written(&conversation)),
                    digest(&report_json),
                    report.tokens_after
                )
                .unwrap();
            }
        }
    }
    out
}

#[test]
fn every_case_gives_the_blessed_bytes() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixture_matrix.txt");
    let now = matrix();
    if std::env::var_os("CASCADE_BLESS").is_some() {
        std::fs::write(&path, &now).unwrap();
        return;
    }
    let blessed = std::fs::read_to_string(&path).unwrap();
    let changed: Vec<String> = (blessed.lines().zip(now.lines()))
        .filter(|(a, b)| a != b)
        .map(|(a, b)| format!("  was {a}\n  now {b}"))
        .collect();
    assert!(
        changed.is_empty() && blessed.lines().count() == now.lines().count(),
        "{} of {} cases changed (re-bless only for a change meant to alter outputs):\n{}",
        changed.len(),
        now.lines().count(),
        changed.join("\n")
    );
}
