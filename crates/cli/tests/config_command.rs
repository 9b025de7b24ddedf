//! `cascade config` prints the proxy's effective settings, each with where it came from,
//! and refuses a file with an unknown key on one line naming the key and its line.

#![allow(clippy::unwrap_used, clippy::expect_used, unreachable_pub)] // test code: a failure is a test failure

use std::path::PathBuf;
use std::process::Command;

const BIN: &str = env!("CARGO_BIN_EXE_cascade");

fn file(name: &str, text: &str) -> PathBuf {
    let path = std::env::temp_dir().join(format!("cascade-{name}-{}.toml", std::process::id()));
    std::fs::write(&path, text).unwrap();
    path
}

#[test]
fn settings_are_printed_with_their_source() {
    let path = file(
        "config-ok",
        "upstream = \"http://127.0.0.1:8080\"\n[cascade.recovery]\npreemptive_target = 0.75\n",
    );
    let output = Command::new(BIN)
        .args(["config", "--config"])
        .arg(&path)
        .args(["--window", "32000", "--summarizer-model", "m"])
        .output()
        .unwrap();
    std::fs::remove_file(&path).unwrap();
    let stdout = String::from_utf8(output.stdout).unwrap();
    assert!(output.status.success(), "{stdout}");
    for line in [
        "upstream = \"http://127.0.0.1:8080\"  # from file",
        "cascade.recovery.preemptive_target = 0.75  # from file",
        "window.force = 32000  # from flag",
        "summarizer.model = \"m\"  # from flag",
        "listen = \"127.0.0.1:8787\"  # from default",
        "cascade.calibration.prior_tokens = 0.0  # from default",
        "# status.admin_token is unset  # from default",
    ] {
        assert!(
            stdout.lines().any(|l| l == line),
            "{line:?} not in\n{stdout}"
        );
    }
    // One line per key: as many as the reference documents.
    let keys = stdout.lines().filter(|l| l.contains("  # from ")).count();
    assert_eq!(keys, stdout.lines().count());
    assert!(keys > 50, "{keys}");
}

#[test]
fn an_unknown_key_is_one_line_naming_the_key_and_line() {
    let path = file(
        "config-typo",
        "upstream = \"http://u\"\n[window]\nforced = 1\n",
    );
    for command in ["config", "proxy"] {
        let output = Command::new(BIN)
            .args([command, "--config"])
            .arg(&path)
            .output()
            .unwrap();
        let stderr = String::from_utf8(output.stderr).unwrap();
        assert_eq!(output.status.code(), Some(2), "{command}: {stderr}");
        assert_eq!(stderr.trim().lines().count(), 1, "{stderr}");
        let place = format!("{}:3:1: unknown field `forced`", path.display());
        assert!(stderr.contains(&place), "{command}: {stderr}");
    }
    std::fs::remove_file(&path).unwrap();
}

#[test]
fn a_bad_value_names_its_key_path() {
    let path = file(
        "config-bad",
        "[cascade.recovery]\ntargets = [0.75, 1.3, 0.5]\n",
    );
    let output = Command::new(BIN)
        .args(["config", "--config"])
        .arg(&path)
        .output()
        .unwrap();
    std::fs::remove_file(&path).unwrap();
    let stderr = String::from_utf8(output.stderr).unwrap();
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("cascade.recovery.targets[1] = 1.3: expected a share of E in (0, 1]"),
        "{stderr}"
    );
}

/// A request with one tool result of about a third of an 8,000-token window: nothing fires
/// by default.
fn one_large_result() -> String {
    let output = "fn main() { println!(\"hello\"); }\n".repeat(250);
    serde_json::json!({"model": "gpt-4o", "messages": [
        {"role": "user", "content": "Read main.rs."},
        {"role": "assistant", "content": null, "tool_calls": [{"id": "c1", "type": "function",
            "function": {"name": "read_file", "arguments": "{\"path\":\"main.rs\"}"}}]},
        {"role": "tool", "tool_call_id": "c1", "content": output},
    ]})
    .to_string()
}

#[test]
fn the_library_commands_read_the_cascade_table_and_the_window() {
    let request = std::env::temp_dir().join(format!("cascade-request-{}.json", std::process::id()));
    std::fs::write(&request, one_large_result()).unwrap();
    let compact = |config: Option<&PathBuf>| {
        let mut command = Command::new(BIN);
        command.arg("compact").arg(&request);
        if let Some(config) = config {
            command.arg("--config").arg(config);
        }
        let output = command.output().unwrap();
        assert!(
            output.status.success(),
            "{}",
            String::from_utf8_lossy(&output.stderr)
        );
        String::from_utf8(output.stdout).unwrap()
    };
    let window = file("config-window", "[window]\nforce = 8000\n");
    let untouched = compact(Some(&window));
    let cut = file(
        "config-cut",
        "[window]\nforce = 8000\n[cascade.layer1]\nsingle_tool_result_share = 0.1\n",
    );
    let truncated = compact(Some(&cut));
    let request_text = std::fs::read_to_string(&request).unwrap();
    for path in [&request, &window, &cut] {
        std::fs::remove_file(path).unwrap();
    }
    let same = |a: &str, b: &str| {
        serde_json::from_str::<serde_json::Value>(a).unwrap()
            == serde_json::from_str::<serde_json::Value>(b).unwrap()
    };
    assert!(
        same(&untouched, &request_text),
        "nothing fires at the default share"
    );
    assert!(
        truncated.len() < untouched.len() / 2,
        "① cut at 0.1·E: {truncated}"
    );
}
