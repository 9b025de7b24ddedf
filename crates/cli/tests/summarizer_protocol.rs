//! One URL, one protocol: `cascade compact` and `cascade proxy` read `--summarizer URL` and
//! `--summarizer-api` with the same parser, so a summarizer endpoint on anthropic.com is
//! spoken to in Anthropic Messages by both commands (it used to get OpenAI requests from
//! `compact` and Anthropic ones from `proxy`).
//!
//! The fake summarizer below answers only the Anthropic shape (`POST /v1/messages`); an
//! OpenAI request gets a 404, which the cascade turns into a degraded summary. To reach it
//! under the name `api.anthropic.com` without the network, the commands are given it as
//! their HTTP proxy (`HTTP_PROXY`, which reqwest honours): the request line then still
//! names `http://api.anthropic.com/v1/...`, and the host-based guess is what is tested.

#![allow(clippy::unwrap_used, clippy::expect_used, unreachable_pub)] // test code: a failure is a test failure

mod common;

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};

use cascade_test_support::upstream::{self, Upstream};
use common::session_messages;
use context_cascade::summarizer::section_heading;
use serde_json::json;

const BIN: &str = env!("CARGO_BIN_EXE_cascade");
const SUMMARY_LINE: &str = "anthropic-only summary line";
/// Reached through the fake (as HTTP proxy), never over the network.
const ANTHROPIC_URL: &str = "http://api.anthropic.com";

/// The fake summarizer: Anthropic Messages only.
fn anthropic_only() -> Upstream {
    upstream::spawn(|_, request| {
        if request.path == "/v1/messages" && request.body["system"].is_string() {
            let text = cascade_test_support::summary_text(section_heading, SUMMARY_LINE);
            upstream::json(200, upstream::anthropic_message(&text, 1000))
        } else {
            upstream::not_found()
        }
    })
}

/// How a command reaches the fake: by the anthropic.com name (guessed protocol) or by its
/// loopback address with `--summarizer-api anthropic`.
#[derive(Clone, Copy)]
enum Reach {
    Guessed,
    Explicit,
}

/// `--summarizer ...` flags and the environment that make a command reach `fake`.
fn summarizer_flags(fake: &Upstream, reach: Reach, command: &mut Command) {
    for name in [
        "HTTP_PROXY",
        "http_proxy",
        "ALL_PROXY",
        "all_proxy",
        "NO_PROXY",
        "no_proxy",
    ] {
        command.env_remove(name);
    }
    match reach {
        Reach::Guessed => {
            command
                .args(["--summarizer", ANTHROPIC_URL])
                .env("HTTP_PROXY", &fake.base)
                // The agent's upstream (proxy test) stays direct.
                .env("NO_PROXY", "127.0.0.1,localhost");
        }
        Reach::Explicit => {
            command.args(["--summarizer", &fake.base, "--summarizer-api", "anthropic"]);
        }
    }
    command
        .args(["--summarizer-model", "claude-test"])
        .env_remove("RUST_LOG");
}

fn assert_spoke_anthropic(fake: &Upstream) {
    let paths = fake.paths();
    assert!(!paths.is_empty(), "the summarizer was never called");
    assert!(
        paths.iter().all(|p| p == "/v1/messages"),
        "the summarizer got non-Anthropic requests: {paths:?}"
    );
}

fn compact(reach: Reach) {
    let fake = anthropic_only();
    let dir = std::env::temp_dir();
    let id = format!("{}-{}", std::process::id(), reach as u8);
    let input = dir.join(format!("cascade-protocol-{id}.json"));
    let out = dir.join(format!("cascade-protocol-{id}-out.json"));
    let body = json!({"model": "gpt-4o", "messages": session_messages()});
    std::fs::write(&input, body.to_string()).unwrap();
    let mut command = Command::new(BIN);
    command.args(["compact", input.to_str().unwrap(), "--window", "4000"]);
    command.args(["-o", out.to_str().unwrap()]);
    summarizer_flags(&fake, reach, &mut command);
    let output = command.output().unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert_spoke_anthropic(&fake);
    let written = std::fs::read_to_string(&out).unwrap();
    assert!(
        written.contains(SUMMARY_LINE),
        "the endpoint's summary was not used"
    );
    let _ = (std::fs::remove_file(input), std::fs::remove_file(out));
}

#[test]
fn compact_speaks_anthropic_to_an_anthropic_host() {
    compact(Reach::Guessed);
}

#[test]
fn compact_speaks_anthropic_when_told() {
    compact(Reach::Explicit);
}

/// Kills the proxy when the test ends, whatever happens.
struct Running(Child);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn proxy(reach: Reach) {
    let fake = anthropic_only();
    let agent_upstream =
        upstream::spawn(|_, _| upstream::json(200, upstream::openai_completion("done", 900)));
    let mut command = Command::new(BIN);
    command.args([
        "proxy",
        "--upstream",
        &agent_upstream.base,
        "--listen",
        "127.0.0.1:0",
    ]);
    command.args(["--db", ":memory:", "--window", "4000"]);
    summarizer_flags(&fake, reach, &mut command);
    let mut child = command
        .stderr(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let stderr = child.stderr.take().unwrap();
    let _running = Running(child);
    let mut line = String::new();
    BufReader::new(stderr).read_line(&mut line).unwrap();
    let url = line
        .split_whitespace()
        .find(|w| w.starts_with("http://"))
        .unwrap_or_else(|| panic!("no address in {line:?}"))
        .trim_end_matches(',')
        .to_owned();
    let body = json!({"model": "gpt-4o", "messages": session_messages()});
    let client = std::net::TcpStream::connect(url.trim_start_matches("http://")).unwrap();
    let answer = post_json(client, "/v1/chat/completions", &body.to_string());
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    assert_spoke_anthropic(&fake);
    let sent = agent_upstream.requests().last().unwrap().body.to_string();
    assert!(
        sent.contains(SUMMARY_LINE),
        "the endpoint's summary was not used"
    );
}

/// A minimal HTTP/1.1 POST (the test needs no HTTP client beyond this): the whole answer.
fn post_json(mut stream: std::net::TcpStream, path: &str, body: &str) -> String {
    use std::io::{Read, Write};
    let request = format!(
        "POST {path} HTTP/1.1\r\nhost: proxy\r\ncontent-type: application/json\r\n\
         content-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(request.as_bytes()).unwrap();
    let mut answer = String::new();
    stream.read_to_string(&mut answer).unwrap();
    answer
}

#[test]
fn proxy_speaks_anthropic_to_an_anthropic_host() {
    proxy(Reach::Guessed);
}

#[test]
fn proxy_speaks_anthropic_when_told() {
    proxy(Reach::Explicit);
}
