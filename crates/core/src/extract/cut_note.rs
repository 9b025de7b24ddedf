//! What ① leaves after its marker about the part of an output it cut (SPEC: "① leaves a
//! trail too: the errors and the stated outcome of the part it cut follow its marker"):
//!
//! ```text
//! ...the head of the output...
//! [truncated: output exceeded context limit]
//! errors: failing test: test adds (ATest); RuntimeError: no key found
//! last line: 12 tests, 1 failure
//! ```
//!
//! The marker stays exactly as SPEC has it; the note's lines follow it, so a truncated test
//! run still says which test failed and how the run ended. The format is written and read
//! back here (the trail, ② and a later ① read the identifiers of a cut result through
//! [`super::error_ids`], which reads notes with [`split`]); what goes into a note is found in
//! `noting` (it reads identifiers, so it cannot live here without an import circle).

use std::sync::LazyLock;

use memchr::memmem::{Finder, FinderRev};

use crate::markers::TRUNCATED;
use crate::recall::HANDLE_PREFIX;

/// ①'s marker, searched for (built once: a searcher costs more to build than most searches).
static MARKER: LazyLock<Finder<'static>> = LazyLock::new(|| Finder::new(TRUNCATED));
static MARKER_BACKWARDS: LazyLock<FinderRev<'static>> = LazyLock::new(|| FinderRev::new(TRUNCATED));

const ERRORS: &str = "errors: ";
const LAST_LINE: &str = "last line: ";

/// The note on the part of an output that ① cut.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct CutNote {
    /// Error identifiers found in the cut part, each whole.
    pub(crate) errors: Vec<String>,
    /// The output's last line, when it states an outcome and was cut away.
    pub(crate) last_line: Option<String>,
}

impl CutNote {
    /// The lines that follow the marker ("" when there is nothing to say), each starting
    /// with a newline.
    pub(crate) fn text(&self) -> String {
        let mut out = String::new();
        if !self.errors.is_empty() {
            out.push('\n');
            out.push_str(ERRORS);
            out.push_str(&self.errors.join("; ").replace('\n', " "));
        }
        if let Some(line) = &self.last_line {
            out.push('\n');
            out.push_str(LAST_LINE);
            out.push_str(&line.replace('\n', " "));
        }
        out
    }
}

/// A text that ① cut, as its head (before the marker) and the note after it; `None` when
/// the text holds no marker followed by nothing but a note.
pub(crate) fn split(text: &str) -> Option<(&str, CutNote)> {
    // Most outputs hold no marker: a vectorized search rules them out, and only the part
    // from the first marker on is searched backwards for the last (std's `rfind` reads every
    // byte, and ② and ③ ask this of every output they look at).
    let first = MARKER.find(text.as_bytes())?;
    let at = first + MARKER_BACKWARDS.rfind(&text.as_bytes()[first..])?;
    let (head, rest) = (&text[..at], &text[at + TRUNCATED.len()..]);
    let mut note = CutNote::default();
    for line in rest.split('\n').skip(1) {
        // Recall's handle line comes right after the marker, before the note.
        if line.starts_with(HANDLE_PREFIX) {
            continue;
        }
        if let Some(listed) = line.strip_prefix(ERRORS) {
            let is_count = |id: &&str| id.starts_with('+') && id.ends_with(" more");
            note.errors = listed
                .split("; ")
                .filter(|id| !id.trim().is_empty() && !is_count(id))
                .map(str::to_owned)
                .collect();
        } else if let Some(last) = line.strip_prefix(LAST_LINE) {
            note.last_line = Some(last.to_owned());
        } else {
            return None;
        }
    }
    (rest.is_empty() || rest.starts_with('\n')).then_some((head, note))
}
