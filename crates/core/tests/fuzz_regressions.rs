//! Every input the fuzz targets (fuzz/, `scripts/fuzz.sh`) ever failed on, kept in
//! `fuzz/regressions/<target>/` and checked here with the target's own property, so that a
//! fixed finding stays fixed without nightly or cargo-fuzz.

#![allow(clippy::unwrap_used, clippy::expect_used, unreachable_pub)] // test code: a failure is a test failure

use std::path::{Path, PathBuf};

/// The parse targets' property, shared with them: what parses writes back as the same JSON,
/// and a second round trip gives the same bytes.
#[path = "../../../fuzz/round_trip.rs"]
mod round_trip;

use context_cascade::format::{self, WriteOptions};
use context_cascade::{Budget, CascadeConfig, ContextManager, Format, classify};

fn inputs(target: &str) -> Vec<(PathBuf, Vec<u8>)> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../fuzz/regressions")
        .join(target);
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|entry| entry.unwrap().path())
        .filter(|path| {
            path.is_file() && !path.file_name().unwrap().to_string_lossy().starts_with('.')
        })
        .collect();
    files.sort();
    files
        .into_iter()
        .map(|path| {
            let bytes = std::fs::read(&path).unwrap();
            (path, bytes)
        })
        .collect()
}

#[test]
fn openai_parse_findings_round_trip() {
    let found = inputs("parse_openai");
    assert!(!found.is_empty());
    for (path, data) in found {
        eprintln!("{}", path.display());
        round_trip::check(&data, Format::OpenAi);
    }
}

#[test]
fn anthropic_parse_findings_round_trip() {
    let found = inputs("parse_anthropic");
    assert!(!found.is_empty());
    for (path, data) in found {
        eprintln!("{}", path.display());
        round_trip::check(&data, Format::Anthropic);
    }
}

#[test]
fn classify_findings_do_not_panic_or_claim_a_zero_limit() {
    for (path, data) in inputs("classify") {
        let (status, body) = match data.as_slice() {
            [a, b, rest @ ..] => (Some(u16::from_le_bytes([*a, *b]) % 600), rest),
            _ => (None, data.as_slice()),
        };
        let body = String::from_utf8_lossy(body);
        if let Some(overflow) = classify(status, &body) {
            assert_ne!(overflow.limit_tokens, Some(0), "{}", path.display());
        }
    }
}

#[test]
fn prepare_findings_fit_and_are_idempotent() {
    for (path, data) in inputs("prepare") {
        let [a, b, body @ ..] = data.as_slice() else {
            continue;
        };
        let window = 256 + u64::from(u16::from_le_bytes([*a, *b]) & 0x7fff);
        let Ok(mut conversation) = format::parse(body, None) else {
            continue;
        };
        let budget = Budget::new(window, conversation.output_reserve().min(window / 2));
        let manager = ContextManager::new(CascadeConfig::default());
        let report = pollster::block_on(manager.compact_with_summary(&mut conversation, budget));
        if report.fits {
            assert!(
                manager.estimate(&conversation) <= budget.effective(),
                "{}",
                path.display()
            );
        }
        let written = format::to_vec(&conversation, WriteOptions::default()).unwrap();
        let mut again = format::parse(&written, Some(conversation.format)).unwrap();
        pollster::block_on(manager.compact_with_summary(&mut again, budget));
        let rewritten = format::to_vec(&again, WriteOptions::default()).unwrap();
        assert!(written == rewritten, "{}: not idempotent", path.display());
    }
}
