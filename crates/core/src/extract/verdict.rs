//! Whether a command's run failed or passed, as its output says: an exit code, a test
//! report's failures, an error identifier (a traceback), the tool marking its result as an
//! error, or a last line that says `passed` / `ok` / `success`. When the output says none
//! of these, the verdict is unknown, and the trail says so rather than guess.

use std::sync::OnceLock;

use regex::Regex;

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

#[allow(clippy::expect_used)]
fn success_regex() -> &'static Regex {
    static RE: OnceLock<Regex> = OnceLock::new();
    RE.get_or_init(|| {
        Regex::new(r"(?i)(?:^|[\s(\[])(?:passed|ok|success|successful|succeeded|all tests pass\w*)[\s.!)\]]*$")
            .expect("static regex")
    })
}

#[allow(clippy::expect_used)]
fn failure_regex() -> &'static Regex {
    static RE: OnceLock<Regex> = OnceLock::new();
    RE.get_or_init(|| {
        Regex::new(r"(?i)\b(?:fail(?:ed|ure|ures|s)?|error|errors|traceback|panicked)\b")
            .expect("static regex")
    })
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
        Some(line) if failure_regex().is_match(line) => Verdict::Failed,
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
        || success_regex().is_match(line)
        || failure_regex().is_match(line) && line.split_whitespace().count() <= 12;
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
}
