//! Test helpers shared by the integration tests: the fixtures and their Anthropic form.
// Helpers, not tests: they unwrap what a test would unwrap, and each test crate uses a part.
#![allow(dead_code, unreachable_pub, clippy::unwrap_used, clippy::expect_used)]

pub mod degraded;
pub mod invariants;
pub mod offline;
pub mod scripted;
pub mod sessions;
mod to_anthropic;

pub use to_anthropic::to_anthropic;

use context_cascade::Format;
use context_cascade::format::{self, WriteOptions};
use serde_json::{Value, json};

/// `fixtures/` at the repository root (vendored, with their sources and licenses).
pub fn fixtures_dir() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures")
}

/// The transcript fixtures' files (`fixtures/transcripts/*.json`), sorted.
pub fn transcript_paths() -> Vec<std::path::PathBuf> {
    let dir = fixtures_dir().join("transcripts");
    let mut entries: Vec<_> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("fixtures at {}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    entries.sort();
    entries
}

/// Every transcript fixture: (file stem, the whole file as JSON).
pub fn transcripts() -> Vec<(String, Value)> {
    let mut out = Vec::new();
    for path in transcript_paths() {
        let text = std::fs::read_to_string(&path).unwrap();
        let stem = path.file_stem().unwrap().to_string_lossy().into_owned();
        out.push((stem, serde_json::from_str(&text).unwrap()));
    }
    assert_eq!(out.len(), 10, "expected the ten transcript fixtures");
    out
}

/// Parses `value` (its format detected, which must be `expected`), writes it back, checks
/// the bytes are the same and returns what was written.
pub fn round_trip(value: &Value, expected: Format) -> Value {
    let bytes = serde_json::to_vec(value).unwrap();
    let conversation = format::parse(&bytes, None).unwrap();
    assert_eq!(conversation.format, expected);
    let out = format::to_vec(&conversation, WriteOptions::default()).unwrap();
    assert_eq!(
        String::from_utf8(out.clone()).unwrap(),
        String::from_utf8(bytes).unwrap(),
        "round trip changed the bytes"
    );
    serde_json::from_slice(&out).unwrap()
}

/// How many cases a property test runs: `PROPTEST_CASES`, or `default`.
pub fn proptest_cases(default: u32) -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// An OpenAI request body made from a fixture's messages.
pub fn openai_body(fixture: &Value) -> Value {
    json!({"model": "gpt-4o", "messages": fixture["messages"].clone(), "max_tokens": 1024})
}
