//! Trail → text, within a token budget.
//!
//! The text is lines under four headings, in a fixed order, each entry one `- ` line
//! (a request's further lines indented by two spaces; files as a tree, `tree.rs`; commands
//! one line per program, `commands.rs`), so that [`Trail::parse`] reads it back. When the
//! whole trail does not fit, it is first written shorter (the operations of files that were
//! only read, the commands behind each program), then entries are kept by priority: user
//! requests, then errors, then files (most recently and most often touched first), then
//! commands; what did not fit is counted on a last line (`Left out for space: +12 more
//! files`). An entry is kept or left out whole: nothing is cut inside a path or an
//! identifier.

use super::commands::{self, Detail as CommandDetail};
use super::handles::with_handle;
use super::tree::{self, Detail as FileDetail, Layout};
use super::{ErrorEntry, LeftOut, Trail};
use crate::estimate::{ClassCounts, Estimator};
use crate::recall::HandleRef;
use crate::tool_names::FileOp;

pub(crate) const REQUESTS: &str = "User requests:";
pub(crate) const ERRORS: &str = "Errors:";
pub(crate) const FILES: &str = "Files (most recent first):";
pub(crate) use tree::ROOT;
pub(crate) const FILES_UNDER: &str = "Files (most recent first; $ROOT = ";
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
    /// How many files the file lines name (a line may name several).
    pub(crate) files_shown: usize,
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
        self.requests.len() + self.errors.len() + self.files_shown + self.commands.len()
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

pub(crate) fn request_line(text: &str, handle: Option<HandleRef>) -> String {
    with_handle(format!("- {}", text.replace('\n', "\n  ")), handle)
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
    with_handle(line, e.handle)
}

/// The order files are kept in when they do not all fit: files a tool read, searched or
/// changed before those only named in a command; then by the sum of their rank by recency
/// and their rank by touches (ties: the more recent first).
fn file_priority(files: &[super::FileEntry]) -> Vec<usize> {
    let mut by_touches: Vec<usize> = (0..files.len()).collect();
    by_touches.sort_by_key(|&i| (std::cmp::Reverse(files[i].touches), i));
    let mut touch_rank = vec![0usize; files.len()];
    for (rank, &i) in by_touches.iter().enumerate() {
        touch_rank[i] = rank;
    }
    let mut order: Vec<usize> = (0..files.len()).collect();
    let only_used =
        |i: usize| !files[i].ops.is_empty() && files[i].ops.iter().all(|o| *o == FileOp::Used);
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

/// Fractional tokens of a text (the prior is additive over characters, so the sum over
/// pieces is the estimate of the whole text).
fn raw(estimator: &Estimator, text: &str) -> f64 {
    estimator.weights.prior(&ClassCounts::of_str(text)) * estimator.multiplier
}

/// Fractional tokens of a line and its newline.
fn cost(estimator: &Estimator, line: &str) -> f64 {
    // `cost("")` is the newline alone.
    raw(estimator, line) + raw(estimator, "\n")
}

/// One kind of entry, costed: its heading, each entry's cost and group (a file's
/// directory line, paid once for the group's first kept file), and the order of priority.
struct Costed {
    heading: f64,
    entries: Vec<(f64, usize)>,
    groups: Vec<f64>,
    order: Vec<usize>,
}

impl Costed {
    /// Entries that are lines of their own (requests, errors, commands).
    fn lines(estimator: &Estimator, heading: &str, lines: &[String], order: Vec<usize>) -> Self {
        Costed {
            heading: cost(estimator, heading),
            entries: lines.iter().map(|l| (cost(estimator, l), 0)).collect(),
            groups: vec![0.0],
            order,
        }
    }

    /// The files of `layout`.
    fn files(estimator: &Estimator, heading: &str, layout: &Layout, order: Vec<usize>) -> Self {
        let groups = (0..layout.prefixes.len())
            .map(|g| cost(estimator, &layout.overhead(g)))
            .collect();
        let entries = (0..layout.members.len())
            .map(|f| (raw(estimator, &layout.member(f)), layout.members[f].0))
            .collect();
        Costed {
            heading: cost(estimator, heading),
            entries,
            groups,
            order,
        }
    }
}

/// The trail written at one level of detail, before any entry is left out.
struct Written {
    requests: Vec<String>,
    errors: Vec<String>,
    files: Layout,
    commands: Vec<String>,
}

impl Written {
    /// The tokens of all of it, exactly (the prior is additive over lines).
    fn cost(&self, estimator: &Estimator, files_heading: &str) -> f64 {
        let files = self.files.lines(&vec![true; self.files.members.len()]);
        [
            (REQUESTS, &self.requests),
            (ERRORS, &self.errors),
            (files_heading, &files),
            (COMMANDS, &self.commands),
        ]
        .iter()
        .filter(|(_, lines)| !lines.is_empty())
        .map(|(heading, lines)| {
            cost(estimator, heading) + lines.iter().map(|l| cost(estimator, l)).sum::<f64>()
        })
        .sum()
    }
}

impl Trail {
    /// Tokens of the line that counts every entry as left out: the least a removal's trail
    /// needs to say something ([`Trail::render_within`] writes nothing in less).
    pub(crate) fn count_line_tokens(&self, estimator: &Estimator) -> u64 {
        left_out_line(&self.all_left_out()).map_or(0, |l| cost(estimator, &l).ceil() as u64)
    }

    /// Every entry counted as left out, with what earlier renderings left out.
    fn all_left_out(&self) -> LeftOut {
        let earlier = self.left_out;
        LeftOut {
            requests: earlier.requests + self.requests.len(),
            errors: earlier.errors + self.errors.len(),
            files: earlier.files + self.files.len(),
            commands: earlier.commands + self.commands.len(),
        }
    }

    fn written(&self, root: Option<&str>, full: bool) -> Written {
        let (files, commands) = if full {
            (FileDetail::Full, CommandDetail::Full)
        } else {
            (FileDetail::Changes, CommandDetail::Outcome)
        };
        Written {
            requests: (self.requests.iter())
                .map(|r| request_line(r, self.request_handle(r)))
                .collect(),
            errors: error_lines(&self.errors),
            files: Layout::of(&self.files, root, files),
            commands: (self.commands.iter())
                .map(|c| with_handle(format!("- {}", commands::line(c, commands)), c.handle))
                .collect(),
        }
    }

    /// The entries that fit in `budget` tokens (see the module docs): the whole trail in
    /// full when it fits, else written shorter and kept by priority.
    pub(crate) fn render_within(&self, budget: u64, estimator: &Estimator) -> Rendered {
        let root = tree::choose_root(&self.files);
        let files_heading = match &root {
            Some(root) => format!("{FILES_UNDER}{root}):"),
            None => FILES.to_owned(),
        };
        let costed = |w: &Written| -> [Costed; 4] {
            let n = |len: usize| (0..len).collect::<Vec<_>>();
            [
                Costed::lines(estimator, REQUESTS, &w.requests, n(w.requests.len())),
                Costed::lines(estimator, ERRORS, &w.errors, error_priority(&self.errors)),
                Costed::files(
                    estimator,
                    &files_heading,
                    &w.files,
                    file_priority(&self.files),
                ),
                Costed::lines(estimator, COMMANDS, &w.commands, n(w.commands.len())),
            ]
        };
        // Every line is costed with its newline; the last one has none.
        let budget = budget as f64 - 0.01 + cost(estimator, "");
        let earlier_left = left_out_line(&self.left_out).map_or(0.0, |l| cost(estimator, &l));
        let mut written = self.written(root.as_deref(), true);
        let mut everything = written.cost(estimator, &files_heading);
        if everything + earlier_left > budget {
            written = self.written(root.as_deref(), false);
            everything = written.cost(estimator, &files_heading);
        }
        let kinds = costed(&written);
        let worst = LeftOut {
            requests: 99_999,
            errors: 99_999,
            files: 99_999,
            commands: 99_999,
        };
        // Room for the worst left-out line, unless everything fits without one (then the
        // costs below, upper bounds of the tree's lines, are not needed: all is kept).
        let fits = everything + earlier_left <= budget;
        let reserve = if fits {
            earlier_left
        } else {
            left_out_line(&worst).map_or(0.0, |l| cost(estimator, &l))
        };
        let mut used = if fits { f64::NEG_INFINITY } else { 0.0 };
        let mut kept: [Vec<bool>; 4] = Default::default();
        let mut dropped = [0usize; 4];
        let mut full = false;
        for (k, kind) in kinds.iter().enumerate() {
            kept[k] = vec![false; kind.entries.len()];
            let mut heading_paid = false;
            let mut group_paid = vec![false; kind.groups.len()];
            for &i in &kind.order {
                let (entry, group) = kind.entries[i];
                let mut c = entry;
                if !heading_paid {
                    c += kind.heading;
                }
                if !group_paid[group] {
                    c += kind.groups[group];
                }
                // Strict priority: once an entry does not fit, nothing after it is kept,
                // so that a short command never displaces a file that came first.
                if !full && used + c + reserve <= budget {
                    used += c;
                    heading_paid = true;
                    group_paid[group] = true;
                    kept[k][i] = true;
                } else {
                    full = true;
                    dropped[k] += 1;
                }
            }
        }
        let pick = |lines: &[String], keep: &[bool]| -> Vec<String> {
            (lines.iter().zip(keep))
                .filter(|(_, keep)| **keep)
                .map(|(line, _)| line.clone())
                .collect()
        };
        let earlier = self.left_out;
        if reserve > budget {
            // No entry fits beside the longest count: count them all, if that line fits;
            // else say nothing rather than overrun.
            let all = self.all_left_out();
            let line = left_out_line(&all).map_or(0.0, |l| cost(estimator, &l));
            return if line > 0.0 && line <= budget {
                Rendered {
                    files_heading,
                    left_out: all,
                    ..Rendered::default()
                }
            } else {
                Rendered::default()
            };
        }
        Rendered {
            requests: pick(&written.requests, &kept[0]),
            errors: pick(&written.errors, &kept[1]),
            files: written.files.lines(&kept[2]),
            commands: pick(&written.commands, &kept[3]),
            files_shown: kept[2].iter().filter(|k| **k).count(),
            files_heading,
            left_out: LeftOut {
                requests: earlier.requests + dropped[0],
                errors: earlier.errors + dropped[1],
                files: earlier.files + dropped[2],
                commands: earlier.commands + dropped[3],
            },
        }
    }

    /// The trail as the lines that follow a notice, within `budget` tokens ("" when there is
    /// nothing to say or no room). The strategies use [`Trail::render_within`]; tests read
    /// the text.
    #[cfg(test)]
    pub(crate) fn render(&self, budget: u64, estimator: &Estimator) -> String {
        self.render_within(budget, estimator).text()
    }
}
