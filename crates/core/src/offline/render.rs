//! Writing the facts as the nine sections' bullet lines, at a given shortening level.

use super::facts::{Facts, MENTIONED, PATH_FLAGS};
use super::tools::TodoStatus;

/// How much of everything a rendering keeps; the summarizer lowers it step by step until
/// the summary fits its token limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Level {
    /// Characters of a quoted user message (and of any merged line).
    pub quote: usize,
    /// Characters of an error line, a plan sentence, a todo.
    pub snippet: usize,
    /// Bullets of sections 1, 3, 6 and 7 (what an agent cannot go on without).
    pub key_items: usize,
    /// Bullets of the other sections.
    pub other_items: usize,
    /// Identifiers listed in section 2.
    pub identifiers: usize,
}

impl Level {
    /// The next, smaller level. Bullets go first (a third fewer each step, quotes kept readable
    /// at 60 characters or more); once every section is down to its last bullet, quotes
    /// shrink to 20 characters.
    pub(crate) fn smaller(self) -> Level {
        let items_left = self.key_items > 1 || self.other_items > 0 || self.identifiers > 0;
        if items_left {
            return Level {
                quote: (self.quote * 4 / 5).max(60.min(self.quote)),
                snippet: (self.snippet * 4 / 5).max(40.min(self.snippet)),
                key_items: (self.key_items * 2 / 3).max(1),
                other_items: self.other_items * 2 / 3,
                identifiers: self.identifiers * 2 / 3,
            };
        }
        Level {
            quote: (self.quote * 3 / 5).max(20),
            snippet: (self.snippet * 3 / 5).max(16),
            ..self
        }
    }

    /// The number of bullets section `index` (0-based) may keep.
    pub(crate) fn items(&self, index: usize) -> usize {
        match index {
            0 | 2 | 5 | 6 => self.key_items,
            1 => self.identifiers,
            _ => self.other_items,
        }
    }
}

/// The label of section 8's tool-call tally (merged by summing).
pub(crate) const TOOL_CALLS_LABEL: &str = "Tool calls";
/// The label of section 8's message tally (merged by summing).
pub(crate) const MESSAGES_LABEL: &str = "Messages summarized";
/// Labels whose newest line replaces older ones when summaries merge.
pub(crate) const LATEST_LABELS: &[&str] =
    &["Last assistant message", "Last action", "Pending tool call"];

/// What a "latest" label stands for: the last call is either done or pending, and only the
/// newest of the two is true.
pub(crate) fn latest_key(label: &str) -> &str {
    match label {
        "Last action" | "Pending tool call" => "last call",
        other => other,
    }
}

/// The bullets of the nine sections written from `facts`.
pub(crate) fn sections(facts: &Facts, level: Level) -> [Vec<String>; 9] {
    let mut s: [Vec<String>; 9] = Default::default();
    let quote = |e: &super::excerpt::Excerpt, n: usize| format!("\"{}\"", e.render(n));

    // 1. User intent and goals
    if let Some(first) = &facts.first_request {
        s[0].push(format!("- Initial request: {}", quote(first, level.quote)));
    }
    let (constraints, _) = facts.constraints.clone().into_parts();
    for c in constraints {
        s[0].push(format!("- Later: {}", quote(&c, level.snippet)));
    }

    // 2. Key concepts and terminology: most frequent first, first seen on ties.
    let mut identifiers: Vec<(&String, &(u64, u64))> = facts.identifiers.iter().collect();
    identifiers.sort_by(|a, b| b.1.0.cmp(&a.1.0).then(a.1.1.cmp(&b.1.1)));
    for (name, _) in identifiers.into_iter().take(level.identifiers) {
        s[1].push(format!("- `{name}`"));
    }

    // 3. Files and paths: those acted on first, then those only mentioned.
    let acted = facts.paths.iter().filter(|p| p.flags != MENTIONED);
    let mentioned = facts.paths.iter().filter(|p| p.flags == MENTIONED);
    for entry in acted.chain(mentioned) {
        s[2].push(path_line(&entry.path, flag_names(entry.flags)));
    }

    // 4. Errors encountered and fixes
    let (errors, _) = facts.errors.clone().into_parts();
    for e in errors {
        let mut line = format!(
            "- {}: `{}`",
            tool_or_output(&e.tool),
            e.line.render(level.snippet)
        );
        if e.more > 0 {
            line.push_str(&format!(" (+{} more error lines)", e.more));
        }
        match &e.followup {
            Some(f) => line.push_str(&format!(" → next: {}", f.render(level.snippet))),
            None => line.push_str(" → no follow-up yet"),
        }
        s[3].push(line);
    }

    // 5. Problem-solving approach
    let (plans, _) = facts.plans.clone().into_parts();
    for p in plans {
        s[4].push(format!("- {}", p.render(level.snippet)));
    }

    // 6. Key user messages
    let (users, dropped) = facts.user_messages.clone().into_parts();
    // When some were dropped, the list is the first and the last N: the gap is mid-way.
    let half = users.len() / 2;
    for (i, u) in users.iter().enumerate() {
        if i == half && dropped > 0 {
            s[5].push(omitted(dropped));
        }
        s[5].push(format!("- {}", quote(u, level.quote)));
    }

    // 7. Pending tasks
    for todo in facts.todo_list.iter().flatten() {
        match todo.status {
            TodoStatus::Pending => s[6].push(format!("- [ ] {}", todo.text.render(level.snippet))),
            TodoStatus::InProgress => s[6].push(format!(
                "- [in progress] {}",
                todo.text.render(level.snippet)
            )),
            TodoStatus::Completed => {}
        }
    }
    let (open, _) = facts.open_todo_lines.clone().into_parts();
    for line in open {
        s[6].push(format!("- {}", strip_bullet(&line.render(level.snippet))));
    }

    // 8. Current progress
    for todo in facts.todo_list.iter().flatten() {
        if todo.status == TodoStatus::Completed {
            s[7].push(format!("- [x] {}", todo.text.render(level.snippet)));
        }
    }
    let (done, _) = facts.done_todo_lines.clone().into_parts();
    for line in done {
        s[7].push(format!("- {}", strip_bullet(&line.render(level.snippet))));
    }
    if !facts.tool_counts.is_empty() {
        let counts: Vec<(String, u64)> = facts
            .tool_counts
            .iter()
            .map(|(k, v)| (k.clone(), *v))
            .collect();
        s[7].push(tally_line(TOOL_CALLS_LABEL, counts));
    }
    let [users_n, assistants_n, results_n] = facts.message_counts;
    if users_n + assistants_n + results_n > 0 {
        let counts = [
            ("user", users_n),
            ("assistant", assistants_n),
            ("tool results", results_n),
        ]
        .into_iter()
        .filter(|(_, n)| *n > 0)
        .map(|(k, n)| (k.to_owned(), n))
        .collect();
        s[7].push(tally_line(MESSAGES_LABEL, counts));
    }
    // Last, so that it is what a cut section keeps.
    if let Some(last) = &facts.last_assistant_text {
        s[7].push(format!(
            "- Last assistant message: {}",
            quote(last, level.quote)
        ));
    }

    // 9. Next steps
    for p in &facts.last_plans {
        s[8].push(format!("- {}", p.render(level.snippet)));
    }
    for todo in facts.todo_list.iter().flatten() {
        if todo.status == TodoStatus::InProgress {
            s[8].push(format!("- Continue: {}", todo.text.render(level.snippet)));
        }
    }
    if let Some((call, answered)) = &facts.last_call {
        let label = if *answered {
            "Last action"
        } else {
            "Pending tool call"
        };
        s[8].push(format!("- {label}: {call}"));
    }
    s
}

/// A section 3 bullet.
pub(crate) fn path_line(path: &str, flags: Vec<String>) -> String {
    if flags.is_empty() {
        format!("- `{path}`")
    } else {
        format!("- `{path}` ({})", flags.join(", "))
    }
}

fn flag_names(flags: u8) -> Vec<String> {
    PATH_FLAGS
        .iter()
        .filter(|(bit, _)| flags & bit != 0)
        // "mentioned" says nothing more once the agent acted on the path.
        .filter(|(bit, _)| *bit != MENTIONED || flags == MENTIONED)
        .map(|(_, name)| (*name).to_owned())
        .collect()
}

/// The order of path flags when merged lines are combined.
pub(crate) fn flag_rank(name: &str) -> usize {
    PATH_FLAGS
        .iter()
        .position(|(_, n)| *n == name)
        .unwrap_or(PATH_FLAGS.len())
}

/// `- Tool calls: Bash ×67, Edit ×32` — most first, then by name.
pub(crate) fn tally_line(label: &str, mut counts: Vec<(String, u64)>) -> String {
    counts.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    let items: Vec<String> = counts.iter().map(|(k, n)| format!("{k} ×{n}")).collect();
    format!("- {label}: {}", items.join(", "))
}

/// The marker written where bullets were left out.
pub(crate) fn omitted(count: usize) -> String {
    format!("- … ({count} more items omitted)")
}

/// Whether a line is an omission marker (never carried into a merged summary).
pub(crate) fn is_omitted_marker(line: &str) -> bool {
    line.starts_with("- … (") && line.ends_with("more items omitted)")
}

fn tool_or_output(tool: &str) -> &str {
    if tool.is_empty() { "tool output" } else { tool }
}

fn strip_bullet(line: &str) -> &str {
    line.trim_start()
        .strip_prefix("- ")
        .or_else(|| line.trim_start().strip_prefix("* "))
        .unwrap_or(line)
        .trim_start()
}
