//! Error identifiers and command outcomes, read from tool output.
//!
//! An identifier is what an agent would search for to find the error again: an exception
//! class with the first line of its message, a compiler error code, a failing test's name.
//! Each pattern is anchored on the shape a runtime prints (`ValueError: ...` at a line's
//! start, `** (RuntimeError) ...`, `error[E0308]: ...`), not on the bare word, because file
//! contents are full of `raise ValueError(...)` that are code, not errors. Which results are
//! looked at (shell output fully, file contents only for the tool's own failure) follows the
//! offline summarizer, whose recognisers (`error_lines.rs`) this module reuses.

use std::ops::Range;
use std::sync::OnceLock;

use aho_corasick::{AhoCorasick, AhoCorasickKind, MatchKind};
use regex::{Regex, bytes};

use super::error_lines;
use super::floor_char_boundary;
use super::literal_guard::LiteralGuard;

/// Longest message kept after an exception class or an error code.
const MESSAGE_CHARS: usize = 140;
/// At most this many identifiers from one result (a run with 300 failing tests says
/// enough with the first ones).
const IDS_PER_RESULT: usize = 12;
/// Only the head and the tail of a huge output are scanned: errors and reports are there.
const SCAN_HEAD: usize = 64 * 1024;
const SCAN_TAIL: usize = 16 * 1024;

const FAILING_TEST: &str = "failing test: ";

#[allow(clippy::expect_used)]
fn regex(cell: &'static OnceLock<Regex>, pattern: &str) -> &'static Regex {
    cell.get_or_init(|| Regex::new(pattern).expect("static regex"))
}

/// The identifier patterns match bytes with Unicode off (`(?-u)`: `[^\n]`, `.`, `\s`, `\d`
/// and `\b` as ASCII knows them): compiled so, they take a quarter to half the time (about
/// 0.5 ms of a 7 ms one-shot process saved, when a result holds the literals of all four;
/// a pattern whose literal no result holds is not compiled, [`captures_on`]). Only `\s` (a
/// test name ends at ASCII white space, no longer at a no-break space) and `\b`
/// (`éerror[E1]` now has one) differ on real text; every group starts and ends beside an
/// ASCII character or a line's end, so on a character boundary of the text ([`Groups`]).
#[allow(clippy::expect_used)]
fn bytes_regex(cell: &'static OnceLock<bytes::Regex>, pattern: &str) -> &'static bytes::Regex {
    cell.get_or_init(|| bytes::Regex::new(pattern).expect("static regex"))
}

/// `ValueError: msg`, `E   AssertionError: ...` (pytest), `** (RuntimeError) msg` (Elixir),
/// `Caused by: java.io.IOException: msg`, `Uncaught TypeError: msg`.
fn exception_regex() -> &'static bytes::Regex {
    static RE: OnceLock<bytes::Regex> = OnceLock::new();
    bytes_regex(
        &RE,
        concat!(
            r#"(?m-u)^[ \t]*(?:E[ \t]+|\*\* \(|Uncaught |Caused by: |Exception in thread "[^"\n]*" )?"#,
            r"((?:[A-Za-z_][A-Za-z0-9_]*\.)*[A-Z][A-Za-z0-9_]*(?:Error|Exception))",
            r"(?:\)|:|[ \t]*$)[ \t]*([^\n]*)",
        ),
    )
}

/// An exception struct in a log line (Elixir: `%Jason.DecodeError{position: 0, ...}`).
fn struct_regex() -> &'static bytes::Regex {
    static RE: OnceLock<bytes::Regex> = OnceLock::new();
    bytes_regex(
        &RE,
        r"(?-u)%((?:[A-Z][A-Za-z0-9_]*\.)*[A-Z][A-Za-z0-9_]*(?:Error|Exception))\{([^\n]*)",
    )
}

/// `error[E0308]: msg` (rustc), `error TS2345: msg` (tsc), `error CS0103: msg` (csc).
fn code_regex() -> &'static bytes::Regex {
    static RE: OnceLock<bytes::Regex> = OnceLock::new();
    bytes_regex(
        &RE,
        r"(?-u)\berror(?:\[| )([A-Z]{1,4}\d{3,5})\]?:[ \t]*([^\n]*)",
    )
}

/// Failing tests: pytest `FAILED path::name`, cargo `test name ... FAILED`, go
/// `--- FAIL: Name`, ExUnit `  1) test name (Module)`, jest `✕ name`.
fn test_regex() -> &'static bytes::Regex {
    static RE: OnceLock<bytes::Regex> = OnceLock::new();
    bytes_regex(
        &RE,
        concat!(
            r"(?m-u)^(?:FAILED ([^\s]+)",
            r"|test ([^\s]+) \.\.\. FAILED",
            r"|[ \t]*--- FAIL: ([^\s]+)",
            r"|[ \t]+\d+\) (test .+ \([A-Za-z0-9_.]+\))[ \t]*$",
            r"|[ \t]*✕ (.+?)(?: \(\d+ ?ms\))?[ \t]*$)",
        ),
    )
}

/// `Exit code 2` (Claude Code), `[The command completed with exit code 0.]` (OpenHands),
/// `exit status 1`, `exited with code 1`. This and the tests pattern are ASCII (`(?-u)`:
/// ASCII case, digits and word boundaries; the codes parse as ASCII digits anyway), which
/// compiles in two thirds of the time.
fn exit_regex() -> &'static Regex {
    static RE: OnceLock<Regex> = OnceLock::new();
    regex(
        &RE,
        r"(?i-u)\bexit(?:ed)?(?: with)? (?:code|status)[: ]*(-?\d+)",
    )
}

/// `14 doctests, 297 tests, 11 failures` (ExUnit), `3 passed`, `1 failed` (pytest, cargo,
/// jest).
fn tests_regex() -> &'static Regex {
    static RE: OnceLock<Regex> = OnceLock::new();
    regex(
        &RE,
        r"(?i-u)\b(\d+) tests?, (\d+) failures?|\b(\d+) passed|\b(\d+) failed",
    )
}

/// What every match of [`exit_regex`] holds.
static EXIT_WORDS: LiteralGuard = LiteralGuard::new(&["exit"]);
/// What every match of [`tests_regex`] holds: a count, a space, then one of these words.
static TEST_REPORT_WORDS: LiteralGuard = LiteralGuard::new(&[" test", " passed", " failed"]);

/// The part of a long output that is scanned: its head and its tail.
fn scanned(text: &str) -> (&str, &str) {
    if text.len() <= SCAN_HEAD + SCAN_TAIL {
        return (text, "");
    }
    let head = floor_char_boundary(text, SCAN_HEAD);
    let tail = floor_char_boundary(text, text.len() - SCAN_TAIL);
    (&text[..head], &text[tail..])
}

/// What kind of output a tool result is, for error recognition.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Output {
    /// File content (a read, a search, an edit's snippet): only the tool's own failure
    /// message, on its first line, counts.
    Content,
    /// A command's output: read fully; its failure is also in the command's outcome.
    Shell,
    /// Anything else: read fully.
    Other,
}

/// The error identifiers of a tool result, in order of appearance, each once. `flagged`:
/// the result is marked as an error; when no identifier is found in a non-shell result,
/// its first error line stands for one (a shell's failure is its command's outcome).
pub(crate) fn error_ids(text: &str, output: Output, flagged: bool) -> Vec<String> {
    // A result ① cut: its head, then the identifiers of the cut part listed after the
    // marker (`errors: A; B`), which no pattern would find on that line.
    if let Some((head, note)) = super::cut_note::split(text) {
        let mut ids = error_ids(head, output, flagged);
        for id in note.errors {
            if !ids.contains(&id) {
                ids.push(id);
            }
        }
        return ids;
    }
    if output == Output::Content && !flagged {
        return error_lines::failure_head(text)
            .map(|line| vec![cut(&line, MESSAGE_CHARS)])
            .unwrap_or_default();
    }
    let (head, tail) = scanned(text);
    let mut ids: Vec<String> = Vec::new();
    for part in [head, tail] {
        identifiers(part, &mut ids);
    }
    if ids.is_empty() && flagged && output != Output::Shell {
        let first = error_lines::first_error_line(head)
            .or_else(|| head.lines().map(str::trim).find(|l| !l.is_empty()));
        ids.extend(first.map(|l| cut(l, MESSAGE_CHARS)));
    }
    ids
}

/// The literals the identifier patterns cannot match without: a class ends with `Error`
/// or `Exception` (exceptions and structs), a code follows `error[` or `error `, a failing
/// test line holds one of the rest. No literal can start inside another's occurrence (no
/// suffix of one is a prefix of another), so one leftmost-first scan sees every one.
/// Aho-Corasick (SIMD-searched) rather than a regex: it builds in microseconds, where the
/// regex's compilation took ~0.15 ms of a one-shot command.
fn needles() -> Option<&'static AhoCorasick> {
    static NEEDLES: OnceLock<Option<AhoCorasick>> = OnceLock::new();
    NEEDLES
        .get_or_init(|| {
            let literals = [
                "Error",
                "Exception",
                "error[",
                "error ",
                "FAILED",
                "--- FAIL: ",
                ") test ",
                "✕",
            ];
            (AhoCorasick::builder())
                .match_kind(MatchKind::LeftmostFirst)
                .kind(Some(AhoCorasickKind::ContiguousNFA))
                .build(literals)
                .ok()
        })
        .as_ref()
}

/// Lines no further apart than this (in bytes) are scanned as one run.
const MERGE_GAP: usize = 512;

/// The runs of whole lines (byte ranges, without their last `\n`) where each pattern can
/// match, in order: every line holding one of its literals, and the lines between two of
/// them that are close together.
#[derive(Debug, Default, PartialEq, Eq)]
struct Lines {
    /// `Error` or `Exception`: the exception and struct patterns.
    class: Vec<Range<usize>>,
    /// `error[` or `error `: the code pattern.
    code: Vec<Range<usize>>,
    /// A failing test's literal: the test pattern.
    test: Vec<Range<usize>>,
}

/// One literal scan of `text` (SIMD-searched by the regex crate) finds the lines where
/// each pattern can match: most tool output holds none of the literals, and ② reads every
/// result it compacts. Running a pattern on runs of whole lines that cover those lines
/// finds what it finds in the whole text: no match of the four spans a `\n` (`[^\n]`,
/// `[^\s]`, `.` and `[ \t]` are all they repeat), and their assertions (`(?m)^`,
/// `(?m)$`, `\b`) hold at a run's edges as they do beside its `\n`.
fn lines_with_literals(text: &str) -> Lines {
    let mut lines = Lines::default();
    let mut line = 0..0;
    // Static literals always build; were they not to, every pattern scans the whole text.
    let Some(needles) = needles() else {
        let whole = 0..text.len();
        return Lines {
            class: vec![whole.clone()],
            code: vec![whole.clone()],
            test: vec![whole],
        };
    };
    for m in needles.find_iter(text) {
        // A literal holds no `\n`: one starting before the current line's end is on it.
        if m.start() >= line.end {
            // `line.end` is the `\n` ending the last line (or 0): search back no further.
            let from = line.end;
            let start = text[from..m.start()]
                .rfind('\n')
                .map_or(from, |i| from + i + 1);
            let end = text[m.end()..]
                .find('\n')
                .map_or(text.len(), |i| m.end() + i);
            line = start..end;
        }
        let kind = match text.as_bytes().get(m.start()) {
            Some(b'E') => &mut lines.class,
            Some(b'e') => &mut lines.code,
            _ => &mut lines.test,
        };
        match kind.last_mut() {
            Some(last) if last.end >= line.end => {}
            // Lines close together are one run: a pattern's call costs more than a few
            // hundred bytes of its scan.
            Some(last) if line.start - last.end <= MERGE_GAP => last.end = line.end,
            _ => kind.push(line.clone()),
        }
    }
    lines
}

/// Every match of `pattern()` on the runs `lines` of `text`, with its offset in `text`.
/// The pattern is asked for (compiled, the first time) only when some line holds its
/// literal: most tool output holds none, and a one-shot command compiles none then.
fn captures_on<'t>(
    pattern: fn() -> &'static bytes::Regex,
    text: &'t str,
    lines: &[Range<usize>],
    mut each: impl FnMut(usize, Groups<'t>),
) {
    if lines.is_empty() {
        return;
    }
    let re = pattern();
    for line in lines {
        let Some(run) = text.get(line.clone()) else {
            continue;
        };
        for captures in re.captures_iter(run.as_bytes()) {
            each(line.start, Groups { run, captures });
        }
    }
}

/// The groups of one match of a [`bytes_regex`] on `run`, as text.
struct Groups<'t> {
    run: &'t str,
    captures: bytes::Captures<'t>,
}

impl<'t> Groups<'t> {
    /// Where the match starts in `run`.
    fn start(&self) -> Option<usize> {
        self.captures.get(0).map(|m| m.start())
    }

    /// Group `i`'s text, if it took part (and ends on character boundaries, as every
    /// group of these patterns does).
    fn text(&self, i: usize) -> Option<&'t str> {
        self.run.get(self.captures.get(i)?.range())
    }
}

fn identifiers(text: &str, ids: &mut Vec<String>) {
    identifiers_on(text, &lines_with_literals(text), ids);
}

/// The identifiers the patterns find on `lines` of `text` (each kind on its own lines; the
/// whole text as one line is what the literal scan must match, see the tests).
fn identifiers_on(text: &str, lines: &Lines, ids: &mut Vec<String>) {
    // Collected with their position, so that the three kinds interleave in output order.
    let mut found: Vec<(usize, String)> = Vec::new();
    captures_on(exception_regex, text, &lines.class, |at, c| {
        if let (Some(start), Some(class)) = (c.start(), c.text(1)) {
            let message = c.text(2).unwrap_or("").trim();
            found.push((at + start, with_message(class, message)));
        }
    });
    captures_on(struct_regex, text, &lines.class, |at, c| {
        if let (Some(start), Some(class)) = (c.start(), c.text(1)) {
            let fields = c.text(2).unwrap_or("").trim();
            found.push((at + start, with_message(class, fields)));
        }
    });
    captures_on(code_regex, text, &lines.code, |at, c| {
        if let (Some(start), Some(code)) = (c.start(), c.text(1)) {
            let message = c.text(2).unwrap_or("").trim();
            found.push((at + start, with_message(code, message)));
        }
    });
    captures_on(test_regex, text, &lines.test, |at, c| {
        let name = (1..=5).find_map(|i| c.text(i));
        if let (Some(start), Some(name)) = (c.start(), name) {
            let name = cut(name.trim(), MESSAGE_CHARS);
            found.push((at + start, format!("{FAILING_TEST}{name}")));
        }
    });
    found.sort_by_key(|(at, _)| *at);
    for (_, id) in found {
        if ids.len() >= IDS_PER_RESULT {
            break;
        }
        if !ids.contains(&id) {
            ids.push(id);
        }
    }
}

fn with_message(name: &str, message: &str) -> String {
    if message.is_empty() {
        name.to_owned()
    } else {
        format!("{name}: {}", cut(message, MESSAGE_CHARS))
    }
}

/// Whether an error text is an identifier (an exception, a code, a failing test) rather
/// than a tool's own failure line (`ERROR: No replacement was performed ...`).
pub(crate) fn is_identifier(text: &str) -> bool {
    if text.starts_with(FAILING_TEST) {
        return true;
    }
    let name = key_of(text);
    name != text
        && (name.ends_with("Error")
            || name.ends_with("Exception")
            || name.len() <= 9
                && name.bytes().any(|b| b.is_ascii_digit())
                && name.bytes().all(|b| b.is_ascii_alphanumeric()))
}

/// What must disappear from a later run for an error to count as fixed: the test's name,
/// else the class or the code before `: `, else the whole text.
pub(crate) fn key_of(text: &str) -> &str {
    if let Some(name) = text.strip_prefix(FAILING_TEST) {
        return name;
    }
    match text.split_once(": ") {
        Some((name, _)) if !name.contains(char::is_whitespace) => name,
        _ => text,
    }
}

/// An error by its name alone: a failing test as it is, else the class or the code
/// before `: ` (what a search finds it by).
pub(crate) fn short_id(text: &str) -> &str {
    if text.starts_with(FAILING_TEST) {
        text
    } else {
        key_of(text)
    }
}

/// What a command's result says about how it went.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Outcome {
    pub(crate) exit: Option<i64>,
    /// The test report (`297 tests, 11 failures`, `3 passed, 1 failed`) and its failures.
    pub(crate) tests: Option<(String, u64)>,
}

impl Outcome {
    /// Reads the exit code and the last test report of a command's output.
    pub(crate) fn of(text: &str) -> Outcome {
        let (head, tail) = scanned(text);
        let body = if tail.is_empty() { head } else { tail };
        // Claude Code writes the code on the first line; others at the end.
        let first = text.lines().next().unwrap_or("");
        let on_first = (EXIT_WORDS.may_match(first))
            .then(|| exit_regex().captures(first))
            .flatten();
        let exit = on_first
            .or_else(|| {
                (EXIT_WORDS.may_match(body))
                    .then(|| exit_regex().captures_iter(body).last())
                    .flatten()
            })
            .and_then(|c| c.get(1)?.as_str().parse().ok());
        Outcome {
            exit,
            tests: test_report(body),
        }
    }

    /// The outcome as the trail writes it, if the output stated one.
    pub(crate) fn text(&self) -> Option<String> {
        match (&self.tests, self.exit) {
            (Some((report, _)), Some(code)) if code != 0 => Some(format!("{report}; exit {code}")),
            (Some((report, _)), _) => Some(report.clone()),
            (None, Some(code)) => Some(format!("exit {code}")),
            (None, None) => None,
        }
    }

    /// Whether the run reported no failure (`flagged`: the result is marked as an error).
    pub(crate) fn succeeded(&self, flagged: bool) -> bool {
        !flagged && self.exit.is_none_or(|c| c == 0) && self.tests.as_ref().is_none_or(|t| t.1 == 0)
    }
}

/// The last line of `text` that reports test counts, as the trail writes it.
fn test_report(text: &str) -> Option<(String, u64)> {
    if !TEST_REPORT_WORDS.may_match(text) {
        return None;
    }
    let re = tests_regex();
    let line = last_matching_line(text, re)?;
    let (mut passed, mut failed, mut exunit) = (None, None, None);
    for c in re.captures_iter(line) {
        let num = |i: usize| c.get(i).and_then(|m| m.as_str().parse::<u64>().ok());
        if let (Some(tests), Some(failures)) = (num(1), num(2)) {
            exunit = Some((tests, failures));
        }
        passed = passed.or(num(3));
        failed = failed.or(num(4));
    }
    if let Some((tests, failures)) = exunit {
        let s = |n: u64| if n == 1 { "" } else { "s" };
        let text = format!(
            "{tests} test{}, {failures} failure{}",
            s(tests),
            s(failures)
        );
        return Some((text, failures));
    }
    let failed_count = failed.unwrap_or(0);
    let text = match (passed, failed) {
        (Some(p), Some(f)) => format!("{p} passed, {f} failed"),
        (Some(p), None) => format!("{p} passed"),
        (None, Some(f)) => format!("{f} failed"),
        (None, None) => return None,
    };
    Some((text, failed_count))
}

/// The last line of `text` (as [`str::lines`] splits it) where `re` matches, for a pattern
/// whose matches stay within a line (the tests pattern: digits, words and spaces): the
/// line of its last match in the whole text, found in one scan instead of one search per
/// line from the end.
fn last_matching_line<'t>(text: &'t str, re: &Regex) -> Option<&'t str> {
    let found = re.find_iter(text).last()?;
    let start = text[..found.start()].rfind('\n').map_or(0, |i| i + 1);
    let end = (text[found.end()..].find('\n')).map_or(text.len(), |i| found.end() + i);
    let line = &text[start..end];
    // `lines` drops the `\r` of a `\r\n`, not a lone one at the very end.
    if end < text.len() {
        Some(line.strip_suffix('\r').unwrap_or(line))
    } else {
        Some(line)
    }
}

/// The program of a command: the first two words of its first step that is not a `cd`
/// (`mix test`, `cargo test`, `python reproduce.py`). Runs of one program can show an
/// error of another run of it fixed. For a tool source (`Edit lib/a.ex`), the source.
pub(crate) fn program(source: &str) -> String {
    let step = source
        .split("&&")
        .flat_map(|s| s.split(';'))
        .map(str::trim)
        .find(|s| !s.is_empty() && !s.starts_with("cd "))
        .unwrap_or(source);
    step.split_whitespace()
        .take(2)
        .collect::<Vec<_>>()
        .join(" ")
}

/// `text` cut to about `max` characters, `…` marking the cut, never inside a word: a path
/// or an identifier cut in its middle (`/home/u/projects/spotte…`) names nothing an agent
/// can find again. The cut falls at the last whitespace before `max`; a first word longer
/// than that is kept whole.
pub(crate) fn cut(text: &str, max: usize) -> String {
    let Some((at, _)) = text.char_indices().nth(max) else {
        return text.to_owned();
    };
    let head = match text[..at].rfind(char::is_whitespace) {
        Some(space) if !text[..space].trim().is_empty() => &text[..space],
        // One word over the limit: whole, up to its end.
        _ => {
            let end = text[at..]
                .find(char::is_whitespace)
                .map_or(text.len(), |i| at + i);
            if end == text.len() {
                return text.to_owned();
            }
            &text[..end]
        }
    };
    format!("{}…", head.trim_end())
}

#[cfg(test)]
#[path = "error_ids_tests.rs"]
mod tests;
