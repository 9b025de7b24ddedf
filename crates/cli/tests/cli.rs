//! The `cascade` binary, run as a user runs it, on the shared fixtures.

#![allow(clippy::unwrap_used, clippy::expect_used, unreachable_pub)] // test code: a failure is a test failure

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::atomic::{AtomicUsize, Ordering};

use context_cascade::Format;
use serde_json::{Value, json};

const BIN: &str = env!("CARGO_BIN_EXE_cascade");

fn fixtures() -> PathBuf {
    cascade_test_support::fixtures_dir()
}

/// Every transcript fixture, sorted by name.
fn transcripts() -> Vec<PathBuf> {
    let dir = fixtures().join("transcripts");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|entry| entry.expect("directory entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .collect();
    files.sort();
    assert!(files.len() >= 10, "expected the ten fixtures");
    files
}

/// A path in the temp directory, unique to this process and call.
fn temp_path(name: &str) -> PathBuf {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    std::env::temp_dir().join(format!(
        "cascade-cli-test-{}-{n}-{name}",
        std::process::id()
    ))
}

fn write_temp(name: &str, bytes: &[u8]) -> PathBuf {
    let path = temp_path(name);
    std::fs::write(&path, bytes).expect("write temp file");
    path
}

/// A fixture's messages as an OpenAI request body for gpt-4o, in a temp file.
fn wrapped(fixture: &Path) -> PathBuf {
    let text = std::fs::read_to_string(fixture).expect("read fixture");
    let value: Value = serde_json::from_str(&text).expect("fixture JSON");
    let body = json!({"model": "gpt-4o", "messages": value["messages"].clone()});
    let name = fixture.file_name().and_then(|n| n.to_str()).unwrap_or("f");
    write_temp(name, body.to_string().as_bytes())
}

fn run(args: &[&str]) -> Output {
    Command::new(BIN)
        .args(args)
        .env("COLUMNS", "100")
        .env_remove("RUST_LOG")
        .output()
        .expect("run cascade")
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn largest_fixture() -> PathBuf {
    transcripts()
        .into_iter()
        .max_by_key(|p| std::fs::metadata(p).map(|m| m.len()).unwrap_or(0))
        .expect("a fixture")
}

#[test]
fn inspect_on_the_largest_fixture_prints_tables_and_bars() {
    let file = wrapped(&largest_fixture());
    let out = run(&[
        "inspect",
        file.to_str().expect("utf-8 path"),
        "--model",
        "gpt-4o",
    ]);
    let text = stdout(&out);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(text.contains("window 128,000 (catalog: gpt-4o"), "{text}");
    for heading in ["By role", "By tool", "Largest messages (top 10)"] {
        assert!(text.contains(heading), "missing {heading:?}:\n{text}");
    }
    for role in ["user", "assistant", "tool"] {
        assert!(
            text.lines().any(|l| l.starts_with(role) && l.contains('█')),
            "no bar for {role}:\n{text}"
        );
    }
    // Claude Code's Read results resolved to their tool's name.
    assert!(text.lines().any(|l| l.starts_with("Read ")), "{text}");
    let largest = text
        .split("Largest messages (top 10)\n")
        .nth(1)
        .expect("largest section");
    assert_eq!(
        largest.lines().count(),
        12,
        "header, rule, ten rows:\n{largest}"
    );
    // Width-aware: nothing past the 100 columns given in COLUMNS.
    for line in text.lines() {
        assert!(line.chars().count() <= 100, "too wide: {line:?}");
    }
}

#[test]
fn inspect_of_an_unknown_model_assumes_the_default_window_and_warns() {
    let file = write_temp(
        "unknown-model.json",
        br#"{"model":"no-such-model-xyz","messages":[{"role":"user","content":"hello"}]}"#,
    );
    let out = run(&["inspect", file.to_str().expect("utf-8 path")]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stdout(&out).contains("window 128,000 (default)"),
        "{}",
        stdout(&out)
    );
    let err = stderr(&out);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains("WARN") && err.contains("no-such-model-xyz"),
        "{err}"
    );
}

#[test]
fn models_lists_the_catalog() {
    let out = run(&["models"]);
    assert!(out.status.success());
    let text = stdout(&out);
    assert!(
        text.lines()
            .any(|l| l.starts_with("gpt-4o ") && l.contains("128,000")),
        "{text}"
    );
    let out = run(&["models", "--json"]);
    let entries: Value = serde_json::from_slice(&out.stdout).expect("JSON catalog");
    let gpt4o = entries
        .as_array()
        .expect("array")
        .iter()
        .find(|e| e["id"] == "gpt-4o")
        .expect("gpt-4o listed");
    assert_eq!(gpt4o["context_window"], 128_000);
}

/// The JSON line `classify` prints.
fn classify(args: &[&str], body: &str) -> Value {
    let file = write_temp("error-body.txt", body.as_bytes());
    let mut all = vec!["classify", file.to_str().expect("utf-8 path")];
    all.extend_from_slice(args);
    let out = run(&all);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    assert_eq!(text.lines().count(), 1, "one line: {text}");
    serde_json::from_str(&text).expect("a JSON line")
}

#[test]
fn classify_recognises_an_overflow_and_not_a_rate_limit() {
    let vectors: Value = serde_json::from_str(
        &std::fs::read_to_string(fixtures().join("overflow-errors.json")).expect("vectors"),
    )
    .expect("vectors JSON");
    let anthropic = vectors
        .as_array()
        .expect("array")
        .iter()
        .find(|v| {
            v["is_overflow"] == true
                && v["body"]
                    .as_str()
                    .is_some_and(|b| b.contains("prompt is too long: 200251 tokens"))
        })
        .expect("the Anthropic vector");
    let verdict = classify(
        &["--status", "400"],
        anthropic["body"].as_str().expect("body"),
    );
    assert_eq!(
        verdict,
        json!({"overflow": true, "observed_tokens": 200251, "limit_tokens": 200000, "provider": "anthropic"})
    );

    let rate_limit = r#"{"error":{"message":"Rate limit reached for gpt-4o in organization org-x on tokens per min (TPM): Limit 30000, Used 29000, Requested 4000.","type":"tokens","code":"rate_limit_exceeded"}}"#;
    let expected =
        json!({"overflow": false, "observed_tokens": null, "limit_tokens": null, "provider": null});
    assert_eq!(classify(&["--status", "429"], rate_limit), expected);
    assert_eq!(classify(&[], rate_limit), expected);
}

#[test]
fn classify_reads_standard_input() {
    let out = common::run_with_stdin(
        &["classify", "-"],
        br#"{"error":{"code":"context_length_exceeded","message":"This model's maximum context length is 128000 tokens. However, your messages resulted in 130001 tokens."}}"#,
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let verdict: Value = serde_json::from_slice(&out.stdout).expect("JSON line");
    assert_eq!(verdict["overflow"], true);
    assert_eq!(verdict["limit_tokens"], 128_000);
}

/// Asserts exit 2 and one stderr line `cascade: <file>: <path>: <problem>`.
fn assert_bad_input(out: &Output, file: &str, path: &str, problem: &str) {
    let err = stderr(out);
    assert_eq!(out.status.code(), Some(2), "stderr: {err}");
    assert_eq!(err.lines().count(), 1, "one line: {err:?}");
    let expected = format!("cascade: {file}: {path}: ");
    assert!(
        err.starts_with(&expected),
        "{err:?} should start with {expected:?}"
    );
    assert!(err.contains(problem), "{err:?} should mention {problem:?}");
    assert!(!err.contains("panicked"), "{err}");
}

#[test]
fn every_bad_input_is_one_line_and_exit_2_in_every_command() {
    let cases: [(&str, &[u8], &str, &str); 6] = [
        ("malformed.json", b"{\"messages\": [", "line 1, column 14", "invalid JSON"),
        ("neither.json", b"{\"prompt\": \"hi\"}", "$", "\"messages\""),
        (
            "role.json",
            br#"{"messages":[{"role":"user","content":"a"},{"role":"wizard","content":"x"}]}"#,
            "$.messages[1].role",
            "unknown role",
        ),
        (
            "orphan.json",
            br#"{"messages":[{"role":"user","content":"a"},{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"bash","arguments":"{}"}}]},{"role":"tool","content":"out"}]}"#,
            "$.messages[2]",
            "tool_call_id",
        ),
        (
            "content.json",
            br#"{"messages":[{"role":"user","content":42}]}"#,
            "$.messages[0].content",
            "found a number",
        ),
        ("empty.json", b"", "$", "empty"),
    ];
    let commands: [&[&str]; 3] = [
        &["inspect", "--window", "8000"],
        &["compact", "--window", "8000"],
        &["replay", "--window", "8000"],
    ];
    for (name, bytes, path, problem) in cases {
        let file = write_temp(name, bytes);
        let file = file.to_str().expect("utf-8 path");
        for command in commands {
            let mut args = command.to_vec();
            args.push(file);
            assert_bad_input(&run(&args), file, path, problem);
        }
    }
    let missing = temp_path("does-not-exist.json");
    let missing = missing.to_str().expect("utf-8 path");
    for command in commands {
        let mut args = command.to_vec();
        args.push(missing);
        assert_bad_input(&run(&args), missing, "$", "no such file");
    }
    assert_bad_input(&run(&["classify", missing]), missing, "$", "no such file");
    let empty = write_temp("empty-error.txt", b"  \n");
    let empty = empty.to_str().expect("utf-8 path");
    assert_bad_input(&run(&["classify", empty]), empty, "$", "empty");
    // The same from standard input.
    let out = common::run_with_stdin(&["compact", "--window", "8000"], b"[{\"role\": 7}]");
    assert_bad_input(&out, "<stdin>", "$[0].role", "found a number");
}

/// Runs `compact` on `input` and returns the output bytes and the report.
fn compact(input: &Path, extra: &[&str]) -> (Output, Vec<u8>, Value) {
    let output = temp_path("compacted.json");
    let report = temp_path("report.json");
    let mut args = vec![
        "compact",
        input.to_str().expect("utf-8 path"),
        "-o",
        output.to_str().expect("utf-8 path"),
        "--report",
        report.to_str().expect("utf-8 path"),
    ];
    args.extend_from_slice(extra);
    let out = run(&args);
    let body = std::fs::read(&output).unwrap_or_default();
    let report: Value = std::fs::read(&report)
        .ok()
        .and_then(|b| serde_json::from_slice(&b).ok())
        .unwrap_or(Value::Null);
    (out, body, report)
}

#[test]
fn compact_fits_every_fixture_into_32k() {
    for fixture in transcripts() {
        let input = wrapped(&fixture);
        let (out, body, report) = compact(&input, &["--window", "32000"]);
        let name = fixture.display();
        assert_eq!(out.status.code(), Some(0), "{name}: {}", stderr(&out));
        let conversation = context_cascade::format::parse(&body, None)
            .unwrap_or_else(|e| panic!("{name}: output does not parse: {e}"));
        assert_eq!(conversation.format, Format::OpenAi, "{name}");
        assert_eq!(conversation.model(), Some("gpt-4o"), "{name}");
        assert_eq!(report["fits"], true, "{name}: {report}");
        assert_eq!(report["window"], 32_000, "{name}");
        let after = report["tokens_after"].as_u64().expect("tokens_after");
        let reserve = report["reserve"].as_u64().expect("reserve");
        assert!(after <= 32_000 - reserve, "{name}: {after} tokens");
        assert_eq!(
            report["messages_after"].as_u64(),
            Some(conversation.messages.len() as u64),
            "{name}"
        );
        let err = stderr(&out);
        assert!(
            err.contains(" tokens (") && err.contains("fits"),
            "{name}: {err}"
        );
    }
}

#[test]
fn compact_honours_the_body_reserve_and_keeps_a_bare_array_bare() {
    let fixture = largest_fixture();
    let value: Value =
        serde_json::from_str(&std::fs::read_to_string(&fixture).expect("read")).expect("JSON");
    let body = json!({"model": "gpt-4o", "max_tokens": 4000, "messages": value["messages"]});
    let input = write_temp("reserve.json", body.to_string().as_bytes());
    let (out, _, report) = compact(&input, &["--window", "32000"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(report["reserve"], 4000);
    assert!(report["tokens_after"].as_u64().expect("tokens") <= 28_000);

    let bare = write_temp("bare.json", value["messages"].to_string().as_bytes());
    let (out, body, report) = compact(&bare, &["--window", "16000", "--reserve", "1000"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        serde_json::from_slice::<Value>(&body)
            .expect("JSON")
            .is_array()
    );
    assert_eq!(report["format"], "bare");
    assert_eq!(report["reserve"], 1000);
    assert!(report["tokens_after"].as_u64().expect("tokens") <= 15_000);
}

#[test]
fn compact_keeps_anthropic_format_and_strips_pins() {
    let mut messages = vec![
        json!({"role": "user", "content": "Fix the parser. Remember: never touch tests/.", "_pin": true}),
    ];
    for i in 0..40 {
        let id = format!("toolu_{i}");
        messages.push(json!({"role": "assistant", "content": [
            {"type": "text", "text": format!("Reading file {i}.")},
            {"type": "tool_use", "id": id, "name": "Read", "input": {"file_path": format!("src/f{i}.rs")}}]}));
        messages.push(json!({"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": id, "content": "fn f() {}\n".repeat(300)}]}));
    }
    let body = json!({"model": "claude-sonnet-4-5", "system": "You are a careful engineer.",
        "max_tokens": 1000, "messages": messages});
    let input = write_temp("anthropic.json", body.to_string().as_bytes());
    let (out, bytes, report) = compact(&input, &["--window", "12000"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(report["format"], "anthropic");
    assert_eq!(report["fits"], true);
    let written: Value = serde_json::from_slice(&bytes).expect("JSON");
    assert_eq!(written["system"], "You are a careful engineer.");
    assert!(!String::from_utf8_lossy(&bytes).contains("\"_pin\""));
    let conversation = context_cascade::format::parse(&bytes, None).expect("valid output");
    assert_eq!(conversation.format, Format::Anthropic);
    let first_user = conversation
        .first_user_index()
        .map(|i| conversation.messages[i].text_content());
    assert!(
        first_user.is_some_and(|t| t.contains("never touch tests/")),
        "the pinned first user message is kept"
    );
}

#[test]
fn compact_reads_stdin_and_writes_stdout() {
    let body = std::fs::read(wrapped(&transcripts()[0])).expect("read");
    let out = common::run_with_stdin(&["compact", "-", "--window", "32000", "--pretty"], &body);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(out.stdout.starts_with(b"{\n"), "pretty JSON on stdout");
    context_cascade::format::parse(&out.stdout, None).expect("valid output");
}

#[test]
fn compact_exits_1_when_the_irreducible_part_cannot_fit() {
    let input = wrapped(&largest_fixture());
    let (out, body, report) = compact(&input, &["--window", "100"]);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert_eq!(report["fits"], false, "{report}");
    let reason = report["reason"].as_str().unwrap_or_default();
    assert!(!reason.is_empty(), "{report}");
    assert!(
        err.lines().last().is_some_and(|l| l.contains(reason)),
        "{err}"
    );
    // The best effort is still written, and valid.
    context_cascade::format::parse(&body, None).expect("valid output");
}

#[test]
fn compact_reports_an_unwritable_output_as_one_line() {
    let input = wrapped(&transcripts()[0]);
    let dir = temp_path("no-such-dir");
    let target = dir.join("out.json");
    let target = target.to_str().expect("utf-8 path");
    let out = run(&[
        "compact",
        input.to_str().expect("utf-8 path"),
        "--window",
        "32000",
        "-o",
        target,
    ]);
    assert_eq!(out.status.code(), Some(2));
    let err = stderr(&out);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.starts_with(&format!("cascade: {target}: cannot write")),
        "{err}"
    );
}

#[test]
fn replay_prints_the_timeline_and_draws_an_svg() {
    let input = wrapped(&largest_fixture());
    let plot = temp_path("replay.svg");
    let out = run(&[
        "replay",
        input.to_str().expect("utf-8 path"),
        "--window",
        "32000",
        "--plot",
        plot.to_str().expect("utf-8 path"),
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(text.contains("strategies fired"), "{text}");
    assert!(text.contains("Totals"), "{text}");
    // A 190K-token session in a 32K window: the cascade must have fired.
    assert!(text.contains("compact "), "{text}");
    assert!(text.contains("still not fitting 0"), "{text}");
    let calls = text
        .lines()
        .filter(|l| {
            l.trim_start()
                .split(' ')
                .next()
                .is_some_and(|w| w.parse::<u32>().is_ok())
        })
        .count();
    assert!(calls > 100, "one row per assistant turn, got {calls}");
    let svg = std::fs::read_to_string(&plot).expect("the plot file");
    assert!(svg.contains("<svg"), "not an SVG");
    assert!(svg.contains("window 32,000"), "the window line is labelled");
}

#[test]
fn replay_with_room_to_spare_changes_nothing_and_keeps_every_prefix() {
    let fixture = transcripts()
        .into_iter()
        .min_by_key(|p| std::fs::metadata(p).map(|m| m.len()).unwrap_or(u64::MAX))
        .expect("a fixture");
    let value: Value =
        serde_json::from_str(&std::fs::read_to_string(&fixture).expect("read")).expect("JSON");
    let roles = value["messages"].as_array().expect("messages").iter();
    let roles = roles.map(|m| context_cascade::Role::parse(m["role"].as_str().unwrap_or("")));
    let turns = context_cascade::replay::call_points(roles.map(|r| r.expect("a role"))).len();
    let input = wrapped(&fixture);
    let out = run(&[
        "replay",
        input.to_str().expect("utf-8 path"),
        "--window",
        "1000000",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(
        text.contains(&format!("calls {turns} · compacted in 0 ·")),
        "{text}"
    );
    assert!(
        text.contains(&format!(
            "unchanged (prompt-cache friendly) {0} of {0} (100.0%)",
            turns - 1
        )),
        "{text}"
    );
    assert!(text.contains("strategies fired (calls): none"), "{text}");
}

#[test]
fn replay_cost_prices_every_plan_and_the_cascade_fits_where_nothing_else_does() {
    let fixture = transcripts()
        .into_iter()
        .min_by_key(|p| std::fs::metadata(p).map(|m| m.len()).unwrap_or(u64::MAX))
        .expect("a fixture");
    let input = wrapped(&fixture);
    let out = run(&[
        "replay",
        input.to_str().expect("utf-8 path"),
        "--window",
        "4000",
        "--cost",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(text.contains("per million tokens"), "{text}");
    let row = |name: &str| {
        let line = (text.lines())
            .find(|l| l.starts_with(name))
            .unwrap_or_else(|| panic!("no row {name:?} in {text}"));
        line[name.len()..]
            .split_whitespace()
            .map(str::to_owned)
            .collect::<Vec<_>>()
    };
    // Columns: calls, over window, extending, cached, written, out, summary calls, USD, ×.
    let cascade = row("cascade  ");
    let unmanaged = row("no management");
    assert_eq!(
        cascade[1], "0",
        "the cascade keeps every call in a 4K window: {text}"
    );
    assert_ne!(unmanaged[1], "0", "a whole history does not fit 4K: {text}");
    assert_eq!(cascade[8], "1.00×");
    assert!(cascade[7].parse::<f64>().expect("USD") > 0.0);
    let codex = row("Codex's auto-compact");
    assert_ne!(codex[6], "0", "the client compacted by itself: {text}");
}

#[test]
fn model_flag_sets_the_window_and_the_token_scale() {
    let input = wrapped(&transcripts()[0]);
    let (out, _, gpt) = compact(&input, &[]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(gpt["window"], 128_000, "the body's model, from the catalog");
    let (out, _, claude) = compact(&input, &["--model", "claude-sonnet-4-5"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(claude["window"], 200_000);
    let scale = |r: &Value| r["token_scale"].as_f64().expect("token_scale");
    // Claude counts more tokens for the same text: its starting scale applies.
    assert!(scale(&claude) > scale(&gpt) * 1.3, "{claude} vs {gpt}");
    assert!(claude["tokens_before"].as_u64() > gpt["tokens_before"].as_u64());
}
