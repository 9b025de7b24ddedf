//! One linear pass over the messages to summarize, gathering what the nine sections need.
//!
//! Everything kept is bounded: excerpts instead of texts, first-and-last lists instead of
//! whole histories, capped maps. Hash maps serve lookups only: whatever is written out is
//! ordered by first appearance or by a total order, so the same input always gives the same
//! summary.

use std::collections::{BTreeMap, HashMap, HashSet};

use serde_json::Value;

use super::excerpt::{Bounded, Excerpt};
use super::scan;
use super::tools::{Todo, describe_call, todo_list};
use crate::conversation::{Block, Message, Role, ToolCall, ToolResult};
use crate::extract::{self, COMMAND_KEYS, PATH_KEYS, PathContext};
use crate::markers;
use crate::tool_names::{ToolKind, ToolPolicy};

/// What the agent did with a path (bit flags, rendered in this order).
pub(crate) const PATH_FLAGS: [(u8, &str); 6] = [
    (CREATED, "created"),
    (EDITED, "edited"),
    (READ, "read"),
    (SEARCHED, "searched"),
    (COMMAND, "in a command"),
    (MENTIONED, "mentioned"),
];
const CREATED: u8 = 1;
const EDITED: u8 = 2;
const READ: u8 = 4;
const SEARCHED: u8 = 8;
const COMMAND: u8 = 16;
pub(crate) const MENTIONED: u8 = 32;

/// How much of one text is scanned for paths, identifiers and todo lines: the head of a
/// huge paste or tool output carries its names; the rest would only add noise.
const SCAN_HEAD: usize = 16 * 1024;
/// Caps that keep memory bounded on any input.
const MAX_IDENTIFIERS: usize = 5_000;
const MAX_MENTIONED_PATHS: usize = 200;
const LIST_CAP: usize = 40;
const ERROR_LINES_PER_RESULT: usize = 3;
const CONSTRAINTS_PER_MESSAGE: usize = 4;

/// A path and what was done with it.
#[derive(Debug, Clone)]
pub(crate) struct PathEntry {
    pub path: String,
    pub flags: u8,
}

/// An error line seen in tool output and what the assistant did next.
#[derive(Debug, Clone)]
pub(crate) struct ErrorEntry {
    pub tool: String,
    pub line: Excerpt,
    pub more: usize,
    pub followup: Option<Excerpt>,
}

/// Everything the sections are written from.
pub(crate) struct Facts {
    pub first_request: Option<Excerpt>,
    pub constraints: Bounded<Excerpt>,
    pub user_messages: Bounded<Excerpt>,
    /// identifier → (occurrences, first seen). Only looked up while gathering; rendering
    /// sorts it by (count, first seen), a total order, so hashing never shows in output.
    pub identifiers: HashMap<String, (u64, u64)>,
    pub paths: Vec<PathEntry>,
    pub errors: Bounded<ErrorEntry>,
    pub plans: Bounded<Excerpt>,
    pub last_plans: Vec<Excerpt>,
    pub open_todo_lines: Bounded<Excerpt>,
    pub done_todo_lines: Bounded<Excerpt>,
    pub todo_list: Option<Vec<Todo>>,
    pub tool_counts: BTreeMap<String, u64>,
    pub last_assistant_text: Option<Excerpt>,
    /// The last tool call, described, and whether its result is among the messages.
    pub last_call: Option<(String, bool)>,
    /// Bodies of `[context summary]` messages met among the messages.
    pub embedded_summaries: Vec<String>,
    pub message_counts: [u64; 3],
}

/// Builds the facts from the messages in one pass.
pub(crate) struct Gatherer {
    facts: Facts,
    quote_keep: usize,
    snippet_keep: usize,
    policy: ToolPolicy,
    /// path → index in `facts.paths` (lookups only; the order is the vector's)
    path_index: HashMap<String, usize>,
    mentioned_only: usize,
    identifiers_seen: u64,
    call_kinds: BTreeMap<String, (String, ToolKind)>,
    last_call_id: Option<String>,
    awaiting_followup: Vec<ErrorEntry>,
    errors_seen: HashSet<String>,
}

impl Gatherer {
    pub(crate) fn new(quote_keep: usize, snippet_keep: usize) -> Self {
        Gatherer {
            facts: Facts {
                first_request: None,
                constraints: Bounded::new(LIST_CAP),
                user_messages: Bounded::new(LIST_CAP * 4),
                identifiers: HashMap::new(),
                paths: Vec::new(),
                errors: Bounded::new(LIST_CAP),
                plans: Bounded::new(LIST_CAP),
                last_plans: Vec::new(),
                open_todo_lines: Bounded::new(LIST_CAP),
                done_todo_lines: Bounded::new(LIST_CAP),
                todo_list: None,
                tool_counts: BTreeMap::new(),
                last_assistant_text: None,
                last_call: None,
                embedded_summaries: Vec::new(),
                message_counts: [0; 3],
            },
            quote_keep,
            snippet_keep,
            policy: ToolPolicy::default(),
            path_index: HashMap::new(),
            mentioned_only: 0,
            identifiers_seen: 0,
            call_kinds: BTreeMap::new(),
            last_call_id: None,
            awaiting_followup: Vec::new(),
            errors_seen: HashSet::new(),
        }
    }

    /// Takes one message into account.
    pub(crate) fn message(&mut self, message: &Message) {
        match message.role() {
            Role::System | Role::Developer => {}
            Role::User => {
                self.user_text(&message.text_content());
                message.tool_results().for_each(|r| self.result(r, message));
            }
            Role::Assistant => {
                self.facts.message_counts[1] += 1;
                let text = message.text_content();
                let text = if markers::is_cascade_notice(text.trim_start()) {
                    ""
                } else {
                    text.trim()
                };
                if !text.is_empty() {
                    self.assistant_text(text);
                }
                let calls: Vec<&ToolCall> = message.tool_calls().collect();
                calls.iter().for_each(|c| self.call(c));
                self.resolve_followups(text, calls.first().copied());
            }
            Role::Tool | Role::Function => {
                message.tool_results().for_each(|r| self.result(r, message));
            }
        }
    }

    /// The facts, once every message was seen.
    pub(crate) fn finish(mut self) -> Facts {
        for entry in std::mem::take(&mut self.awaiting_followup) {
            self.facts.errors.push(entry);
        }
        self.facts
    }

    fn user_text(&mut self, text: &str) {
        let trimmed = text.trim_start();
        if let Some(body) = trimmed.strip_prefix(markers::SUMMARY_PREFIX) {
            // An earlier summary: merged section by section, not summarized as text.
            self.facts.embedded_summaries.push(body.to_owned());
            return;
        }
        if trimmed.is_empty() || markers::is_cascade_notice(trimmed) {
            return;
        }
        self.facts.message_counts[0] += 1;
        let excerpt = Excerpt::new(trimmed, self.quote_keep);
        self.facts.user_messages.push(excerpt.clone());
        let head = head(trimmed);
        if self.facts.first_request.is_none() {
            self.facts.first_request = Some(excerpt);
        } else {
            // A few per message, so that one long paste does not crowd out the others
            // (every message is quoted whole in section 6 anyway).
            let constraints = scan::sentences(head)
                .into_iter()
                .filter(|s| scan::is_constraint(s))
                .take(CONSTRAINTS_PER_MESSAGE);
            for sentence in constraints {
                let e = Excerpt::new(sentence, self.snippet_keep);
                self.facts.constraints.push(e);
            }
        }
        self.todo_lines(head);
        self.identifiers(head);
        self.prose_paths(head);
    }

    fn assistant_text(&mut self, text: &str) {
        self.facts.last_assistant_text = Some(Excerpt::new(text, self.quote_keep));
        let head = head(text);
        let plans: Vec<Excerpt> = scan::sentences(head)
            .into_iter()
            .filter(|s| scan::is_plan(s))
            .map(|s| Excerpt::new(s, self.snippet_keep))
            .collect();
        if !plans.is_empty() {
            plans.iter().for_each(|p| self.facts.plans.push(p.clone()));
            self.facts.last_plans = plans;
        }
        self.todo_lines(head);
        self.identifiers(head);
        self.prose_paths(head);
    }

    fn todo_lines(&mut self, text: &str) {
        for line in text.lines() {
            if scan::is_done_line(line) {
                self.facts
                    .done_todo_lines
                    .push(Excerpt::new(line, self.snippet_keep));
            } else if scan::is_todo_line(line) {
                self.facts
                    .open_todo_lines
                    .push(Excerpt::new(line, self.snippet_keep));
            }
        }
    }

    fn identifiers(&mut self, text: &str) {
        let map = &mut self.facts.identifiers;
        let seen = &mut self.identifiers_seen;
        scan::identifiers_in(text, |word| {
            if let Some(entry) = map.get_mut(word) {
                entry.0 += 1;
            } else if map.len() < MAX_IDENTIFIERS {
                map.insert(word.to_owned(), (1, *seen));
                *seen += 1;
            }
        });
    }

    fn prose_paths(&mut self, text: &str) {
        for path in extract::paths_in(text, PathContext::Prose) {
            self.add_path(path, MENTIONED);
        }
    }

    fn add_path(&mut self, path: &str, flag: u8) {
        let path = path.trim();
        let trivial = matches!(path, "" | "." | ".." | "./" | "../" | "/" | "~");
        if trivial || path.len() > 500 || path.contains('\n') || path.contains("://") {
            return;
        }
        if let Some(&index) = self.path_index.get(path) {
            let entry = &mut self.facts.paths[index];
            if entry.flags == MENTIONED && flag != MENTIONED {
                self.mentioned_only -= 1;
            }
            entry.flags |= flag;
            return;
        }
        if flag == MENTIONED {
            if self.mentioned_only >= MAX_MENTIONED_PATHS {
                return;
            }
            self.mentioned_only += 1;
        }
        self.path_index
            .insert(path.to_owned(), self.facts.paths.len());
        self.facts.paths.push(PathEntry {
            path: path.to_owned(),
            flags: flag,
        });
    }

    fn call(&mut self, call: &ToolCall) {
        *self.facts.tool_counts.entry(call.name.clone()).or_insert(0) += 1;
        let args = call
            .arguments_value()
            .unwrap_or_else(|| Value::String(call.arguments_text().into_owned()));
        let kind = self.policy.kind(&call.name, &args);
        let flag = match kind {
            ToolKind::Read => READ,
            ToolKind::Search => SEARCHED,
            ToolKind::Edit => EDITED,
            ToolKind::Write => CREATED,
            ToolKind::Shell => COMMAND,
            ToolKind::Fetch | ToolKind::Other => MENTIONED,
        };
        self.arguments(&args, flag, None);
        if let Some(thought) = args.get("thought").and_then(Value::as_str) {
            // OpenHands' `think` tool: the reasoning itself.
            for sentence in scan::sentences(head(thought)).into_iter().take(3) {
                self.facts
                    .plans
                    .push(Excerpt::new(sentence, self.snippet_keep));
            }
        }
        if let Some(list) = todo_list(&args, self.snippet_keep) {
            self.facts.todo_list = Some(list);
        }
        self.call_kinds
            .insert(call.id.clone(), (call.name.clone(), kind));
        self.last_call_id = Some(call.id.clone());
        self.facts.last_call = Some((describe_call(call, &args), false));
    }

    /// Walks tool arguments: paths under path keys, paths inside commands and patches,
    /// identifiers in the other string values.
    fn arguments(&mut self, value: &Value, flag: u8, key: Option<&str>) {
        match value {
            Value::String(s) => match key {
                Some(k) if PATH_KEYS.contains(&k) => self.add_path(s, flag),
                Some(k) if COMMAND_KEYS.contains(&k) => self.command(s),
                _ => {
                    self.patch_paths(s);
                    let head = &s[..extract::floor_char_boundary(s, 4096)];
                    self.identifiers(head);
                    // A subagent's prompt or a question names files in prose; the text an
                    // edit or write carries is code, where `a.b` is seldom a file.
                    if flag == MENTIONED {
                        self.prose_paths(head);
                    }
                }
            },
            Value::Array(items) => {
                if key.is_some_and(|k| COMMAND_KEYS.contains(&k)) {
                    // Codex: `["bash", "-lc", "cat src/lib.rs"]`
                    let joined: Vec<&str> = items.iter().filter_map(Value::as_str).collect();
                    self.command(&joined.join(" "));
                } else {
                    items.iter().for_each(|v| self.arguments(v, flag, key));
                }
            }
            Value::Object(map) => {
                for (k, v) in map {
                    self.arguments(v, flag, Some(k));
                }
            }
            _ => {}
        }
    }

    fn command(&mut self, command: &str) {
        let command = head(command);
        for path in extract::command_paths(command) {
            self.add_path(path, COMMAND);
        }
        self.patch_paths(command);
    }

    /// `apply_patch` envelopes name the files they add and change (one reading of the
    /// envelope, shared with the trail: `tool_names::patch_files`).
    fn patch_paths(&mut self, text: &str) {
        for (op, path) in crate::tool_names::patch_files(text) {
            let kind = match op {
                crate::tool_names::FileOp::Created => CREATED,
                _ => EDITED,
            };
            self.add_path(path, kind);
        }
    }

    fn result(&mut self, result: &ToolResult, message: &Message) {
        self.facts.message_counts[2] += 1;
        if self.last_call_id.as_deref() == Some(result.call_id.as_str()) {
            if let Some(last) = &mut self.facts.last_call {
                last.1 = true;
            }
        }
        let (tool, kind) = self.call_kinds.remove(&result.call_id).unwrap_or_else(|| {
            let name = result.tool_name.clone().unwrap_or_default();
            let kind = self.policy.kind(&name, &Value::Null);
            (name, kind)
        });
        let flag = |m: &serde_json::Map<String, Value>| {
            m.get("is_error").and_then(Value::as_bool) == Some(true)
        };
        let flagged = flag(&result.fields) || flag(message.fields());
        for text in result.content.iter().filter_map(Block::as_text) {
            if markers::is_cascade_notice(text) || text.starts_with(markers::COMPACTED) {
                continue;
            }
            let content_tool = matches!(
                kind,
                ToolKind::Read | ToolKind::Search | ToolKind::Edit | ToolKind::Write
            );
            if content_tool && !flagged {
                if let Some(failure) = extract::failure_head(text) {
                    self.error_lines(&tool, &failure, true);
                }
            } else {
                self.error_lines(&tool, text, flagged);
            }
            let head = head(text);
            self.prose_paths(head);
            self.identifiers(&head[..extract::floor_char_boundary(head, 4096)]);
        }
    }

    fn error_lines(&mut self, tool: &str, text: &str, flagged: bool) {
        let (mut lines, more) = extract::error_lines(text, ERROR_LINES_PER_RESULT);
        if lines.is_empty() && flagged {
            // Flagged as an error but no recognizable line: its first line says what.
            lines.extend(text.lines().map(str::trim).find(|l| !l.is_empty()));
        }
        for line in lines {
            let excerpt = Excerpt::new(line, self.snippet_keep);
            if !self.errors_seen.insert(excerpt.render(self.snippet_keep)) {
                continue;
            }
            self.awaiting_followup.push(ErrorEntry {
                tool: tool.to_owned(),
                line: excerpt,
                more,
                followup: None,
            });
        }
    }

    /// The assistant's next move after errors: what it said, then what it called.
    fn resolve_followups(&mut self, text: &str, first_call: Option<&ToolCall>) {
        if self.awaiting_followup.is_empty() {
            return;
        }
        let mut followup = scan::sentences(head(text))
            .into_iter()
            .next()
            .unwrap_or("")
            .to_owned();
        if let Some(call) = first_call {
            let args = call.arguments_value().unwrap_or(Value::Null);
            if !followup.is_empty() {
                followup.push_str(" → ");
            }
            followup.push_str(&describe_call(call, &args));
        }
        let followup = (!followup.is_empty()).then(|| Excerpt::new(&followup, self.snippet_keep));
        for mut entry in std::mem::take(&mut self.awaiting_followup) {
            entry.followup = followup.clone();
            self.facts.errors.push(entry);
        }
    }
}

/// The scanned head of a text, cut on a character boundary.
fn head(text: &str) -> &str {
    &text[..extract::floor_char_boundary(text, SCAN_HEAD)]
}
