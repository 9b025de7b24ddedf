//! Tests of `extract::verdict` (a file of their own: they read every fixture).

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
    let failure =
        regex::Regex::new(r"(?i)\b(?:fail(?:ed|ure|ures|s)?|error|errors|traceback|panicked)\b")
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
    for text in crate::trail::fixture_tests::fixture_texts() {
        lines.extend(text.lines().rev().take(3).map(|l| l.trim().to_owned()));
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
