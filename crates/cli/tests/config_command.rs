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
        "cascade.calibration.prior_tokens = 32000.0  # from default",
        "# status.admin_token is unset  # from default",
    ] {
        assert!(stdout.lines().any(|l| l == line), "{line:?} not in\n{stdout}");
    }
    // One line per key: as many as the reference documents.
    let keys = stdout.lines().filter(|l| l.contains("  # from ")).count();
    assert_eq!(keys, stdout.lines().count());
    assert!(keys > 50, "{keys}");
}

#[test]
fn an_unknown_key_is_one_line_naming_the_key_and_line() {
    let path = file("config-typo", "upstream = \"http://u\"\n[window]\nforced = 1\n");
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
    let path = file("config-bad", "[cascade.recovery]\ntargets = [0.75, 1.3, 0.5]\n");
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
