//! Reads a request body, compacts it in process and writes it back, timing each run: the
//! in-process counterpart of `cascade compact`, used by `bench/py_trim.py` beside the Python
//! trimmers and by `bench/run.sh` for peak RSS when the CLI is missing.
//!
//! `compact_file FILE --window N [--runs R] [--sync] [--bare] [-o OUT]` prints one JSON
//! object: min/median/max milliseconds of parse → compaction → serialize (file reading
//! excluded), and what the output holds; with `--bare`, also a bare serde_json round trip
//! of the same bytes timed between the runs (left out by default: it would add its own
//! memory to a peak-RSS measurement). Without `--sync` it runs `compact_with_summary` (the whole
//! cascade with the offline summarizer, what `cascade compact` runs); with it, the
//! synchronous `compact` (Layers 1–2).

use std::time::Instant;

use context_cascade::format;
use context_cascade::{Budget, CascadeConfig, ContextManager};
use serde_json::json;

struct Args {
    file: String,
    window: u64,
    runs: usize,
    sync: bool,
    bare: bool,
    output: Option<String>,
}

fn parse_args() -> Result<Args, String> {
    let mut args = std::env::args().skip(1);
    let (mut file, mut window, mut runs, mut sync, mut bare, mut output) =
        (None, None, 5usize, false, false, None);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--window" => window = args.next().and_then(|v| v.parse().ok()),
            "--runs" => runs = args.next().and_then(|v| v.parse().ok()).ok_or("--runs N")?,
            "--sync" => sync = true,
            "--bare" => bare = true,
            "-o" => output = args.next(),
            _ if file.is_none() => file = Some(arg),
            other => return Err(format!("unexpected argument {other}")),
        }
    }
    Ok(Args {
        file: file
            .ok_or("usage: compact_file FILE --window N [--runs R] [--sync] [--bare] [-o OUT]")?,
        window: window.ok_or("--window N is required")?,
        runs: runs.max(1),
        sync,
        bare,
        output,
    })
}

/// The median of sorted samples (the mean of the middle two for an even count).
fn median(sorted: &[f64]) -> f64 {
    let n = sorted.len();
    if n % 2 == 1 {
        sorted[n / 2]
    } else {
        (sorted[n / 2 - 1] + sorted[n / 2]) / 2.0
    }
}

fn main() {
    // As the `cascade` binary's one-shot commands count: a large request on up to 4 threads.
    context_cascade::estimate::set_counting_threads(4);
    if let Err(e) = run() {
        eprintln!("compact_file: {e}");
        std::process::exit(2);
    }
}

fn run() -> Result<(), String> {
    let args = parse_args()?;
    let bytes = std::fs::read(&args.file).map_err(|e| format!("{}: {e}", args.file))?;
    let manager = ContextManager::new(CascadeConfig::default());
    let budget = Budget::new(args.window, 0);
    let mut times = Vec::new();
    // A bare serde_json round trip of the same bytes, interleaved run by run: the floor
    // under any tool that reads and writes the request as JSON.
    let mut bare_times = Vec::new();
    let mut last = None;
    for _ in 0..args.runs {
        if args.bare {
            let start = Instant::now();
            let value: serde_json::Value =
                serde_json::from_slice(&bytes).map_err(|e| format!("{}: {e}", args.file))?;
            let written = serde_json::to_vec(&value).map_err(|e| e.to_string())?;
            drop((value, written));
            bare_times.push(start.elapsed().as_secs_f64() * 1e3);
        }
        let start = Instant::now();
        let mut conversation = format::parse(&bytes, None).map_err(|e| e.to_string())?;
        let messages_before = conversation.messages.len();
        let report = if args.sync {
            manager.compact(&mut conversation, budget)
        } else {
            pollster::block_on(manager.compact_with_summary(&mut conversation, budget))
        };
        let out = cascade_bench::upstream_bytes(&conversation)?;
        times.push(start.elapsed().as_secs_f64() * 1e3);
        last = Some((out, report, messages_before));
    }
    let Some((out, report, messages_before)) = last else {
        return Err("no run".into());
    };
    if let Some(path) = &args.output {
        std::fs::write(path, &out).map_err(|e| format!("{path}: {e}"))?;
    }
    let mut sorted = times.clone();
    sorted.sort_by(f64::total_cmp);
    bare_times.sort_by(f64::total_cmp);
    let bare_ms = (!bare_times.is_empty()).then(|| {
        json!({
            "min": bare_times[0],
            "median": median(&bare_times),
            "max": bare_times[bare_times.len() - 1],
        })
    });
    let summary = json!({
        "file": args.file,
        "window": args.window,
        "mode": if args.sync { "compact" } else { "compact_with_summary" },
        "runs": times.len(),
        "ms": {"min": sorted[0], "median": median(&sorted), "max": sorted[sorted.len() - 1]},
        "bare_ms": bare_ms,
        "messages_before": messages_before,
        "messages_after": report.messages_after,
        "tokens_before": report.tokens_before,
        "tokens_after": report.tokens_after,
        "fits": report.fits,
        "steps": report.summary_line(),
        "output_bytes": out.len(),
    });
    println!("{summary}");
    Ok(())
}
