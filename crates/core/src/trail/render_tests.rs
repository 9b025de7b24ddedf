//! Tests of the trail's rendering within budget, parse and merge, the placeholder's error
//! line and stale reads (helpers in `tests.rs`).

use serde_json::json;

use super::tests::{assistant, call, claude_code_session, extract, failed, messages, result, user};
use super::*;
use crate::conversation::Message;
use crate::estimate::Estimator;

fn big_trail() -> Trail {
    let mut trail = extract(claude_code_session());
    // The root itself is written `$ROOT` too.
    trail.files.push(FileEntry {
        path: "/p/src".into(),
        ops: vec![FileOp::Searched],
        touches: 1,
        handle: None,
    });
    trail.requests.push("line one\nline two\n  indented".into());
    for i in 0..40 {
        trail.files.push(FileEntry {
            path: format!("/p/src/file_{i}.rs"),
            ops: vec![FileOp::Read],
            touches: 1 + (i % 3),
            handle: None,
        });
        trail.commands.push(CommandEntry {
            program: format!("cargo test{i}"),
            runs: 1 + (i % 2),
            failed: i % 2,
            passed: 1,
            last: Some("passed: exit 0".into()),
            commands: vec![format!("cargo test case_{i}")],
            handle: None,
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
         - RuntimeError: no key found in Endpoint. (same) — fixed later\n\
         Files (most recent first):\n- /p/config searched\n- /p/lib/a.ex edited+read ×2\n\
         - test/a_test.exs used\n\
         Commands:\n- mix test ×2 (1 failed, 1 passed, last passed: 65 tests, 0 failures): \
         `mix test test/a_test.exs 2>&1 | tail -5`, `mix test 2>&1 | tail -5`"
    );
    let notice = format!("[context compacted: 12 earlier messages removed]\n{text}");
    let parsed = Trail::parse(&notice);
    let mut expected = trail.clone();
    expected.runs.clear();
    assert_eq!(parsed, expected);
    let big = big_trail();
    let mut big_expected = big.clone();
    big_expected.runs.clear();
    let mut parsed = Trail::parse(&big.render(u64::MAX, &Estimator::default()));
    // The tree writes a directory's files together: the same files, grouped.
    for files in [&mut parsed.files, &mut big_expected.files] {
        files.sort_by(|a, b| a.path.cmp(&b.path));
    }
    assert_eq!(parsed, big_expected);
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
    // Files that do not all fit: the most touched and most recent first (the sum of both
    // ranks: `file_2.rs`, touched 3 times, comes before `/p/config`, touched once).
    let some = (100..1_000)
        .map(|budget| trail.render_within(budget, &estimator))
        .find(|r| !r.files.is_empty() && r.left_out.files > 0)
        .unwrap();
    assert_eq!(some.files, vec!["- $ROOT/file_2.rs"]);
    let more = (100..1_000)
        .map(|budget| trail.render_within(budget, &estimator))
        .find(|r| r.files_shown >= 4 && r.left_out.files > 0)
        .unwrap();
    assert!(
        more.files.iter().any(|f| f.contains("/p/lib/a.ex edited")),
        "{:?}",
        more.files
    );
    assert!(!some.files.is_empty() && some.left_out.files > 0 && some.left_out.commands == 41);
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
    // One program, its runs of both ranges counted once each.
    assert_eq!(merged.commands.len(), 1);
    assert_eq!(merged.commands[0].runs, 2);
    assert_eq!(merged.commands[0].commands.len(), 2);
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
    assert_eq!(trail.commands.len(), 1);
    assert_eq!((trail.commands[0].runs, trail.commands[0].failed), (2, 1));
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

#[test]
fn an_error_names_its_source_once_per_run_and_reads_back() {
    let error = |text: &str, fixed: bool| ErrorEntry {
        text: text.into(),
        source: Some("mix test".into()),
        fixed,
        handle: None,
    };
    let trail = Trail {
        errors: vec![
            error("failing test: a (M)", false),
            error("failing test: b (M)", true),
            error("failing test: c (M)", false),
            error("failing test: d (M)", false),
        ],
        ..Trail::default()
    };
    let estimator = Estimator::default();
    let all = trail.render(4_000, &estimator);
    assert_eq!(
        all,
        "Errors:\n- failing test: a (M) (from `mix test`)\n\
         - failing test: b (M) (from `mix test`) — fixed later\n\
         - failing test: c (M) (from `mix test`)\n- failing test: d (M) (same)"
    );
    assert_eq!(Trail::parse(&all), trail);
    // Room for the open errors only: each `(same)` still refers to the line above it.
    // Long names, so that one line costs more than the left-out count's reserve.
    let mut long = trail.clone();
    for e in &mut long.errors {
        e.text = format!("{} {}", e.text, "word ".repeat(40).trim_end());
    }
    let trail = long;
    let open = (1..400)
        .map(|budget| trail.render_within(budget, &estimator))
        .find(|r| r.errors.len() == 3)
        .unwrap();
    assert!(
        open.errors.iter().all(|l| !l.contains("fixed later")),
        "{open:?}"
    );
    assert_eq!(open.left_out.errors, 1);
    let parsed = Trail::parse(&open.text());
    assert!(
        parsed
            .errors
            .iter()
            .all(|e| e.source.as_deref() == Some("mix test"))
    );
}
