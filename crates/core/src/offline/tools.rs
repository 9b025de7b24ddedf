//! What the summary says about tool calls: a call in a few words, and the task list a
//! planning tool holds (Claude Code `TodoWrite`, Codex `update_plan`, OpenHands
//! `task_tracker`).

use serde_json::Value;

use super::excerpt::Excerpt;
use crate::conversation::ToolCall;

/// Argument keys of planning tools holding the task list (Claude Code `todos`, Codex
/// `plan`, OpenHands `task_list`).
const TODO_LIST_KEYS: &[&str] = &["todos", "plan", "task_list", "tasks"];
/// A task from a planning tool.
#[derive(Debug, Clone)]
pub(crate) struct Todo {
    pub text: Excerpt,
    pub status: TodoStatus,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum TodoStatus {
    Pending,
    InProgress,
    Completed,
}

/// A tool call in a few words: its name and its main argument.
pub(crate) fn describe_call(call: &ToolCall, args: &Value) -> String {
    const MAIN_KEYS: &[&str] = &[
        "command",
        "cmd",
        "file_path",
        "path",
        "filePath",
        "filename",
        "notebook_path",
        "pattern",
        "query",
        "url",
        "description",
        "prompt",
        "thought",
    ];
    // Editors take a verb (`view`, `create`) and a path: say both.
    let verb = args
        .get("command")
        .and_then(Value::as_str)
        .filter(|c| !c.is_empty() && c.len() <= 20 && !c.contains(char::is_whitespace))
        .filter(|_| args.get("path").is_some_and(Value::is_string));
    let keys = if verb.is_some() {
        &MAIN_KEYS[2..]
    } else {
        MAIN_KEYS
    };
    let main = keys.iter().find_map(|k| match args.get(k) {
        Some(Value::String(s)) => Some(s.clone()),
        Some(Value::Array(items)) => Some(
            items
                .iter()
                .filter_map(Value::as_str)
                .collect::<Vec<_>>()
                .join(" "),
        ),
        _ => None,
    });
    let name = match verb {
        Some(v) => format!("{} {v}", call.name),
        None => call.name.clone(),
    };
    match main {
        Some(m) => format!("{name} `{}`", Excerpt::new(&m, 80).render(80)),
        None => name,
    }
}

/// The task list of a planning tool call, if the arguments hold one.
pub(crate) fn todo_list(args: &Value, keep: usize) -> Option<Vec<Todo>> {
    let items = TODO_LIST_KEYS
        .iter()
        .find_map(|k| args.get(k).and_then(Value::as_array))?;
    let todos: Vec<Todo> = items
        .iter()
        .filter_map(|item| {
            let text = ["content", "title", "step", "description", "task", "text"]
                .iter()
                .find_map(|k| item.get(k).and_then(Value::as_str))?;
            let status = ["status", "state"]
                .iter()
                .find_map(|k| item.get(k).and_then(Value::as_str))
                .unwrap_or("pending")
                .to_ascii_lowercase();
            let status = match status.as_str() {
                "completed" | "complete" | "done" => TodoStatus::Completed,
                "in_progress" | "in-progress" | "inprogress" | "active" => TodoStatus::InProgress,
                _ => TodoStatus::Pending,
            };
            Some(Todo {
                text: Excerpt::new(text, keep),
                status,
            })
        })
        .collect();
    (!todos.is_empty()).then_some(todos)
}

#[cfg(test)]
mod tests {
    use serde_json::{Map, json};

    use super::*;

    #[test]
    fn todo_lists_of_every_planning_tool() {
        let claude = json!({"todos": [{"content": "a", "status": "completed"}, {"content": "b", "status": "in_progress"}]});
        let codex = json!({"plan": [{"step": "c", "status": "pending"}]});
        let openhands = json!({"command": "plan", "task_list": [{"title": "d", "status": "done"}]});
        let statuses = |v: &Value| {
            todo_list(v, 50)
                .unwrap()
                .iter()
                .map(|t| (t.text.render(50), t.status))
                .collect::<Vec<_>>()
        };
        assert_eq!(
            statuses(&claude),
            vec![
                ("a".into(), TodoStatus::Completed),
                ("b".into(), TodoStatus::InProgress)
            ]
        );
        assert_eq!(statuses(&codex), vec![("c".into(), TodoStatus::Pending)]);
        assert_eq!(
            statuses(&openhands),
            vec![("d".into(), TodoStatus::Completed)]
        );
        assert!(todo_list(&json!({"plan": "just text"}), 50).is_none());
    }

    #[test]
    fn calls_are_described_by_their_main_argument() {
        let call = ToolCall {
            id: "1".into(),
            name: "shell".into(),
            arguments: Value::Null,
            fields: Map::new(),
            function_fields: Map::new(),
            legacy: false,
        };
        let args = json!({"command": ["bash", "-lc", "cargo test"]});
        assert_eq!(describe_call(&call, &args), "shell `bash -lc cargo test`");
        assert_eq!(describe_call(&call, &json!({})), "shell");
        let view = json!({"command": "view", "path": "/a.rs"});
        assert_eq!(describe_call(&call, &view), "shell view `/a.rs`");
    }
}
