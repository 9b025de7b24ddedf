//! Every input the fuzz targets (fuzz/, `scripts/fuzz.sh`) ever failed on, kept in
//! `fuzz/regressions/<target>/` and checked here with the target's own property, so that a
//! fixed finding stays fixed without nightly or cargo-fuzz.

#![allow(clippy::unwrap_used, clippy::expect_used, unreachable_pub)] // test code: a failure is a test failure

use std::path::{Path, PathBuf};

/// The parse targets' property, shared with them: what parses writes back as the same JSON,
/// and a second round trip gives the same bytes.
#[path = "../../../fuzz/round_trip.rs"]
mod round_trip;

/// The `prepare` target's property, shared with it: the cascade at a window from the input
/// keeps the budget (or says why not), valid output, tool pairs, and is a fixed point.
#[path = "../../../fuzz/prepared.rs"]
mod prepared;

use context_cascade::{Format, classify};

/// The findings of `target`.
fn inputs(target: &str) -> Vec<(PathBuf, Vec<u8>)> {
    files_in(&Path::new("regressions").join(target))
}

/// The files of `fuzz/<folder>`, in order, with their bytes.
fn files_in(folder: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../fuzz")
        .join(folder);
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|entry| entry.unwrap().path())
        .filter(|path| {
            path.is_file() && !path.file_name().unwrap().to_string_lossy().starts_with('.')
        })
        .collect();
    files.sort();
    files
        .into_iter()
        .map(|path| {
            let bytes = std::fs::read(&path).unwrap();
            (path, bytes)
        })
        .collect()
}

#[test]
fn openai_parse_findings_round_trip() {
    let found = inputs("parse_openai");
    assert!(!found.is_empty());
    for (path, data) in found {
        eprintln!("{}", path.display());
        round_trip::check(&data, Format::OpenAi);
    }
}

#[test]
fn anthropic_parse_findings_round_trip() {
    let found = inputs("parse_anthropic");
    assert!(!found.is_empty());
    for (path, data) in found {
        eprintln!("{}", path.display());
        round_trip::check(&data, Format::Anthropic);
    }
}

#[test]
fn classify_findings_do_not_panic_or_claim_a_zero_limit() {
    for (path, data) in inputs("classify") {
        let (status, body) = match data.as_slice() {
            [a, b, rest @ ..] => (Some(u16::from_le_bytes([*a, *b]) % 600), rest),
            _ => (None, data.as_slice()),
        };
        let body = String::from_utf8_lossy(body);
        if let Some(overflow) = classify(status, &body) {
            assert_ne!(overflow.limit_tokens, Some(0), "{}", path.display());
        }
    }
}

#[test]
fn prepare_findings_hold_the_property() {
    for (path, data) in inputs("prepare") {
        eprintln!("{}", path.display());
        prepared::check(&data);
    }
}

#[test]
fn responses_parse_findings_round_trip() {
    for (path, data) in inputs("parse_responses") {
        eprintln!("{}", path.display());
        round_trip::check(&data, Format::Responses);
    }
}

/// The seeds the targets start from (bodies cut from the fixtures) hold the same
/// properties: what the fuzzers mutate is sound to begin with, and the properties are
/// checked on real requests of every format on every test run.
#[test]
fn seeds_hold_the_properties() {
    let seeds = |target: &str| files_in(&Path::new("seeds").join(target));
    let formats = [
        ("parse_openai", Format::OpenAi),
        ("parse_anthropic", Format::Anthropic),
        ("parse_responses", Format::Responses),
    ];
    for (target, format) in formats {
        let found = seeds(target);
        assert!(!found.is_empty(), "no {target} seeds");
        for (path, data) in found {
            eprintln!("{}", path.display());
            round_trip::check(&data, format);
        }
    }
    let found = seeds("prepare");
    assert!(!found.is_empty(), "no prepare seeds");
    for (path, data) in found {
        eprintln!("{}", path.display());
        prepared::check(&data);
    }
}
