//! What a compaction keeps: the share of tool-argument paths, error identifiers, commands
//! and user requests of an original history that are still present in a compacted output
//! (issue 12, SPEC.md "The trail", "Measure it"). One place for the counting, shared by the
//! `what_compaction_keeps` test and, later, the BENCHMARKS table.
//!
//! The yardstick is deliberately independent of the trail's own extractor, so that the
//! trail is measured, not graded by itself: paths are the values of the common path keys
//! of tool-call arguments (and `apply_patch` headers); errors are exception class names,
//! compiler error codes and failing-test names printed by commands (file contents are code,
//! not errors, unless the result is flagged); commands are the shell tools' `command`
//! arguments; requests are the user's own messages. Which user messages a harness wrote is
//! the one definition shared with the trail: `src/trail/requests.rs`.
//!
//! Included by path from an integration test and from the library's own tests, this module
//! takes what it uses from its parent: the crate's `Block`, `Conversation`, `Message`,
//! `Role`, `tool_names`, `CallActivity`, and `requests` (an integration test includes
//! `src/trail/requests.rs` by path, with `mod markers { pub use
//! context_cascade::markers::*; }` at its root, which that file names).

use std::sync::OnceLock;

use super::{Block, CallActivity, Conversation, Message, Role, requests, tool_names};
use regex::Regex;
use serde_json::Value;

/// Argument keys whose value names a file (the keys agents use for the file they act on).
const PATH_KEYS: &[&str] = &[
    "file_path",
    "path",
    "notebook_path",
    "filename",
    "file_name",
];
/// Characters of a command's first line, and of a request, that must be found.
const COMMAND_HEAD: usize = 60;
const REQUEST_HEAD: usize = 200;

/// What an original history holds, each list distinct, in first-seen order.
#[derive(Debug, Clone, Default)]
pub struct Expected {
    pub paths: Vec<String>,
    pub errors: Vec<String>,
    pub commands: Vec<String>,
    pub requests: Vec<String>,
}

/// How many of each kind an output keeps: (kept, total).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Kept {
    pub paths: (usize, usize),
    pub errors: (usize, usize),
    pub commands: (usize, usize),
    pub requests: (usize, usize),
    /// Pinned and remembered messages planted by [`plant`] (`(0, 0)` when none was).
    pub pinned: (usize, usize),
}

impl Kept {
    /// Adds another fixture's counts (for totals).
    pub fn add(&mut self, other: Kept) {
        for (a, b) in [
            (&mut self.paths, other.paths),
            (&mut self.errors, other.errors),
            (&mut self.commands, other.commands),
            (&mut self.requests, other.requests),
            (&mut self.pinned, other.pinned),
        ] {
            a.0 += b.0;
            a.1 += b.1;
        }
    }
}

/// `k/n (p%)`, or `-` when there is nothing to keep.
pub fn share((kept, total): (usize, usize)) -> String {
    if total == 0 {
        return "-".to_owned();
    }
    format!(
        "{kept}/{total} ({:.0}%)",
        100.0 * kept as f64 / total as f64
    )
}

fn push(list: &mut Vec<String>, item: &str) {
    let item = item.trim();
    if !item.is_empty() && !list.iter().any(|x| x == item) {
        list.push(item.to_owned());
    }
}

fn arguments(value: &Value, key: Option<&str>, out: &mut Expected) {
    match value {
        Value::String(s) => {
            if key.is_some_and(|k| PATH_KEYS.contains(&k)) && !s.contains('\n') {
                push(&mut out.paths, s);
            }
            for (_, path) in tool_names::patch_files(s) {
                push(&mut out.paths, path);
            }
        }
        Value::Array(items) => items.iter().for_each(|v| arguments(v, key, out)),
        Value::Object(map) => map.iter().for_each(|(k, v)| arguments(v, Some(k), out)),
        _ => {}
    }
}

fn command_of(args: &Value) -> Option<String> {
    match args.get("command").or_else(|| args.get("cmd"))? {
        Value::String(s) => Some(s.clone()),
        Value::Array(items) => {
            let words: Vec<&str> = items.iter().filter_map(Value::as_str).collect();
            Some(words.join(" "))
        }
        _ => None,
    }
}

#[allow(clippy::expect_used)]
fn error_regex() -> &'static Regex {
    static RE: OnceLock<Regex> = OnceLock::new();
    RE.get_or_init(|| {
        Regex::new(concat!(
            r"\b((?:[A-Z][A-Za-z0-9_]*\.)*[A-Z][A-Za-z0-9_]*(?:Error|Exception))\b",
            r"|\berror\[?((?:E|TS|CS)\d{4})\]?",
            r"|(?m)^FAILED ([^\s]+)|^test ([^\s]+) \.\.\. FAILED|--- FAIL: ([^\s]+)",
            r"|(?m)^[ \t]+\d+\) (test .+) \([A-Za-z0-9_.]+\)[ \t]*$",
        ))
        .expect("static regex")
    })
}

/// The paths a shell command names in its arguments (a here-document is text, not
/// arguments): tokens with a separator whose last component is a file name (`name.ext`), or
/// that start at a root (`/`, `~/`, `./`, `../`); a `:line` suffix and an `--opt=` head are
/// not part of the path; globs, variables, URLs and devices are not files.
pub fn command_paths(command: &str) -> Vec<&str> {
    let args = command.split("<<").next().unwrap_or("");
    let separators = |c: char| c.is_whitespace() || "\"'`|;&()<>".contains(c);
    let mut out = Vec::new();
    for token in args.split(separators) {
        let token = token.rsplit_once('=').map_or(token, |(_, v)| v);
        let token = token.split(':').next().unwrap_or("");
        let token = token.trim_end_matches(['.', ',']);
        let odd = token.contains(['*', '?', '$', '{', '[']) || token.starts_with("/dev/");
        if !token.contains('/') || odd || token.len() < 3 {
            continue;
        }
        let name = token.trim_end_matches('/').rsplit('/').next().unwrap_or("");
        let file_name = name.rsplit_once('.').is_some_and(|(stem, ext)| {
            !stem.is_empty() && ext.chars().any(|c| c.is_ascii_alphabetic())
        });
        let rooted = ["/", "~/", "./", "../"]
            .iter()
            .any(|r| token.starts_with(r));
        if file_name || rooted && token.len() > 2 {
            out.push(token);
        }
    }
    out
}

/// What `messages` (an original history) holds.
pub fn expected(messages: &[Message]) -> Expected {
    let mut out = Expected::default();
    let mut activity: std::collections::HashMap<String, CallActivity> = Default::default();
    for message in messages {
        if message.role() == Role::User {
            let own: Vec<&str> = message
                .blocks()
                .iter()
                .filter_map(Block::as_text)
                .filter(|t| !requests::is_harness(t))
                .collect();
            push(&mut out.requests, &own.join("\n"));
        }
        for call in message.tool_calls() {
            let args = call.arguments_value().unwrap_or(Value::Null);
            let kind = tool_names::call_activity(&call.name, &args);
            arguments(&args, None, &mut out);
            if kind == CallActivity::Command {
                if let Some(command) = command_of(&args) {
                    for path in command_paths(&command) {
                        push(&mut out.paths, path);
                    }
                    push(&mut out.commands, &command);
                }
            }
            activity.insert(call.id.clone(), kind);
        }
        let flagged = |fields: &serde_json::Map<String, Value>| {
            fields.get("is_error").and_then(Value::as_bool) == Some(true)
        };
        for result in message.tool_results() {
            let kind = activity.get(&result.call_id).copied();
            let content = matches!(kind, Some(CallActivity::File(_)));
            if content && !flagged(&result.fields) && !flagged(message.fields()) {
                continue;
            }
            let text = result.joined_text();
            for c in error_regex().captures_iter(&text) {
                if let Some(id) = (1..=6).find_map(|i| c.get(i)) {
                    push(&mut out.errors, id.as_str());
                }
            }
        }
    }
    out
}

/// All the text of an output that an agent reads: message texts, tool results, and the
/// string values of tool-call arguments (parsed, so JSON escapes do not hide them).
pub fn output_text(conversation: &Conversation) -> String {
    fn strings(value: &Value, out: &mut String) {
        match value {
            Value::String(s) => {
                out.push_str(s);
                out.push('\n');
            }
            Value::Array(items) => items.iter().for_each(|v| strings(v, out)),
            Value::Object(map) => map.values().for_each(|v| strings(v, out)),
            _ => {}
        }
    }
    let mut out = String::new();
    for message in &conversation.messages {
        for block in message.blocks() {
            match block {
                Block::Text(t) => out.push_str(&t.text),
                Block::ToolResult(r) => out.push_str(&r.joined_text()),
                Block::ToolCall(c) => {
                    strings(&c.arguments_value().unwrap_or(Value::Null), &mut out)
                }
                _ => {}
            }
            out.push('\n');
        }
    }
    out
}

fn normalized(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

fn head(text: &str, chars: usize) -> String {
    normalized(text).chars().take(chars).collect()
}

/// A command as it is looked for: its first line without a `bash -lc` wrapper.
fn command_head(command: &str) -> String {
    let mut text = command.trim();
    for wrapper in ["bash -lc ", "bash -c ", "sh -c "] {
        text = text.strip_prefix(wrapper).unwrap_or(text);
    }
    head(text.lines().next().unwrap_or(""), COMMAND_HEAD)
}

/// `text` with the trail's shorthand spelled out, so that a path is looked for as the agent
/// reads it: `$ROOT` replaced by the root the nearest heading before it defines
/// (`Files ($ROOT = /home/u/p; ...)`), and a group `dir/{a.ex edited ×2, b.ex}` written as
/// one line per member (`dir/a.ex edited ×2`, `dir/b.ex`).
pub fn spelled_out(text: &str) -> String {
    let mut root: Option<&str> = None;
    let mut out = String::with_capacity(text.len());
    for line in text.lines() {
        if let Some(at) = line.find("$ROOT = ") {
            let rest = &line[at + "$ROOT = ".len()..];
            let end = rest.find([')', ';']).unwrap_or(rest.len());
            root = Some(rest[..end].trim());
        }
        let line = match root {
            Some(root) => line.replace("$ROOT", root),
            None => line.to_owned(),
        };
        expand_groups(&line, &mut out);
        out.push('\n');
    }
    out
}

/// Writes `line` with each `prefix/{member, member}` group as one line per member.
fn expand_groups(line: &str, out: &mut String) {
    let Some(open) = line.find("/{") else {
        out.push_str(line);
        return;
    };
    let Some(close) = line[open..].find('}').map(|i| open + i) else {
        out.push_str(line);
        return;
    };
    let start = line[..open].rfind(char::is_whitespace).map_or(0, |i| i + 1);
    out.push_str(&line[..start]);
    let prefix = &line[start..=open];
    for member in line[open + 2..close].split(", ") {
        out.push('\n');
        out.push_str(prefix);
        out.push_str(member);
    }
    out.push('\n');
    expand_groups(&line[close + 1..], out);
}

/// Whether `path` is spelled in `text` (spelled out) as a whole: not as the head of a
/// longer name (`a.ex` in `a.exs`).
fn has_path(text: &str, path: &str) -> bool {
    text.match_indices(path).any(|(at, _)| {
        let next = text[at + path.len()..].chars().next();
        next.is_none_or(|c| {
            !(c.is_alphanumeric() || "._-/~@+#%".contains(c)) || path.ends_with('/')
        })
    })
}

/// The paths of `expected` that the output `text` does not hold.
pub fn missing_paths(expected: &Expected, text: &str) -> Vec<String> {
    let text = spelled_out(text);
    (expected.paths.iter())
        .filter(|p| !has_path(&text, p))
        .cloned()
        .collect()
}

/// The shortest plain listing of `paths` that still spells each: relative to their longest
/// common directory, one per line (a lower bound for what any trail format can cost).
pub fn cheapest_listing(paths: &[String]) -> String {
    let Some(first) = paths.first() else {
        return String::new();
    };
    let mut common = first.rfind('/').map_or("", |i| &first[..=i]);
    for path in paths {
        while !path.starts_with(common) {
            let shorter = common.trim_end_matches('/');
            common = shorter.rfind('/').map_or("", |i| &shorter[..=i]);
        }
    }
    let mut out = format!("{common}\n");
    for path in paths {
        out.push_str(&path[common.len()..]);
        out.push('\n');
    }
    out
}

/// The distinct last components of `paths`, one per line: what any listing that spells the
/// paths must at least write.
pub fn file_names(paths: &[String]) -> String {
    let mut names: Vec<&str> = Vec::new();
    for path in paths {
        let name = path
            .trim_end_matches('/')
            .rsplit('/')
            .next()
            .unwrap_or(path);
        if !names.contains(&name) {
            names.push(name);
        }
    }
    names.join("\n")
}

/// How much of `expected` the output `text` still holds. A path counts when it is written
/// in full, or relative to a root the same text names (`$ROOT = /dir`, then `$ROOT/a.rs`):
/// the agent reads the same path either way.
pub fn kept(expected: &Expected, text: &str) -> Kept {
    let flat = normalized(text);
    let spelled = spelled_out(text);
    let count = |items: &[String], probe: &dyn Fn(&str) -> bool| {
        (items.iter().filter(|i| probe(i)).count(), items.len())
    };
    Kept {
        paths: count(&expected.paths, &|p| has_path(&spelled, p)),
        errors: count(&expected.errors, &|e| text.contains(e)),
        commands: count(&expected.commands, &|c| flat.contains(&command_head(c))),
        requests: count(&expected.requests, &|r| {
            flat.contains(&head(r, REQUEST_HEAD))
        }),
        pinned: (0, 0),
    }
}

/// The planted messages: the text of each pinned message, then of the remember request.
pub type Planted = Vec<String>;

/// What the user asks to be remembered in [`plant`]'s copy.
pub const REMEMBER: &str =
    "Please remember: the staging database is read-only, never run migrations against it.";

/// A copy of `conversation` with two messages of its middle pinned (the first assistant
/// messages with text of their own at or after a third and two thirds of the history) and a
/// user message asking to remember something inserted before the first assistant message
/// at or after the middle (after a tool result or an answer, where a user turn is valid).
/// Returns the copy and the texts of what was planted.
pub fn plant(conversation: &Conversation) -> (Conversation, Planted) {
    let mut copy = conversation.clone();
    let n = copy.messages.len();
    let mut planted = Vec::new();
    for from in [n / 3, 2 * n / 3] {
        let found = (from..n).find(|&i| {
            let m = &copy.messages[i];
            m.role() == Role::Assistant && !m.is_pinned() && !m.text_content().trim().is_empty()
        });
        if let Some(i) = found {
            copy.messages[i].pin();
            planted.push(copy.messages[i].text_content());
        }
    }
    let at = (n / 2..n).find(|&i| {
        let previous = &copy.messages[i - 1];
        copy.messages[i].role() == Role::Assistant
            && (previous.role() == Role::Tool
                || previous.role() == Role::Assistant && previous.tool_calls().next().is_none())
    });
    if let Some(at) = at {
        copy.messages
            .insert(at, Message::text(Role::User, REMEMBER));
        planted.push(REMEMBER.to_owned());
    }
    (copy, planted)
}

/// How many of the planted messages `output` holds as they were: (kept, planted).
pub fn kept_planted(planted: &Planted, output: &Conversation) -> (usize, usize) {
    let texts: Vec<String> = output.messages.iter().map(Message::text_content).collect();
    let kept = planted.iter().filter(|p| texts.contains(p)).count();
    (kept, planted.len())
}
