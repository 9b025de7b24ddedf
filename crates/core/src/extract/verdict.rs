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
mod tests {
    use super::*;

    fn of(text: &str) -> Verdict {
        verdict(text, &Outcome::of(text), false, false)
    }

    #[test]
    fn a_run_says_it_failed_passed_or_nothing() {
        assert_eq!(
            of("Finished in 0.2s\n12 tests, 2 failures\n"),
            Verdict::Failed
        );
        assert_eq!(
            of("Finished in 0.2s\n12 tests, 0 failures\n"),
            Verdict::Passed
        );
        assert_eq!(of("Exit code 1\nboom"), Verdict::Failed);
        assert_eq!(of("===== 3 passed in 0.1s ====="), Verdict::Passed);
        assert_eq!(of("Compiling x\nok"), Verdict::Passed);
        assert_eq!(of("On branch main\nnothing to commit"), Verdict::Unknown);
        assert_eq!(of("lib/a.ex\nlib/b.ex"), Verdict::Unknown);
        assert_eq!(
            verdict("x", &Outcome::of("x"), true, false),
            Verdict::Failed
        );
        assert_eq!(
            verdict("x", &Outcome::of("x"), false, true),
            Verdict::Failed
        );
    }

    #[test]
    fn only_a_last_line_that_states_an_outcome_is_one() {
        assert_eq!(
            stated_outcome_line("a\nb\n  3 passed, 1 failed \n\n"),
            Some("3 passed, 1 failed")
        );
        assert_eq!(
            stated_outcome_line("x\nFAILED tests/test_a.py::test_b"),
            Some("FAILED tests/test_a.py::test_b")
        );
        assert_eq!(stated_outcome_line("fn main() {}\n}"), None);
        assert_eq!(stated_outcome_line(""), None);
    }

    /// The two functions read a line as the patterns they replaced did, on edge cases and
    /// on every fixture text's last line.
    #[test]
    fn success_and_failure_are_read_as_the_former_patterns_read_them() {
        let success = regex::Regex::new(
            r"(?i)(?:^|[\s(\[])(?:passed|ok|success|successful|succeeded|all tests pass\w*)[\s.!)\]]*$",
        )
        .unwrap();
        let failure = regex::Regex::new(
            r"(?i)\b(?:fail(?:ed|ure|ures|s)?|error|errors|traceback|panicked)\b",
        )
        .unwrap();
        let mut lines: Vec<String> = [
            "ok",
            "OK.",
            "(ok)",
            "[Passed]!",
            "x-ok",
            "okay",
            "ok ok",
            "passed_.",
            "successful",
            "Success",
            "succeed",
            "all tests passing",
            "ALL TESTS PASS",
            "all  tests pass",
            "xall tests pass",
            "(all tests passed)",
            "tests pass",
            "é ok",
            "éok",
            "ok\u{a0}",
            "3 failed",
            "failing",
            "FAIL:",
            "error_x",
            "errors.",
            "Traceback (most",
            "panicked at",
            "unfailed",
            "fail2",
            "fails!",
            "",
            " ",
            "ok ]).",
        ]
        .map(String::from)
        .to_vec();
        for (_, conversation) in crate::trail::fixture_tests::fixtures() {
            for message in &conversation.messages {
                for block in message.blocks() {
                    let text = match block {
                        crate::conversation::Block::ToolResult(result) => result.joined_text(),
                        crate::conversation::Block::Text(t) => t.text.clone(),
                        _ => continue,
                    };
                    lines.extend(text.lines().rev().take(3).map(|l| l.trim().to_owned()));
                }
            }
        }
        let (mut successes, mut failures) = (0, 0);
        for line in &lines {
            assert_eq!(
                states_success(line),
                success.is_match(line),
                "success: {line:?}"
            );
            assert_eq!(
                names_failure(line),
                failure.is_match(line),
                "failure: {line:?}"
            );
            successes += usize::from(success.is_match(line));
            failures += usize::from(failure.is_match(line));
        }
        assert!(successes > 5 && failures > 20, "{successes} {failures}");
    }
}
