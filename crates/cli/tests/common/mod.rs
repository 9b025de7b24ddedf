//! What the CLI's tests share.

use std::io::Write;
use std::process::{Command, Output, Stdio};

use serde_json::{Value, json};

/// Runs the `cascade` binary with `args`, writing `stdin` to it (no `RUST_LOG`: stderr holds
/// only what the command prints).
#[allow(dead_code)] // not every test crate sends standard input
pub fn run_with_stdin(args: &[&str], stdin: &[u8]) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_cascade"))
        .args(args)
        .env_remove("RUST_LOG")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn cascade");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(stdin)
        .expect("write stdin");
    child.wait_with_output().expect("wait for cascade")
}

/// Long prose turns: nothing ② can compact and the recent turns alone overflow the pruning
/// target, so ③ cannot do and ④ must summarize.
#[allow(dead_code)] // the summarizer tests' session
pub fn session_messages() -> Vec<Value> {
    let prose = "The parser in src/lexer.rs still mishandles nested comments; ".repeat(30);
    let mut messages =
        vec![json!({"role": "user", "content": "Fix the nested comment bug in src/lexer.rs"})];
    for i in 0..20 {
        messages.push(json!({"role": "assistant", "content": format!("Step {i}: {prose}")}));
        messages.push(json!({"role": "user", "content": format!("Noted {i}. {prose}")}));
    }
    messages
}
