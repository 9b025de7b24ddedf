//! The literal scan that picks the lines the identifier patterns run on: they find there
//! exactly what they find on the whole text, in the same order.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failure is a test failure

use super::*;
use crate::trail::fixture_tests::{fixture_texts, fixtures};

/// The patterns run on the whole text, as before the scan: the reference.
fn identifiers_on_whole_text(text: &str, ids: &mut Vec<String>) {
    let whole = || std::iter::once(0..text.len()).collect::<Vec<_>>();
    let lines = Lines {
        class: whole(),
        code: whole(),
        test: whole(),
    };
    identifiers_on(text, &lines, ids);
}

fn assert_same(text: &str) {
    let (mut scanned, mut whole) = (Vec::new(), Vec::new());
    identifiers(text, &mut scanned);
    identifiers_on_whole_text(text, &mut whole);
    assert_eq!(scanned, whole, "{text:?}");
}

const LINES: &[&str] = &[
    "Traceback (most recent call last):",
    "ValueError: invalid literal for int() with base 10: 'x'",
    "E   AssertionError: assert 1 == 2",
    "** (RuntimeError) something broke",
    "Caused by: java.io.IOException: disk full",
    "Exception in thread \"main\" java.lang.IllegalStateException: boom",
    "Uncaught TypeError: x is not a function",
    "    raise ValueError(\"not an error line\")",
    "  %Jason.DecodeError{position: 0, token: nil}",
    "error[E0308]: mismatched types",
    "src/a.ts(3,1): error TS2345: Argument of type",
    "an error occurred, error  twice, error[ not a code",
    "FAILED tests/test_a.py::test_one - assert 0",
    "test tests::it_works ... FAILED",
    "--- FAIL: TestThing (0.00s)",
    "  1) test adds numbers (MathTest)",
    "  ✕ renders the page (12 ms)",
    "✕",
    "MyError",
    "SomeException   ",
    "Error: plain",
    "\u{e9}t\u{e9} ValueError: after non-ASCII",
    "",
    "   ",
];

#[test]
fn the_lines_scanned_give_what_the_whole_text_gives() {
    for line in LINES {
        assert_same(line);
    }
    for sep in ["\n", "\r\n", "\n\n", " ", ""] {
        let joined = LINES.join(sep);
        assert_same(&joined);
        assert_same(&format!("{sep}{joined}{sep}"));
        // Every pair, in both orders: two kinds on one line, or on lines next to each other.
        for a in LINES {
            for b in LINES {
                assert_same(&format!("{a}{sep}{b}"));
            }
        }
    }
}

#[test]
fn the_lines_scanned_give_what_the_whole_text_gives_on_every_fixture() {
    let mut results = 0;
    for text in fixture_texts() {
        assert_same(&text);
        results += 1;
    }
    assert!(results > 500, "{results}");
}

#[test]
fn each_line_holding_a_literal_is_listed_once_per_kind_close_ones_as_one_run() {
    let far = "x".repeat(MERGE_GAP + 1);
    let text = format!(
        "ok\nValueError: a Error\nerror[E1] error x\n{far}\nFAILED t ✕\nend Exception\nmid\nMore Error"
    );
    let lines = lines_with_literals(&text);
    let of = |ranges: &[Range<usize>]| -> Vec<&str> {
        ranges.iter().map(|r| &text[r.clone()]).collect()
    };
    assert_eq!(
        of(&lines.class),
        ["ValueError: a Error", "end Exception\nmid\nMore Error"]
    );
    assert_eq!(of(&lines.code), ["error[E1] error x"]);
    assert_eq!(of(&lines.test), ["FAILED t ✕"]);
    assert_eq!(lines_with_literals("nothing here\n"), Lines::default());
}

#[test]
fn runs_far_apart_give_what_the_whole_text_gives() {
    let far = format!("\n{}\n", "filler line without literals\n".repeat(40));
    for sep in [far.as_str(), "\n\n"] {
        assert_same(&LINES.join(sep));
    }
}

/// Every text (and line) of the fixtures' tool results where the exit or the test-report
/// pattern matches holds one of its guard's words; each word is needed by some example.
#[test]
fn the_guards_pass_every_text_their_patterns_match() {
    for (line, guard, re) in [
        ("Exit code 2", &EXIT_WORDS, exit_regex()),
        ("EXITED WITH STATUS 1", &EXIT_WORDS, exit_regex()),
        (
            "14 doctests, 297 Tests, 11 failures",
            &TEST_REPORT_WORDS,
            tests_regex(),
        ),
        ("3 PASSED", &TEST_REPORT_WORDS, tests_regex()),
        ("1 Failed", &TEST_REPORT_WORDS, tests_regex()),
    ] {
        assert!(re.is_match(line), "{line}");
        assert!(guard.may_match(line), "{line}");
    }
    // The guards ignore ASCII case only; so must the patterns (Unicode folds `ſ` to `s`).
    for line in ["3 paſſed", "2 teſts, 1 failure"] {
        assert!(!tests_regex().is_match(line), "{line}");
    }
    let mut matched = 0;
    for text in fixture_texts() {
        for part in std::iter::once(text.as_str()).chain(text.lines()) {
            for (guard, re) in [
                (&EXIT_WORDS, exit_regex()),
                (&TEST_REPORT_WORDS, tests_regex()),
            ] {
                if re.is_match(part) {
                    assert!(guard.may_match(part), "{part}");
                    matched += 1;
                }
            }
        }
    }
    assert!(matched > 100, "{matched}");
    let plain = "def add(a, b):\n    return a + b\n";
    assert_eq!(Outcome::of(plain).text(), None);
    assert!(!EXIT_WORDS.may_match(plain) && !TEST_REPORT_WORDS.may_match(plain));
}

/// The search per line from the end that [`last_matching_line`] replaces.
fn last_line_per_line(text: &str) -> Option<&str> {
    text.lines().rev().find(|l| tests_regex().is_match(l))
}

#[test]
fn the_last_report_line_is_the_one_a_search_per_line_finds() {
    let reports = [
        "14 doctests, 297 tests, 11 failures",
        "1 test, 0 failures",
        "=== 3 passed, 1 failed in 0.2s ===",
        "test result: FAILED. 5 passed; 2 failed; 0 ignored",
        "Tests: 1 Failed, 4 Passed",
        "nothing to report",
        "10passed",
        "",
    ];
    for sep in ["\n", "\r\n", "\n\n", " ", "\r"] {
        for a in reports {
            for b in reports {
                for text in [
                    format!("{a}{sep}{b}"),
                    format!("{a}{sep}{b}{sep}"),
                    format!("{sep}{a}{sep}tail\r"),
                    format!("{a}\r"),
                ] {
                    assert_eq!(
                        last_matching_line(&text, tests_regex()),
                        last_line_per_line(&text),
                        "{text:?}"
                    );
                }
            }
        }
    }
    let mut results = 0;
    for (_, conversation) in fixtures() {
        for message in &conversation.messages {
            for result in message.tool_results() {
                let text = result.joined_text();
                assert_eq!(
                    last_matching_line(&text, tests_regex()),
                    last_line_per_line(&text)
                );
                results += 1;
            }
        }
    }
    assert!(results > 500, "{results}");
}

/// The patterns match bytes; a message, a struct's fields or a test name holding
/// characters past ASCII still comes out whole, cut on a character boundary.
#[test]
fn identifiers_keep_text_past_ascii_whole() {
    let text = concat!(
        "ValueError: naïve café — ünïcode ✓\n",
        "  %Jason.DecodeError{position: 0, token: \"é\"}\n",
        "error[E0308]: types différents: `ü8`\n",
        "FAILED tests/test_é.py::test_ünï - assert 0\n",
        "  ✕ rend le résumé (12 ms)\n",
    );
    let mut ids = Vec::new();
    identifiers(text, &mut ids);
    assert_eq!(
        ids,
        [
            "ValueError: naïve café — ünïcode ✓",
            "Jason.DecodeError: position: 0, token: \"é\"}",
            "E0308: types différents: `ü8`",
            "failing test: tests/test_é.py::test_ünï",
            "failing test: rend le résumé",
        ]
    );
    let long = format!("ValueError: {}\n", "résumé ".repeat(40));
    let mut ids = Vec::new();
    identifiers(&long, &mut ids);
    assert!(
        ids[0].starts_with("ValueError: résumé résumé") && ids[0].chars().count() < 160,
        "{ids:?}"
    );
}
