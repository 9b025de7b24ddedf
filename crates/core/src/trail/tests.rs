//! Tests of the trail's extraction: per agent, error identifiers, outcomes, fixed later
//! (rendering, parsing, merging and stale reads: `render_tests.rs`).

use serde_json::{Value, json};

use super::*;
use crate::conversation::Message;
use crate::extract::{self as errors, Outcome, Output};

/// Messages of an OpenAI body; `calls` are `(id, name, arguments)`.
pub(super) fn messages(list: Value) -> Vec<Message> {
    let body = json!({"model": "m", "messages": list});
    crate::format::parse(body.to_string().as_bytes(), None)
        .unwrap()
        .messages
}

pub(super) fn call(id: &str, name: &str, args: Value) -> Value {
    json!({"id": id, "type": "function", "function": {"name": name, "arguments": args.to_string()}})
}

pub(super) fn assistant(calls: Vec<Value>) -> Value {
    json!({"role": "assistant", "content": null, "tool_calls": calls})
}

pub(super) fn result(id: &str, text: &str) -> Value {
    json!({"role": "tool", "tool_call_id": id, "content": text})
}

pub(super) fn failed(id: &str, text: &str) -> Value {
    json!({"role": "tool", "tool_call_id": id, "content": text, "is_error": true})
}

pub(super) fn user(text: &str) -> Value {
    json!({"role": "user", "content": text})
}

pub(super) fn extract(list: Value) -> Trail {
    let all = messages(list);
    Trail::extract(&all, &[], &TrailConfig::default())
}

pub(super) fn claude_code_session() -> Value {
    json!([
        user("Fix the failing test in lib/a.ex"),
        assistant(vec![call("1", "Read", json!({"file_path": "/p/lib/a.ex"}))]),
        result(
            "1",
            "     1→defmodule A do\n     2→  raise ArgumentError, \"x\""
        ),
        user("[Request interrupted by user for tool use]"),
        user("<task-notification>\n<task-id>b1</task-id>\n</task-notification>"),
        assistant(vec![call(
            "2",
            "Bash",
            json!({"command": "mix test test/a_test.exs 2>&1 | tail -5"})
        )]),
        failed(
            "2",
            "Exit code 2\n  1) test adds (ATest)\n     ** (RuntimeError) no key found in Endpoint.\n5 tests, 1 failure"
        ),
        assistant(vec![
            call(
                "3",
                "Edit",
                json!({"file_path": "/p/lib/a.ex", "old_string": "a", "new_string": "b"})
            ),
            call(
                "4",
                "Grep",
                json!({"pattern": "Endpoint", "path": "/p/config"})
            ),
        ]),
        result("3", "The file /p/lib/a.ex has been updated."),
        result("4", "/p/config/config.exs"),
        user("also keep the old API"),
        assistant(vec![call(
            "5",
            "Bash",
            json!({"command": "mix test 2>&1 | tail -5"})
        )]),
        result("5", "14 doctests, 65 tests, 0 failures"),
    ])
}

#[test]
fn claude_code_session_leaves_files_commands_errors_and_requests() {
    let trail = extract(claude_code_session());
    assert_eq!(
        trail.requests,
        vec!["Fix the failing test in lib/a.ex", "also keep the old API"]
    );
    let files: Vec<(&str, Vec<FileOp>, u32)> = trail
        .files
        .iter()
        .map(|f| (f.path.as_str(), f.ops.clone(), f.touches))
        .collect();
    assert_eq!(
        files,
        vec![
            ("/p/config", vec![FileOp::Searched], 1),
            ("/p/lib/a.ex", vec![FileOp::Edited, FileOp::Read], 2),
            // Named by a command that does not say what it did with it.
            ("test/a_test.exs", vec![FileOp::Used], 1),
        ]
    );
    // Both runs of `mix test`, one line: the first failed, the last passed.
    let [mix] = trail.commands.as_slice() else {
        panic!("one program: {:?}", trail.commands);
    };
    assert_eq!(
        (mix.program.as_str(), mix.runs, mix.failed, mix.passed),
        ("mix test", 2, 1, 1)
    );
    assert_eq!(mix.last.as_deref(), Some("passed: 65 tests, 0 failures"));
    assert_eq!(mix.commands.len(), 2);
    let errors: Vec<(&str, bool)> = trail
        .errors
        .iter()
        .map(|e| (e.text.as_str(), e.fixed))
        .collect();
    // Both fixed: a later `mix test` run reports 0 failures and neither error.
    assert_eq!(
        errors,
        vec![
            ("failing test: test adds (ATest)", true),
            ("RuntimeError: no key found in Endpoint.", true),
        ]
    );
}

#[test]
fn an_error_is_fixed_only_by_a_later_run_that_no_longer_shows_it() {
    let mut list = claude_code_session();
    let items = list.as_array_mut().unwrap();
    items.truncate(10); // the passing run is gone
    let trail = extract(Value::Array(items.clone()));
    assert!(trail.errors.iter().all(|e| !e.fixed));
    // The passing run among the later (kept) messages shows it fixed.
    let all = messages(claude_code_session());
    let trail = Trail::extract(&all[..10], &all[10..], &TrailConfig::default());
    assert!(trail.errors.iter().all(|e| e.fixed));
    assert_eq!(trail.commands.len(), 1, "later commands are not listed");
    // A later run of the same program that fails again: not fixed.
    items.push(assistant(vec![call(
        "9",
        "Bash",
        json!({"command": "mix test"}),
    )]));
    items.push(failed(
        "9",
        "Exit code 2\n  1) test adds (ATest)\n1 test, 1 failure",
    ));
    let trail = extract(Value::Array(items.clone()));
    assert!(!trail.errors[0].fixed);
}

#[test]
fn openhands_swe_agent_codex_and_unknown_tools() {
    let trail = extract(json!([
        user("<uploaded_files>/w</uploaded_files> fix the bug"),
        // OpenHands
        assistant(vec![call(
            "1",
            "str_replace_editor",
            json!({"command": "view", "path": "/w/src/a.c", "view_range": [1, 9]})
        )]),
        result("1", "1\tint x;"),
        assistant(vec![call(
            "2",
            "str_replace_editor",
            json!({"command": "create", "path": "/w/repro.c", "file_text": "int main(){}"})
        )]),
        result("2", "File created"),
        assistant(vec![call(
            "3",
            "execute_bash",
            json!({"command": "cd /w && make test"})
        )]),
        result(
            "3",
            "make: *** [test] Error 1\n[The command completed with exit code 2.]"
        ),
        // SWE-agent: `edit` changes the file `open` opened
        assistant(vec![call("4", "open", json!({"path": "src/fields.py"}))]),
        result("4", "[File: src/fields.py (100 lines total)]"),
        assistant(vec![call(
            "5",
            "edit",
            json!({"search": "a", "replace": "b"})
        )]),
        result("5", "ok"),
        assistant(vec![call(
            "6",
            "find_file",
            json!({"file_name": "x.py", "dir": "src"})
        )]),
        result("6", "none"),
        // Codex
        assistant(vec![call(
            "7",
            "shell",
            json!({"command": ["bash", "-lc", "cat src/lib.rs && rm old.txt"]})
        )]),
        result("7", "fn main() {}\nexit code: 0"),
        assistant(vec![call(
            "8",
            "apply_patch",
            json!({"input": "*** Begin Patch\n*** Update File: src/lib.rs\n@@\n*** Add File: src/new.rs\n*** End Patch"})
        )]),
        result("8", "Done"),
        // Unknown tool: its path-looking arguments still count
        assistant(vec![call(
            "9",
            "frobnicate",
            json!({"target_file": "docs/a.md", "other": "notes/b.txt", "text": "a sentence"})
        )]),
        result("9", "ok"),
    ]));
    let got: Vec<String> = trail
        .files
        .iter()
        .map(|f| {
            let ops: Vec<&str> = f.ops.iter().map(|o| o.label()).collect();
            format!("{} {}", f.path, ops.join(","))
        })
        .collect();
    assert_eq!(
        got,
        vec![
            "notes/b.txt used",
            "docs/a.md used",
            "src/new.rs created",
            "src/lib.rs edited,read",
            "old.txt deleted",
            "src searched",
            "x.py searched",
            "src/fields.py edited,read",
            "/w/repro.c created",
            "/w/src/a.c read",
        ]
    );
    let commands: Vec<(&str, Option<&str>, &[String])> = trail
        .commands
        .iter()
        .map(|c| (c.program.as_str(), c.last.as_deref(), c.commands.as_slice()))
        .collect();
    assert_eq!(
        commands,
        vec![
            (
                "make test",
                Some("failed: exit 2"),
                &["cd /w && make test".to_owned()][..]
            ),
            (
                "cat",
                Some("passed: exit 0"),
                &["cat src/lib.rs && rm old.txt".to_owned()][..]
            ),
        ]
    );
    assert_eq!(
        trail.requests,
        vec!["<uploaded_files>/w</uploaded_files> fix the bug"]
    );
}

#[test]
fn error_identifiers_of_common_runtimes() {
    let ids = |text: &str| errors::error_ids(text, Output::Shell, false);
    let python = "Traceback (most recent call last):\n  File \"a.py\", line 3\nValueError: invalid literal for int() with base 10: 'x'";
    assert_eq!(
        ids(python),
        vec!["ValueError: invalid literal for int() with base 10: 'x'"]
    );
    let pytest = "E       AssertionError: assert 1 == 2\nFAILED tests/test_a.py::test_one - AssertionError\n1 failed, 3 passed in 0.1s";
    assert_eq!(
        ids(pytest),
        vec![
            "AssertionError: assert 1 == 2",
            "failing test: tests/test_a.py::test_one"
        ]
    );
    let rust = "error[E0308]: mismatched types\n --> src/a.rs:1:5\ntest tests::adds ... FAILED\n";
    assert_eq!(
        ids(rust),
        vec!["E0308: mismatched types", "failing test: tests::adds"]
    );
    let ts = "src/a.ts(3,5): error TS2345: Argument of type 'string' is not assignable.";
    assert_eq!(
        ids(ts),
        vec!["TS2345: Argument of type 'string' is not assignable."]
    );
    let go = "--- FAIL: TestParse (0.00s)\nFAIL\tpkg/x";
    assert_eq!(ids(go), vec!["failing test: TestParse"]);
    let elixir = "** (CompileError) lib/a.ex:3: undefined function foo/0";
    assert_eq!(
        ids(elixir),
        vec!["CompileError: lib/a.ex:3: undefined function foo/0"]
    );
    // Code is not an error: a read's content only counts for the tool's own failure.
    let code = "   36\t        raise RuntimeError(\"Cannot find version\")\n  except (TypeError, ValueError) as e:";
    assert!(errors::error_ids(code, Output::Content, false).is_empty());
    assert!(ids(code).is_empty());
    let missing = "<tool_use_error>File does not exist.</tool_use_error>";
    assert_eq!(
        errors::error_ids(missing, Output::Content, false),
        vec![missing]
    );
    // Flagged, no identifier: its first error line (not for a shell: its outcome says it).
    assert_eq!(
        errors::error_ids("String to replace not found in file.", Output::Other, true),
        vec!["String to replace not found in file."]
    );
    assert!(errors::error_ids("Exit code 1", Output::Shell, true).is_empty());
    assert_eq!(errors::key_of("failing test: a::b"), "a::b");
    assert_eq!(errors::key_of("ValueError: x y"), "ValueError");
    assert_eq!(errors::key_of("no such thing: x"), "no such thing: x");
}

#[test]
fn outcomes_of_commands() {
    let text = |s: &str| Outcome::of(s).text();
    assert_eq!(text("Exit code 1\nboom").as_deref(), Some("exit 1"));
    assert_eq!(
        text("ok\n[The command completed with exit code 0.]").as_deref(),
        Some("exit 0")
    );
    assert_eq!(
        text("14 doctests, 297 tests, 11 failures").as_deref(),
        Some("297 tests, 11 failures")
    );
    assert_eq!(
        text("test result: FAILED. 3 passed; 1 failed; 0 ignored").as_deref(),
        Some("3 passed, 1 failed")
    );
    assert_eq!(
        text("==== 2 passed in 0.3s ====").as_deref(),
        Some("2 passed")
    );
    assert_eq!(text("nothing to see"), None);
    assert!(Outcome::of("1 test, 0 failures").succeeded(false));
    assert!(!Outcome::of("1 test, 1 failure").succeeded(false));
    assert!(!Outcome::of("fine").succeeded(true));
    assert_eq!(errors::program("cd /w && mix test test/a.exs"), "mix test");
    assert_eq!(errors::program("Edit /p/a.ex"), "Edit /p/a.ex");
}

#[test]
fn commands_are_shortened() {
    use crate::extract::short_command;
    assert_eq!(short_command("bash -lc ls -la", 100), "ls -la");
    assert_eq!(
        short_command("git commit -m \"$(cat <<'EOF'\nmsg\nEOF\n)\"", 100),
        "git commit -m \"$(cat <<'EOF' …"
    );
    // Cut at a word boundary, never inside a path; one word longer than the limit whole.
    assert_eq!(short_command(&"x".repeat(120), 10), "x".repeat(120));
    assert_eq!(
        short_command(
            "cat /home/u/projects/spotter-worktrees/spotter/lib/a.ex | head",
            30
        ),
        "cat…"
    );
    assert_eq!(short_command("git log --oneline -20 a b", 15), "git log…");
}

#[test]
fn a_relative_path_of_a_command_is_the_absolute_file_of_a_tool() {
    let trail = extract(json!([
        user("go"),
        assistant(vec![call("1", "Read", json!({"file_path": "/p/lib/a.ex"}))]),
        result("1", "x"),
        assistant(vec![call(
            "2",
            "Bash",
            json!({"command": "git add lib/a.ex docs/b.md && mix format lib/a.ex"})
        )]),
        result("2", ""),
    ]));
    let files: Vec<(&str, Vec<FileOp>, u32)> = trail
        .files
        .iter()
        .map(|f| (f.path.as_str(), f.ops.clone(), f.touches))
        .collect();
    // `used` says nothing once `read` is known; `docs/b.md` has no absolute twin.
    assert_eq!(
        files,
        vec![
            ("docs/b.md", vec![FileOp::Used], 1),
            ("/p/lib/a.ex", vec![FileOp::Read], 3),
        ]
    );
}
