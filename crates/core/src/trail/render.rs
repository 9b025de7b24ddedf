//! Trail → text, within a token budget.
//!
//! The text is lines under four headings, in a fixed order, each entry one `- ` line
//! (a request's further lines indented by two spaces), so that [`Trail::parse`] reads it back.
//! Over the budget, entries are kept by priority: user requests, then errors, then files
//! (most recently and most often touched first), then commands; what did not fit is counted
//! on a last line (`Left out for space: +12 more files`).

use std::collections::BTreeMap;

use super::{ErrorEntry, FileEntry, LeftOut, Trail};
use crate::estimate::{ClassCounts, Estimator};
use crate::tool_names::FileOp;

pub(crate) const REQUESTS: &str = "User requests:";
pub(crate) const ERRORS: &str = "Errors:";
pub(crate) const FILES: &str = "Files (most recent first):";
/// Files under a common directory are written relative to it: `$ROOT/lib/a.ex`, the
/// directory named once in the heading (`Files (most recent first; $ROOT = /home/u/p):`).
pub(crate) const ROOT: &str = "$ROOT";
pub(crate) const FILES_UNDER: &str = "Files (most recent first; $ROOT = ";
/// A root is worth naming when at least this many files are under it.
const ROOT_MIN_FILES: usize = 3;
pub(crate) const COMMANDS: &str = "Commands:";
pub(crate) const LEFT_OUT: &str = "Left out for space:";
pub(crate) const FIXED: &str = " — fixed later";
pub(crate) const FROM: &str = " (from `";
/// An error from the same call as the error listed just before it: its source is written
/// once (a test run's ten failures would otherwise repeat the command ten times).
pub(crate) const SAME_SOURCE: &str = " (same)";

/// The entries that fit, as lines, by kind, in display order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Rendered {
    pub(crate) requests: Vec<String>,
    pub(crate) errors: Vec<String>,
    pub(crate) files: Vec<String>,
    pub(crate) commands: Vec<String>,
    /// The heading of the files (it names their root, if any).
    pub(crate) files_heading: String,
    /// Everything left out, this time and by earlier renderings.
    pub(crate) left_out: LeftOut,
}

impl Rendered {
    /// One kind's heading and entries (empty when there is none): what ④'s sections 3, 4
    /// and 6 carry.
    pub(crate) fn block(heading: &str, lines: &[String]) -> String {
        if lines.is_empty() {
            return String::new();
        }
        let mut out = heading.to_owned();
        for line in lines {
            out.push('\n');
            out.push_str(line);
        }
        out
    }

    /// How many entries are written (the left-out count aside).
    pub(crate) fn shown(&self) -> usize {
        self.requests.len() + self.errors.len() + self.files.len() + self.commands.len()
    }

    /// The `Left out for space: ...` line, when something was left out.
    pub(crate) fn left_out_line(&self) -> Option<String> {
        left_out_line(&self.left_out)
    }

    /// The whole trail as lines (empty when there is nothing to say).
    pub(crate) fn text(&self) -> String {
        let mut parts: Vec<String> = [
            (REQUESTS, &self.requests),
            (ERRORS, &self.errors),
            (self.files_heading.as_str(), &self.files),
            (COMMANDS, &self.commands),
        ]
        .into_iter()
        .map(|(heading, lines)| Rendered::block(heading, lines))
        .filter(|b| !b.is_empty())
        .collect();
        parts.extend(self.left_out_line());
        parts.join("\n")
    }
}

fn left_out_line(left: &LeftOut) -> Option<String> {
    let parts: Vec<String> = [
        (left.requests, "requests"),
        (left.errors, "errors"),
        (left.files, "files"),
        (left.commands, "commands"),
    ]
    .iter()
    .filter(|(n, _)| *n > 0)
    .map(|(n, what)| format!("+{n} more {what}"))
    .collect();
    (!parts.is_empty()).then(|| format!("{LEFT_OUT} {}", parts.join(", ")))
}

pub(crate) fn request_line(text: &str) -> String {
    format!("- {}", text.replace('\n', "\n  "))
}

/// An error's line; `previous`: the source of the error listed just before it.
pub(crate) fn error_line(e: &ErrorEntry, previous: Option<&str>) -> String {
    let mut line = format!("- {}", e.text.replace('\n', " "));
    match &e.source {
        Some(source) if previous == Some(source.as_str()) => line.push_str(SAME_SOURCE),
        Some(source) => line.push_str(&format!("{FROM}{}`)", source.replace('\n', " "))),
        None => {}
    }
    if e.fixed {
        line.push_str(FIXED);
    }
    line
}

pub(crate) fn file_line(f: &FileEntry, root: Option<&str>) -> String {
    let ops: Vec<&str> = f.ops.iter().map(|o| o.label()).collect();
    let path = match root.and_then(|r| f.path.strip_prefix(r)) {
        Some(rest) if rest.is_empty() || rest.starts_with('/') => format!("{ROOT}{rest}"),
        _ => f.path.clone(),
    };
    let mut line = format!("- {path} — {}", ops.join(", "));
    if f.touches > 1 {
        line.push_str(&format!(" ×{}", f.touches));
    }
    line
}

pub(crate) fn command_line(c: &super::CommandEntry) -> String {
    let mut line = format!("- `{}`", c.command.replace('\n', " "));
    if c.runs > 1 {
        line.push_str(&format!(" ×{}", c.runs));
    }
    if let Some(outcome) = &c.outcome {
        line.push_str(&format!(" → {outcome}"));
    }
    line
}

/// The directory most worth naming once: the one whose length times the number of files
/// under it is largest (at least [`ROOT_MIN_FILES`] files, at least two levels deep; ties:
/// the longer).
pub(crate) fn choose_root(files: &[FileEntry]) -> Option<String> {
    let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
    for f in files.iter().filter(|f| f.path.starts_with('/')) {
        let slashes = f.path.match_indices('/').map(|(i, _)| i).skip(2);
        for i in slashes {
            *counts.entry(&f.path[..i]).or_default() += 1;
        }
    }
    counts
        .into_iter()
        .filter(|(_, n)| *n >= ROOT_MIN_FILES)
        .max_by_key(|(root, n)| (n * root.len(), root.len()))
        .map(|(root, _)| root.to_owned())
}

/// The order files are kept in when they do not all fit: files a tool read, searched or
/// changed before those only named in a command; then by the sum of their rank by recency
/// and their rank by touches (ties: the more recent first).
fn file_priority(files: &[FileEntry]) -> Vec<usize> {
    let mut by_touches: Vec<usize> = (0..files.len()).collect();
    by_touches.sort_by_key(|&i| (std::cmp::Reverse(files[i].touches), i));
    let mut touch_rank = vec![0usize; files.len()];
    for (rank, &i) in by_touches.iter().enumerate() {
        touch_rank[i] = rank;
    }
    let mut order: Vec<usize> = (0..files.len()).collect();
    let only_used = |i: usize| files[i].ops.iter().all(|o| *o == FileOp::Used);
    order.sort_by_key(|&i| (only_used(i), i + touch_rank[i], i));
    order
}

/// The order errors are kept in: the open ones first, then those fixed later.
fn error_priority(errors: &[ErrorEntry]) -> Vec<usize> {
    let mut order: Vec<usize> = (0..errors.len()).collect();
    order.sort_by_key(|&i| (errors[i].fixed, i));
    order
}

/// The errors' lines, each source written once per run of errors that share it. An error
/// says `(same)` only after an error with the same source *and* the same state (open or
/// fixed later): errors are kept open ones first, each group in order, so whenever this
/// error is kept the one before it is kept too, and the line above it is that one.
fn error_lines(errors: &[ErrorEntry]) -> Vec<String> {
    let mut previous: Option<&ErrorEntry> = None;
    errors
        .iter()
        .map(|e| {
            let same = previous
                .filter(|p| p.fixed == e.fixed)
                .and_then(|p| p.source.as_deref());
            previous = Some(e);
            error_line(e, same)
        })
        .collect()
}

/// Fractional tokens of a line and its newline (the prior is additive over characters,
/// so the sum over lines is the estimate of the whole text).
fn cost(estimator: &Estimator, line: &str) -> f64 {
    // `cost("")` is the newline alone.
    let counts = ClassCounts::of_str(line) + ClassCounts::of_str("\n");
    estimator.weights.prior(&counts) * estimator.multiplier
}

impl Trail {
    /// Tokens of the line that counts every entry as left out: the least a removal's trail
    /// needs to say something ([`Trail::render_within`] writes nothing in less).
    pub(crate) fn count_line_tokens(&self, estimator: &Estimator) -> u64 {
        let earlier = self.left_out;
        let all = LeftOut {
            requests: earlier.requests + self.requests.len(),
            errors: earlier.errors + self.errors.len(),
            files: earlier.files + self.files.len(),
            commands: earlier.commands + self.commands.len(),
        };
        left_out_line(&all).map_or(0, |l| cost(estimator, &l).ceil() as u64)
    }

    /// The entries that fit in `budget` tokens, by priority (see the module docs).
    pub(crate) fn render_within(&self, budget: u64, estimator: &Estimator) -> Rendered {
        let root = choose_root(&self.files);
        let files_heading = match &root {
            Some(root) => format!("{FILES_UNDER}{root}):"),
            None => FILES.to_owned(),
        };
        let kinds: [(&str, Vec<String>); 4] = [
            (
                REQUESTS,
                self.requests.iter().map(|r| request_line(r)).collect(),
            ),
            (ERRORS, error_lines(&self.errors)),
            (
                files_heading.as_str(),
                self.files
                    .iter()
                    .map(|f| file_line(f, root.as_deref()))
                    .collect(),
            ),
            (COMMANDS, self.commands.iter().map(command_line).collect()),
        ];
        let worst = LeftOut {
            requests: 99_999,
            errors: 99_999,
            files: 99_999,
            commands: 99_999,
        };
        // Every line is costed with its newline; the last one has none.
        let budget = budget as f64 - 0.01 + cost(estimator, "");
        let everything: f64 = kinds
            .iter()
            .filter(|(_, lines)| !lines.is_empty())
            .map(|(heading, lines)| {
                cost(estimator, heading) + lines.iter().map(|l| cost(estimator, l)).sum::<f64>()
            })
            .sum();
        let earlier_left = left_out_line(&self.left_out).map_or(0.0, |l| cost(estimator, &l));
        // Room for the worst left-out line, unless everything fits without one.
        let reserve = if everything + earlier_left <= budget {
            earlier_left
        } else {
            left_out_line(&worst).map_or(0.0, |l| cost(estimator, &l))
        };
        let mut used = 0.0;
        let mut kept: [Vec<bool>; 4] = Default::default();
        let mut dropped = [0usize; 4];
        let mut full = false;
        for (k, (heading, lines)) in kinds.iter().enumerate() {
            kept[k] = vec![false; lines.len()];
            let order: Vec<usize> = match k {
                1 => error_priority(&self.errors),
                2 => file_priority(&self.files),
                _ => (0..lines.len()).collect(),
            };
            let mut heading_paid = false;
            for i in order {
                let mut c = cost(estimator, &lines[i]);
                if !heading_paid {
                    c += cost(estimator, heading);
                }
                // Strict priority: once an entry does not fit, nothing after it is kept,
                // so that a short command never displaces a file that came first.
                if !full && used + c + reserve <= budget {
                    used += c;
                    heading_paid = true;
                    kept[k][i] = true;
                } else {
                    full = true;
                    dropped[k] += 1;
                }
            }
        }
        let pick = |k: usize| -> Vec<String> {
            kinds[k]
                .1
                .iter()
                .zip(&kept[k])
                .filter(|(_, keep)| **keep)
                .map(|(line, _)| line.clone())
                .collect()
        };
        let earlier = self.left_out;
        let mut rendered = Rendered {
            requests: pick(0),
            errors: pick(1),
            files: pick(2),
            commands: pick(3),
            files_heading: files_heading.clone(),
            left_out: LeftOut {
                requests: earlier.requests + dropped[0],
                errors: earlier.errors + dropped[1],
                files: earlier.files + dropped[2],
                commands: earlier.commands + dropped[3],
            },
        };
        if reserve > budget {
            // No entry fits beside the longest count: count them all, if that line fits;
            // else say nothing rather than overrun.
            let all = LeftOut {
                requests: earlier.requests + self.requests.len(),
                errors: earlier.errors + self.errors.len(),
                files: earlier.files + self.files.len(),
                commands: earlier.commands + self.commands.len(),
            };
            let line = left_out_line(&all).map_or(0.0, |l| cost(estimator, &l));
            rendered = if line > 0.0 && line <= budget {
                Rendered {
                    files_heading,
                    left_out: all,
                    ..Rendered::default()
                }
            } else {
                Rendered::default()
            };
        }
        rendered
    }

    /// The trail as the lines that follow a notice, within `budget` tokens ("" when there is
    /// nothing to say or no room). The strategies use [`Trail::render_within`]; tests read
    /// the text.
    #[cfg(test)]
    pub(crate) fn render(&self, budget: u64, estimator: &Estimator) -> String {
        self.render_within(budget, estimator).text()
    }
}
