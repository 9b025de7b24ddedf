//! Test helpers shared by the integration tests: the fixtures and their Anthropic form.
// Helpers, not tests: they unwrap what a test would unwrap, and each test crate uses a part.
#![allow(dead_code, unreachable_pub, clippy::unwrap_used, clippy::expect_used)]

pub mod degraded;
pub mod invariants;
pub mod scripted;
pub mod sessions;
mod to_anthropic;

pub use to_anthropic::to_anthropic;

use serde_json::{Value, json};

/// `fixtures/` at the repository root (vendored, with their sources and licenses).
pub fn fixtures_dir() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures")
}

/// Every transcript fixture: (file stem, the whole file as JSON).
pub fn transcripts() -> Vec<(String, Value)> {
    let dir = fixtures_dir().join("transcripts");
    let mut out = Vec::new();
    let mut entries: Vec<_> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("fixtures at {}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    entries.sort();
    for path in entries {
        let text = std::fs::read_to_string(&path).unwrap();
        let stem = path.file_stem().unwrap().to_string_lossy().into_owned();
        out.push((stem, serde_json::from_str(&text).unwrap()));
    }
    assert_eq!(out.len(), 10, "expected the ten transcript fixtures");
    out
}

/// An OpenAI request body made from a fixture's messages.
pub fn openai_body(fixture: &Value) -> Value {
    json!({"model": "gpt-4o", "messages": fixture["messages"].clone(), "max_tokens": 1024})
}
