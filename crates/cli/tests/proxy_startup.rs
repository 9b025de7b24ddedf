//! `cascade proxy` refuses what cannot work before it says it is listening: an upstream
//! that is not an http(s) URL, a database it cannot open.

#![allow(clippy::unwrap_used, clippy::expect_used, unreachable_pub)] // test code: a failure is a test failure

use std::process::Command;

const BIN: &str = env!("CARGO_BIN_EXE_cascade");

fn run(args: &[&str]) -> (Option<i32>, String) {
    let output = Command::new(BIN)
        .arg("proxy")
        .args(["--listen", "127.0.0.1:0"])
        .args(args)
        .output()
        .unwrap();
    (
        output.status.code(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

#[test]
fn bad_upstreams_exit_2_with_one_line() {
    for bad in ["notaurl", "ftp://example.com/v1"] {
        let (code, stderr) = run(&["--upstream", bad, "--db", ":memory:"]);
        assert_eq!(code, Some(2), "{bad}: {stderr}");
        assert_eq!(stderr.trim().lines().count(), 1, "{stderr}");
        assert!(stderr.contains("upstream"), "{stderr}");
        assert!(!stderr.contains("listening"), "{stderr}");
    }
}

#[test]
fn a_bad_database_fails_before_listening() {
    let dir = std::env::temp_dir().join(format!("cascade-baddb-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    // A directory is not a database file.
    let (code, stderr) = run(&[
        "--upstream",
        "http://127.0.0.1:9",
        "--db",
        dir.to_str().unwrap(),
    ]);
    let _ = std::fs::remove_dir_all(&dir);
    assert_ne!(code, Some(0), "{stderr}");
    assert!(!stderr.contains("listening"), "{stderr}");
}
