//! The offline summarizer's behaviour, end to end: sections, merging, sizing, fixtures.

#![allow(clippy::unwrap_used, clippy::expect_used, unreachable_pub)] // test code: a failure is a test failure

mod common;

use serde_json::{Map, Value, json};

use context_cascade::SUMMARY_PREFIX;
use context_cascade::estimate::Estimator;
use context_cascade::summarizer::{
    Summarizer, SummaryError, SummaryRequest, section_heading, split_sections,
};
use context_cascade::{Block, Message, Role, Shape, ToolCall, ToolResult};
use context_cascade::{OfflineConfig, OfflineSummarizer};

use common::offline::{run, tokens};

fn user(text: &str) -> Message {
    Message::text(Role::User, text)
}

fn assistant(text: &str, calls: &[(&str, &str, Value)]) -> Message {
    let mut blocks = Vec::new();
    if !text.is_empty() {
        blocks.push(Block::text(text));
    }
    for (id, name, args) in calls {
        blocks.push(Block::ToolCall(ToolCall {
            id: (*id).to_owned(),
            name: (*name).to_owned(),
            arguments: Value::String(args.to_string()),
            fields: Map::new(),
            function_fields: Map::new(),
            legacy: false,
        }));
    }
    Message::new(Role::Assistant, blocks, Shape::Parts, Map::new())
}

fn result(id: &str, name: &str, text: &str) -> Message {
    let r = ToolResult::text(id, Some(name.to_owned()), text.to_owned());
    Message::new(
        Role::Tool,
        vec![Block::ToolResult(r)],
        Shape::String,
        Map::new(),
    )
}

fn request(messages: Vec<Message>) -> SummaryRequest {
    SummaryRequest::summarize(messages, 100_000)
}

/// `messages` with an earlier summary to update.
fn updating(messages: Vec<Message>, previous: String, max_tokens: u64) -> SummaryRequest {
    SummaryRequest::Summarize {
        messages,
        previous_summary: Some(previous),
        max_tokens,
    }
}

fn session() -> Vec<Message> {
    vec![
        user("Fix the failing parser test in crates/core. Do not change the public API."),
        assistant(
            "Let me read the parser first.",
            &[("c1", "Read", json!({"file_path": "/repo/src/parser.rs"}))],
        ),
        result(
            "c1",
            "Read",
            "pub fn parse_header(input: &str) -> Header {}",
        ),
        assistant(
            "",
            &[(
                "c2",
                "Bash",
                json!({"command": "cargo test -p core && cat tests/data/input.txt"}),
            )],
        ),
        result(
            "c2",
            "Bash",
            "running 3 tests\nthread 'parses' panicked at src/parser.rs:10:5\nerror: test failed, to rerun pass `--lib`",
        ),
        assistant(
            "The issue is an off-by-one in parse_header. I'll fix the index.",
            &[(
                "c3",
                "Edit",
                json!({"file_path": "/repo/src/parser.rs", "old_string": "i + 1", "new_string": "i"}),
            )],
        ),
        result(
            "c3",
            "Edit",
            "The file /repo/src/parser.rs has been updated.",
        ),
        user("Also please keep the ParserConfig struct unchanged."),
        assistant(
            "Done. Next I will run the full test suite.",
            &[(
                "c4",
                "TodoWrite",
                json!({"todos": [
                    {"content": "Fix parse_header", "status": "completed"},
                    {"content": "Run the full test suite", "status": "in_progress"},
                    {"content": "Update CHANGELOG.md", "status": "pending"}
                ]}),
            )],
        ),
    ]
}

fn sections_of(summary: &str) -> [Vec<String>; 9] {
    split_sections(summary)
}

#[test]
fn nine_headings_in_order_and_id() {
    let summary = run(&request(session())).unwrap();
    let mut from = 0;
    for i in 0..9 {
        let heading = section_heading(i);
        assert_eq!(summary.matches(&heading).count(), 1, "{heading}");
        let at = summary[from..].find(&heading).unwrap() + from;
        from = at + heading.len();
    }
    assert!(summary.starts_with(&section_heading(0)));
    assert_eq!(OfflineSummarizer::default().id(), "offline/v1");
    let custom = OfflineSummarizer::new(OfflineConfig {
        quote_chars: 40,
        ..OfflineConfig::default()
    });
    assert!(custom.id().starts_with("offline/v1?quote=40&"));
    let short = custom.summarize_now(&request(session())).unwrap();
    assert!(short.len() < summary.len());
}

#[test]
fn paths_from_read_args_and_bash_commands_are_listed_with_what_was_done() {
    let s = sections_of(&run(&request(session())).unwrap());
    let files = s[2].join("\n");
    assert!(
        files.contains("- `/repo/src/parser.rs` (edited, read)"),
        "{files}"
    );
    assert!(
        files.contains("`tests/data/input.txt` (in a command)"),
        "{files}"
    );
    assert!(
        !files.contains("`/repo/src/parser.rs` (read)"),
        "listed once: {files}"
    );
}

#[test]
fn user_requests_and_constraints_are_quoted() {
    let s = sections_of(&run(&request(session())).unwrap());
    let intent = s[0].join("\n");
    assert!(
        intent.contains(
            "\"Fix the failing parser test in crates/core. Do not change the public API.\""
        )
    );
    assert!(intent.contains("\"Also please keep the ParserConfig struct unchanged.\""));
    assert_eq!(s[5].len(), 2, "every user message: {:?}", s[5]);
    assert!(
        s[1].iter().any(|l| l.contains("`parse_header`")),
        "{:?}",
        s[1]
    );
}

#[test]
fn error_lines_come_with_what_followed() {
    let s = sections_of(&run(&request(session())).unwrap());
    let errors = s[3].join("\n");
    assert!(
        errors.contains("panicked at src/parser.rs:10:5"),
        "{errors}"
    );
    assert!(errors.contains("error: test failed"), "{errors}");
    assert!(
        errors.contains("next: The issue is an off-by-one in parse_header."),
        "{errors}"
    );
    assert!(errors.contains("Edit `/repo/src/parser.rs`"), "{errors}");
    assert!(
        s[4].iter().any(|l| l.contains("I'll fix the index.")),
        "{:?}",
        s[4]
    );
}

#[test]
fn todos_progress_and_next_steps() {
    let s = sections_of(&run(&request(session())).unwrap());
    let pending = s[6].join("\n");
    assert!(
        pending.contains("- [in progress] Run the full test suite"),
        "{pending}"
    );
    assert!(pending.contains("- [ ] Update CHANGELOG.md"), "{pending}");
    assert!(
        pending.contains("Next I will run the full test suite."),
        "{pending}"
    );
    let progress = s[7].join("\n");
    assert!(progress.contains("- [x] Fix parse_header"), "{progress}");
    assert!(
        progress.contains("Tool calls: Bash ×1, Edit ×1, Read ×1, TodoWrite ×1"),
        "{progress}"
    );
    assert!(
        progress.contains("Last assistant message: \"Done."),
        "{progress}"
    );
    let next = s[8].join("\n");
    assert!(next.contains("Pending tool call: TodoWrite"), "{next}");
    assert!(next.contains("Continue: Run the full test suite"), "{next}");
}

#[test]
fn previous_summary_is_merged_not_summarized() {
    let previous = run(&request(vec![
        user("Port the CLI to clap 4; never use unsafe."),
        assistant("", &[("p1", "Read", json!({"path": "src/cli.rs"}))]),
        result("p1", "Read", "fn main() {}"),
    ]))
    .unwrap();
    let merged = run(&updating(session(), previous.clone(), 100_000)).unwrap();
    for i in 0..9 {
        assert_eq!(merged.matches(&section_heading(i)).count(), 1);
    }
    let s = sections_of(&merged);
    assert!(
        s[0].iter()
            .any(|l| l.contains("Port the CLI to clap 4; never use unsafe."))
    );
    assert!(
        s[0].iter()
            .any(|l| l.contains("Fix the failing parser test"))
    );
    assert!(
        s[2].iter().any(|l| l == "- `src/cli.rs` (read)"),
        "{:?}",
        s[2]
    );
    // Old bullets come first, and the tallies add up instead of repeating.
    assert!(s[5][0].contains("Port the CLI"));
    let tallies: Vec<_> = s[7]
        .iter()
        .filter(|l| l.starts_with("- Tool calls:"))
        .collect();
    assert_eq!(tallies.len(), 1);
    assert!(tallies[0].contains("Read ×2"), "{tallies:?}");
    // The previous summary is not quoted as if it were a user message.
    assert!(!merged.contains("\"## 1."));
    // Merging the same summary again changes nothing.
    let again = updating(Vec::new(), merged.clone(), 100_000);
    let s2 = sections_of(&run(&again).unwrap());
    assert_eq!(s2, s);
}

#[test]
fn a_newer_task_list_replaces_the_older_one() {
    let previous = run(&request(session())).unwrap();
    assert!(previous.contains("- [ ] Update CHANGELOG.md"));
    let req = updating(
        vec![assistant(
            "",
            &[(
                "t2",
                "TodoWrite",
                json!({"todos": [
                    {"content": "Run the full test suite", "status": "completed"},
                    {"content": "Update CHANGELOG.md", "status": "completed"}
                ]}),
            )],
        )],
        previous,
        100_000,
    );
    let s = split_sections(&run(&req).unwrap());
    assert!(s[6].iter().all(|l| !l.starts_with("- [")), "{:?}", s[6]);
    assert!(
        s[7].contains(&"- [x] Update CHANGELOG.md".to_owned()),
        "{:?}",
        s[7]
    );
    assert!(
        !s[7].contains(&"- [x] Fix parse_header".to_owned()),
        "{:?}",
        s[7]
    );
    assert!(
        s[8].iter().all(|l| !l.starts_with("- Continue:")),
        "{:?}",
        s[8]
    );
}

#[test]
fn merging_a_shrunk_summary_again_reaches_a_fixed_point() {
    let mut messages = session();
    for i in 0..100 {
        messages.push(user(&format!(
            "Please also cover edge case {i} in lib_{i}.rs"
        )));
    }
    let max = 1_500;
    let first = run(&SummaryRequest::summarize(messages, max)).unwrap();
    let merge = |previous: &str| run(&updating(Vec::new(), previous.to_owned(), max)).unwrap();
    let second = merge(&first);
    let third = merge(&second);
    assert_eq!(second, third);
    assert!(second.contains("Fix the failing parser test"));
    assert!(second.contains("`/repo/src/parser.rs` (edited, read)"));
}

#[test]
fn anthropic_tool_use_and_flagged_results() {
    let body = json!({
        "model": "claude-sonnet-4-5",
        "max_tokens": 1024,
        "messages": [
            {"role": "user", "content": "Rename the crate; keep the old name as an alias."},
            {"role": "assistant", "content": [
                {"type": "text", "text": "I'll open the manifest."},
                {"type": "tool_use", "id": "tu1", "name": "str_replace_based_edit_tool",
                 "input": {"command": "view", "path": "/w/Cargo.toml"}}
            ]},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "tu1", "is_error": true,
                 "content": "The path /w/Cargo.toml does not exist."}
            ]},
            {"role": "assistant", "content": [
                {"type": "tool_use", "id": "tu2", "name": "str_replace_based_edit_tool",
                 "input": {"command": "create", "path": "/w/crates/a/Cargo.toml", "file_text": "[package]"}}
            ]}
        ]
    });
    let conversation = context_cascade::format::parse(body.to_string().as_bytes(), None).unwrap();
    let s = split_sections(&run(&request(conversation.messages)).unwrap());
    assert!(
        s[2].contains(&"- `/w/Cargo.toml` (read)".to_owned()),
        "{:?}",
        s[2]
    );
    assert!(
        s[2].contains(&"- `/w/crates/a/Cargo.toml` (created)".to_owned()),
        "{:?}",
        s[2]
    );
    let errors = s[3].join("\n");
    assert!(errors.contains("does not exist"), "{errors}");
    assert!(
        errors.contains("next: str_replace_based_edit_tool create `/w/crates/a/Cargo.toml`"),
        "{errors}"
    );
    assert!(
        s[8].iter()
            .any(|l| l.starts_with("- Pending tool call: str_replace_based_edit_tool"))
    );
}

#[test]
fn summary_inside_messages_is_merged_and_notices_skipped() {
    let old = run(&request(vec![user("Keep the logs in /var/log/app.log")])).unwrap();
    let messages = vec![
        user(&format!("{}\n{old}", SUMMARY_PREFIX)),
        user("[context compacted: 4 earlier messages removed]"),
        user("Now add retries."),
    ];
    let s = sections_of(&run(&request(messages)).unwrap());
    assert!(
        s[0].iter()
            .any(|l| l.contains("Keep the logs in /var/log/app.log"))
    );
    assert!(
        s[5].iter().all(|l| !l.contains("context compacted")),
        "{:?}",
        s[5]
    );
    assert!(
        s[5].iter().all(|l| !l.contains("context summary")),
        "{:?}",
        s[5]
    );
    assert!(s[5].iter().any(|l| l.contains("Now add retries.")));
}

#[test]
fn partials_are_merged_in_order() {
    let first = run(&request(session()[..3].to_vec())).unwrap();
    let second = run(&request(session()[3..].to_vec())).unwrap();
    let req = SummaryRequest::Merge {
        partials: vec![first, second],
        max_tokens: 100_000,
    };
    let merged = run(&req).unwrap();
    for i in 0..9 {
        assert_eq!(merged.matches(&section_heading(i)).count(), 1);
    }
    let s = sections_of(&merged);
    assert!(
        s[0][0].contains("Fix the failing parser test"),
        "{:?}",
        s[0]
    );
    assert!(
        s[2].iter()
            .any(|l| l == "- `/repo/src/parser.rs` (edited, read)"),
        "{:?}",
        s[2]
    );
    assert!(s[3].iter().any(|l| l.contains("panicked at")));
    let last: Vec<_> = s[8]
        .iter()
        .filter(|l| l.contains("tool call:") || l.contains("action:"))
        .collect();
    assert_eq!(
        last.len(),
        1,
        "only the newest last action survives: {last:?}"
    );
}

#[test]
fn deterministic() {
    let req = request(session());
    let a = run(&req).unwrap();
    let b = run(&req.clone()).unwrap();
    let c = OfflineSummarizer::default().summarize_now(&req).unwrap();
    assert_eq!(a, b);
    assert_eq!(a, c);
}

#[test]
fn max_tokens_is_respected_by_shrinking() {
    let mut messages = session();
    for i in 0..200 {
        messages.push(user(&format!(
            "Request number {i}: please also handle case_{i} in module_{i}.rs"
        )));
        messages.push(assistant(
            &format!("Let me look at module_{i}.rs."),
            &[(
                &format!("r{i}"),
                "Read",
                json!({"file_path": format!("/repo/src/module_{i}.rs")}),
            )],
        ));
    }
    let estimator = Estimator::default();
    let full = run(&request(messages.clone())).unwrap();
    let full_tokens = tokens(&estimator, &full);
    for max in [full_tokens, full_tokens / 2, 2_000, 600, 200, 120] {
        let req = SummaryRequest::summarize(messages.clone(), max);
        let summary = run(&req).unwrap();
        assert!(tokens(&estimator, &summary) <= max, "{max}");
        for i in 0..9 {
            assert!(summary.contains(&section_heading(i)));
        }
        if max >= 600 {
            assert!(
                summary.contains("Fix the failing parser"),
                "{max}: {summary}"
            );
        }
    }
    let tiny = SummaryRequest::summarize(messages, 10);
    assert!(matches!(run(&tiny), Err(SummaryError::TooLarge { .. })));
}

#[test]
fn multi_megabyte_input_is_summarized() {
    let big_output = "x".repeat(200_000) + "\nerror: out of memory\n" + &"y ".repeat(100_000);
    let mut messages = vec![user("Process the dataset in data/huge.csv")];
    for i in 0..20 {
        messages.push(assistant(
            "",
            &[(
                &format!("b{i}"),
                "Bash",
                json!({"command": format!("./run.sh part{i}.csv")}),
            )],
        ));
        messages.push(result(&format!("b{i}"), "Bash", &big_output));
    }
    messages.push(user(&"long paste ".repeat(100_000)));
    let req = SummaryRequest::summarize(messages, 4_000);
    let summary = run(&req).unwrap();
    assert!(summary.len() < 40_000, "{}", summary.len());
    assert!(summary.contains("error: out of memory"));
    assert!(summary.contains("`part19.csv` (in a command)"));
}

#[test]
fn multibyte_text_is_never_cut_inside_a_character() {
    let cjk = "请不要修改公共接口🎉。".repeat(200);
    let messages = vec![
        user(&cjk),
        assistant(
            &"我会先读文件😀".repeat(100),
            &[("k", "Bash", json!({"command": "ls"}))],
        ),
        result(
            "k",
            "Bash",
            &format!("Error: 文件不存在 {}", "💥".repeat(5_000)),
        ),
    ];
    let estimator = Estimator::default();
    for max in [100_000, 1_000, 300, 150] {
        let req = SummaryRequest::summarize(messages.clone(), max);
        let summary = run(&req).unwrap();
        assert!(tokens(&estimator, &summary) <= max);
        assert!(!summary.contains('\u{FFFD}'));
        if max >= 1_000 {
            let quote = summary
                .lines()
                .find(|l| l.starts_with("- Initial request"))
                .unwrap();
            assert!(
                quote.contains("请不要修改公共接口🎉") && quote.contains('…'),
                "{quote}"
            );
        }
    }
}

#[test]
fn empty_input_still_gives_the_nine_headings() {
    let summary = run(&request(Vec::new())).unwrap();
    assert_eq!(summary.lines().count(), 9 + 8);
    assert!(!summary.trim().is_empty());
}
