//! Messages → trail, in one pass over the removed messages and one over the later ones.
//!
//! Paths and commands come from tool-call arguments, errors and outcomes from tool results
//! (both read through [`crate::extract`], as the offline summarizer reads them), requests
//! from user messages. Later
//! messages are read only for the runs that can show an error fixed. Hash maps serve
//! lookups only; every list keeps history order.

use std::borrow::Cow;
use std::collections::HashMap;

use serde_json::{Map, Value};

use super::requests;
use super::{CommandEntry, ErrorEntry, FileEntry, Run, Trail, TrailConfig};
use crate::conversation::{Block, Message, Role, ToolCall, ToolResult};
use crate::extract::{self as errors, Outcome, Output, Verdict};
use crate::extract::{call_files, command_program, short_command};
use crate::markers;
use crate::recall::{Handle, HandleRef};
use crate::tool_names::{CallActivity, FileOp};

/// What a call is, remembered until its result comes.
struct CallInfo {
    output: Output,
    /// The program it runs (how the trail groups commands).
    program: Option<String>,
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
    /// With recall on: the handle the removed range is kept under, which every entry read
    /// from it names (the part that holds it is found once the trail is whole,
    /// `handles.rs`).
    handle: Option<HandleRef>,
}

impl<'c> Extractor<'c> {
    pub(crate) fn new(config: &'c TrailConfig, handle: Option<Handle>) -> Self {
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
            handle: handle.map(|handle| HandleRef { handle, part: None }),
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
            self.trail.set_request_handle(&quoted, self.handle);
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
        let program = files.command.as_deref().map(command_program);
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
            if let (Some(c), Some(program)) = (&command, &program) {
                self.command_run(program, c);
            }
        }
        let info = CallInfo {
            output,
            program,
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
                    handle: None,
                });
                self.file_last.push(0);
                self.trail.files.len() - 1
            }
        };
        let entry = &mut self.trail.files[index];
        entry.touches += 1;
        entry.handle = self.handle.or(entry.handle);
        if op != FileOp::Used {
            entry.ops.retain(|o| *o != op);
        }
        entry.ops.insert(0, op);
        drop_used(&mut entry.ops);
        self.file_last[index] = self.seq;
    }

    /// A run of `command` (shortened) whose program is `program`: grouped with the runs of
    /// the same program, its outcome unknown until its result says otherwise.
    fn command_run(&mut self, program: &str, command: &str) {
        let index = match self.command_index.get(program) {
            Some(&i) => i,
            None => {
                self.command_index
                    .insert(program.to_owned(), self.trail.commands.len());
                self.trail.commands.push(CommandEntry {
                    program: program.to_owned(),
                    runs: 0,
                    failed: 0,
                    passed: 0,
                    last: None,
                    commands: Vec::new(),
                    handle: None,
                });
                self.trail.commands.len() - 1
            }
        };
        let entry = &mut self.trail.commands[index];
        entry.runs += 1;
        entry.last = None;
        entry.handle = self.handle.or(entry.handle);
        if !entry.commands.iter().any(|c| c == command) {
            entry.commands.push(command.to_owned());
        }
    }

    /// What a run's output said of it, on its program's entry.
    fn command_outcome(&mut self, program: &str, verdict: Verdict, stated: Option<String>) {
        let Some(&i) = self.command_index.get(program) else {
            return;
        };
        let entry = &mut self.trail.commands[i];
        match verdict {
            Verdict::Failed => entry.failed += 1,
            Verdict::Passed => entry.passed += 1,
            Verdict::Unknown => {}
        }
        entry.last = match (verdict.word(), stated) {
            (Some(word), Some(text)) if text != word => Some(format!("{word}: {text}")),
            (Some(word), _) => Some(word.to_owned()),
            (None, _) => None,
        };
    }

    fn result(&mut self, result: &ToolResult, message: &Message, removed: bool) {
        let text = text_of(result);
        let trimmed = text.trim_start();
        if trimmed.starts_with(markers::COMPACTED) {
            // ② kept the result's error identifiers on its placeholder's second line.
            let listed = trimmed
                .lines()
                .nth(1)
                .and_then(|l| l.strip_prefix("errors: "));
            if let (true, Some(listed)) = (removed, listed) {
                let source = self.calls.get(&result.call_id).map(|i| i.source.clone());
                let source = source.unwrap_or_default();
                // The entry points into the range, at the placeholder: it lists the error
                // by the name the entry gives and carries ②'s own handle, whose output can
                // be long (a test run's is many parts, the failure in any of them).
                let listed = listed.split("; ").filter(|id| !id.trim().is_empty());
                for id in listed.filter(|id| !is_more_count(id)) {
                    self.error(id, &source, self.handle);
                }
            }
            return;
        }
        if trimmed.starts_with(markers::RESULT_REMOVED) || markers::is_cascade_notice(trimmed) {
            return;
        }
        let flagged = is_flagged(&result.fields) || is_flagged(message.fields());
        let (output, program, source) = match self.calls.get(&result.call_id) {
            Some(info) => (info.output, info.program.clone(), info.source.clone()),
            None => {
                let name = result.tool_name.clone().unwrap_or_default();
                (Output::Other, None, name)
            }
        };
        let ids = errors::error_ids(&text, output, flagged);
        let outcome = program.as_ref().map(|_| Outcome::of(&text));
        let succeeded =
            ids.is_empty() && outcome.as_ref().map_or(!flagged, |o| o.succeeded(flagged));
        if removed {
            if let (Some(program), Some(outcome)) = (&program, &outcome) {
                let verdict = errors::verdict(&text, outcome, !ids.is_empty(), flagged);
                let stated = outcome.text();
                self.command_outcome(program, verdict, stated);
            }
            for id in &ids {
                self.error(id, &source, self.handle);
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

    fn error(&mut self, id: &str, source: &str, handle: Option<HandleRef>) {
        let at = (self.runs.len(), errors::program(source));
        if let Some(&i) = self.error_index.get(id) {
            self.error_at[i] = at;
            let entry = &mut self.trail.errors[i];
            entry.handle = handle.or(entry.handle);
            return;
        }
        self.error_index
            .insert(id.to_owned(), self.trail.errors.len());
        self.trail.errors.push(ErrorEntry {
            text: id.to_owned(),
            source: (!source.is_empty()).then(|| source.to_owned()),
            fixed: false,
            handle,
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
                absolute.handle = absolute.handle.or(relative.handle);
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

/// A result's text as [`ToolResult::joined_text`] gives it, borrowed when one block holds
/// it all (most results): the trail reads every result ② compacts and ③ removes, and a
/// copy of each would be as long as the history.
fn text_of(result: &ToolResult) -> Cow<'_, str> {
    let mut texts = result.content.iter().filter_map(Block::as_text);
    match (texts.next(), texts.next()) {
        (None, _) => Cow::Borrowed(""),
        (Some(only), None) => Cow::Borrowed(only),
        _ => Cow::Owned(result.joined_text()),
    }
}

fn is_flagged(fields: &Map<String, Value>) -> bool {
    fields.get("is_error").and_then(Value::as_bool) == Some(true)
}

impl Trail {
    /// The trail of `removed` (the messages a step takes out, in history order); `later`
    /// (the messages after them) can show the removed range's errors fixed.
    #[cfg(test)]
    pub(crate) fn extract<'a>(
        removed: impl IntoIterator<Item = &'a Message>,
        later: impl IntoIterator<Item = &'a Message>,
        config: &TrailConfig,
    ) -> Trail {
        Trail::extract_kept(removed, later, config, None)
    }

    /// [`Trail::extract`] of a range that recall keeps under `handle` (`None`: recall is
    /// off, and the trail names no handle).
    pub(crate) fn extract_kept<'a>(
        removed: impl IntoIterator<Item = &'a Message>,
        later: impl IntoIterator<Item = &'a Message>,
        config: &TrailConfig,
        handle: Option<Handle>,
    ) -> Trail {
        let mut extractor = Extractor::new(config, handle);
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
        Self::lines_for_errors_of(result, call.map(|c| call_files(c, None).activity), flagged)
    }

    /// [`Trail::lines_for_errors`] for a result whose call's activity is known already.
    pub(crate) fn lines_for_errors_of(
        result: &ToolResult,
        activity: Option<CallActivity>,
        flagged: bool,
    ) -> Option<String> {
        let output = match activity {
            Some(CallActivity::File(_)) => Output::Content,
            Some(CallActivity::Command) => Output::Shell,
            _ => Output::Other,
        };
        let flagged = flagged || is_flagged(&result.fields);
        let ids = errors::error_ids(&text_of(result), output, flagged);
        (!ids.is_empty()).then(|| placeholder_errors(&ids))
    }
}

/// The longest `errors: ...` line ② writes on its placeholder with each error's message...
const PLACEHOLDER_ERRORS_CHARS: usize = 400;
/// ... and with the errors' names alone: a test run's failing tests are what the agent
/// needs next, and a result is only compacted when its placeholder is shorter (200 tokens
/// against a test run's output of thousands).
const PLACEHOLDER_NAMES_CHARS: usize = 800;

/// `errors: A; B`, never cutting an identifier: when the ids with their messages are over
/// [`PLACEHOLDER_ERRORS_CHARS`], each is written by its name alone (the class, the code, the
/// failing test: what a later trail and the agent search for) within
/// [`PLACEHOLDER_NAMES_CHARS`], and past that the rest is counted (`+2 more`). A cut id
/// (`fa…`) would be found by no search and read back by the trail as an error of its own.
fn placeholder_errors(ids: &[String]) -> String {
    let full = format!("errors: {}", ids.join("; "));
    if full.chars().count() <= PLACEHOLDER_ERRORS_CHARS {
        return full;
    }
    let mut line = "errors:".to_owned();
    for (i, id) in ids.iter().enumerate() {
        let short = errors::short_id(id);
        let more = ids.len() - i - 1;
        let tail = if more > 0 {
            format!("; +{more} more")
        } else {
            String::new()
        };
        let sep = if i == 0 { " " } else { "; " };
        let fits = line.chars().count() + sep.len() + short.chars().count() + tail.chars().count()
            <= PLACEHOLDER_NAMES_CHARS;
        if !fits {
            line.push_str(&format!("{sep}+{} more", ids.len() - i));
            break;
        }
        line.push_str(sep);
        line.push_str(short);
    }
    line
}

/// Whether a placeholder's listed id is the count of those left out (`+2 more`).
fn is_more_count(id: &str) -> bool {
    id.strip_prefix('+')
        .and_then(|r| r.strip_suffix(" more"))
        .is_some_and(|n| n.bytes().all(|b| b.is_ascii_digit()))
}

#[cfg(test)]
mod placeholder_tests {
    use super::*;

    #[test]
    fn a_long_error_line_keeps_whole_ids() {
        let long = "x".repeat(130);
        let ids: Vec<String> = (0..6)
            .map(|i| format!("RuntimeError{i}: {long}"))
            .chain((0..6).map(|i| format!("failing test: test number {i} (M)")))
            .collect();
        let line = placeholder_errors(&ids);
        assert!(line.chars().count() <= PLACEHOLDER_NAMES_CHARS, "{line}");
        assert!(!line.contains('…'), "{line}");
        assert!(
            line.starts_with("errors: RuntimeError0; RuntimeError1;"),
            "{line}"
        );
        assert!(line.contains("failing test: test number 5 (M)"), "{line}");
        let many: Vec<String> = (0..40)
            .map(|i| format!("failing test: t{i} (Mod)"))
            .collect();
        let line = placeholder_errors(&many);
        assert!(line.chars().count() <= PLACEHOLDER_NAMES_CHARS, "{line}");
        assert!(line.ends_with(" more"), "{line}");
        let listed: Vec<&str> = line["errors: ".len()..].split("; ").collect();
        assert!(is_more_count(listed.last().unwrap()));
        assert_eq!(
            listed.len() - 1
                + listed.last().unwrap()[1..]
                    .split(' ')
                    .next()
                    .unwrap()
                    .parse::<usize>()
                    .unwrap(),
            40
        );
    }
}
