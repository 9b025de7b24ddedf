//! What ① says about the part of an output it cut: the error identifiers it held and its
//! last line when that states an outcome ([`CutNote`]'s content; the format is in
//! `cut_note`, which stays a leaf so that `error_ids` can read notes back).

use super::cut_note::CutNote;

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
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::extract::cut_note::split;
    use crate::markers::TRUNCATED;

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
        // An output that quotes the marker before its own cut is read at its last marker:
        // the head keeps the quote, and the note is the one after the real cut.
        let quoted = format!("log says {TRUNCATED}\nthen more{TRUNCATED}{}", note.text());
        assert_eq!(
            split(&quoted),
            Some((
                format!("log says {TRUNCATED}\nthen more").as_str(),
                note.clone()
            ))
        );
        // Whole identifiers only, the rest counted.
        let many = CutNote::of(cut, 40);
        assert_eq!(
            many.errors,
            vec!["failing test: test adds (ATest)", "+1 more"]
        );
    }
}
