//! Tests of the trail: extraction per agent, error identifiers and outcomes, rendering
//! within budget, parse and merge, stale reads.

use serde_json::{Value, json};

use super::errors::{self, Outcome, Output};
use super::*;
use crate::conversation::Message;
use crate::estimate::Estimator;

/// Messages of an OpenAI body; `calls` are `(id, name, arguments)`.
fn messages(list: Value) -> Vec<Message> {
    let body = json!({"model": "m", "messages": list});
    crate::format::parse(body.to_string().as_bytes(), None)
        .unwrap()
        .messages
}

fn call(id: &str, name: &str, args: Value) -> Value {
    json!({"id": id, "type": "function", "function": {"name": name, "arguments": args.to_string()}})
}

fn assistant(calls: Vec<Value>) -> Value {
    json!({"role": "assistant", "content": null, "tool_calls": calls})
}

fn result(id: &str, text: &str) -> Value {
    json!({"role": "tool", "tool_call_id": id, "content": text})
}

fn failed(id: &str, text: &str) -> Value {
    json!({"role": "tool", "tool_call_id": id, "content": text, "is_error": true})
}

fn user(text: &str) -> Value {
    json!({"role": "user", "content": text})
}

fn extract(list: Value) -> Trail {
    let all = messages(list);
    Trail::extract(&all, &[], &TrailConfig::default())
}

fn claude_code_session() -> Value {
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
    let commands: Vec<(&str, u32, Option<&str>)> = trail
        .commands
        .iter()
        .map(|c| (c.command.as_str(), c.runs, c.outcome.as_deref()))
        .collect();
    assert_eq!(
        commands,
        vec![
            (
                "mix test test/a_test.exs 2>&1 | tail -5",
                1,
                Some("5 tests, 1 failure; exit 2")
            ),
            ("mix test 2>&1 | tail -5", 1, Some("65 tests, 0 failures")),
        ]
    );
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
    let commands: Vec<(&str, Option<&str>)> = trail
        .commands
        .iter()
        .map(|c| (c.command.as_str(), c.outcome.as_deref()))
        .collect();
    assert_eq!(
        commands,
        vec![
            ("cd /w && make test", Some("exit 2")),
            ("cat src/lib.rs && rm old.txt", Some("exit 0")),
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
    use super::extract::short_command;
    assert_eq!(short_command("bash -lc ls -la", 100), "ls -la");
    assert_eq!(
        short_command("git commit -m \"$(cat <<'EOF'\nmsg\nEOF\n)\"", 100),
        "git commit -m \"$(cat <<'EOF' …"
    );
    assert_eq!(
        short_command(&"x".repeat(120), 10),
        format!("{}…", "x".repeat(10))
    );
}

fn big_trail() -> Trail {
    let mut trail = extract(claude_code_session());
    trail.requests.push("line one\nline two\n  indented".into());
    for i in 0..40 {
        trail.files.push(FileEntry {
            path: format!("/p/src/file_{i}.rs"),
            ops: vec![FileOp::Read],
            touches: 1 + (i % 3),
        });
        trail.commands.push(CommandEntry {
            command: format!("cargo test case_{i}"),
            runs: 1,
            outcome: Some("exit 0".into()),
        });
    }
    trail
}

#[test]
fn render_and_parse_round_trip() {
    let trail = extract(claude_code_session());
    let text = trail.render(4_000, &Estimator::default());
    assert_eq!(
        text,
        "User requests:\n- Fix the failing test in lib/a.ex\n- also keep the old API\n\
         Errors:\n- failing test: test adds (ATest) (from `mix test test/a_test.exs 2>&1 | tail -5`) — fixed later\n\
         - RuntimeError: no key found in Endpoint. (from `mix test test/a_test.exs 2>&1 | tail -5`) — fixed later\n\
         Files (most recent first):\n- /p/config — searched\n- /p/lib/a.ex — edited, read ×2\n\
         - test/a_test.exs — used\n\
         Commands:\n- `mix test test/a_test.exs 2>&1 | tail -5` → 5 tests, 1 failure; exit 2\n\
         - `mix test 2>&1 | tail -5` → 65 tests, 0 failures"
    );
    let notice = format!("[context compacted: 12 earlier messages removed]\n{text}");
    let parsed = Trail::parse(&notice);
    let mut expected = trail.clone();
    expected.runs.clear();
    assert_eq!(parsed, expected);
    let big = big_trail();
    let mut big_expected = big.clone();
    big_expected.runs.clear();
    assert_eq!(
        Trail::parse(&big.render(u64::MAX, &Estimator::default())),
        big_expected
    );
    assert_eq!(Trail::parse("no trail here\n- a bullet"), Trail::default());
}

#[test]
fn rendering_keeps_to_its_budget_by_priority() {
    let estimator = Estimator::default();
    let trail = big_trail();
    let full = trail.render(u64::MAX, &estimator);
    let full_tokens = estimator.text_tokens(&full);
    let mut previous_left = usize::MAX;
    let mut budgets = [
        0,
        10,
        40,
        80,
        150,
        300,
        600,
        full_tokens / 2,
        full_tokens,
        full_tokens + 100,
    ];
    budgets.sort();
    for budget in budgets {
        let rendered = trail.render_within(budget, &estimator);
        let text = rendered.text();
        assert!(estimator.text_tokens(&text) <= budget, "{budget}: {text}");
        let left = rendered.left_out.requests
            + rendered.left_out.errors
            + rendered.left_out.files
            + rendered.left_out.commands;
        if !text.is_empty() {
            assert!(
                left <= previous_left,
                "more room never leaves more out: {budget} {left} {previous_left}\n{text}"
            );
            previous_left = left;
        }
        // Priority: no command before every file, no file before every error and request.
        if !rendered.commands.is_empty() {
            assert_eq!(rendered.left_out.files, 0, "{budget}");
        }
        if !rendered.files.is_empty() {
            assert_eq!(
                rendered.left_out.errors + rendered.left_out.requests,
                0,
                "{budget}"
            );
        }
        if left > 0 && !text.is_empty() {
            assert!(
                text.lines()
                    .last()
                    .unwrap()
                    .starts_with("Left out for space: +"),
                "{text}"
            );
        }
    }
    assert_eq!(trail.render(full_tokens, &estimator), full);
    // Files that do not all fit: the most touched and most recent first.
    let some = trail.render_within(330, &estimator);
    assert!(
        some.files.first().is_some_and(|f| f.contains("/p/config")),
        "{:?}",
        some.files
    );
    assert!(!some.files.is_empty() && some.left_out.files > 0 && some.left_out.commands == 42);
    assert_eq!(Trail::default().render(4_000, &estimator), "");
}

#[test]
fn the_budget_is_a_share_of_the_window_and_capped() {
    let config = TrailConfig::default();
    assert_eq!(config.budget(10_000), 1_500);
    assert_eq!(config.budget(200_000), 4_000);
    assert_eq!(config.budget(0), 0);
}

#[test]
fn merge_dedupes_keeps_first_seen_order_and_updates_outcomes() {
    let all = messages(claude_code_session());
    let config = TrailConfig::default();
    let earlier = Trail::extract(&all[..7], &[], &config);
    assert!(earlier.errors.iter().all(|e| !e.fixed));
    let rendered = earlier.render(4_000, &Estimator::default());
    let newer = Trail::extract(&all[7..], &[], &config);
    let merged = Trail::parse(&rendered).merge(newer);
    assert_eq!(
        merged.requests,
        vec!["Fix the failing test in lib/a.ex", "also keep the old API"]
    );
    assert!(
        merged.errors.iter().all(|e| e.fixed),
        "the newer range's passing run fixes them"
    );
    let paths: Vec<&str> = merged.files.iter().map(|f| f.path.as_str()).collect();
    assert_eq!(paths, vec!["/p/config", "/p/lib/a.ex", "test/a_test.exs"]);
    assert_eq!(merged.files[1].ops, vec![FileOp::Edited, FileOp::Read]);
    assert_eq!(merged.files[1].touches, 2);
    assert_eq!(merged.commands.len(), 2);
    // Merging the same trail again changes nothing but the counts of runs and touches.
    let again = Trail::parse(&rendered).merge(Trail::parse(&rendered));
    assert_eq!(again.requests.len(), 1);
    assert_eq!(again.errors.len(), 2);
    assert_eq!(again.commands[0].runs, 2);
    // Left-out counts add up.
    let mut a = Trail::default();
    a.left_out.files = 3;
    let mut b = Trail::default();
    b.left_out.files = 2;
    b.left_out.commands = 1;
    let text = a.merge(b).render(4_000, &Estimator::default());
    assert_eq!(text, "Left out for space: +5 more files, +1 more commands");
    assert_eq!(Trail::parse(&text).left_out.files, 5);
}

#[test]
fn an_earlier_notice_in_the_removed_range_is_merged_not_quoted() {
    let all = messages(claude_code_session());
    let config = TrailConfig::default();
    let first = Trail::extract(&all[..7], &[], &config);
    let notice = format!(
        "[context compacted: 7 earlier messages removed]\n{}",
        first.render(4_000, &Estimator::default())
    );
    let mut second: Vec<Message> = vec![Message::text(crate::conversation::Role::User, notice)];
    second.extend_from_slice(&all[7..]);
    let trail = Trail::extract(&second, &[], &config);
    assert_eq!(
        trail.requests,
        vec!["Fix the failing test in lib/a.ex", "also keep the old API"]
    );
    assert_eq!(trail.errors.len(), 2);
    assert!(trail.errors.iter().all(|e| e.fixed));
    assert_eq!(trail.commands.len(), 2);
}

#[test]
fn extraction_and_rendering_are_deterministic() {
    let estimator = Estimator::default();
    let a = extract(claude_code_session()).render(300, &estimator);
    for _ in 0..5 {
        assert_eq!(extract(claude_code_session()).render(300, &estimator), a);
    }
}

#[test]
fn placeholder_error_line() {
    let all = messages(json!([
        assistant(vec![call("1", "Bash", json!({"command": "pytest"}))]),
        failed(
            "1",
            "Exit code 1\nE   ValueError: bad\nFAILED t.py::test_x - ValueError"
        ),
        assistant(vec![call("2", "Read", json!({"file_path": "a.py"}))]),
        result("2", "raise ValueError(x)\nValueError: in a docstring"),
    ]));
    let results: Vec<_> = all.iter().flat_map(|m| m.tool_results()).collect();
    let calls: Vec<_> = all.iter().flat_map(|m| m.tool_calls()).collect();
    assert_eq!(
        Trail::lines_for_errors(results[0], Some(calls[0]), true).as_deref(),
        Some("errors: ValueError: bad; failing test: t.py::test_x")
    );
    assert_eq!(
        Trail::lines_for_errors(results[1], Some(calls[1]), false),
        None
    );
}

#[test]
fn stale_reads_are_found_with_what_superseded_them() {
    let all = messages(json!([
        user("go"),
        assistant(vec![call("r1", "Read", json!({"file_path": "/a.rs"}))]),
        result("r1", "old a"),
        assistant(vec![call(
            "r2",
            "Read",
            json!({"file_path": "/b.rs", "offset": 1, "limit": 10})
        )]),
        result("r2", "b 1-10"),
        assistant(vec![call(
            "r3",
            "Read",
            json!({"file_path": "/b.rs", "offset": 50, "limit": 10})
        )]),
        result("r3", "b 50-60"),
        assistant(vec![call(
            "e1",
            "Edit",
            json!({"file_path": "/a.rs", "old_string": "a", "new_string": "b"})
        )]),
        result("e1", "ok"),
        assistant(vec![call(
            "r4",
            "str_replace_editor",
            json!({"command": "view", "path": "/c.rs"})
        )]),
        result("r4", "c"),
        assistant(vec![call(
            "s1",
            "Bash",
            json!({"command": "sed -i s/x/y/ /c.rs"})
        )]),
        result("s1", ""),
        assistant(vec![
            call("r5", "Read", json!({"file_path": "/d.rs"})),
            call("w1", "Write", json!({"file_path": "/d.rs", "content": "x"}))
        ]),
        result("r5", "d"),
        result("w1", "ok"),
        assistant(vec![call(
            "r6",
            "Read",
            json!({"file_path": "/b.rs", "offset": 50, "limit": 10})
        )]),
        result("r6", "b 50-60 again"),
        // Reused id (Kimi-K2 style): each result answers the latest call with that id.
        assistant(vec![call("k", "Read", json!({"file_path": "/e.rs"}))]),
        result("k", "e"),
        assistant(vec![call("k", "Read", json!({"file_path": "/e.rs"}))]),
        result("k", "e again"),
    ]));
    let stale = stale_reads(&all);
    let got: Vec<(usize, &str, &str, &str)> = stale
        .iter()
        .map(|s| {
            (
                s.message,
                s.call_id.as_str(),
                s.path.as_str(),
                s.superseded_by.call_id.as_str(),
            )
        })
        .collect();
    assert_eq!(
        got,
        vec![
            (2, "r1", "/a.rs", "e1"),
            (6, "r3", "/b.rs", "r6"),
            (10, "r4", "/c.rs", "s1"),
            (19, "k", "/e.rs", "k"),
        ]
    );
    assert_eq!(stale[0].note(), "stale: /a.rs was edited later by Edit");
    assert_eq!(stale[1].note(), "stale: /b.rs was read again later by Read");
}
