//! Preparation cost (issue 2, issue 5 item 1): on requests built from the fixtures and
//! scaled to ~10K, ~100K and ~1M tokens, a bare `serde_json::Value` parse + serialize beside
//! parse → estimate → serialize (goal ≤ 1.5× the bare path) and parse → Layers 1–2
//! (`ContextManager::compact`, window half the request) → serialize (goal ≤ 2×).
//!
//! `cargo bench -p context_cascade --bench prepare`; `bench/run.sh` prints the same ratios,
//! measured side by side, with min/median/max.

// Shared with bench_report (whose items are `pub` for its other modules); a benchmark may
// panic on a fixture it cannot read.
#[allow(dead_code, unreachable_pub, clippy::unwrap_used, clippy::expect_used)]
#[path = "../../bench/src/bin/bench_report/inputs.rs"]
mod inputs;

use std::hint::black_box;
use std::time::Duration;

use context_cascade::ContextManager;
use context_cascade::estimate::Estimator;
use context_cascade::format::{self, WriteOptions};
use context_cascade::{Budget, CascadeConfig};
use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use serde_json::Value;

fn prepare(c: &mut Criterion) {
    let fixtures = match inputs::load_fixtures(&inputs::fixtures_dir()) {
        Ok(f) => f,
        Err(e) => {
            eprintln!("prepare bench skipped: {e}");
            return;
        }
    };
    let manager = ContextManager::new(CascadeConfig::default());
    for (label, target) in inputs::SIZES {
        let bytes = inputs::to_bytes(&inputs::request(inputs::scaled_messages(&fixtures, target)));
        let Ok(parsed) = format::parse(&bytes, None) else {
            eprintln!("{label}: the built request does not parse");
            continue;
        };
        let budget = Budget::new(Estimator::default().tokens(&parsed) / 2, 0);
        let mut group = c.benchmark_group(format!("prepare/{label}"));
        group.throughput(Throughput::Bytes(bytes.len() as u64));
        group.sample_size(10);
        group.warm_up_time(Duration::from_millis(500));
        group.measurement_time(Duration::from_secs(if target >= 1e6 { 4 } else { 2 }));
        group.bench_function("bare_value", |b| {
            b.iter(|| {
                let value: Value = serde_json::from_slice(black_box(&bytes)).unwrap_or(Value::Null);
                serde_json::to_vec(&value).map(|v| v.len()).unwrap_or(0)
            })
        });
        group.bench_function("parse_estimate_serialize", |b| {
            b.iter(|| {
                let Ok(conversation) = format::parse(black_box(&bytes), None) else {
                    return 0;
                };
                black_box(Estimator::default().tokens(&conversation));
                format::to_vec(&conversation, WriteOptions::default())
                    .map(|v| v.len())
                    .unwrap_or(0)
            })
        });
        group.bench_function("parse_layers12_serialize", |b| {
            b.iter(|| {
                let Ok(mut conversation) = format::parse(black_box(&bytes), None) else {
                    return 0;
                };
                black_box(manager.compact(&mut conversation, budget));
                format::to_vec(&conversation, WriteOptions::default())
                    .map(|v| v.len())
                    .unwrap_or(0)
            })
        });
        group.finish();
    }
}

criterion_group!(benches, prepare);
criterion_main!(benches);
