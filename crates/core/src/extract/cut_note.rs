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
//! run still says which test failed and how the run ended. Written here and read back here
//! (the trail, ② and a later ① read the identifiers of a cut result through
//! [`super::error_ids`]).

use crate::markers::TRUNCATED;
use crate::recall::HANDLE_PREFIX;

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
    /// The note on `cut` (the part of an output that goes), with at most `max_chars`
    /// characters of identifiers (whole ones only; the rest counted as `+N more`).
    pub(crate) fn of(cut: &str, max_chars: usize) -> CutNote {
        let ids = super::error_ids(cut, super::Output::Shell, false);
        let mut errors = Vec::new();
        let mut used = 0;
        for (i, id) in ids.iter().enumerate() {
            let len = id.chars().count() + 2;
            if used + len > max_chars {
                errors.push(format!("+{} more", ids.len() - i));
                break;
            }
            used += len;
            errors.push(id.clone());
        }
        let last_line = super::stated_outcome_line(cut)
            .filter(|l| l.chars().count() <= max_chars)
            .map(str::to_owned);
        CutNote { errors, last_line }
    }

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
    let at = text.rfind(TRUNCATED)?;
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_note_says_what_the_cut_part_held_and_reads_back() {
        let cut = "  1) test adds (ATest)\n     test/a_test.exs:3\n** (RuntimeError) no key found\n\
                   Finished in 0.1 seconds\n12 tests, 1 failure\n";
        let note = CutNote::of(cut, 400);
        assert_eq!(
            note.errors,
            vec![
                "failing test: test adds (ATest)",
                "RuntimeError: no key found"
            ]
        );
        assert_eq!(note.last_line.as_deref(), Some("12 tests, 1 failure"));
        let text = format!("head{TRUNCATED}{}", note.text());
        assert_eq!(split(&text), Some(("head", note.clone())));
        // Read back through the identifiers of the whole result.
        assert_eq!(
            super::super::error_ids(&text, super::super::Output::Shell, false),
            note.errors
        );
        // A bare marker reads back as an empty note; a marker inside text is not one.
        assert_eq!(
            split(&format!("x{TRUNCATED}")),
            Some(("x", CutNote::default()))
        );
        assert_eq!(split(&format!("x{TRUNCATED}\nmore output")), None);
        // Recall's handle line between the marker and the note is passed over.
        let handled = format!(
            "head{TRUNCATED}\nrecall handle: 3f9a1c2b7d40{}",
            note.text()
        );
        assert_eq!(split(&handled), Some(("head", note.clone())));
        // Whole identifiers only, the rest counted.
        let many = CutNote::of(cut, 40);
        assert_eq!(
            many.errors,
            vec!["failing test: test adds (ATest)", "+1 more"]
        );
    }
}
