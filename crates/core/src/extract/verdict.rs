//! Whether a command's run failed or passed, as its output says: an exit code, a test
//! report's failures, an error identifier (a traceback), the tool marking its result as an
//! error, or a last line that says `passed` / `ok` / `success`. When the output says none
//! of these, the verdict is unknown, and the trail says so rather than guess.

use super::Outcome;

/// What one run's output says of it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Verdict {
    Failed,
    Passed,
    Unknown,
}

impl Verdict {
    /// The word the trail writes (`None` for unknown).
    pub(crate) fn word(self) -> Option<&'static str> {
        match self {
            Verdict::Failed => Some("failed"),
            Verdict::Passed => Some("passed"),
            Verdict::Unknown => None,
        }
    }
}

/// Whether a last line says the run succeeded: it ends with one of [`SUCCESS_WORDS`] or
/// with `all tests pass…`, as a word after the line's start, a space, `(` or `[`, then only
/// spaces, `.`, `!`, `)` or `]`. Letters compare in either ASCII case. (These checks were
/// regular expressions whose compilation took ~1 ms of a one-shot command's trail.)
fn states_success(line: &str) -> bool {
    let body =
        line.trim_end_matches(|c: char| c.is_whitespace() || matches!(c, '.' | '!' | ')' | ']'));
    let (before, word) = body.split_at(last_word_start(body));
    let leads = |before: &str| {
        before
            .chars()
            .next_back()
            .is_none_or(|c| c.is_whitespace() || c == '(' || c == '[')
    };
    if SUCCESS_WORDS.iter().any(|w| word.eq_ignore_ascii_case(w)) {
        return leads(before);
    }
    let all_tests = (before.len().checked_sub(ALL_TESTS.len()))
        .and_then(|at| Some((before.get(..at)?, before.get(at..)?)))
        .filter(|(_, tail)| tail.eq_ignore_ascii_case(ALL_TESTS));
    let pass = word
        .get(..4)
        .is_some_and(|p| p.eq_ignore_ascii_case("pass"));
    pass && all_tests.is_some_and(|(head, _)| leads(head))
}

/// The words a last line ends with to say the run succeeded.
const SUCCESS_WORDS: [&str; 5] = ["passed", "ok", "success", "successful", "succeeded"];
/// What leads `pass…` in a line that says `all tests pass…`.
const ALL_TESTS: &str = "all tests ";

/// Whether a line names a failure: one of [`FAILURE_WORDS`] as a word, in either ASCII case.
fn names_failure(line: &str) -> bool {
    (line.split(|c: char| !is_word_char(c)))
        .any(|word| FAILURE_WORDS.iter().any(|w| word.eq_ignore_ascii_case(w)))
}

/// The words that name a failure.
const FAILURE_WORDS: [&str; 9] = [
    "fail",
    "failed",
    "failure",
    "failures",
    "fails",
    "error",
    "errors",
    "traceback",
    "panicked",
];

/// A word character as a regex's `\w` reads it (letters, digits, `_`), to within marks
/// and numbers that are not digits.
fn is_word_char(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

/// Where the run of word characters that ends `text` starts.
fn last_word_start(text: &str) -> usize {
    text.char_indices()
        .rev()
        .find(|&(_, c)| !is_word_char(c))
        .map_or(0, |(at, c)| at + c.len_utf8())
}

/// The verdict of a run whose output is `text`: `outcome` read from it, `errors` whether
/// error identifiers were found in it, `flagged` whether the tool marked it as an error.
pub(crate) fn verdict(text: &str, outcome: &Outcome, errors: bool, flagged: bool) -> Verdict {
    let failures = outcome.tests.as_ref().is_some_and(|t| t.1 > 0);
    if flagged || errors || failures || outcome.exit.is_some_and(|c| c != 0) {
        return Verdict::Failed;
    }
    if outcome.tests.is_some() || outcome.exit == Some(0) {
        return Verdict::Passed;
    }
    match stated_outcome_line(text) {
        Some(line) if names_failure(line) => Verdict::Failed,
        Some(_) => Verdict::Passed,
        None => Verdict::Unknown,
    }
}

/// The output's last non-empty line when it states an outcome (a test report, an exit
/// code, `passed`, `ok`, `FAILED`, `N errors`): what a cut output must still say.
pub(crate) fn stated_outcome_line(text: &str) -> Option<&str> {
    let line = text.lines().rev().map(str::trim).find(|l| !l.is_empty())?;
    if line.chars().count() > 200 {
        return None;
    }
    let outcome = Outcome::of(line);
    let states = outcome.exit.is_some()
        || outcome.tests.is_some()
        || states_success(line)
        || names_failure(line) && line.split_whitespace().count() <= 12;
    states.then_some(line)
}

#[cfg(test)]
#[path = "verdict_tests.rs"]
mod tests;
