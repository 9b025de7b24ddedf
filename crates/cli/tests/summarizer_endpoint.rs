//! `cascade compact --summarizer URL`: the LLM summarizer against a scripted endpoint on
//! loopback, and the degradation when the endpoint is down.

#![allow(clippy::unwrap_used, clippy::expect_used, unreachable_pub)] // test code: a failure is a test failure

mod common;

use std::path::PathBuf;
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};

use cascade_test_support::upstream::{self, Upstream};
use context_cascade::summarizer::section_heading;
use serde_json::{Value, json};

const BIN: &str = env!("CARGO_BIN_EXE_cascade");

/// Starts the scripted endpoint on a free loopback port; returns its URL and a hit counter.
fn start_endpoint() -> Upstream {
    upstream::spawn(|_, request| {
        if request.path != "/v1/chat/completions" {
            return upstream::not_found();
        }
        let text = cascade_test_support::summary_text(section_heading, "scripted summary line");
        upstream::json(200, upstream::openai_completion(&text, 1000))
    })
}

/// A conversation of `common::session_messages`, written to a file.
fn session(id: &str) -> PathBuf {
    let body = json!({"model": "gpt-4o", "messages": common::session_messages()});
    let path = std::env::temp_dir().join(format!("cascade-summarizer-session-{id}.json"));
    std::fs::write(&path, body.to_string()).unwrap();
    path
}

fn compact(summarizer: &str) -> (std::process::Output, String, Value) {
    let dir = std::env::temp_dir();
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    let id = format!(
        "{}-{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::SeqCst)
    );
    let out = dir.join(format!("cascade-summarizer-{id}.json"));
    let report = dir.join(format!("cascade-summarizer-{id}-report.json"));
    let output = Command::new(BIN)
        .args([
            "compact",
            session(&id).to_str().unwrap(),
            "--window",
            "4000",
            "--summarizer",
            summarizer,
        ])
        .args([
            "--summarizer-model",
            "scripted",
            "-o",
            out.to_str().unwrap(),
            "--report",
            report.to_str().unwrap(),
        ])
        .env_remove("RUST_LOG")
        .output()
        .unwrap();
    let body = std::fs::read_to_string(&out).unwrap_or_default();
    let report =
        serde_json::from_slice(&std::fs::read(&report).unwrap_or_default()).unwrap_or(Value::Null);
    (output, body, report)
}

#[test]
fn an_endpoint_writes_the_summary() {
    let endpoint = start_endpoint();
    let (output, body, report) = compact(&endpoint.base);
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(endpoint.hits() >= 1, "the endpoint was never asked");
    assert!(
        body.contains("[context summary]"),
        "no summary in the output"
    );
    assert!(
        body.contains("scripted summary line 3"),
        "the endpoint's summary is not the one written"
    );
    let strategies: Vec<&str> = report["steps"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|s| s["strategy"].as_str())
        .collect();
    assert!(strategies.contains(&"summarize"), "{strategies:?}");
    assert_eq!(report["degraded"], json!(false));
}

#[test]
fn a_dead_endpoint_degrades_instead_of_failing() {
    let (output, body, report) = compact(&upstream::refused_base());
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert_eq!(report["degraded"], json!(true), "{report}");
    assert!(
        body.contains("summary unavailable]"),
        "no bare notice in the output"
    );
}

#[test]
fn a_bad_summarizer_url_is_one_line_and_exit_2() {
    let (output, _, _) = compact("not a url");
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(stderr.trim().lines().count(), 1, "{stderr}");
    assert!(
        stderr.starts_with("cascade: --summarizer: not a url:"),
        "{stderr}"
    );
}
