//! The offline summarizer on the real transcripts of `fixtures/` (vendored in the repository): the files an agent
//! worked on must survive a tenfold compaction.
// Helpers beside the tests unwrap what a test would: a panic is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use serde_json::{Value, json};

use common::offline::{run, tokens};
use context_cascade::estimate::Estimator;
use context_cascade::summarizer::{SummaryRequest, split_sections};

const FIXTURES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../fixtures/transcripts");

/// Summarizes a fixture transcript within `max_tokens` (or a tenth of its size when
/// `None`) and returns (file paths of tool-call arguments kept in section 3, all of
/// them, the summary).
fn fixture_paths_kept(name: &str, max_tokens: Option<u64>) -> (usize, usize, String) {
    let bytes = std::fs::read(format!("{FIXTURES}/{name}")).unwrap();
    let fixture: Value = serde_json::from_slice(&bytes).unwrap();
    let body = json!({"model": "gpt-4o", "messages": fixture["messages"].clone()});
    let conversation = context_cascade::format::parse(body.to_string().as_bytes(), None).unwrap();
    let mut arg_paths: Vec<String> = Vec::new();
    for call in conversation.messages.iter().flat_map(|m| m.tool_calls()) {
        let args = call.arguments_value().unwrap_or(Value::Null);
        for key in ["file_path", "path", "notebook_path", "filename"] {
            if let Some(p) = args.get(key).and_then(Value::as_str) {
                if !arg_paths.iter().any(|q| q == p) {
                    arg_paths.push(p.to_owned());
                }
            }
        }
    }
    let estimator = Estimator::default();
    let max = max_tokens.unwrap_or(estimator.tokens(&conversation) / 10);
    let req = SummaryRequest::summarize(conversation.messages, max);
    let summary = run(&req).unwrap();
    assert!(tokens(&estimator, &summary) <= max, "{name}");
    let files = split_sections(&summary)[2].join("\n");
    let kept = arg_paths
        .iter()
        .filter(|p| files.contains(&format!("`{p}`")))
        .count();
    (kept, arg_paths.len(), summary)
}

#[test]
fn fixture_file_paths_survive() {
    let name = "claude-code__spotter__4d5611e5-main.json";
    for max in [None, Some(2_500), Some(1_200)] {
        let (kept, total, summary) = fixture_paths_kept(name, max);
        println!("{name} max {max:?}: {kept}/{total} tool-argument paths in the summary");
        assert!(total >= 5);
        assert!(kept * 10 >= total * 9, "{kept}/{total}\n{summary}");
    }
}

#[test]
fn every_fixture_keeps_its_paths_at_a_tenth_of_its_size() {
    let names: Vec<String> = (common::transcript_paths().iter())
        .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    assert!(names.len() >= 5);
    for name in &names {
        let (kept, total, summary) = fixture_paths_kept(name, None);
        println!("{name}: {kept}/{total} tool-argument paths at 10x");
        assert!(kept * 10 >= total * 9, "{name}: {kept}/{total}\n{summary}");
        assert_eq!(
            summary,
            fixture_paths_kept(name, None).2,
            "{name}: deterministic"
        );
    }
}
