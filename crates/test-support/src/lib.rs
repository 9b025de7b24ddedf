//! # cascade-test-support
//!
//! What the tests of cascade-llm, cascade-proxy and the `cascade` CLI share instead of
//! copying: the path of the vendored fixtures, the overflow error bodies real providers send
//! (read from `fixtures/overflow-errors.json`, not written by hand), and one scripted HTTP
//! upstream on loopback ([`upstream`]).

#![allow(clippy::unwrap_used, clippy::expect_used)] // test support: a failure is a test failure

pub mod overflow;
pub mod upstream;

use std::path::PathBuf;

pub use overflow::{OverflowKind, overflow_body, overflow_body_sized};
pub use upstream::{Recorded, Upstream};

/// The repository's `fixtures/` directory (transcripts, overflow error vectors).
pub fn fixtures_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../fixtures")
}

/// A file under `fixtures/`.
pub fn fixture(relative: &str) -> PathBuf {
    fixtures_dir().join(relative)
}

/// The nine-section summary a model would write (what the LLM summarizer accepts):
/// `heading(i)` for each section (pass `context_cascade::summarizer::section_heading`; this
/// crate does not depend on the core), then one line `- {line} {i + 1}`.
pub fn summary_text(heading: impl Fn(usize) -> String, line: &str) -> String {
    (0..9)
        .map(|i| format!("{}\n- {line} {}\n", heading(i), i + 1))
        .collect()
}
