//! Error lines in tool output, and the failure message a file tool returns instead of
//! content.
//!
//! The error finder is one compiled regex, which the `regex` crate runs in linear time:
//! tool outputs can be hundreds of kilobytes.

use std::sync::OnceLock;

use regex::Regex;

use super::floor_char_boundary;
use super::literal_guard::LiteralGuard;

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

/// What every match of [`error_regex`] holds, ASCII case ignored (a class ending in
/// `Error`, `<tool_use_error>` and the counts of errors hold `error`; `FAILED`, `FAIL:`,
/// `FAILURE` and the counts of failures hold `fail`): a text holding none of these has no
/// error line, and the pattern is not compiled for it.
static ERROR_WORDS: LiteralGuard = LiteralGuard::new(&[
    "error",
    "exception",
    "traceback",
    "fail",
    "panicked at",
    "exit",
    "fatal:",
    "command not found",
    "no such file or directory",
    "permission denied",
    "segmentation fault",
    "core dumped",
]);

/// Whether the first line of a file tool's output is the tool's own failure message:
/// only that line is looked at, because file content itself is full of `ParseError`s and
/// `raise ValueError`s that are code. ASCII letters in either case: the line starts with
/// `<tool_use_error>` or one of [`FAILURE_WORDS`] as a word, or holds one of
/// [`FAILURE_PHRASES`]. (A regex compiled for this took ~0.2 ms of a one-shot command.)
fn is_failure_line(line: &str) -> bool {
    let lower = line.to_ascii_lowercase();
    let head = lower.trim_start_matches(|c: char| c.is_ascii_whitespace() || c == '\x0b');
    let starts_with_word = |word: &str| {
        head.strip_prefix(word).is_some_and(|rest| {
            !(rest.bytes().next()).is_some_and(|b| b.is_ascii_alphanumeric() || b == b'_')
        })
    };
    head.starts_with("<tool_use_error>")
        || FAILURE_WORDS.iter().any(|word| starts_with_word(word))
        || FAILURE_PHRASES.iter().any(|phrase| lower.contains(phrase))
}

/// Words that, starting a file tool's first line, make it a failure message.
const FAILURE_WORDS: [&str; 4] = ["error", "failed", "exception", "fatal"];
/// Phrases that, anywhere on a file tool's first line, make it a failure message.
const FAILURE_PHRASES: [&str; 4] = [
    "no such file or directory",
    "does not exist",
    "permission denied",
    "not found",
];

/// The failure message a file-content tool returned instead of content, if any: its first
/// two non-empty lines (an `ERROR:` line says little without the next one).
pub(crate) fn failure_head(text: &str) -> Option<String> {
    let mut lines = text.lines().map(str::trim).filter(|l| !l.is_empty());
    let first = lines.next()?;
    let first = &first[..floor_char_boundary(first, 500)];
    if !is_failure_line(first) {
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
    if !ERROR_WORDS.may_match(text) {
        return (Vec::new(), 0);
    }
    let re = error_regex();
    let mut lines: Vec<&str> = Vec::new();
    let mut more = 0usize;
    let mut taken_until = 0usize;
    for m in re.find_iter(text) {
        if m.start() < taken_until {
            continue;
        }
        let (line, line_end) = quoted_line(text, m.range());
        taken_until = line_end;
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

/// The first line of `text` that reports an error, quoted as [`error_lines`] quotes it:
/// the scan stops there, where `error_lines(text, 1)` reads on to count the rest.
pub(crate) fn first_error_line(text: &str) -> Option<&str> {
    if !ERROR_WORDS.may_match(text) {
        return None;
    }
    let m = error_regex().find(text)?;
    Some(quoted_line(text, m.range()).0)
}

/// The line of `text` holding the match `found`, from shortly before the match when the
/// line is long, trimmed; and where the line ends.
fn quoted_line(text: &str, found: std::ops::Range<usize>) -> (&str, usize) {
    let line_start = text[..found.start].rfind('\n').map_or(0, |i| i + 1);
    let line_end = text[found.end..]
        .find('\n')
        .map_or(text.len(), |i| found.end + i);
    // Quote a long line from shortly before the match, not from its start.
    let from = floor_char_boundary(text, line_start.max(found.start.saturating_sub(80)));
    (text[from..line_end].trim(), line_end)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_static_patterns_compile() {
        assert!(error_regex().is_match("error: expected one of"));
        assert!(is_failure_line("Error: no such file"));
    }

    /// One line per alternative of the error pattern, each holding a single one of the
    /// guard's words: a word missing from the guard fails here.
    const ONE_WORD_EACH: [&str; 16] = [
        "ValueError",
        "ERROR: x",
        "Traceback (most recent call last):",
        "--- FAIL: TestX",
        "thread 'main' panicked at src/main.rs:1",
        "an Exception occurred",
        "Exited With Code 2",
        "FATAL: not a git repository",
        "bash: foo: Command Not Found",
        "ls: x: No Such File Or Directory",
        "open: Permission Denied",
        "Segmentation Fault",
        "Aborted (core dumped)",
        "3 FAILURES",
        "<tool_use_error>",
        "2 errors",
    ];

    #[test]
    fn the_guard_passes_every_text_the_error_pattern_matches() {
        for line in ONE_WORD_EACH {
            assert!(error_regex().is_match(line), "{line}");
            assert!(ERROR_WORDS.may_match(line), "{line}");
        }
        // The guard ignores ASCII case only; so must the pattern (Unicode folds `ſ` to `s`).
        for line in [
            "ſegmentation fault",
            "no ſuch file or directory",
            "permiſſion denied",
        ] {
            assert!(!error_regex().is_match(line), "{line}");
        }
        let mut matched = 0;
        for text in crate::trail::fixture_tests::fixture_texts() {
            for part in std::iter::once(text.as_str()).chain(text.lines()) {
                if error_regex().is_match(part) {
                    assert!(ERROR_WORDS.may_match(part), "{part}");
                    matched += 1;
                }
            }
        }
        assert!(matched > 200, "{matched}");
        // And a text without them: no line, no pattern compiled for it.
        let plain = "fn main() {\n    println!(\"hello\");\n}\n";
        assert!(!ERROR_WORDS.may_match(plain));
        assert_eq!(error_lines(plain, 5), (Vec::new(), 0));
        assert_eq!(first_error_line(plain), None);
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

    /// The early stop finds what the full scan lists first, on every fixture text.
    #[test]
    fn the_first_error_line_is_the_first_listed() {
        let mut texts = crate::trail::fixture_tests::fixture_texts();
        texts.push("no error here\n".to_owned());
        texts.push(format!(
            "{}  Traceback (most recent call last)",
            "x".repeat(300)
        ));
        let mut found = 0;
        for text in &texts {
            let listed = error_lines(text, 1).0.first().copied();
            assert_eq!(first_error_line(text), listed, "{text:.200}");
            found += usize::from(listed.is_some());
        }
        assert!(found > 100, "only {found} texts hold an error line");
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

    /// The function reads a first line as the pattern it replaced did
    /// (`(?-u)(?i)^\s*(?:<tool_use_error>|error\b|failed\b|exception\b|fatal\b)` or one of
    /// the phrases anywhere), on edge cases and on every fixture text's first line.
    #[test]
    fn a_failure_line_is_what_the_former_pattern_matched() {
        let pattern = regex::Regex::new(concat!(
            r"(?-u)(?i)^\s*(?:<tool_use_error>|error\b|failed\b|exception\b|fatal\b)",
            r"|(?i:no such file or directory|does not exist|permission denied|not found)",
        ))
        .unwrap();
        let mut lines: Vec<String> = [
            "ERROR:",
            "error",
            "errors",
            "Error_x",
            "error1",
            "erroré",
            "\u{b} \tFatal: x",
            "FAILED",
            "failedx",
            "  exception!",
            "<TOOL_USE_ERROR>x",
            "x NOT FOUND",
            "Not Foun",
            "file Does Not Exist.",
            "Permission denied",
            "no such file or director",
            "",
            "\u{212A}",
            "é error",
            "errorß",
            "x No Such File Or Directory y",
        ]
        .map(String::from)
        .to_vec();
        for text in crate::trail::fixture_tests::fixture_texts() {
            if let Some(first) = text.lines().map(str::trim).find(|l| !l.is_empty()) {
                lines.push(first[..floor_char_boundary(first, 500)].to_owned());
            }
        }
        let mut failures = 0;
        for line in &lines {
            assert_eq!(is_failure_line(line), pattern.is_match(line), "{line:?}");
            failures += usize::from(pattern.is_match(line));
        }
        assert!(
            lines.len() > 500 && failures > 10,
            "{} {failures}",
            lines.len()
        );
    }
}
