//! What one tool call names: its files (with what it did to each), its command, whether
//! it read only part of a file. Paths come from the argument keys and the path recogniser
//! of this module (`paths.rs`), the ones the offline summarizer reads too; what a call
//! does, from `tool_names` (the table ② uses); what a shell step does to a path, from its
//! verb.

use std::collections::HashMap;
use std::sync::{Arc, LazyLock, Mutex};

use serde_json::{Map, Value};
use xxhash_rust::xxh3;

use super::paths::{self, PathContext};
use super::{COMMAND_KEYS, PATH_KEYS, floor_char_boundary};
use crate::conversation::ToolCall;
use crate::tool_names::{self, CallActivity, FileOp};

/// Argument keys that make a read partial: a later partial read of other lines does not
/// make an earlier read stale.
const RANGE_KEYS: &[&str] = &[
    "offset",
    "limit",
    "view_range",
    "line_number",
    "start_line",
    "end_line",
    "line_range",
];
/// How much of one command is scanned for paths.
const COMMAND_SCAN: usize = 16 * 1024;

/// What one call names: its activity, its files (with what it did to each, in argument
/// order), its command and whether it read only part of a file.
#[derive(Debug, Clone)]
pub(crate) struct CallFiles {
    pub(crate) activity: CallActivity,
    pub(crate) files: Vec<(FileOp, String)>,
    pub(crate) command: Option<String>,
    /// The range arguments of a partial read, as JSON text (`None`: the whole file).
    pub(crate) range: Option<String>,
}

/// The arguments of a call as a JSON value (an unparsable OpenAI string stays a string).
fn arguments(call: &ToolCall) -> Value {
    call.arguments_value()
        .unwrap_or_else(|| Value::String(call.arguments_text().into_owned()))
}

/// Reads a call's arguments. `current_file`: the file an editor without a path argument
/// works on (SWE-agent's `edit` and `insert` change the file `open` or `create` opened).
/// Shared with the memo: a call read before costs no copy of its files.
pub(crate) fn call_files(call: &ToolCall, current_file: Option<&str>) -> Arc<CallFiles> {
    let out = memoized(call);
    if out.files.is_empty() && out.activity == CallActivity::File(FileOp::Edited) {
        if let Some(path) = current_file {
            let mut own = CallFiles::clone(&out);
            own.files.push((FileOp::Edited, path.to_owned()));
            return Arc::new(own);
        }
    }
    out
}

/// Calls read before, by a hash of their name and arguments and their lengths, at most [`MEMO_CAPACITY`]
/// (a full memo starts over). ② reads every call of the history on every request that
/// reaches it, and ③ and ④ read the calls they remove again: parsing the arguments and
/// scanning commands was a quarter of a compaction's time.
static MEMO: LazyLock<Mutex<HashMap<MemoKey, Arc<CallFiles>>>> = LazyLock::new(Mutex::default);
/// xxh3-128 of the arguments seeded by the name, the name's length, the arguments' length.
type MemoKey = (u128, usize, usize);
const MEMO_CAPACITY: usize = 1 << 14;

fn memoized(call: &ToolCall) -> Arc<CallFiles> {
    let arguments = call.arguments_text();
    // 128 bits of xxh3 over the arguments, seeded by the name: SipHash over them was a
    // tenth of ②'s time.
    let seed = xxh3::xxh3_64(call.name.as_bytes());
    let hash = xxh3::xxh3_128_with_seed(arguments.as_bytes(), seed);
    let key = (hash, call.name.len(), arguments.len());
    let lock = || MEMO.lock().unwrap_or_else(|p| p.into_inner());
    if let Some(found) = lock().get(&key) {
        return Arc::clone(found);
    }
    let files = Arc::new(read_call(call));
    let mut memo = lock();
    if memo.len() >= MEMO_CAPACITY {
        memo.clear();
    }
    memo.insert(key, Arc::clone(&files));
    files
}

/// What a call names, from its name and arguments alone.
fn read_call(call: &ToolCall) -> CallFiles {
    let args = arguments(call);
    let activity = tool_names::call_activity(&call.name, &args);
    let is_move = tool_names::MOVE_TOOLS.contains(&tool_names::normalize(&call.name).as_str());
    let mut out = CallFiles {
        activity,
        files: Vec::new(),
        command: None,
        range: None,
    };
    let op = match activity {
        CallActivity::File(op) => op,
        CallActivity::Command | CallActivity::Other => FileOp::Used,
    };
    walk(&args, None, op, is_move, &mut out);
    if let Value::Object(map) = &args {
        out.range = range_of(map);
    }
    out
}

fn range_of(map: &Map<String, Value>) -> Option<String> {
    let range: Map<String, Value> = RANGE_KEYS
        .iter()
        .filter_map(|k| {
            Some((
                (*k).to_owned(),
                map.get(*k).filter(|v| !v.is_null())?.clone(),
            ))
        })
        .collect();
    (!range.is_empty()).then(|| Value::Object(range).to_string())
}

fn walk(value: &Value, key: Option<&str>, op: FileOp, is_move: bool, out: &mut CallFiles) {
    match value {
        Value::String(s) => match key {
            Some(k) if PATH_KEYS.contains(&k) => {
                let op = match k {
                    "source" | "old_path" if is_move => FileOp::Deleted,
                    _ => op,
                };
                push_path(out, op, s);
            }
            Some(k) if COMMAND_KEYS.contains(&k) && out.activity == CallActivity::Command => {
                command(s, out);
            }
            _ => {
                for (op, path) in tool_names::patch_files(s) {
                    push_path(out, op, path);
                }
                // An unknown tool still names files: a lone path-looking value.
                let lone = !s.contains(char::is_whitespace) && out.activity == CallActivity::Other;
                if let Some(path) = lone
                    .then(|| paths::clean_path(s, PathContext::Prose))
                    .flatten()
                {
                    push_path(out, FileOp::Used, path);
                }
            }
        },
        Value::Array(items) => {
            let is_command = key.is_some_and(|k| COMMAND_KEYS.contains(&k));
            if is_command && out.activity == CallActivity::Command {
                // Codex: `["bash", "-lc", "cat src/lib.rs"]`
                let words: Vec<&str> = items.iter().filter_map(Value::as_str).collect();
                command(&words.join(" "), out);
            } else {
                items.iter().for_each(|v| walk(v, key, op, is_move, out));
            }
        }
        Value::Object(map) => {
            for (k, v) in map {
                walk(v, Some(k), op, is_move, out);
            }
        }
        _ => {}
    }
}

fn push_path(out: &mut CallFiles, op: FileOp, path: &str) {
    let path = path.trim();
    let trivial = matches!(path, "" | "." | ".." | "./" | "../" | "/" | "~");
    if trivial || path.len() > 500 || path.contains('\n') || path.contains("://") {
        return;
    }
    out.files.push((op, path.to_owned()));
}

fn command(text: &str, out: &mut CallFiles) {
    let text = text.trim();
    let scanned = &text[..floor_char_boundary(text, COMMAND_SCAN)];
    let heredoc = scanned.find("<<").unwrap_or(scanned.len());
    for path in paths::command_paths(scanned) {
        // `command_paths` yields slices of `scanned`: where the path sits tells its verb.
        let at = (path.as_ptr() as usize).wrapping_sub(scanned.as_ptr() as usize);
        let op = if at >= heredoc || at > scanned.len() {
            FileOp::Used
        } else {
            shell_op(&scanned[..at])
        };
        push_path(out, op, path);
    }
    for (op, path) in tool_names::patch_files(scanned) {
        push_path(out, op, path);
    }
    if out.command.is_none() {
        out.command = Some(text.to_owned());
    }
}

/// What the shell step ending at a path does to it, from the step's verb (`cat` reads,
/// `rm` deletes, `> file` creates); [`FileOp::Used`] when the verb does not say.
fn shell_op(before: &str) -> FileOp {
    let step = &before[step_start(before)..];
    if step.trim_end().ends_with('>') {
        return FileOp::Created;
    }
    let mut words = step.split_whitespace().skip_while(|w| {
        // Wrappers before the verb: `sudo`, `env A=b`, Codex's `bash -lc`.
        let wrapper = matches!(
            *w,
            "sudo" | "env" | "time" | "xargs" | "command" | "bash" | "sh" | "zsh"
        );
        wrapper || w.contains('=') || matches!(*w, "-c" | "-lc" | "-l")
    });
    let verb = words.next().unwrap_or("");
    let verb = verb.rsplit('/').next().unwrap_or(verb);
    let in_place = step.contains(" -i");
    match verb {
        "sed" | "perl" if in_place => FileOp::Edited,
        "cat" | "head" | "tail" | "less" | "more" | "bat" | "nl" | "wc" | "diff" | "sed"
        | "awk" | "source" | "." | "view" | "stat" | "file" => FileOp::Read,
        "grep" | "egrep" | "rg" | "ag" | "ack" | "find" | "fd" | "ls" | "tree" | "du" => {
            FileOp::Searched
        }
        "rm" | "rmdir" | "unlink" | "shred" => FileOp::Deleted,
        "touch" | "mkdir" | "tee" => FileOp::Created,
        "chmod" | "patch" | "truncate" => FileOp::Edited,
        "git" => match words.next().unwrap_or("") {
            "rm" => FileOp::Deleted,
            "grep" | "ls-files" => FileOp::Searched,
            "diff" | "log" | "show" | "blame" => FileOp::Read,
            _ => FileOp::Used,
        },
        _ => FileOp::Used,
    }
}

/// Where the shell step that `before` ends with starts: just past the last `&&`, `||`, `;`,
/// `|`, newline, `$(`, backquote or `(`. One scan from the end: past a `||` or a `$(` is
/// past its `|` or `(` (eight `rfind`s, each setting up a substring searcher, were most of
/// the cost of reading a call's command).
fn step_start(before: &str) -> usize {
    let bytes = before.as_bytes();
    (0..bytes.len())
        .rev()
        .find(|&i| match bytes[i] {
            b';' | b'|' | b'\n' | b'`' | b'(' => true,
            b'&' => i > 0 && bytes[i - 1] == b'&',
            _ => false,
        })
        .map_or(0, |i| i + 1)
}

/// A command without a `bash -lc` wrapper (its quotes stay).
fn unwrapped(command: &str) -> &str {
    let mut text = command.trim();
    for wrapper in [
        "bash -lc ",
        "bash -c ",
        "sh -c ",
        "sh -lc ",
        "zsh -lc ",
        "zsh -c ",
    ] {
        text = text.strip_prefix(wrapper).unwrap_or(text).trim();
    }
    text
}

/// A command as the trail lists it: its first line without a `bash -lc` wrapper, cut.
pub(crate) fn short_command(command: &str, max: usize) -> String {
    let mut lines = unwrapped(command).lines();
    let first = lines.next().unwrap_or("").trim();
    let short = super::error_ids::cut(first, max);
    if lines.next().is_some() && !short.ends_with('…') {
        format!("{short} …")
    } else {
        short
    }
}

/// The program a command runs, as the trail groups runs: its first step that is not a
/// `cd` or a comment (steps end at `&&`, `;`, `|` and line ends, so a command written over
/// several lines is read whole), without wrappers and `VAR=value` words, by its first word
/// and a subcommand (`mix test`, `git status`, `cargo test`), not by its arguments (`cat`,
/// `python`).
pub(crate) fn command_program(command: &str) -> String {
    let text = unwrapped(command);
    let step = text
        .split("&&")
        .flat_map(|s| s.split([';', '|', '\n']))
        .map(|s| s.trim().trim_matches(['\'', '"']).trim())
        .find(|s| !s.is_empty() && !s.starts_with('#') && *s != "cd" && !s.starts_with("cd "))
        .unwrap_or_else(|| text.trim_matches(['\'', '"']));
    let mut words = step.split_whitespace().skip_while(|w| {
        w.contains('=')
            || matches!(*w, "sudo" | "env" | "time" | "timeout" | "nohup")
            || w.bytes().all(|b| b.is_ascii_digit())
    });
    let Some(first) = words.next() else {
        return String::new();
    };
    let first = first.rsplit('/').next().unwrap_or(first);
    let subcommand = words.next().filter(|w| {
        w.len() > 1
            && w.bytes()
                .all(|b| b.is_ascii_lowercase() || b == b'-' || b == b'_' || b == b':')
            && !w.starts_with('-')
    });
    match subcommand {
        Some(sub) if !matches!(first, "cat" | "ls" | "echo" | "rm" | "cd" | "head" | "tail") => {
            format!("{first} {sub}")
        }
        _ => first.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failure is a test failure
    use super::*;

    fn call(name: &str, arguments: &str) -> ToolCall {
        ToolCall {
            id: "call_1".into(),
            name: name.into(),
            arguments: Value::String(arguments.into()),
            fields: Map::new(),
            function_fields: Map::new(),
            legacy: false,
        }
    }

    /// The memo keeps what a call names by itself; the file an editor without a path
    /// works on is added per use, so the same call in another file's context names that
    /// file.
    #[test]
    fn a_memoized_call_still_names_the_open_file_of_its_context() {
        let insert = call("insert", r#"{"line": 3, "text": "fn main() {}"}"#);
        let first = call_files(&insert, Some("src/a.rs"));
        let second = call_files(&insert, Some("src/b.rs"));
        assert_eq!(first.files, vec![(FileOp::Edited, "src/a.rs".to_owned())]);
        assert_eq!(second.files, vec![(FileOp::Edited, "src/b.rs".to_owned())]);
        assert!(call_files(&insert, None).files.is_empty());
        // Another call with the same name but other arguments is read on its own.
        let read = call("read_file", r#"{"path": "src/c.rs"}"#);
        let other = call("read_file", r#"{"path": "src/d.rs"}"#);
        assert_ne!(
            call_files(&read, None).files,
            call_files(&other, None).files
        );
    }

    proptest::proptest! {
        /// One scan finds where the step starts as the last of the separators' `rfind`s.
        #[test]
        fn a_step_starts_past_the_last_separator(before in "[a &|;\n$(`)é]{0,40}") {
            let by_rfind = ["&&", "||", ";", "|", "\n", "$(", "`", "("]
                .iter()
                .filter_map(|sep| before.rfind(sep).map(|i| i + sep.len()))
                .max()
                .unwrap_or(0);
            proptest::prop_assert_eq!(step_start(&before), by_rfind);
        }
    }

    #[test]
    fn shell_steps_say_what_they_do_to_a_path() {
        assert_eq!(shell_op("cd /p && cat "), FileOp::Read);
        assert_eq!(shell_op("ls src; rm -f "), FileOp::Deleted);
        assert_eq!(shell_op("echo $(head "), FileOp::Read);
        assert_eq!(shell_op("make 2>&1 | tee "), FileOp::Created);
        assert_eq!(shell_op("cat a & grep x "), FileOp::Read);
    }

    #[test]
    fn commands_are_grouped_by_program_and_subcommand() {
        assert_eq!(
            command_program("cd /p && mix test test/a_test.exs 2>&1 | tail -5"),
            "mix test"
        );
        assert_eq!(
            command_program("MIX_ENV=test mix compile --force"),
            "mix compile"
        );
        assert_eq!(command_program("bash -lc 'git status'"), "git status");
        assert_eq!(command_program("cat /home/u/p/lib/a.ex"), "cat");
        assert_eq!(command_program("python reproduce.py"), "python");
        assert_eq!(command_program("/usr/bin/cargo test -p x"), "cargo test");
        assert_eq!(command_program("timeout 60 ponyc -V"), "ponyc");
        // Over several lines: the steps of every line, not the first line's `cd` and `…`.
        assert_eq!(command_program("cd /p &&\n  mix test --trace"), "mix test");
        assert_eq!(
            command_program("bash -lc 'cd /p &&\nmix format --check-formatted'"),
            "mix format"
        );
        assert_eq!(
            command_program("# run the suite\ncargo test -q"),
            "cargo test"
        );
        assert_eq!(command_program("cd /p"), "cd");
    }
}
