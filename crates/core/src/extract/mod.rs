//! What tool calls and their outputs name, read without a model: file paths, shell
//! commands, error identifiers and error lines.
//!
//! Two readers need the same answers: the trail (what a removal leaves behind, trail/) and
//! the offline summarizer (offline/). Both read them here, so that a path or an error is
//! recognized the same way in a trail and in a summary, and neither depends on the other.
//!
//! * `calls`: what one tool call names (its files, what it did to each, its command);
//! * `paths`: path-like tokens in arguments, commands and prose;
//! * `error_ids`: error identifiers and command outcomes in tool output (the trail's);
//! * `error_lines`: the lines of an output that report an error, and a file tool's failure
//!   message (the summary's);
//! * `literal_guard`: the words a pattern's matches hold, checked before it is compiled;
//! * `cut_note`: the note ① writes after its marker about the part it cut, read back;
//! * `noting`: what goes into that note (the cut part's identifiers and outcome);
//! * `verdict`: whether a command's run failed or passed, as its output says (or not).

mod calls;
mod cut_note;
mod error_ids;
mod error_lines;
mod literal_guard;
mod noting;
mod paths;
mod verdict;

pub(crate) use calls::{call_files, command_program, short_command};
pub(crate) use cut_note::CutNote;
pub(crate) use error_ids::{Outcome, Output, error_ids, is_identifier, key_of, program, short_id};
pub(crate) use error_lines::{error_lines, failure_head};
pub(crate) use paths::{PathContext, command_paths, paths_in};
pub(crate) use verdict::{Verdict, stated_outcome_line, verdict};

/// Argument keys that hold a file or directory path, across agents.
pub(crate) const PATH_KEYS: &[&str] = &[
    "path",
    "file_path",
    "filePath",
    "filepath",
    "filename",
    "file_name",
    "file",
    "notebook_path",
    "target_file",
    "absolute_path",
    "relative_path",
    "dir",
    "directory",
    "source",
    "destination",
    "paths",
    "files",
    "old_path",
    "new_path",
    "cwd",
    "workdir",
];
/// Argument keys that hold a shell command.
pub(crate) const COMMAND_KEYS: &[&str] = &["command", "cmd", "script", "commands"];

/// The largest char boundary of `text` at or below `index`.
pub(crate) fn floor_char_boundary(text: &str, mut index: usize) -> usize {
    index = index.min(text.len());
    while index > 0 && !text.is_char_boundary(index) {
        index -= 1;
    }
    index
}
