//! The commands of a trail, one line per program, written and read back:
//!
//! ```text
//! Commands:
//! - mix test ×6 (4 failed, 2 passed, last passed: 297 tests, 0 failures): `mix test`, `mix test test/a_test.exs`
//! - git status ×3
//! ```
//!
//! A long session runs the same few programs dozens of times; what the agent needs is how
//! often, how it went and how it went last. The outcome is only what the outputs stated
//! (an exit code, a test report, a traceback, `passed`): a run that stated nothing is counted
//! in the runs and nowhere else. The distinct commands follow when there is room.

use super::CommandEntry;

/// How much a program's line says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Detail {
    /// Counts, outcome and the distinct commands.
    Full,
    /// Counts and outcome.
    Outcome,
}

/// `(4 failed, 2 passed, last passed: 297 tests, 0 failures)`, or "" when no run stated
/// anything.
fn outcome(c: &CommandEntry) -> String {
    if c.failed == 0 && c.passed == 0 && c.last.is_none() {
        return String::new();
    }
    if c.runs <= 1 {
        return format!(" ({})", c.last.as_deref().unwrap_or("no outcome stated"));
    }
    let mut parts = Vec::new();
    if c.failed > 0 {
        parts.push(format!("{} failed", c.failed));
    }
    if c.passed > 0 {
        parts.push(format!("{} passed", c.passed));
    }
    parts.push(format!(
        "last {}",
        c.last.as_deref().unwrap_or("no outcome stated")
    ));
    format!(" ({})", parts.join(", "))
}

/// A program's line (without the leading `- `).
pub(crate) fn line(c: &CommandEntry, detail: Detail) -> String {
    let mut out = c.program.clone();
    if c.runs > 1 {
        out.push_str(&format!(" ×{}", c.runs));
    }
    out.push_str(&outcome(c));
    if detail == Detail::Full && !c.commands.is_empty() {
        let quoted: Vec<String> = (c.commands.iter())
            .map(|command| format!("`{}`", command.replace(['`', '\n'], "'")))
            .collect();
        out.push_str(": ");
        out.push_str(&quoted.join(", "));
    }
    out
}

/// Reads a program's line back; the older form (`` `command` ×2 → outcome ``) too.
pub(crate) fn parse_line(item: &str) -> CommandEntry {
    if item.starts_with('`') {
        return parse_older(item);
    }
    let (head, commands) = match item.split_once(": `") {
        Some((head, rest)) => (head, quoted(&format!("`{rest}"))),
        None => (item, Vec::new()),
    };
    let (head, outcome) = match head.strip_suffix(')').and_then(|h| h.split_once(" (")) {
        Some((head, outcome)) => (head, Some(outcome)),
        None => (head, None),
    };
    let (program, runs) = super::tree::split_count(head);
    let mut entry = CommandEntry {
        program: program.to_owned(),
        runs,
        failed: 0,
        passed: 0,
        last: None,
        commands,
        handle: None,
    };
    let Some(outcome) = outcome else {
        return entry;
    };
    let last = |text: &str| (text != "no outcome stated").then(|| text.to_owned());
    if runs <= 1 {
        entry.last = last(outcome);
        entry.failed = u32::from(outcome.starts_with("failed"));
        entry.passed = u32::from(outcome.starts_with("passed"));
        return entry;
    }
    let (counts, tail) = match outcome.split_once("last ") {
        Some((counts, tail)) => (counts, Some(tail)),
        None => (outcome, None),
    };
    for part in counts.split(", ") {
        match part.split_once(' ') {
            Some((n, "failed")) => entry.failed = n.parse().unwrap_or(0),
            Some((n, "passed")) => entry.passed = n.parse().unwrap_or(0),
            _ => {}
        }
    }
    entry.last = tail.and_then(last);
    entry
}

/// The backquoted commands of `` `a`, `b` ``.
fn quoted(text: &str) -> Vec<String> {
    text.split('`')
        .skip(1)
        .step_by(2)
        .map(str::to_owned)
        .collect()
}

/// `` `command` ×2 → outcome `` (the form of trails written before commands were grouped).
fn parse_older(item: &str) -> CommandEntry {
    let (head, outcome) = match item.rsplit_once(" → ") {
        Some((head, outcome)) if head.ends_with('`') || head.contains("` ×") => {
            (head, Some(outcome.to_owned()))
        }
        _ => (item, None),
    };
    let (quoted, runs) = super::tree::split_count(head);
    let command = quoted
        .strip_prefix('`')
        .and_then(|c| c.strip_suffix('`'))
        .unwrap_or(quoted);
    CommandEntry {
        program: crate::extract::command_program(command),
        runs,
        failed: 0,
        passed: 0,
        last: outcome,
        commands: vec![command.to_owned()],
        handle: None,
    }
}

/// `known` with the runs of `newer` of the same program added: counts summed, the newer
/// last outcome (when its runs stated one... or not: the latest run is the newer's), the
/// commands of both, first seen first.
pub(crate) fn add(known: &mut CommandEntry, newer: CommandEntry) {
    known.runs += newer.runs;
    known.failed += newer.failed;
    known.passed += newer.passed;
    if newer.runs > 0 {
        known.last = newer.last;
    }
    // The newer runs' removal holds the latest run.
    known.handle = newer.handle.or(known.handle);
    for command in newer.commands {
        if !known.commands.contains(&command) {
            known.commands.push(command);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(runs: u32, failed: u32, passed: u32, last: Option<&str>) -> CommandEntry {
        CommandEntry {
            program: "mix test".into(),
            runs,
            failed,
            passed,
            last: last.map(str::to_owned),
            commands: vec!["mix test".into(), "mix test test/a_test.exs:12".into()],
            handle: None,
        }
    }

    #[test]
    fn a_program_line_says_counts_and_outcomes_and_reads_back() {
        let c = entry(6, 4, 2, Some("passed: 297 tests, 0 failures"));
        let full = line(&c, Detail::Full);
        assert_eq!(
            full,
            "mix test ×6 (4 failed, 2 passed, last passed: 297 tests, 0 failures): `mix test`, `mix test test/a_test.exs:12`"
        );
        assert_eq!(parse_line(&full), c);
        let short = line(&c, Detail::Outcome);
        assert_eq!(
            short,
            "mix test ×6 (4 failed, 2 passed, last passed: 297 tests, 0 failures)"
        );
        assert_eq!(parse_line(&short).failed, 4);
        // Honest when unknown: nothing stated, nothing claimed.
        let quiet = entry(3, 0, 0, None);
        assert_eq!(line(&quiet, Detail::Outcome), "mix test ×3");
        let unknown_last = entry(3, 2, 0, None);
        assert_eq!(
            line(&unknown_last, Detail::Outcome),
            "mix test ×3 (2 failed, last no outcome stated)"
        );
        assert_eq!(parse_line(&line(&unknown_last, Detail::Full)), unknown_last);
        let once = entry(1, 1, 0, Some("failed: exit 1"));
        assert_eq!(line(&once, Detail::Outcome), "mix test (failed: exit 1)");
        assert_eq!(parse_line(&line(&once, Detail::Full)), once);
    }

    #[test]
    fn an_older_command_line_reads_as_its_program() {
        let c = parse_line("`mix test test/a_test.exs` ×2 → 3 tests, 1 failure");
        assert_eq!(c.program, "mix test");
        assert_eq!(c.runs, 2);
        assert_eq!(c.last.as_deref(), Some("3 tests, 1 failure"));
    }
}
