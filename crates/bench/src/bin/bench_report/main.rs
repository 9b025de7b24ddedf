//! The benchmark driver behind `bench/run.sh`: preparation cost (1), estimator accuracy (3)
//! and the cost curve of a session (4), measured in one run; writes the inputs the Python
//! comparison (2) and the memory measurement (5) use.
//!
//! `cargo run --release -p cascade-bench --bin bench_report -- [--out DIR] [--quick]`
//!
//! Writes `DIR/rust.json` (every figure), `DIR/rust.md` (the tables, also printed),
//! `DIR/curve-*.svg` and `DIR/inputs/*.json`. `--quick` runs fewer repetitions.
//!
//! `--families` runs section 11 alone instead (accuracy per model family, what bounds the
//! prior, the cost of exact counts) and writes `DIR/families.{md,json}`. `--prep` runs
//! section 1 alone and only prints it (to compare two trees side by side). `--cost` runs
//! section 12 (cost per session) alone and writes `DIR/cost.{md,json}`.
// A benchmark binary: its modules have no outside users, and a benchmark may stop on a
// fixture it cannot read.
#![allow(unreachable_pub, clippy::unwrap_used, clippy::expect_used)]

mod accuracy;
mod accuracy_rules;
mod accuracy_tables;
mod curve;
mod exact_cost;
mod families;
mod families_tables;
mod inputs;
mod measured;
mod prep_cost;
mod session_cost;
mod stats;

use std::path::{Path, PathBuf};
use std::time::Instant;

use context_cascade::estimate::exact::{Encoding, ExactCounter};
use serde_json::json;

fn main() {
    // As the `cascade` binary's one-shot commands count: a large request on up to 4 threads.
    context_cascade::estimate::set_counting_threads(4);
    if let Err(e) = run() {
        eprintln!("bench_report: {e}");
        std::process::exit(1);
    }
}

fn run() -> Result<(), String> {
    let mut out_dir = PathBuf::from("bench/out");
    let mut quick = false;
    let mut families_only = false;
    let mut prep_only = false;
    let mut cost_only = false;
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--out" => out_dir = args.next().map(PathBuf::from).ok_or("--out DIR")?,
            "--quick" => quick = true,
            "--families" => families_only = true,
            "--prep" => prep_only = true,
            "--cost" => cost_only = true,
            other => return Err(format!("unexpected argument {other}")),
        }
    }
    std::fs::create_dir_all(out_dir.join("inputs"))
        .map_err(|e| format!("{}: {e}", out_dir.display()))?;
    let started = Instant::now();
    let fixtures = inputs::load_fixtures(&inputs::fixtures_dir())?;
    if families_only {
        return run_families(&fixtures, &out_dir, quick);
    }
    if cost_only {
        // Section 12 alone: printed and written to DIR/cost.{md,json}.
        let totals = session_cost::run(&fixtures)?;
        let markdown = session_cost::markdown(&totals, fixtures.len());
        println!("{markdown}");
        write(&out_dir.join("cost.md"), markdown.as_bytes())?;
        let body = serde_json::to_vec_pretty(&totals).map_err(|e| e.to_string())?;
        return write(&out_dir.join("cost.json"), &body);
    }
    if prep_only {
        // Section 1 alone (to compare two trees): printed, nothing written.
        let prep = prep_cost::run(&fixtures, if quick { 0.3 } else { 1.0 })?;
        println!("{}", prep_cost::markdown(&prep));
        return Ok(());
    }
    let written = write_inputs(&fixtures, &out_dir.join("inputs"))?;
    eprintln!("inputs written ({:.1}s)", started.elapsed().as_secs_f64());

    let prep = prep_cost::run(&fixtures, if quick { 0.3 } else { 1.0 })?;
    eprintln!(
        "(1) preparation cost done ({:.1}s)",
        started.elapsed().as_secs_f64()
    );

    let counter = ExactCounter::new(Encoding::O200kBase).map_err(|e| e.to_string())?;
    let data = fixtures
        .iter()
        .map(|f| measured::Measured::new(f, &counter))
        .collect::<Result<Vec<_>, _>>()?;
    let accuracy = accuracy::run(&data);
    eprintln!(
        "(3) accuracy done ({:.1}s)",
        started.elapsed().as_secs_f64()
    );

    let mut curves = Vec::new();
    for m in data.iter().filter(|m| m.cum_exact[m.len()] > 32_000) {
        for window in [128_000, 32_000] {
            curves.push(curve::replay(m, window, &counter, &out_dir)?);
        }
    }
    eprintln!(
        "(4) cost curves done ({:.1}s)",
        started.elapsed().as_secs_f64()
    );

    let markdown = [
        prep_cost::markdown(&prep),
        accuracy_tables::markdown(&accuracy),
        curve::markdown(&curves),
    ]
    .join("\n");
    println!("{markdown}");
    write(&out_dir.join("rust.md"), markdown.as_bytes())?;
    let report = json!({
        "prep_cost": prep,
        "accuracy": accuracy,
        "curves": curves,
        "inputs": written,
        "seconds": started.elapsed().as_secs_f64(),
    });
    let body = serde_json::to_vec_pretty(&report).map_err(|e| e.to_string())?;
    write(&out_dir.join("rust.json"), &body)
}

/// Section 11: accuracy per model family, the rules tried, the cost of exact counts.
fn run_families(fixtures: &[inputs::Fixture], out_dir: &Path, quick: bool) -> Result<(), String> {
    let started = Instant::now();
    let counter = ExactCounter::new(Encoding::O200kBase).map_err(|e| e.to_string())?;
    let data = fixtures
        .iter()
        .map(|f| measured::Measured::new(f, &counter))
        .collect::<Result<Vec<_>, _>>()?;
    let families = families::run(&data)?;
    let rules = accuracy_rules::run(&data);
    eprintln!(
        "(11) accuracy per family done ({:.1}s)",
        started.elapsed().as_secs_f64()
    );
    let cost = exact_cost::run(fixtures, if quick { 3 } else { 15 })?;
    eprintln!(
        "(11) cost of exact counts done ({:.1}s)",
        started.elapsed().as_secs_f64()
    );
    let markdown = families_tables::markdown(&families, &rules, &cost);
    println!("{markdown}");
    write(&out_dir.join("families.md"), markdown.as_bytes())?;
    let report = json!({"families": families, "rules": rules, "cost": cost});
    let body = serde_json::to_vec_pretty(&report).map_err(|e| e.to_string())?;
    write(&out_dir.join("families.json"), &body)
}

fn write(path: &Path, bytes: &[u8]) -> Result<(), String> {
    std::fs::write(path, bytes).map_err(|e| format!("{}: {e}", path.display()))
}

/// Writes every fixture as a request body, the ~1.3 MB concatenation of the two largest
/// Claude Code sessions (the request of issue 5's reference measurement) and the ~1M-token
/// request; returns their names and sizes.
fn write_inputs(
    fixtures: &[inputs::Fixture],
    dir: &Path,
) -> Result<Vec<serde_json::Value>, String> {
    let mut written = Vec::new();
    let mut save = |name: &str, messages: Vec<serde_json::Value>| -> Result<(), String> {
        let count = messages.len();
        let bytes = inputs::to_bytes(&inputs::request(messages));
        write(&dir.join(format!("{name}.json")), &bytes)?;
        written.push(json!({"name": name, "messages": count, "bytes": bytes.len()}));
        Ok(())
    };
    for f in fixtures {
        save(&f.name, f.messages.clone())?;
    }
    let mut largest: Vec<&inputs::Fixture> = fixtures
        .iter()
        .filter(|f| f.name.starts_with("claude-code") && f.name.ends_with("-main"))
        .collect();
    largest.sort_by_key(|f| {
        std::cmp::Reverse(
            f.messages
                .iter()
                .map(|m| m.to_string().len())
                .sum::<usize>(),
        )
    });
    largest.truncate(2);
    largest.sort_by(|a, b| a.name.cmp(&b.name));
    save("concat-1.3mb", inputs::concatenated(&largest))?;
    save("scaled-1m", inputs::scaled_messages(fixtures, 1_000_000.0))?;
    Ok(written)
}
