//! `cascade proxy` as a user starts it: flags, a scripted upstream on loopback, a request
//! over the window that comes back answered with the strategies in a header.

#![allow(clippy::unwrap_used, clippy::expect_used, unreachable_pub)] // test code: a failure is a test failure

use cascade_test_support::upstream::{self, Upstream};
use serde_json::{Value, json};
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};

const BIN: &str = env!("CARGO_BIN_EXE_cascade");

/// Kills the proxy when the test ends, whatever happens.
struct Running(Child);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A scripted upstream that records the bodies it receives.
async fn start_upstream() -> Upstream {
    upstream::start(|_, _| upstream::json(200, upstream::openai_completion("done", 900))).await
}

/// Starts `cascade proxy` on a free port; returns it and its base URL (read from stderr).
fn start_proxy(upstream: &str) -> (Running, String) {
    let mut child = Command::new(BIN)
        .args([
            "proxy",
            "--upstream",
            upstream,
            "--listen",
            "127.0.0.1:0",
            "--db",
            ":memory:",
            "--window",
            "4000",
        ])
        .stderr(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let stderr = child.stderr.take().unwrap();
    let running = Running(child);
    let mut line = String::new();
    BufReader::new(stderr).read_line(&mut line).unwrap();
    let url = line
        .split_whitespace()
        .find(|w| w.starts_with("http://"))
        .unwrap()
        .trim_end_matches(',')
        .to_owned();
    (running, url)
}

#[tokio::test]
async fn the_proxy_compacts_a_request_over_the_window() {
    let upstream = start_upstream().await;
    let (_proxy, url) = start_proxy(&upstream.base);
    let output = "fn main() { println!(\"hello\"); }\n".repeat(400);
    let mut messages =
        vec![json!({"role": "user", "content": "Read the sources and fix the bug."})];
    for i in 0..6 {
        let id = format!("call_{i}");
        messages.push(json!({"role": "assistant", "content": null, "tool_calls": [{"id": id, "type": "function",
            "function": {"name": "Read", "arguments": format!("{{\"file_path\":\"/src/f{i}.rs\"}}")}}]}));
        messages.push(json!({"role": "tool", "tool_call_id": id, "content": output}));
    }
    messages.push(json!({"role": "user", "content": "Now fix it."}));
    let body = json!({"model": "gpt-4o", "messages": messages});
    let response = reqwest::Client::new()
        .post(format!("{url}/v1/chat/completions"))
        .header("authorization", "Bearer sk-test")
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let applied = response
        .headers()
        .get("x-context-cascade")
        .map(|v| v.to_str().unwrap().to_owned());
    assert!(
        applied.as_deref().is_some_and(
            |h| h.contains("compact_tool_results") || h.contains("truncate_tool_result")
        ),
        "{applied:?}"
    );
    let answer: Value = response.json().await.unwrap();
    assert_eq!(answer["choices"][0]["message"]["content"], "done");
    let sent = upstream.requests().last().unwrap().body.clone();
    assert!(
        sent.to_string().len() < body.to_string().len() / 2,
        "the upstream got the request uncompacted"
    );
    assert_eq!(
        sent["messages"].as_array().unwrap().last().unwrap()["content"],
        "Now fix it."
    );
}

#[test]
fn the_proxy_needs_an_upstream() {
    let out = Command::new(BIN)
        .args(["proxy", "--db", ":memory:"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(stderr.trim().lines().count(), 1, "{stderr}");
    assert!(stderr.contains("upstream is required"), "{stderr}");
}

#[test]
fn a_proxy_that_cannot_start_exits_3_and_help_lists_the_codes() {
    // A directory is no SQLite file: the store cannot open, the proxy cannot start.
    let dir = std::env::temp_dir();
    let out = Command::new(BIN)
        .args([
            "proxy",
            "--upstream",
            "http://127.0.0.1:9",
            "--listen",
            "127.0.0.1:0",
        ])
        .args(["--db", dir.to_str().unwrap()])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{stderr}");
    let last = stderr.trim().lines().last().unwrap_or_default();
    assert!(last.starts_with("cascade: proxy: store error"), "{stderr}");
    let help = Command::new(BIN).arg("--help").output().unwrap();
    let help = String::from_utf8_lossy(&help.stdout);
    assert!(
        help.contains("Exit codes:") && help.contains("  3  the proxy"),
        "{help}"
    );
}
