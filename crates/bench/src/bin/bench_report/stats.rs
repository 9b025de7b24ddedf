//! Summaries of repeated measurements and of error samples, and markdown tables.

use std::time::{Duration, Instant};

/// min / median / max of some samples.
#[derive(Debug, Clone, Copy, Default, serde::Serialize)]
pub struct Spread {
    pub min: f64,
    pub median: f64,
    pub max: f64,
    pub n: usize,
}

impl Spread {
    /// The spread of some samples (all zero when there are none).
    pub fn of(samples: &[f64]) -> Spread {
        let mut sorted: Vec<f64> = samples.iter().copied().filter(|x| x.is_finite()).collect();
        if sorted.is_empty() {
            return Spread::default();
        }
        sorted.sort_by(f64::total_cmp);
        Spread {
            min: sorted[0],
            median: percentile_sorted(&sorted, 0.5),
            max: sorted[sorted.len() - 1],
            n: sorted.len(),
        }
    }

    /// `min / median / max` with a unit, for a table cell.
    pub fn cell(&self, digits: usize, unit: &str) -> String {
        format!(
            "{:.d$} / {:.d$} / {:.d$}{unit}",
            self.min,
            self.median,
            self.max,
            d = digits
        )
    }
}

/// The `q` quantile (0..=1) of sorted samples, linearly interpolated.
pub fn percentile_sorted(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let rank = q.clamp(0.0, 1.0) * (sorted.len() - 1) as f64;
    let lo = rank.floor() as usize;
    let hi = rank.ceil() as usize;
    sorted[lo] + (sorted[hi] - sorted[lo]) * (rank - lo as f64)
}

/// Median and 95th percentile of absolute errors, and the signed extremes.
#[derive(Debug, Clone, Copy, Default, serde::Serialize)]
pub struct ErrorStats {
    /// Median |error|, as a fraction.
    pub median_abs: f64,
    /// 95th percentile |error|, as a fraction.
    pub p95_abs: f64,
    /// Most negative error (underestimate, the dangerous side).
    pub worst_under: f64,
    /// Most positive error.
    pub worst_over: f64,
    pub n: usize,
}

impl ErrorStats {
    /// Statistics of signed relative errors.
    pub fn of(errors: &[f64]) -> ErrorStats {
        let mut abs: Vec<f64> = errors.iter().map(|e| e.abs()).collect();
        abs.sort_by(f64::total_cmp);
        ErrorStats {
            median_abs: percentile_sorted(&abs, 0.5),
            p95_abs: percentile_sorted(&abs, 0.95),
            worst_under: errors.iter().copied().fold(0.0, f64::min),
            worst_over: errors.iter().copied().fold(0.0, f64::max),
            n: errors.len(),
        }
    }
}

/// Runs `f` and returns its result and the elapsed time.
pub fn timed<T>(f: impl FnOnce() -> T) -> (T, Duration) {
    let start = Instant::now();
    let out = f();
    (out, start.elapsed())
}

/// Milliseconds of a duration.
pub fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// A percentage cell.
pub fn pct(x: f64) -> String {
    format!("{:.1}%", x * 100.0)
}

/// A signed percentage cell.
pub fn spct(x: f64) -> String {
    format!("{:+.1}%", x * 100.0)
}

/// A markdown table.
pub fn table(header: &[&str], rows: &[Vec<String>]) -> String {
    let mut out = String::new();
    out.push_str(&format!("| {} |\n", header.join(" | ")));
    out.push_str(&format!(
        "|{}\n",
        header.iter().map(|_| "---|").collect::<String>()
    ));
    for row in rows {
        out.push_str(&format!("| {} |\n", row.join(" | ")));
    }
    out
}
