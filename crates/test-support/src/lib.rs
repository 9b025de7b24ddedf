//! # cascade-test-support
//!
//! What the tests of cascade-llm, cascade-proxy and the `cascade` CLI share instead of
//! copying: the path of the vendored fixtures, the overflow error bodies real providers send
//! (read from `fixtures/overflow-errors.json`, not written by hand), and one scripted HTTP
//! upstream on loopback ([`upstream`]) with the providers' own compaction answers
//! ([`compaction`], shapes from `fixtures/provider-compaction.json`), and a generated
//! tool-reading session ([`tool_session_body`]); the scripted agent model's wire shapes
//! ([`agent`]) and its recall calls ([`agent_recall`]).

#![allow(clippy::unwrap_used, clippy::expect_used)] // test support: a failure is a test failure

pub mod agent;
pub mod agent_recall;
pub mod compaction;
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

/// An OpenAI body of a coding agent reading files: a system prompt and a request, then
/// `turns` calls of `read_file` on `src/f{i}.rs`, each answered with about `output_chars`
/// characters of code. Every call point but the first follows a tool result.
pub fn tool_session_body(turns: usize, output_chars: usize) -> serde_json::Value {
    let mut messages = vec![
        serde_json::json!({"role": "system", "content": "You are a coding agent."}),
        serde_json::json!({"role": "user", "content": "Read every file and fix the bug."}),
    ];
    for i in 0..turns {
        let id = format!("call_{i}");
        messages.push(serde_json::json!({"role": "assistant", "content": null,
            "tool_calls": [{"id": id, "type": "function", "function": {
                "name": "read_file", "arguments": format!("{{\"path\":\"src/f{i}.rs\"}}")}}]}));
        messages.push(serde_json::json!({"role": "tool", "tool_call_id": id,
            "content": format!("// file {i}\n{}", "let x = 1;\n".repeat(output_chars / 11))}));
    }
    serde_json::json!({"model": "gpt-4o", "messages": messages})
}

/// The nine-section summary a model would write (what the LLM summarizer accepts):
/// `heading(i)` for each section (pass `context_cascade::summarizer::section_heading`; this
/// crate does not depend on the core), then one line `- {line} {i + 1}`.
pub fn summary_text(heading: impl Fn(usize) -> String, line: &str) -> String {
    (0..9)
        .map(|i| format!("{}\n- {line} {}\n", heading(i), i + 1))
        .collect()
}
