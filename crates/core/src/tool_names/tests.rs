//! Tests of the tool classification (moved out of tool_names.rs to keep it short).

use super::*;
use serde_json::json;

fn kind(name: &str, args: Value) -> ToolKind {
    ToolPolicy::default().kind(name, &args)
}

fn compactable(name: &str, args: Value) -> bool {
    ToolPolicy::default().is_compactable(name, &args)
}

/// Every tool name in fixtures/transcripts/*.json (`str_replace_editor`
/// is judged by command, below).
#[rustfmt::skip]
const FIXTURE_TOOLS: &[(&str, ToolKind)] = &[
    ("AskUserQuestion", Other), ("Bash", Shell), ("Edit", Edit), ("Glob", Search),
    ("Grep", Search), ("Read", Read), ("Skill", Other), ("Task", Other), ("TaskOutput", Other),
    ("WebFetch", Fetch), ("Write", Write), ("bash", Shell), ("create", Write), ("edit", Edit),
    ("execute_bash", Shell), ("find_file", Search), ("finish", Other), ("insert", Edit),
    ("open", Read), ("submit", Other), ("think", Other),
];

/// Tool sets of the common agents, by their own spellings.
#[rustfmt::skip]
const AGENT_TOOLS: &[(&str, ToolKind)] = &[
    // Claude Code
    ("LS", Read), ("MultiEdit", Edit), ("NotebookEdit", Edit), ("WebSearch", Search),
    ("TodoWrite", Other), ("BashOutput", Shell), ("ExitPlanMode", Other),
    // Codex
    ("shell", Shell), ("exec_command", Shell), ("apply_patch", Edit), ("read_file", Read),
    ("list_dir", Read), ("grep_files", Search), ("update_plan", Other),
    ("container.exec", Shell), ("write_stdin", Shell), ("view_image", Read),
    // OpenHands
    ("execute_ipython_cell", Shell), ("browser", Fetch), ("web_read", Fetch), ("fetch", Fetch),
    ("edit_file", Edit),
    // SWE-agent
    ("goto", Read), ("scroll_up", Read), ("scroll_down", Read), ("search_dir", Search),
    ("search_file", Search),
    // Cline
    ("write_to_file", Write), ("replace_in_file", Edit), ("search_files", Search),
    ("list_files", Read), ("list_code_definition_names", Search), ("execute_command", Shell),
    ("browser_action", Fetch), ("web_fetch", Fetch), ("attempt_completion", Other),
    ("ask_followup_question", Other),
    // Goose
    ("developer__shell", Shell), ("computercontroller__web_scrape", Fetch),
    // MCP filesystem server, bare and as Claude Code names it
    ("read_text_file", Read), ("read_media_file", Read), ("read_multiple_files", Read),
    ("write_file", Write), ("mcp__filesystem__edit_file", Edit), ("create_directory", Other),
    ("list_directory", Read), ("list_directory_with_sizes", Read), ("directory_tree", Read),
    ("move_file", Other), ("mcp__filesystem__search_files", Search), ("get_file_info", Read),
    ("list_allowed_directories", Read),
    // Unknown
    ("frobnicate", Other), ("", Other),
];

fn check(cases: &[(&str, ToolKind)]) {
    let none = json!("{}");
    for &(name, want) in cases {
        assert_eq!(kind(name, none.clone()), want, "{name}");
        let compact = compactable(name, none.clone());
        assert_eq!(compact, want.is_compactable(), "{name}");
    }
}

#[test]
fn every_fixture_tool_name_is_classified() {
    check(FIXTURE_TOOLS);
    // str_replace_editor, with the three commands the fixtures use (OpenAI strings).
    let args = |c: &str| json!(format!(r#"{{"command": "{c}", "path": "/w/a.pony"}}"#));
    assert_eq!(kind("str_replace_editor", args("view")), Read);
    assert_eq!(kind("str_replace_editor", args("str_replace")), Edit);
    assert_eq!(kind("str_replace_editor", args("insert")), Edit);
}

#[test]
fn normalize_spellings() {
    assert_eq!(normalize("read_file"), "readfile");
    assert_eq!(normalize("Read File"), "readfile");
    assert_eq!(normalize("readFile"), "readfile");
    assert_eq!(normalize("read-file"), "readfile");
    assert_eq!(normalize("mcp__filesystem__read_file"), "readfile");
    assert_eq!(normalize("mcp__my_server__list_directory"), "listdirectory");
    assert_eq!(normalize("functions.read_file"), "readfile");
    assert_eq!(normalize("functions.mcp__fs__read_file"), "readfile");
    assert_eq!(normalize("default_api:run"), "run");
    assert_eq!(normalize("developer__text_editor"), "texteditor");
    assert_eq!(normalize("filesystem/read_file"), "readfile");
    assert_eq!(normalize("container.exec"), "containerexec");
    assert_eq!(normalize("  WebFetch "), "webfetch");
    assert_eq!(normalize("__init__"), "init");
    assert_eq!(normalize(""), "");
}

#[test]
fn builtin_table_is_normalized_and_consistent() {
    let mut seen = HashSet::new();
    for (name, _) in BUILTIN {
        assert_eq!(normalize(name), *name, "table rows are normalized");
        assert!(seen.insert(*name), "duplicate row {name}");
        assert!(!MULTI_COMMAND.contains(name), "{name} is judged by command");
    }
    for name in MULTI_COMMAND {
        assert_eq!(normalize(name), *name);
    }
}

#[test]
fn agent_tool_sets() {
    check(AGENT_TOOLS);
}

#[test]
fn editors_are_judged_by_command() {
    for editor in [
        "str_replace_editor",
        "str_replace_based_edit_tool",
        "developer__text_editor",
    ] {
        for (command, want) in [
            ("view", Read),
            ("create", Write),
            ("write", Write),
            ("str_replace", Edit),
            ("insert", Edit),
            ("undo_edit", Edit),
            ("delete_everything", Other),
        ] {
            let object = json!({"command": command, "path": "/a"});
            assert_eq!(kind(editor, object.clone()), want, "{editor} {command}");
            let string = Value::String(object.to_string());
            assert_eq!(kind(editor, string.clone()), want, "{editor} {command}");
            assert_eq!(compactable(editor, string), want.is_compactable());
        }
    }
}

#[test]
fn editor_arguments_that_do_not_say() {
    let editor = "str_replace_editor";
    for args in [
        json!({}),
        json!(null),
        json!([]),
        json!({"command": 3}),
        json!("not json at all"),
        json!(r#"{"command": 3}"#),
        json!(r#"{"path": "/a"}"#),
    ] {
        assert_eq!(kind(editor, args.clone()), Other, "{args}");
        assert!(!compactable(editor, args));
    }
}

#[test]
fn invalid_json_strings_are_scanned() {
    // Truncated arguments, as agents sometimes log them.
    let cut = json!(r#"{"command": "create", "path": "/a", "file_text": "abc"#);
    assert_eq!(kind("str_replace_editor", cut), Write);
    let cut = json!(r#"{"path": "/a", "command" : "view""#);
    assert_eq!(kind("str_replace_editor", cut), Read);
    assert_eq!(
        scan_command(r#""command" 1, "command": "insert""#).as_deref(),
        Some("insert")
    );
    assert_eq!(scan_command(r#"{"command": "unterminated"#), None);
}

#[test]
fn from_names_replaces_the_list() {
    let policy = ToolPolicy::from_names(["Read", "my_custom_reader", "Write"], ["x"]);
    let none = json!({});
    assert!(policy.is_compactable("read", &none));
    assert!(policy.is_compactable("MyCustomReader", &none));
    assert_eq!(policy.kind("my_custom_reader", &none), Other);
    assert!(!policy.is_compactable("Bash", &none), "not listed");
    assert!(
        !policy.is_compactable("Write", &none),
        "writes are never compacted"
    );
    assert_eq!(policy.kind("Bash", &none), Shell, "classification stays");
    let empty = ToolPolicy::from_names(Vec::<String>::new(), Vec::<String>::new());
    assert!(!empty.is_compactable("Read", &none));
}

#[test]
fn with_names_extends_and_never_wins() {
    let none = json!({});
    let policy = ToolPolicy::default().with_names(["run_tests"], ["Bash", "str_replace_editor"]);
    assert!(policy.is_compactable("run-tests", &none));
    assert!(!policy.is_compactable("bash", &none));
    assert!(policy.is_compactable("Read", &none));
    assert!(!policy.is_compactable("str_replace_editor", &json!({"command": "view"})));
    let listed = ToolPolicy::from_names(["str_replace_editor"], Vec::<&str>::new());
    assert!(listed.is_compactable("str_replace_editor", &json!({"command": "view"})));
    assert!(!listed.is_compactable("str_replace_editor", &json!({"command": "create"})));
}

#[test]
fn kind_serializes_snake_case() {
    assert_eq!(serde_json::to_value(Search).unwrap(), "search");
}

/// The trail's view of the tool sets of item 1 of issue 12, by each agent's own spelling.
#[test]
fn trail_activity_of_every_agent() {
    use CallActivity::{Command, File};
    use FileOp::{Created, Deleted, Edited, Read as R, Searched};
    let none = json!({});
    #[rustfmt::skip]
    let cases: &[(&str, CallActivity)] = &[
        // Claude Code
        ("Read", File(R)), ("Write", File(Created)), ("Edit", File(Edited)),
        ("MultiEdit", File(Edited)), ("Glob", File(Searched)), ("Grep", File(Searched)),
        ("Bash", Command), ("NotebookEdit", File(Edited)),
        // Codex
        ("shell", Command), ("exec_command", Command), ("apply_patch", File(Edited)),
        // OpenHands
        ("execute_bash", Command),
        // SWE-agent
        ("bash", Command), ("edit", File(Edited)), ("open", File(R)), ("create", File(Created)),
        ("find_file", File(Searched)), ("search_file", File(Searched)),
        ("search_dir", File(Searched)),
        // Cline
        ("read_file", File(R)), ("write_to_file", File(Created)),
        ("replace_in_file", File(Edited)), ("execute_command", Command),
        ("search_files", File(Searched)), ("list_files", File(R)),
        // Goose
        ("developer__shell", Command),
        // MCP filesystem server
        ("read_text_file", File(R)), ("mcp__filesystem__read_file", File(R)),
        ("write_file", File(Created)), ("edit_file", File(Edited)),
        ("create_directory", File(Created)), ("move_file", File(Created)),
        ("search_files", File(Searched)), ("list_directory", File(R)),
        ("directory_tree", File(R)), ("read_multiple_files", File(R)),
        ("delete_file", File(Deleted)),
        // Not about files
        ("WebFetch", CallActivity::Other), ("Task", CallActivity::Other),
        ("frobnicate", CallActivity::Other),
    ];
    for &(name, want) in cases {
        assert_eq!(call_activity(name, &none), want, "{name}");
        // Case- and separator-insensitive, as for ②.
        let shouted = if name.contains("__") {
            name.to_uppercase()
        } else {
            name.to_uppercase().replace('_', "-")
        };
        assert_eq!(call_activity(&shouted, &none), want, "{shouted}");
    }
    for editor in [
        "str_replace_editor",
        "developer__text_editor",
        "str_replace_based_edit_tool",
    ] {
        for (command, want) in [
            ("view", File(R)),
            ("create", File(Created)),
            ("write", File(Created)),
            ("str_replace", File(Edited)),
            ("insert", File(Edited)),
            ("undo_edit", File(Edited)),
            ("bogus", CallActivity::Other),
        ] {
            let args = json!({"command": command, "path": "/a"});
            assert_eq!(call_activity(editor, &args), want, "{editor} {command}");
            let text = Value::String(args.to_string());
            assert_eq!(call_activity(editor, &text), want, "{editor} {command}");
        }
    }
}

#[test]
fn file_ops_round_trip_their_labels() {
    for op in FileOp::ALL {
        assert_eq!(FileOp::parse(op.label()), Some(op));
    }
    assert_eq!(FileOp::parse("frobbed"), None);
    assert!(FileOp::Deleted.changes_file() && !FileOp::Read.changes_file());
}

#[test]
fn patch_envelopes_name_their_files() {
    let patch = "*** Begin Patch\n*** Add File: docs/new.md\n+hi\n*** Update File: src/lib.rs\n\
                 *** Move to: src/core.rs\n@@\n-a\n+b\n*** Delete File: old.txt\n*** End Patch";
    let files: Vec<_> = patch_files(patch).collect();
    assert_eq!(
        files,
        vec![
            (FileOp::Created, "docs/new.md"),
            (FileOp::Edited, "src/lib.rs"),
            (FileOp::Created, "src/core.rs"),
            (FileOp::Deleted, "old.txt"),
        ]
    );
    assert_eq!(patch_files("no patch here").count(), 0);
    assert_eq!(patch_files("*** Update File: ").count(), 0);
}
