//! The markdown tables of section 11: accuracy per model family, what bounds the prior,
//! and the cost of exact counts.

use crate::accuracy_rules::Rules;
use crate::exact_cost::CostRow;
use crate::families::{FamilyRow, RuleStats};
use crate::stats::{ErrorStats, pct, table};

fn cell(s: &ErrorStats) -> String {
    format!("{} / {}", pct(s.median_abs), pct(s.p95_abs))
}

fn family_rows(rows: &[FamilyRow], rule: impl Fn(&FamilyRow) -> &RuleStats) -> Vec<Vec<String>> {
    rows.iter()
        .map(|r| {
            let s = rule(r);
            vec![
                r.family.clone(),
                r.models
                    .iter()
                    .map(|m| {
                        if m.is_empty() {
                            "(none)".into()
                        } else {
                            format!("`{m}`")
                        }
                    })
                    .collect::<Vec<_>>()
                    .join(", "),
                format!("{} / {}", r.fixtures, s.rolling.n),
                r.yardstick.clone(),
                cell(&s.after[0]),
                cell(&s.after[1]),
                cell(&s.after[2]),
                cell(&s.rolling),
            ]
        })
        .collect()
}

/// The section's generated part (the prose around it lives in docs/benchmarks.md).
pub fn markdown(families: &[FamilyRow], rules: &Rules, cost: &[CostRow]) -> String {
    let header = [
        "family",
        "model id asked for",
        "fixtures / requests",
        "yardstick",
        "after 0 obs",
        "after 1",
        "after 3",
        "rolling",
    ];
    let mut out = String::from(
        "### Per family: median / p95 |error| of `ContextManager::estimator(model)`\n\n\
         SPEC's EMA rule (the default):\n\n",
    );
    out.push_str(&table(&header, &family_rows(families, |r| &r.ema)));
    out.push_str("\nThe size-weighted rule (`calibration.prior_tokens = 32000`):\n\n");
    out.push_str(&table(&header, &family_rows(families, |r| &r.weighted)));

    out.push_str(
        "\n### What bounds the prior after 3 observations: the first requests tokenize \
         differently\n\n",
    );
    let rows: Vec<Vec<String>> = rules
        .drift
        .iter()
        .map(|d| {
            vec![
                format!("`{}`", d.name),
                if d.model.is_empty() {
                    "(none)".into()
                } else {
                    format!("`{}`", d.model)
                },
                format!("{:.3}", d.early_ratio),
                format!("{:.3}", d.later_ratio),
                format!("{:+.1}%", (d.later_ratio / d.early_ratio - 1.0) * 100.0),
                pct(d.ema3),
                pct(d.weighted3),
            ]
        })
        .collect();
    out.push_str(&table(
        &[
            "fixture",
            "model",
            "o200k ÷ prior, first 3 requests",
            "o200k ÷ prior, later requests (median)",
            "shift",
            "after 3 obs, EMA (median)",
            "size-weighted (median)",
        ],
        &rows,
    ));

    out.push_str("\n### Rules tried (every fixture, o200k_base yardstick as in section 3)\n\n");
    let rows: Vec<Vec<String>> = rules
        .candidates
        .iter()
        .map(|c| {
            vec![
                c.name.clone(),
                cell(&c.after3),
                c.rolling.as_ref().map_or_else(|| "—".into(), cell),
                c.after3.n.to_string(),
            ]
        })
        .collect();
    out.push_str(&table(
        &["rule", "after 3 obs (median / p95)", "rolling", "requests"],
        &rows,
    ));

    out.push_str("\n### Cost of exact counting per request, beside the prior (median ms)\n\n");
    let ratio = |a: f64, b: f64| format!("{:.0}×", a / b.max(1e-9));
    let rows: Vec<Vec<String>> = cost
        .iter()
        .map(|c| {
            vec![
                c.label.clone(),
                format!(
                    "{} msgs, {:.1} MB, {} tokens",
                    c.messages,
                    c.bytes as f64 / 1e6,
                    c.exact_tokens
                ),
                format!("{:.2}", c.parse.median),
                format!("{:.2}", c.prior.median),
                format!("{:.2}", c.exact_cold.median),
                ratio(c.exact_cold.median, c.prior.median),
                format!("{:.2}", c.prior_extending.median),
                format!("{:.2}", c.exact_extending.median),
                ratio(c.exact_extending.median, c.prior_extending.median),
                format!("{:.2}", c.exact_repeat.median),
                c.exact_cold.n.to_string(),
            ]
        })
        .collect();
    out.push_str(&table(
        &[
            "request",
            "size",
            "parse (for scale)",
            "prior, first request",
            "exact, first request (memo cold)",
            "exact ÷ prior",
            "prior, extending request",
            "exact, extending request (memo warm, one new exchange)",
            "exact ÷ prior",
            "of which hashing (same request again, all memoized)",
            "runs",
        ],
        &rows,
    ));
    if let Some(first) = cost.first() {
        out.push_str(&format!(
            "\nLoading the o200k_base tokenizer, once per process before the first count: \
             {:.1} ms median (n={}).\n",
            first.load.median, first.load.n
        ));
    }
    out
}
