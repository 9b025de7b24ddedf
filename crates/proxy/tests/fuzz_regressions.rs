//! Every input the `admission` fuzz target (fuzz/, `scripts/fuzz.sh`) ever failed on, kept
//! in `fuzz/regressions/admission/` and run here through the target's own harness and
//! property (a fresh proxy over a scripted upstream on 127.0.0.1), so that a fixed finding
//! stays fixed without nightly or cargo-fuzz. The seeds the target starts from run too: they
//! are the ordinary requests the property must hold for.

#![allow(clippy::unwrap_used, clippy::expect_used, unreachable_pub)] // test code: a failure is a test failure

use std::path::{Path, PathBuf};

/// The target's harness and property, shared with it.
#[path = "../../../fuzz/admission.rs"]
mod admission;

fn inputs(folder: &str) -> Vec<PathBuf> {
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
}

fn replay(folder: &str) -> admission::Tally {
    let harness = admission::Harness::new();
    let mut tally = admission::Tally::default();
    for path in inputs(folder) {
        eprintln!("{}", path.display());
        tally += harness.check(&std::fs::read(&path).unwrap());
    }
    tally
}

#[test]
fn admission_findings_hold_the_property() {
    assert!(replay("regressions/admission").requests > 0);
}

/// The seeds reach every stage the property speaks of: refusals, bodies the cascade
/// changed, the retry loop recovering from an overflow, and the fast path.
#[test]
fn admission_seeds_hold_the_property_at_every_stage() {
    let tally = replay("seeds/admission");
    eprintln!("{tally:?}");
    assert!(tally.refused > 0, "{tally:?}");
    assert!(tally.rewritten > 0, "{tally:?}");
    assert!(tally.retried > 0 && tally.recovered > 0, "{tally:?}");
    assert!(tally.fast_path > 0, "{tally:?}");
}
