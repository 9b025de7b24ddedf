//! Error lines in tool output, and the failure message a file tool returns instead of
//! content.
//!
//! The error finder is one compiled regex, which the `regex` crate runs in linear time:
//! tool outputs can be hundreds of kilobytes.

use std::sync::OnceLock;

use regex::Regex;

use super::floor_char_boundary;

/// The error-line finder (built once).
// A static pattern that does not compile is a bug the tests catch on the first summary, not
// a rule to drop silently.
#[allow(clippy::expect_used)]
fn error_regex() -> &'static Regex {
    static RE: OnceLock<Regex> = OnceLock::new();
    RE.get_or_init(|| {
        // ASCII-only (`(?-u)`): Unicode word boundaries would make the regex engine leave
        // its fast DFA on any non-ASCII output.
        Regex::new(concat!(
            r"(?-u)\b[A-Z][A-Za-z]*(?:Error|Exception)\b",
            r"|(?i:\berror\b\s*(?:[:\[(]|\d))",
            r"|(?m:^\s*(?i:error)\b)",
            r"|Traceback \(most recent call last\)",
            r"|\bFAILED\b|\bFAIL:|\bFAILURE\b",
            r"|panicked at",
            r"|(?i:\bexception\b)",
            r"|(?i:\bexit(?:ed)?(?: with)? (?:code|status):? ?-?[1-9]\d*)",
            r"|(?i:\bfatal:)",
            r"|(?i:command not found|no such file or directory|permission denied)",
            r"|(?i:\b[1-9]\d* (?:failures?|failed|errors?)\b)",
            r"|(?i:segmentation fault|core dumped)",
            r"|<tool_use_error>",
        ))
        .expect("the static error pattern compiles")
    })
}

/// The failure finder for tools whose output is file content (reads, searches, edits):
/// only their first line is looked at, and only for a tool's own failure message, because
/// the content itself is full of `ParseError`s and `raise ValueError`s that are code.
#[allow(clippy::expect_used)]
fn failure_regex() -> &'static Regex {
    static RE: OnceLock<Regex> = OnceLock::new();
    RE.get_or_init(|| {
        Regex::new(concat!(
            r"(?-u)(?i)^\s*(?:<tool_use_error>|error\b|failed\b|exception\b|fatal\b)",
            r"|(?i:no such file or directory|does not exist|permission denied|not found)",
        ))
        .expect("the static failure pattern compiles")
    })
}

/// The failure message a file-content tool returned instead of content, if any: its first
/// two non-empty lines (an `ERROR:` line says little without the next one).
pub(crate) fn failure_head(text: &str) -> Option<String> {
    let re = failure_regex();
    let mut lines = text.lines().map(str::trim).filter(|l| !l.is_empty());
    let first = lines.next()?;
    let first = &first[..floor_char_boundary(first, 500)];
    if !re.is_match(first) {
        return None;
    }
    let mut out = first.to_owned();
    if let Some(second) = lines.next() {
        out.push(' ');
        out.push_str(&second[..floor_char_boundary(second, 300)]);
    }
    Some(out)
}

/// The distinct lines of `text` that report an error, at most `max` of them, each with the
/// byte offset of the match in its line (so that a long line is quoted around the error).
/// Returns them and how many more error lines there were.
pub(crate) fn error_lines(text: &str, max: usize) -> (Vec<&str>, usize) {
    let re = error_regex();
    let mut lines: Vec<&str> = Vec::new();
    let mut more = 0usize;
    let mut taken_until = 0usize;
    for m in re.find_iter(text) {
        if m.start() < taken_until {
            continue;
        }
        let line_start = text[..m.start()].rfind('\n').map_or(0, |i| i + 1);
        let line_end = text[m.end()..]
            .find('\n')
            .map_or(text.len(), |i| m.end() + i);
        taken_until = line_end;
        // Quote a long line from shortly before the match, not from its start.
        let from = floor_char_boundary(text, line_start.max(m.start().saturating_sub(80)));
        let line = text[from..line_end].trim();
        if lines.contains(&line) {
            continue;
        }
        if lines.len() < max {
            lines.push(line);
        } else {
            more += 1;
        }
    }
    (lines, more)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_static_patterns_compile() {
        assert!(error_regex().is_match("error: expected one of"));
        assert!(failure_regex().is_match("Error: no such file"));
    }

    #[test]
    fn error_lines_are_found_once() {
        let text = "ok\nerror[E0308]: mismatched types\n  --> src/a.rs:1\nerror[E0308]: mismatched types\n\
                    test result: FAILED. 1 passed; 2 failed\nExit code 0\n0 errors\nException in thread";
        let (lines, more) = error_lines(text, 10);
        assert_eq!(
            lines,
            vec![
                "error[E0308]: mismatched types",
                "test result: FAILED. 1 passed; 2 failed",
                "Exception in thread"
            ]
        );
        assert_eq!(more, 0);
        assert!(
            error_lines("all good, exit code 0, 0 failures", 3)
                .0
                .is_empty()
        );
    }

    #[test]
    fn failures_of_file_tools_are_read_from_their_first_line() {
        assert_eq!(
            failure_head("ERROR:\nNo replacement was performed.\nmore").as_deref(),
            Some("ERROR: No replacement was performed.")
        );
        assert_eq!(
            failure_head("<tool_use_error>File does not exist.</tool_use_error>").as_deref(),
            Some("<tool_use_error>File does not exist.</tool_use_error>")
        );
        assert_eq!(
            failure_head("     1→use crate::ParseError;\nraise ValueError"),
            None
        );
    }
}
