//! Messages → trail, in one pass over the removed messages and one over the later ones.
//!
//! Paths and commands come from tool-call arguments (the argument keys and the path
//! recogniser of the offline summarizer, `offline/facts.rs` and `offline/scan.rs`), errors
//! and outcomes from tool results ([`super::errors`]), requests from user messages. Later
//! messages are read only for the runs that can show an error fixed. Hash maps serve
//! lookups only; every list keeps history order.

use std::collections::HashMap;

use serde_json::{Map, Value};

use super::errors::{self, Outcome, Output};
use super::requests;
use super::{CommandEntry, ErrorEntry, FileEntry, Run, Trail, TrailConfig};
use crate::conversation::{Block, Message, Role, ToolCall, ToolResult};
use crate::markers;
use crate::offline::facts::{COMMAND_KEYS, PATH_KEYS};
use crate::offline::scan::{self, PathContext};
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
pub(crate) fn call_files(call: &ToolCall, current_file: Option<&str>) -> CallFiles {
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
    if out.files.is_empty() && op == FileOp::Edited {
        if let Some(path) = current_file {
            out.files.push((op, path.to_owned()));
        }
    }
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
                    .then(|| scan::clean_path(s, PathContext::Prose))
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
    let scanned = &text[..errors::floor(text, COMMAND_SCAN)];
    let heredoc = scanned.find("<<").unwrap_or(scanned.len());
    for path in scan::command_paths(scanned) {
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
    let start = ["&&", "||", ";", "|", "\n", "$(", "`", "("]
        .iter()
        .filter_map(|sep| before.rfind(sep).map(|i| i + sep.len()))
        .max()
        .unwrap_or(0);
    let step = &before[start..];
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

/// A command as the trail lists it: its first line without a `bash -lc` wrapper, cut.
pub(crate) fn short_command(command: &str, max: usize) -> String {
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
    let mut lines = text.lines();
    let first = lines.next().unwrap_or("").trim();
    let short = errors::cut(first, max);
    if lines.next().is_some() && !short.ends_with('…') {
        format!("{short} …")
    } else {
        short
    }
}

/// What a call is, remembered until its result comes.
struct CallInfo {
    output: Output,
    /// The shortened command, for a shell tool.
    command: Option<String>,
    /// What produced an error of this call: the command, or the tool and its first path.
    source: String,
}

/// The one-pass builder.
pub(crate) struct Extractor<'c> {
    config: &'c TrailConfig,
    trail: Trail,
    calls: HashMap<String, CallInfo>,
    file_index: HashMap<String, usize>,
    file_last: Vec<u64>,
    command_index: HashMap<String, usize>,
    error_index: HashMap<String, usize>,
    /// Per error: the index in `runs` of its latest occurrence, and its program.
    error_at: Vec<(usize, String)>,
    runs: Vec<Run>,
    /// Earlier trails met in the removed range (in notices and summaries).
    embedded: Vec<Trail>,
    current_file: Option<String>,
    seq: u64,
}

impl<'c> Extractor<'c> {
    pub(crate) fn new(config: &'c TrailConfig) -> Self {
        Extractor {
            config,
            trail: Trail::default(),
            calls: HashMap::new(),
            file_index: HashMap::new(),
            file_last: Vec::new(),
            command_index: HashMap::new(),
            error_index: HashMap::new(),
            error_at: Vec::new(),
            runs: Vec::new(),
            embedded: Vec::new(),
            current_file: None,
            seq: 0,
        }
    }

    /// Takes a message into account: `removed` ones fill the trail, later ones only
    /// show errors fixed.
    pub(crate) fn message(&mut self, message: &Message, removed: bool) {
        if removed && message.role() == Role::User {
            self.user(message);
        }
        for block in message.blocks() {
            match block {
                Block::ToolCall(call) => self.call(call, removed),
                Block::ToolResult(result) => self.result(result, message, removed),
                _ => {}
            }
        }
    }

    fn user(&mut self, message: &Message) {
        let mut own: Vec<&str> = Vec::new();
        for text in message.blocks().iter().filter_map(Block::as_text) {
            let trimmed = text.trim_start();
            if markers::is_cascade_notice(trimmed) {
                let earlier = Trail::parse(trimmed);
                if !earlier.is_empty() {
                    self.embedded.push(earlier);
                }
            } else if !requests::is_harness(trimmed) {
                own.push(text);
            }
        }
        let text = own.join("\n");
        if !text.trim().is_empty() {
            let quoted = requests::quote(&text, self.config.request_chars);
            if !self.trail.requests.contains(&quoted) {
                self.trail.requests.push(quoted);
            }
        }
    }

    fn call(&mut self, call: &ToolCall, removed: bool) {
        let files = call_files(call, self.current_file.as_deref());
        let output = match files.activity {
            CallActivity::File(_) => Output::Content,
            CallActivity::Command => Output::Shell,
            CallActivity::Other => Output::Other,
        };
        let command = files
            .command
            .as_deref()
            .map(|c| short_command(c, self.config.command_chars));
        let source = match (&command, files.files.first()) {
            (Some(c), _) => c.clone(),
            (None, Some((_, path))) => format!("{} {path}", call.name),
            (None, None) => call.name.clone(),
        };
        if matches!(
            files.activity,
            CallActivity::File(FileOp::Read | FileOp::Created)
        ) {
            if let Some((_, path)) = files.files.first() {
                self.current_file = Some(path.clone());
            }
        }
        if removed {
            for (op, path) in &files.files {
                self.touch(path, *op);
            }
            if let Some(c) = &command {
                self.command_run(c);
            }
        }
        let info = CallInfo {
            output,
            command,
            source,
        };
        // Ids may be reused across turns: a result answers the latest call with its id.
        self.calls.insert(call.id.clone(), info);
    }

    fn touch(&mut self, path: &str, op: FileOp) {
        self.seq += 1;
        let index = match self.file_index.get(path) {
            Some(&i) => i,
            None => {
                self.file_index
                    .insert(path.to_owned(), self.trail.files.len());
                self.trail.files.push(FileEntry {
                    path: path.to_owned(),
                    ops: Vec::new(),
                    touches: 0,
                });
                self.file_last.push(0);
                self.trail.files.len() - 1
            }
        };
        let entry = &mut self.trail.files[index];
        entry.touches += 1;
        if op != FileOp::Used {
            entry.ops.retain(|o| *o != op);
        }
        entry.ops.insert(0, op);
        drop_used(&mut entry.ops);
        self.file_last[index] = self.seq;
    }

    fn command_run(&mut self, command: &str) {
        if let Some(&i) = self.command_index.get(command) {
            self.trail.commands[i].runs += 1;
            return;
        }
        self.command_index
            .insert(command.to_owned(), self.trail.commands.len());
        self.trail.commands.push(CommandEntry {
            command: command.to_owned(),
            runs: 1,
            outcome: None,
        });
    }

    fn result(&mut self, result: &ToolResult, message: &Message, removed: bool) {
        let text = result.joined_text();
        let trimmed = text.trim_start();
        if trimmed.starts_with(markers::COMPACTED)
            || trimmed.starts_with(markers::RESULT_REMOVED)
            || markers::is_cascade_notice(trimmed)
        {
            return;
        }
        let flagged = is_flagged(&result.fields) || is_flagged(message.fields());
        let (output, command, source) = match self.calls.get(&result.call_id) {
            Some(info) => (info.output, info.command.clone(), info.source.clone()),
            None => {
                let name = result.tool_name.clone().unwrap_or_default();
                (Output::Other, None, name)
            }
        };
        let ids = errors::error_ids(&text, output, flagged);
        let outcome = command.as_ref().map(|_| Outcome::of(&text));
        let succeeded =
            ids.is_empty() && outcome.as_ref().map_or(!flagged, |o| o.succeeded(flagged));
        if removed {
            if let Some(i) = command.as_ref().and_then(|c| self.command_index.get(c)) {
                self.trail.commands[*i].outcome = outcome.as_ref().and_then(Outcome::text);
            }
            for id in &ids {
                self.error(id, &source);
            }
        }
        if source.is_empty() {
            return;
        }
        self.runs.push(Run {
            program: errors::program(&source),
            succeeded,
            test_report: outcome.as_ref().is_some_and(|o| o.tests.is_some()),
            keys: ids.iter().map(|id| errors::key_of(id).to_owned()).collect(),
        });
    }

    fn error(&mut self, id: &str, source: &str) {
        let at = (self.runs.len(), errors::program(source));
        if let Some(&i) = self.error_index.get(id) {
            self.error_at[i] = at;
            return;
        }
        self.error_index
            .insert(id.to_owned(), self.trail.errors.len());
        self.trail.errors.push(ErrorEntry {
            text: id.to_owned(),
            source: (!source.is_empty()).then(|| source.to_owned()),
            fixed: false,
        });
        self.error_at.push(at);
    }

    /// The trail: files most recent first, errors marked fixed where a later run shows it,
    /// earlier trails of the range merged in.
    pub(crate) fn finish(mut self) -> Trail {
        for (i, (at, program)) in self.error_at.iter().enumerate() {
            let entry = &mut self.trail.errors[i];
            let key = errors::key_of(&entry.text);
            entry.fixed = self.runs[(*at).min(self.runs.len())..]
                .iter()
                .any(|run| shows_fixed(run, program, key));
        }
        self.trail.forget_fixed_failures();
        let mut order: Vec<usize> = (0..self.trail.files.len()).collect();
        order.sort_by_key(|&i| std::cmp::Reverse(self.file_last[i]));
        let mut files: Vec<Option<FileEntry>> = self.trail.files.drain(..).map(Some).collect();
        self.trail.files = fold_relative(order.iter().filter_map(|&i| files[i].take()).collect());
        // Every run here comes after an earlier trail's errors: a merge checks them all.
        self.trail.runs = self.runs;
        let mut merged = Trail::default();
        for earlier in self.embedded {
            merged = merged.merge(earlier);
        }
        merged.merge(self.trail)
    }
}

/// Keeps `used` (named by a command that does not say what it did) only when nothing
/// better is known about the file, and only once.
pub(crate) fn drop_used(ops: &mut Vec<FileOp>) {
    if ops.iter().any(|o| *o != FileOp::Used) {
        ops.retain(|o| *o != FileOp::Used);
    } else {
        ops.truncate(1);
    }
}

/// A relative path a command named (`lib/a.ex`, run in the project) is the file an absolute
/// path of a tool names (`/home/u/p/lib/a.ex`): one entry, under the absolute path (the most
/// recent one that ends with it), with both entries' operations and touches.
fn fold_relative(files: Vec<FileEntry>) -> Vec<FileEntry> {
    let target: Vec<Option<usize>> = files
        .iter()
        .map(|f| {
            let rel = f.path.trim_start_matches("./");
            if f.path.starts_with(['/', '~']) || rel.is_empty() || rel.starts_with("..") {
                return None;
            }
            let suffix = format!("/{rel}");
            files
                .iter()
                .position(|a| a.path.starts_with('/') && a.path.ends_with(&suffix))
        })
        .collect();
    let mut slots: Vec<Option<FileEntry>> = files.into_iter().map(Some).collect();
    for (i, t) in target.iter().enumerate() {
        let Some(t) = *t else { continue };
        if let Some(relative) = slots[i].take() {
            if let Some(absolute) = slots[t].as_mut() {
                absolute.touches += relative.touches;
                for op in relative.ops {
                    if !absolute.ops.contains(&op) {
                        absolute.ops.push(op);
                    }
                }
                drop_used(&mut absolute.ops);
            }
        }
    }
    slots.into_iter().flatten().collect()
}

/// Whether `run` shows an error with this key, first met in a run of `program`, fixed:
/// a later run of the same program that no longer reports it and either went well or
/// printed a test report (whose failures no longer include it).
pub(crate) fn shows_fixed(run: &Run, program: &str, key: &str) -> bool {
    run.program == program
        && !run.keys.iter().any(|k| k == key)
        && (run.succeeded || run.test_report && !run.keys.is_empty())
}

fn is_flagged(fields: &Map<String, Value>) -> bool {
    fields.get("is_error").and_then(Value::as_bool) == Some(true)
}

#[allow(dead_code)] // wired in phase 2
impl Trail {
    /// The trail of `removed` (the messages a step takes out, in history order); `later`
    /// (the messages after them) can show the removed range's errors fixed.
    pub(crate) fn extract<'a>(
        removed: impl IntoIterator<Item = &'a Message>,
        later: impl IntoIterator<Item = &'a Message>,
        config: &TrailConfig,
    ) -> Trail {
        let mut extractor = Extractor::new(config);
        removed.into_iter().for_each(|m| extractor.message(m, true));
        later.into_iter().for_each(|m| extractor.message(m, false));
        extractor.finish()
    }

    /// The second line of ②'s placeholder for this result: `errors: A; B`, when the result
    /// holds error identifiers. `call`: the call it answers (its tool says whether the
    /// output is file content, where only the tool's own failure counts); `flagged`: the
    /// message carrying it is marked as an error.
    pub(crate) fn lines_for_errors(
        result: &ToolResult,
        call: Option<&ToolCall>,
        flagged: bool,
    ) -> Option<String> {
        let output = match call.map(|c| call_files(c, None).activity) {
            Some(CallActivity::File(_)) => Output::Content,
            Some(CallActivity::Command) => Output::Shell,
            _ => Output::Other,
        };
        let flagged = flagged || is_flagged(&result.fields);
        let ids = errors::error_ids(&result.joined_text(), output, flagged);
        (!ids.is_empty()).then(|| errors::cut(&format!("errors: {}", ids.join("; ")), 400))
    }
}
