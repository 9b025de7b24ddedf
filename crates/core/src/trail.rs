//! The trail: what a removal leaves behind so that the agent can go on (SPEC.md "The
//! trail").
//!
//! A bare "[context compacted: 131 earlier messages removed]" makes an agent forget which
//! files it touched, which errors it hit and what the user asked. The trail is extracted
//! from the removed messages, with no model call: the files named in tool-call arguments
//! (with what was done to them, most recent first), the commands a shell tool ran (with their
//! outcome), the error identifiers of tool results (with "fixed later" where the history
//! shows it), and the user's requests verbatim. It is rendered as lines that follow a notice
//! (the marker stays the first line), within a budget, by priority, saying what it left out;
//! and it is parsed back from an earlier notice, so repeated compactions merge their trails.
//! With recall on, each entry names the handle (and part) that holds what it came from.
//!
//! Everything here is pure and deterministic: no clock, no randomness, and every list is
//! ordered by position in the history or by a total order, never by hashing.
//!
//! Module layout: `gather` (messages → trail, reading what calls and outputs name through
//! `crate::extract`), `requests` (which user messages are the user's), `render` (budgeted
//! text), `tree` (files as a tree under their directories) and `commands` (one line per
//! program), `parse` (text → trail, and merging), `compose` (where the trail goes: after a
//! notice, into a summary, after ①'s marker), `stale` (reads superseded later), `handles`
//! (with recall on, the part of a removal each entry points to).

mod commands;
mod compose;
#[cfg(test)]
pub(crate) mod fixture_tests;
mod gather;
mod handles;
mod parse;
mod render;
#[cfg(test)]
mod render_tests;
mod requests;
mod stale;
#[cfg(test)]
mod tests;
mod tree;

use crate::recall::HandleRef;
use crate::tool_names::FileOp;

pub(crate) use compose::{complete_summary, notice_with_trail, render_for};
pub(crate) use render::Rendered;
#[cfg(test)]
pub(crate) use stale::stale_reads;
pub(crate) use stale::{StaleRead, stale_reads_and_activities};

/// The trail's budget and limits. `Default` gives SPEC.md's values; `CascadeConfig::trail`
/// carries it.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct TrailConfig {
    /// Whether removals leave a trail at all (`false`: the bare notices of SPEC's first
    /// version, which is what the benchmarks compare against).
    pub enabled: bool,
    /// The trail may take at most this share of E.
    pub max_share: f64,
    /// ... and at most this many tokens.
    pub max_tokens: u64,
    /// A user request longer than this many characters is cut to its head, the cut marked.
    pub request_chars: usize,
    /// A command is listed by its first line, cut to this many characters.
    pub command_chars: usize,
}

impl Default for TrailConfig {
    fn default() -> Self {
        TrailConfig {
            enabled: true,
            max_share: 0.15,
            max_tokens: 4_000,
            request_chars: 400,
            command_chars: 100,
        }
    }
}

impl TrailConfig {
    /// The trail's token budget for an effective window of `effective` tokens (0 when the
    /// trail is switched off).
    pub fn budget(&self, effective: u64) -> u64 {
        if !self.enabled {
            return 0;
        }
        let share = (effective as f64 * self.max_share).floor().max(0.0) as u64;
        share.min(self.max_tokens)
    }
}

/// What a trail holds, as a step wrote it (SPEC.md "The trail").
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct TrailStats {
    /// User requests listed.
    pub requests: usize,
    /// Error identifiers listed.
    pub errors: usize,
    /// Files listed.
    pub files: usize,
    /// Commands listed.
    pub commands: usize,
    /// Entries left out for space (counted on its last line), this time and before.
    pub left_out: usize,
    /// Estimated tokens the trail's lines cost.
    pub tokens: u64,
}

/// A file named by removed tool calls.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct FileEntry {
    pub(crate) path: String,
    /// What was done to it, most recent first, each once.
    pub(crate) ops: Vec<FileOp>,
    /// How many calls named it.
    pub(crate) touches: u32,
    /// With recall on: the removal that holds the latest call that named it.
    pub(crate) handle: Option<HandleRef>,
}

/// The runs of one program by a shell tool (`mix test ×6 (4 failed, 2 passed, last
/// passed)`), grouped so that a long session's hundred commands stay a few lines.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct CommandEntry {
    /// The program and its subcommand (`mix test`, `git status`, `cat`).
    pub(crate) program: String,
    /// How many times it ran.
    pub(crate) runs: u32,
    /// Runs whose output said they failed, and said they passed (the rest said neither).
    pub(crate) failed: u32,
    pub(crate) passed: u32,
    /// The latest run's outcome: its verdict word and what its output stated
    /// (`failed: 297 tests, 11 failures`, `passed`); `None` when it stated nothing.
    pub(crate) last: Option<String>,
    /// The distinct commands run, first run first, each its first line shortened at a
    /// word boundary.
    pub(crate) commands: Vec<String>,
    /// With recall on: the removal that holds its latest run.
    pub(crate) handle: Option<HandleRef>,
}

/// An error identifier seen in a tool result.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ErrorEntry {
    /// `RuntimeError: first line of the message`, `E0308: mismatched types`,
    /// `failing test: name`, or a tool's own failure line.
    pub(crate) text: String,
    /// The call that produced it: a shortened command, or a tool and its path.
    pub(crate) source: Option<String>,
    /// A later step in the history shows it fixed.
    pub(crate) fixed: bool,
    /// With recall on: the removal that holds the output it was read from (or ②'s
    /// placeholder that lists it).
    pub(crate) handle: Option<HandleRef>,
}

/// How many entries of each kind earlier renderings left out for space (carried forward so
/// that the count stays honest across compactions).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct LeftOut {
    pub(crate) requests: usize,
    pub(crate) errors: usize,
    pub(crate) files: usize,
    pub(crate) commands: usize,
}

impl LeftOut {
    fn total(&self) -> usize {
        self.requests + self.errors + self.files + self.commands
    }
}

/// One run of a tool whose outcome can show an earlier error fixed (not rendered).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Run {
    /// The command's program (`mix test`, `cargo test`) or the tool and its path.
    pub(crate) program: String,
    /// The run reported no failure.
    pub(crate) succeeded: bool,
    /// It printed a test report (so errors it does not list are gone).
    pub(crate) test_report: bool,
    /// The keys of the errors it reported.
    pub(crate) keys: Vec<String>,
}

/// What a removal leaves behind. Built by [`Trail::extract`] or [`Trail::parse`], combined
/// by [`Trail::merge`], written by [`Trail::render`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Trail {
    /// Every user request of the removed range, oldest first, verbatim (cut past the limit).
    pub(crate) requests: Vec<String>,
    /// With recall on: the removal that holds each request, by its text (only requests
    /// that have one; kept apart so that a trail without recall is the plain list).
    pub(crate) request_handles: Vec<(String, HandleRef)>,
    /// Error identifiers, first seen first.
    pub(crate) errors: Vec<ErrorEntry>,
    /// Files, most recently touched first.
    pub(crate) files: Vec<FileEntry>,
    /// Commands, first run first.
    pub(crate) commands: Vec<CommandEntry>,
    /// Entries earlier renderings left out.
    pub(crate) left_out: LeftOut,
    /// Runs seen after the removed range's errors (removed or later messages), in order:
    /// what a merge uses to mark an earlier trail's errors fixed.
    pub(crate) runs: Vec<Run>,
}

impl Trail {
    /// Drops the tool failures (not identifiers) that a later call shows fixed: a retried
    /// edit that then worked leaves nothing the agent needs to know.
    fn forget_fixed_failures(&mut self) {
        self.errors
            .retain(|e| !e.fixed || crate::extract::is_identifier(&e.text));
    }
}

impl Trail {
    /// The handle of the request `text`, if recall kept it.
    pub(crate) fn request_handle(&self, text: &str) -> Option<HandleRef> {
        (self.request_handles.iter())
            .find(|(t, _)| t == text)
            .map(|(_, h)| *h)
    }

    /// Records `handle` for the request `text`, unless it has one already (the earliest
    /// removal holding it stays: every later one holds only its trail line).
    pub(crate) fn set_request_handle(&mut self, text: &str, handle: Option<HandleRef>) {
        if let (Some(handle), None) = (handle, self.request_handle(text)) {
            self.request_handles.push((text.to_owned(), handle));
        }
    }

    /// Whether there is nothing to say.
    pub(crate) fn is_empty(&self) -> bool {
        self.requests.is_empty()
            && self.errors.is_empty()
            && self.files.is_empty()
            && self.commands.is_empty()
            && self.left_out.total() == 0
    }
}
