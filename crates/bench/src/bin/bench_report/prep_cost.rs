//! (1) Preparation cost: what parsing, estimating and Layers 1–2 cost beside a bare
//! `serde_json::Value` parse + serialize of the same bytes, measured side by side
//! (interleaved runs, so machine noise hits every variant alike).

use std::sync::Arc;

use context_cascade::estimate::exact::{Encoding, ExactCounter};
use context_cascade::estimate::{Estimator, TokenCounter};
use context_cascade::format::{self, WriteOptions};
use context_cascade::{Budget, CascadeConfig, ContextManager};
use serde_json::Value;

use crate::inputs::{self, Fixture};
use crate::stats::{Spread, ms, table, timed};

/// The measurements at one request size.
#[derive(serde::Serialize)]
pub struct SizeResult {
    pub label: String,
    pub bytes: usize,
    pub messages: usize,
    /// The prior estimate of the request, in tokens.
    pub tokens: u64,
    /// The window Layers 1–2 compact to (half the request).
    pub window: u64,
    pub tokens_after: u64,
    pub steps: String,
    pub bare_ms: Spread,
    pub estimate_ms: Spread,
    pub layers_ms: Spread,
    /// Layers 1–2 counting exactly (o200k_base) with a fresh counter: nothing memoized.
    pub exact_ms: Spread,
    pub exact_ratio: Spread,
    pub exact_ratio_of_min: f64,
    pub exact_tokens_after: u64,
    /// Per-run ratios (variant / bare of the same run).
    pub estimate_ratio: Spread,
    pub layers_ratio: Spread,
    /// Ratio of the fastest runs (least disturbed by other load on the machine).
    pub estimate_ratio_of_min: f64,
    pub layers_ratio_of_min: f64,
    /// Median milliseconds of each stage, timed apart: where the extra time goes.
    pub stages_ms: Stages,
}

/// The stages of the three paths, timed one by one (medians, ms).
#[derive(serde::Serialize, Default)]
pub struct Stages {
    pub value_parse: f64,
    pub value_serialize: f64,
    pub conversation_parse: f64,
    pub estimate: f64,
    pub conversation_serialize: f64,
    pub compact: f64,
}

/// Times each stage once: bare parse and serialize, then parse → estimate → serialize of
/// the conversation, then `compact` on a freshly parsed conversation.
fn stages(manager: &ContextManager, bytes: &[u8], budget: Budget) -> Result<[f64; 6], String> {
    let (value, t0) = timed(|| serde_json::from_slice::<Value>(bytes).unwrap_or(Value::Null));
    let (_, t1) = timed(|| serde_json::to_vec(&value).map(|v| v.len()).unwrap_or(0));
    drop(value);
    let (conversation, t2) = timed(|| format::parse(bytes, None));
    let conversation = conversation.map_err(|e| e.to_string())?;
    let (_, t3) = timed(|| Estimator::default().tokens(&conversation));
    let (_, t4) = timed(|| format::to_vec(&conversation, WriteOptions::default()).map(|v| v.len()));
    drop(conversation);
    let mut fresh = format::parse(bytes, None).map_err(|e| e.to_string())?;
    let (_, t5) = timed(|| manager.compact(&mut fresh, budget));
    Ok([t0, t1, t2, t3, t4, t5].map(ms))
}

fn bare(bytes: &[u8]) -> usize {
    let value: Value = serde_json::from_slice(bytes).unwrap_or(Value::Null);
    serde_json::to_vec(&value).map(|v| v.len()).unwrap_or(0)
}

fn estimate(bytes: &[u8]) -> Result<(usize, u64), String> {
    let conversation = format::parse(bytes, None).map_err(|e| e.to_string())?;
    let tokens = Estimator::default().tokens(&conversation);
    let out = format::to_vec(&conversation, WriteOptions::default()).map_err(|e| e.to_string())?;
    Ok((out.len(), tokens))
}

fn layers(
    manager: &ContextManager,
    bytes: &[u8],
    budget: Budget,
) -> Result<(usize, u64, String), String> {
    let mut conversation = format::parse(bytes, None).map_err(|e| e.to_string())?;
    let report = manager.compact(&mut conversation, budget);
    let out = cascade_bench::upstream_bytes(&conversation)?;
    Ok((out.len(), report.tokens_after, report.summary_line()))
}

/// An engine counting exactly with a counter of its own, so that nothing is memoized from
/// an earlier run (the counter is leaked: one per run, a few hundred kB each); each run
/// also counts on a fresh thread, whose memo of merged pieces starts empty.
fn cold_exact_manager() -> Result<ContextManager, String> {
    let counter = ExactCounter::new(Encoding::O200kBase).map_err(|e| e.to_string())?;
    let counter: &'static ExactCounter = Box::leak(Box::new(counter));
    Ok(
        ContextManager::new(CascadeConfig::default()).with_token_counters(Arc::new(
            move |_: &str| Some(counter as &'static dyn TokenCounter),
        )),
    )
}

/// Runs the measurement at every size of [`inputs::SIZES`].
pub fn run(fixtures: &[Fixture], runs_scale: f64) -> Result<Vec<SizeResult>, String> {
    let manager = ContextManager::new(CascadeConfig::default());
    let mut results = Vec::new();
    for (label, target) in inputs::SIZES {
        let messages = inputs::scaled_messages(fixtures, target);
        let count = messages.len();
        let bytes = inputs::to_bytes(&inputs::request(messages));
        let (_, tokens) = estimate(&bytes)?;
        let window = tokens / 2;
        let budget = Budget::new(window, 0);
        let runs = ((if target >= 1e6 {
            9.0
        } else if target >= 1e5 {
            21.0
        } else {
            41.0
        }) * runs_scale)
            .ceil()
            .max(3.0) as usize;
        // One warm-up of each, then interleaved runs.
        bare(&bytes);
        estimate(&bytes)?;
        let (_, tokens_after, steps) = layers(&manager, &bytes, budget)?;
        let (_, exact_tokens_after, _) = layers(&cold_exact_manager()?, &bytes, budget)?;
        let (mut b, mut e, mut l, mut er, mut lr) = (vec![], vec![], vec![], vec![], vec![]);
        let (mut x, mut xr) = (vec![], vec![]);
        let mut stage_samples: [Vec<f64>; 6] = Default::default();
        for _ in 0..runs {
            let (_, tb) = timed(|| bare(&bytes));
            let (r, te) = timed(|| estimate(&bytes));
            r?;
            let (r, tl) = timed(|| layers(&manager, &bytes, budget));
            r?;
            let exact = cold_exact_manager()?;
            // On a thread of its own: nothing a counter keeps per thread survives a run.
            let (r, tx) =
                std::thread::scope(|s| s.spawn(|| timed(|| layers(&exact, &bytes, budget))).join())
                    .map_err(|_| "the exact run panicked".to_owned())?;
            r?;
            x.push(ms(tx));
            xr.push(tx.as_secs_f64() / tb.as_secs_f64());
            b.push(ms(tb));
            e.push(ms(te));
            l.push(ms(tl));
            er.push(te.as_secs_f64() / tb.as_secs_f64());
            lr.push(tl.as_secs_f64() / tb.as_secs_f64());
            for (samples, t) in stage_samples
                .iter_mut()
                .zip(stages(&manager, &bytes, budget)?)
            {
                samples.push(t);
            }
        }
        let median = |i: usize| Spread::of(&stage_samples[i]).median;
        eprintln!("  prep cost {label}: {runs} runs");
        results.push(SizeResult {
            label: label.to_owned(),
            bytes: bytes.len(),
            messages: count,
            tokens,
            window,
            tokens_after,
            steps,
            bare_ms: Spread::of(&b),
            estimate_ms: Spread::of(&e),
            layers_ms: Spread::of(&l),
            estimate_ratio: Spread::of(&er),
            layers_ratio: Spread::of(&lr),
            estimate_ratio_of_min: Spread::of(&e).min / Spread::of(&b).min,
            layers_ratio_of_min: Spread::of(&l).min / Spread::of(&b).min,
            exact_ms: Spread::of(&x),
            exact_ratio: Spread::of(&xr),
            exact_ratio_of_min: Spread::of(&x).min / Spread::of(&b).min,
            exact_tokens_after,
            stages_ms: Stages {
                value_parse: median(0),
                value_serialize: median(1),
                conversation_parse: median(2),
                estimate: median(3),
                conversation_serialize: median(4),
                compact: median(5),
            },
        });
    }
    Ok(results)
}

/// The markdown section.
pub fn markdown(results: &[SizeResult]) -> String {
    let rows: Vec<Vec<String>> = results
        .iter()
        .map(|r| {
            vec![
                r.label.clone(),
                format!(
                    "{:.2} MB, {} msgs, {} tok",
                    r.bytes as f64 / 1e6,
                    r.messages,
                    r.tokens
                ),
                r.bare_ms.cell(2, " ms"),
                r.estimate_ms.cell(2, " ms"),
                r.layers_ms.cell(2, " ms"),
                format!(
                    "{} (fastest runs: {:.2}×)",
                    r.estimate_ratio.cell(2, "×"),
                    r.estimate_ratio_of_min
                ),
                format!(
                    "{} (fastest runs: {:.2}×)",
                    r.layers_ratio.cell(2, "×"),
                    r.layers_ratio_of_min
                ),
                r.exact_ms.cell(2, " ms"),
                format!(
                    "{} (fastest runs: {:.2}×)",
                    r.exact_ratio.cell(2, "×"),
                    r.exact_ratio_of_min
                ),
            ]
        })
        .collect();
    let mut out = String::from(
        "## 1. Preparation cost\n\n\
         Request bodies built from the fixtures (concatenated, repeated with unique tool-call \
         ids), measured in one process, interleaved run by run; cells are min / median / max. \
         *bare* = `serde_json::from_slice::<Value>` + `to_vec`; *estimate* = parse into the \
         conversation model → estimate → serialize (issue 2, goal ≤ 1.5×); *Layers 1–2* = \
         parse → `ContextManager::compact` (①②, ③ when still over 0.9·E) with a window of \
         half the request → serialize (issue 5, goal ≤ 2×); *exact* = the same with exact \
         o200k_base counts and a fresh counter each run, nothing memoized (issue 27, goal ≤ \
         2×). Ratios are per run (variant ÷ bare of the same run); *fastest runs* divides the minimums, the figure least moved \
         by other load on a shared machine.\n\n",
    );
    out.push_str(&table(
        &[
            "size",
            "request",
            "bare",
            "estimate",
            "Layers 1–2",
            "estimate ÷ bare",
            "Layers 1–2 ÷ bare",
            "Layers 1–2, exact",
            "exact ÷ bare",
        ],
        &rows,
    ));
    out.push_str(
        "\nWhere the time goes (median ms of each stage timed on its own; the conversation \
         parse includes the `serde_json::Value` parse it starts from):\n\n",
    );
    let rows: Vec<Vec<String>> = results
        .iter()
        .map(|r| {
            let s = &r.stages_ms;
            vec![
                r.label.clone(),
                format!("{:.2}", s.value_parse),
                format!("{:.2}", s.value_serialize),
                format!("{:.2}", s.conversation_parse),
                format!("{:.2}", s.estimate),
                format!("{:.2}", s.conversation_serialize),
                format!("{:.2}", s.compact),
            ]
        })
        .collect();
    out.push_str(&table(
        &[
            "size",
            "Value parse",
            "Value serialize",
            "conversation parse",
            "estimate",
            "conversation serialize",
            "compact (Layers 1–2)",
        ],
        &rows,
    ));
    out.push('\n');
    for r in results {
        out.push_str(&format!(
            "- {}: window {} → {} tokens after ({}); counting exactly: {} o200k tokens after\n",
            r.label, r.window, r.tokens_after, r.steps, r.exact_tokens_after
        ));
    }
    out
}
