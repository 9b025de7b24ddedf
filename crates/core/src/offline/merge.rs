//! Merging summaries section by section: an earlier summary, chunk summaries, then the
//! new facts. Identical lines are kept once; a path listed twice keeps one line with both
//! flags; tallies add up; "last ..." lines keep only the newest.

use std::collections::BTreeMap;

use super::excerpt::shorten;
use super::render::{
    LATEST_LABELS, MESSAGES_LABEL, TOOL_CALLS_LABEL, flag_rank, is_omitted_marker, latest_key,
    omitted, path_line, tally_line,
};
use crate::markers;

const INITIAL: &str = "- Initial request: ";
const LATER: &str = "- Later: ";

/// One section being merged.
#[derive(Debug, Default)]
pub(crate) struct SectionMerge {
    lines: Vec<String>,
    /// line → index, to keep identical lines once
    present: BTreeMap<String, usize>,
    /// label ("Last action", "Tool calls", a path) → index of its line
    keyed: BTreeMap<String, usize>,
}

impl SectionMerge {
    /// Adds a line of section `index` (0-based), merging it with an earlier line if they
    /// say the same thing. `limit` shortens long lines taken from earlier summaries.
    pub(crate) fn add(&mut self, index: usize, line: &str, limit: Option<usize>) {
        let line = line.trim_end();
        let trimmed = line.trim();
        if trimmed.is_empty() || is_omitted_marker(trimmed) || markers::is_cascade_notice(trimmed) {
            return;
        }
        let line = match limit {
            // Paths are never cut: a shortened path is a wrong path.
            Some(n) if index != 2 && line.chars().count() > n => shorten(line, n),
            _ => line.to_owned(),
        };
        if self.present.contains_key(&line) {
            return;
        }
        // Each summarized part opens with its own first request; only the first of them
        // is the initial one.
        let line = match line.strip_prefix(INITIAL) {
            Some(rest) if index == 0 && self.keyed.contains_key(INITIAL) => {
                format!("{LATER}{rest}")
            }
            Some(_) if index == 0 => {
                self.keyed.insert(INITIAL.to_owned(), self.lines.len());
                line
            }
            _ => line,
        };
        if self.present.contains_key(&line) {
            return;
        }
        if index == 2 {
            if let Some((path, flags)) = parse_path_line(&line) {
                return self.merge_path(path, flags);
            }
        }
        if let Some((label, rest)) = labelled(&line) {
            if label == TOOL_CALLS_LABEL || label == MESSAGES_LABEL {
                return self.merge_tally(label, rest);
            }
            if LATEST_LABELS.contains(&label) {
                // Only the newest "last ..." line is true; the newest comes last.
                // The newest goes last (where a cut section keeps it); the older line is
                // blanked and dropped when the section is finished.
                let key = latest_key(label);
                if let Some(&at) = self.keyed.get(key) {
                    self.replace(at, String::new());
                }
                self.keyed.insert(key.to_owned(), self.lines.len());
            }
        }
        self.push(line);
    }

    fn push(&mut self, line: String) {
        self.present.insert(line.clone(), self.lines.len());
        self.lines.push(line);
    }

    fn replace(&mut self, at: usize, line: String) {
        if let Some(old) = self.lines.get_mut(at) {
            self.present.remove(old);
            self.present.insert(line.clone(), at);
            *old = line;
        }
    }

    fn merge_path(&mut self, path: &str, flags: Vec<String>) {
        let key = format!("path:{path}");
        let Some(&at) = self.keyed.get(&key) else {
            self.keyed.insert(key, self.lines.len());
            return self.push(path_line(path, flags));
        };
        let mut all = self
            .lines
            .get(at)
            .and_then(|l| parse_path_line(l))
            .map(|(_, f)| f)
            .unwrap_or_default();
        for f in flags {
            if !all.contains(&f) {
                all.push(f);
            }
        }
        if all.len() > 1 {
            all.retain(|f| f != "mentioned");
        }
        all.sort_by_key(|f| flag_rank(f));
        self.replace(at, path_line(path, all));
    }

    fn merge_tally(&mut self, label: &str, rest: &str) {
        let mut counts = parse_tally(rest);
        if let Some(&at) = self.keyed.get(label) {
            let earlier = self
                .lines
                .get(at)
                .and_then(|l| labelled(l))
                .map(|(_, r)| parse_tally(r))
                .unwrap_or_default();
            for (name, n) in earlier {
                *counts.entry(name).or_insert(0) += n;
            }
            let line = tally_line(label, counts.into_iter().collect());
            self.replace(at, line);
        } else {
            self.keyed.insert(label.to_owned(), self.lines.len());
            self.push(tally_line(label, counts.into_iter().collect()));
        }
    }

    /// The merged lines, at most `max` of them: the first `head` and the rest from the end,
    /// with a marker where lines were left out.
    pub(crate) fn finish(self, max: usize, head: usize) -> Vec<String> {
        let mut lines = self.lines;
        lines.retain(|l| !l.is_empty());
        if lines.len() <= max {
            return lines;
        }
        let head = head.min(max);
        let tail = max - head;
        let dropped = lines.len() - max;
        let mut out: Vec<String> = lines.drain(..head).collect();
        if max > 0 {
            out.push(omitted(dropped));
        }
        let keep_from = lines.len() - tail;
        out.extend(lines.drain(keep_from..));
        out
    }
}

impl SectionMerge {
    /// The merged path lines, at most `max` of them: when some must go, the ones the agent
    /// did least with go first (mentioned, then only used in a command, then searched),
    /// and the survivors keep their first-seen order. A marker ends a cut list.
    pub(crate) fn finish_paths(self, max: usize) -> Vec<String> {
        let lines = self.lines;
        if lines.len() <= max {
            return lines;
        }
        let mut by_rank: Vec<(usize, usize)> = lines
            .iter()
            .enumerate()
            .map(|(i, l)| (path_importance(l), i))
            .collect();
        by_rank.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
        let mut keep: Vec<usize> = by_rank.iter().take(max).map(|(_, i)| *i).collect();
        keep.sort_unstable();
        let dropped = lines.len() - keep.len();
        let mut out: Vec<String> = keep.into_iter().map(|i| lines[i].clone()).collect();
        if max > 0 {
            out.push(omitted(dropped));
        }
        out
    }
}

/// How much a path line matters: written > read > searched > in a command > mentioned.
fn path_importance(line: &str) -> usize {
    let Some((_, flags)) = parse_path_line(line) else {
        return 0;
    };
    flags
        .iter()
        .map(|f| match f.as_str() {
            "created" | "edited" => 5,
            "read" => 4,
            "searched" => 3,
            "in a command" => 2,
            "mentioned" => 1,
            _ => 0,
        })
        .max()
        .unwrap_or(0)
}

/// Whether a line belongs to a planning tool's task list (pending, in progress, done).
/// Such a list is a full state: the newest one replaces the older ones when merging.
pub(crate) fn is_task_list_line(index: usize, line: &str) -> bool {
    match index {
        6 => line.starts_with("- [ ] ") || line.starts_with("- [in progress] "),
        7 => line.starts_with("- [x] "),
        8 => line.starts_with("- Continue: "),
        _ => false,
    }
}

/// `- Label: rest` → (`Label`, `rest`) for the labels merges care about.
fn labelled(line: &str) -> Option<(&str, &str)> {
    let body = line.strip_prefix("- ")?;
    let (label, rest) = body.split_once(": ")?;
    let known =
        label == TOOL_CALLS_LABEL || label == MESSAGES_LABEL || LATEST_LABELS.contains(&label);
    known.then_some((label, rest))
}

/// `- `path` (read, edited)` → (`path`, [read, edited]).
fn parse_path_line(line: &str) -> Option<(&str, Vec<String>)> {
    let body = line.strip_prefix("- `")?;
    let (path, rest) = body.split_once('`')?;
    let rest = rest.trim();
    let flags = rest
        .strip_prefix('(')
        .and_then(|r| r.strip_suffix(')'))
        .map(|r| r.split(", ").map(str::to_owned).collect())
        .unwrap_or_default();
    Some((path, flags))
}

/// `Bash ×67, Edit ×32` → {Bash: 67, Edit: 32}.
fn parse_tally(text: &str) -> BTreeMap<String, u64> {
    let mut counts = BTreeMap::new();
    for item in text.split(", ") {
        if let Some((name, n)) = item.rsplit_once(" ×") {
            if let Ok(n) = n.trim().parse::<u64>() {
                *counts.entry(name.to_owned()).or_insert(0) += n;
            }
        }
    }
    counts
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identical_lines_once_and_paths_union_flags() {
        let mut m = SectionMerge::default();
        m.add(2, "- `src/a.rs` (read)", None);
        m.add(2, "- `src/b.rs` (mentioned)", None);
        m.add(2, "- `src/a.rs` (edited)", None);
        m.add(2, "- `src/b.rs` (read)", None);
        m.add(2, "- `src/a.rs` (edited)", None);
        assert_eq!(
            m.finish(10, 5),
            vec!["- `src/a.rs` (edited, read)", "- `src/b.rs` (read)"]
        );
    }

    #[test]
    fn tallies_add_and_latest_labels_replace() {
        let mut m = SectionMerge::default();
        m.add(7, "- Tool calls: Bash ×2, Read ×1", None);
        m.add(8, "- Last action: Read `a`", None);
        m.add(7, "- Tool calls: Read ×3", None);
        m.add(8, "- Last action: Edit `b`", None);
        let lines = m.finish(10, 5);
        assert_eq!(
            lines,
            vec!["- Tool calls: Read ×4, Bash ×2", "- Last action: Edit `b`"]
        );
    }

    #[test]
    fn paths_cut_by_importance_in_first_seen_order() {
        let mut m = SectionMerge::default();
        for line in [
            "- `a` (mentioned)",
            "- `b` (in a command)",
            "- `c` (read)",
            "- `d` (edited)",
        ] {
            m.add(2, line, None);
        }
        assert_eq!(
            m.finish_paths(2),
            vec![
                "- `c` (read)",
                "- `d` (edited)",
                "- … (2 more items omitted)"
            ]
        );
    }

    #[test]
    fn the_newest_latest_line_moves_to_the_end() {
        let mut m = SectionMerge::default();
        m.add(7, "- Last assistant message: \"a\"", None);
        m.add(7, "- Tool calls: X ×1", None);
        m.add(7, "- Last assistant message: \"b\"", None);
        assert_eq!(
            m.finish(1, 0),
            vec![
                "- … (1 more items omitted)",
                "- Last assistant message: \"b\""
            ]
        );
    }

    #[test]
    fn only_the_first_initial_request_keeps_its_label() {
        let mut m = SectionMerge::default();
        m.add(0, "- Initial request: \"a\"", None);
        m.add(0, "- Initial request: \"b\"", None);
        m.add(0, "- Initial request: \"a\"", None);
        assert_eq!(
            m.finish(9, 9),
            vec!["- Initial request: \"a\"", "- Later: \"b\"",]
        );
    }

    #[test]
    fn finish_keeps_head_and_tail_with_a_marker() {
        let mut m = SectionMerge::default();
        (0..10).for_each(|i| m.add(5, &format!("- {i}"), None));
        assert_eq!(
            m.finish(3, 1),
            vec!["- 0", "- … (7 more items omitted)", "- 8", "- 9"]
        );
    }
}
