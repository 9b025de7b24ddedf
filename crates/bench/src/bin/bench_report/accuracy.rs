//! (3) Estimator accuracy against exact o200k_base counts: chars/4, the SPEC prior, and the
//! prior after 1, 3 and 10 EMA observations — calibrated on the early requests of a session,
//! measured on its later ones. Also: the rolling case (every call observed), the α that
//! would do best, weights refitted by least squares (leave-one-out), and the `preTokens`
//! Claude Code recorded.

use context_cascade::Calibration;
use context_cascade::estimate::{ClassCounts, Weights};
use context_cascade::{CascadeConfig, ContextManager};

use crate::measured::Measured;
use crate::stats::ErrorStats;

/// Calibration observations come from the first requests; the errors are measured on
/// requests after the largest of these, so every variant is judged on the same requests.
const OBSERVATIONS: [usize; 3] = [1, 3, 10];
/// At most this many later requests per fixture, evenly spaced, so long sessions do not
/// outweigh short ones.
const SAMPLES_PER_FIXTURE: usize = 20;
/// The size-weighted calibration measured beside SPEC's rule
/// (`CalibrationConfig::prior_tokens`).
pub const WEIGHTED_PRIOR_TOKENS: f64 = 32_000.0;

/// Accuracy of one estimator variant, pooled over fixtures.
#[derive(serde::Serialize)]
pub struct Variant {
    pub name: String,
    pub stats: ErrorStats,
}

/// Per-fixture figures.
#[derive(serde::Serialize)]
pub struct PerFixture {
    pub name: String,
    pub messages: usize,
    pub exact_tokens: u64,
    /// Whole-transcript errors.
    pub chars4_error: f64,
    pub prior_error: f64,
    /// Median |error| on later requests after 3 observations.
    pub calibrated3_median: f64,
}

/// A Claude Code compaction point.
#[derive(serde::Serialize)]
pub struct PreTokens {
    pub name: String,
    pub message_index: usize,
    pub pre_tokens: u64,
    pub exact_o200k: u64,
    pub prior: f64,
    pub chars4: f64,
    /// What the engine estimates for the session's model before any observation: the prior
    /// times the catalog's starting scale times the safety margin.
    pub engine_uncalibrated: f64,
    pub model: String,
}

#[derive(serde::Serialize)]
pub struct AlphaRow {
    pub alpha: f64,
    pub after3: ErrorStats,
    pub after10: ErrorStats,
    pub rolling: ErrorStats,
}

#[derive(serde::Serialize)]
pub struct Accuracy {
    pub variants: Vec<Variant>,
    pub per_fixture: Vec<PerFixture>,
    pub pre_tokens: Vec<PreTokens>,
    pub alphas: Vec<AlphaRow>,
    /// Weights fitted on all fixtures.
    pub fitted_weights: Weights,
    /// Leave-one-out: SPEC weights vs refitted, uncalibrated and after 3 observations.
    pub loo: Vec<Variant>,
}

/// The later requests of a fixture that every variant is measured on.
pub fn measured_requests(m: &Measured) -> Vec<usize> {
    let first = OBSERVATIONS[OBSERVATIONS.len() - 1].min(m.calls.len().saturating_sub(1));
    let later = &m.calls[first..];
    if later.len() <= SAMPLES_PER_FIXTURE {
        return later.to_vec();
    }
    (0..SAMPLES_PER_FIXTURE)
        .map(|k| later[k * (later.len() - 1) / (SAMPLES_PER_FIXTURE - 1)])
        .collect()
}

/// Signed relative error of an estimate.
pub fn rel(estimate: f64, exact: u64) -> f64 {
    (estimate - exact as f64) / exact.max(1) as f64
}

/// What a replay estimates and observes: here a prior scaled by one `Calibration`; in
/// section 11 (`families`) a `ContextManager` as the engine runs it.
pub trait Subject {
    /// The estimate in force for the request `messages[..i]`.
    fn estimate(&mut self, m: &Measured, i: usize) -> f64;
    /// The count the estimate is judged against (and the one observed).
    fn real(&self, m: &Measured, i: usize) -> u64;
    /// Folds in the real count of the request `messages[..i]`.
    fn observe(&mut self, m: &Measured, i: usize);
}

/// Errors on the measured requests of every fixture after observing its first `k` calls
/// (then frozen); `make` gives each fixture a fresh subject.
pub fn errors_after<S: Subject>(
    data: &[Measured],
    k: usize,
    make: impl Fn(&Measured) -> S,
) -> Vec<f64> {
    let mut errors = Vec::new();
    for m in data {
        let mut subject = make(m);
        for &i in m.calls.iter().take(k) {
            subject.observe(m, i);
        }
        for i in measured_requests(m) {
            errors.push(rel(subject.estimate(m, i), subject.real(m, i)));
        }
    }
    errors
}

/// Errors when every call is observed and the next one estimated (what a running agent or
/// the proxy sees), on the same measured requests.
pub fn errors_rolling<S: Subject>(data: &[Measured], make: impl Fn(&Measured) -> S) -> Vec<f64> {
    let mut errors = Vec::new();
    for m in data {
        let wanted = measured_requests(m);
        let mut subject = make(m);
        for &i in &m.calls {
            if wanted.contains(&i) {
                errors.push(rel(subject.estimate(m, i), subject.real(m, i)));
            }
            subject.observe(m, i);
        }
    }
    errors
}

/// Section 3's subject: the prior under some weights times the scale one `Calibration`
/// gives (1 before any observation), judged against exact o200k_base counts.
pub struct Scaled<'a> {
    weights: &'a Weights,
    config: &'a CascadeConfig,
    calibration: Calibration,
    scale: f64,
}

impl<'a> Scaled<'a> {
    /// A fresh subject (no observation yet).
    pub fn new(weights: &'a Weights, config: &'a CascadeConfig) -> Self {
        Scaled {
            weights,
            config,
            calibration: Calibration::new(),
            scale: 1.0,
        }
    }
}

impl Subject for Scaled<'_> {
    fn estimate(&mut self, m: &Measured, i: usize) -> f64 {
        m.prior(self.weights, i) * self.scale
    }
    fn real(&self, m: &Measured, i: usize) -> u64 {
        m.cum_exact[i]
    }
    fn observe(&mut self, m: &Measured, i: usize) {
        let prior = m.prior(self.weights, i);
        self.scale = self
            .calibration
            .observe("m", prior, m.cum_exact[i], None, self.config);
    }
}

/// Errors of `prior × scale-after-k` on the measured requests of every fixture.
fn calibrated_errors(
    data: &[Measured],
    weights: &Weights,
    config: &CascadeConfig,
    k: usize,
) -> Vec<f64> {
    errors_after(data, k, |_| Scaled::new(weights, config))
}

/// Section 3's rolling case.
fn rolling_errors(data: &[Measured], weights: &Weights, config: &CascadeConfig) -> Vec<f64> {
    errors_rolling(data, |_| Scaled::new(weights, config))
}

fn pooled(data: &[Measured], f: impl Fn(&Measured, usize) -> f64) -> Vec<f64> {
    data.iter()
        .flat_map(|m| measured_requests(m).into_iter().map(move |i| (m, i)))
        .map(|(m, i)| rel(f(m, i), m.cum_exact[i]))
        .collect()
}

/// Weighted least squares of exact tokens on the five character classes, one sample per
/// message, each fixture weighing the same; the fixed costs stay as in the SPEC.
pub fn fit(data: &[&Measured]) -> Weights {
    let mut ata = [[0.0f64; 5]; 5];
    let mut atb = [0.0f64; 5];
    let base = Weights::default();
    for m in data {
        let total = m.cum_exact[m.len()].max(1) as f64;
        for i in 0..m.len() {
            let c = diff(&m.cum_counts[i + 1], &m.cum_counts[i]);
            let x = [
                c.letters,
                c.digits,
                c.whitespace,
                c.punctuation,
                c.non_ascii,
            ]
            .map(|v| v as f64);
            let fixed = base.per_message * c.messages as f64
                + base.per_binary_block * c.binary_blocks as f64;
            let y = (m.cum_exact[i + 1] - m.cum_exact[i]) as f64 - fixed;
            let w = 1.0 / total;
            for r in 0..5 {
                atb[r] += w * x[r] * y;
                for s in 0..5 {
                    ata[r][s] += w * x[r] * x[s];
                }
            }
        }
    }
    let solved = solve(ata, atb).unwrap_or([
        base.letter,
        base.digit,
        base.whitespace,
        base.punctuation,
        base.non_ascii,
    ]);
    Weights {
        letter: solved[0],
        digit: solved[1],
        whitespace: solved[2],
        punctuation: solved[3],
        non_ascii: solved[4],
        ..base
    }
}

fn diff(a: &ClassCounts, b: &ClassCounts) -> ClassCounts {
    ClassCounts {
        letters: a.letters - b.letters,
        digits: a.digits - b.digits,
        whitespace: a.whitespace - b.whitespace,
        punctuation: a.punctuation - b.punctuation,
        non_ascii: a.non_ascii - b.non_ascii,
        binary_blocks: a.binary_blocks - b.binary_blocks,
        messages: a.messages - b.messages,
    }
}

/// Gaussian elimination with partial pivoting (None when singular).
fn solve(mut a: [[f64; 5]; 5], mut b: [f64; 5]) -> Option<[f64; 5]> {
    for col in 0..5 {
        let pivot = (col..5).max_by(|&i, &j| a[i][col].abs().total_cmp(&a[j][col].abs()))?;
        if a[pivot][col].abs() < 1e-12 {
            return None;
        }
        a.swap(col, pivot);
        b.swap(col, pivot);
        let pivot_row = a[col];
        for row in col + 1..5 {
            let f = a[row][col] / pivot_row[col];
            for (cell, p) in a[row].iter_mut().zip(pivot_row).skip(col) {
                *cell -= f * p;
            }
            b[row] -= f * b[col];
        }
    }
    let mut x = [0.0; 5];
    for row in (0..5).rev() {
        let s: f64 = (row + 1..5).map(|k| a[row][k] * x[k]).sum();
        x[row] = (b[row] - s) / a[row][row];
    }
    Some(x)
}

/// Runs every accuracy measurement.
pub fn run(data: &[Measured]) -> Accuracy {
    // SPEC's EMA rule (no prior tokens); the size-weighted default is `weighted` below.
    let mut config = CascadeConfig::default();
    config.calibration.prior_tokens = 0.0;
    let spec = config.weights;
    let mut variants = vec![
        Variant {
            name: "chars/4".into(),
            stats: ErrorStats::of(&pooled(data, |m, i| m.chars_over_4(i))),
        },
        Variant {
            name: "SPEC prior (uncalibrated)".into(),
            stats: ErrorStats::of(&pooled(data, |m, i| m.prior(&spec, i))),
        },
        Variant {
            name: format!(
                "SPEC prior × {} (the engine before its first observation)",
                config.calibration.uncalibrated_margin
            ),
            stats: ErrorStats::of(&pooled(data, |m, i| {
                m.prior(&spec, i) * config.calibration.uncalibrated_margin
            })),
        },
    ];
    let mut weighted = CascadeConfig::default();
    weighted.calibration.prior_tokens = WEIGHTED_PRIOR_TOKENS;
    // SPEC's rule, then the size-weighted one: after 1, 3 and 10 observations, and rolling.
    for (prefix, rolling, rule) in [
        (
            "prior after",
            "rolling: every call observed, next one estimated",
            &config,
        ),
        (
            "size-weighted rule, after",
            "size-weighted rule, rolling",
            &weighted,
        ),
    ] {
        for k in OBSERVATIONS {
            let plural = if k == 1 { "" } else { "s" };
            variants.push(Variant {
                name: format!("{prefix} {k} observation{plural}"),
                stats: ErrorStats::of(&calibrated_errors(data, &spec, rule, k)),
            });
        }
        variants.push(Variant {
            name: rolling.into(),
            stats: ErrorStats::of(&rolling_errors(data, &spec, rule)),
        });
    }

    let per_fixture = data
        .iter()
        .map(|m| {
            let n = m.len();
            let mut errs: Vec<f64> = calibrated_errors(std::slice::from_ref(m), &spec, &config, 3)
                .into_iter()
                .map(f64::abs)
                .collect();
            errs.sort_by(f64::total_cmp);
            PerFixture {
                name: m.name.clone(),
                messages: n,
                exact_tokens: m.cum_exact[n],
                chars4_error: rel(m.chars_over_4(n), m.cum_exact[n]),
                prior_error: rel(m.prior(&spec, n), m.cum_exact[n]),
                calibrated3_median: crate::stats::percentile_sorted(&errs, 0.5),
            }
        })
        .collect();

    let manager = ContextManager::new(CascadeConfig::default());
    let pre_tokens = data
        .iter()
        .flat_map(|m| {
            m.compactions
                .iter()
                .map(move |&(index, pre)| (m, index, pre))
        })
        .filter(|(m, index, _)| *index <= m.len())
        .map(|(m, index, pre)| PreTokens {
            name: m.name.clone(),
            message_index: index,
            pre_tokens: pre,
            exact_o200k: m.cum_exact[index],
            prior: m.prior(&spec, index),
            chars4: m.chars_over_4(index),
            engine_uncalibrated: m.prior(&spec, index)
                * manager.estimator(&m.session_model).multiplier,
            model: m.session_model.clone(),
        })
        .collect();

    let alphas = [0.1, 0.2, 0.3, 0.5, 0.7, 1.0]
        .into_iter()
        .map(|alpha| {
            // SPEC's EMA (no prior tokens) at each smoothing factor.
            let mut config = CascadeConfig::default();
            config.calibration.prior_tokens = 0.0;
            config.calibration.ema_alpha = alpha;
            AlphaRow {
                alpha,
                after3: ErrorStats::of(&calibrated_errors(data, &spec, &config, 3)),
                after10: ErrorStats::of(&calibrated_errors(data, &spec, &config, 10)),
                rolling: ErrorStats::of(&rolling_errors(data, &spec, &config)),
            }
        })
        .collect();

    let all: Vec<&Measured> = data.iter().collect();
    let fitted_weights = fit(&all);
    let (mut spec0, mut fit0, mut spec3, mut fit3) = (vec![], vec![], vec![], vec![]);
    for (held, m) in data.iter().enumerate() {
        let others: Vec<&Measured> = data
            .iter()
            .enumerate()
            .filter(|(j, _)| *j != held)
            .map(|(_, m)| m)
            .collect();
        let w = fit(&others);
        let one = std::slice::from_ref(m);
        spec0.extend(pooled(one, |m, i| m.prior(&spec, i)));
        fit0.extend(pooled(one, |m, i| m.prior(&w, i)));
        spec3.extend(calibrated_errors(one, &spec, &config, 3));
        fit3.extend(calibrated_errors(one, &w, &config, 3));
    }
    let loo = vec![
        Variant {
            name: "SPEC weights, uncalibrated".into(),
            stats: ErrorStats::of(&spec0),
        },
        Variant {
            name: "refitted (leave-one-out), uncalibrated".into(),
            stats: ErrorStats::of(&fit0),
        },
        Variant {
            name: "SPEC weights, after 3 observations".into(),
            stats: ErrorStats::of(&spec3),
        },
        Variant {
            name: "refitted (leave-one-out), after 3 observations".into(),
            stats: ErrorStats::of(&fit3),
        },
    ];
    variants.shrink_to_fit();
    Accuracy {
        variants,
        per_fixture,
        pre_tokens,
        alphas,
        fitted_weights,
        loo,
    }
}
