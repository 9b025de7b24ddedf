//! The markdown tables of the estimator-accuracy section (3).

use context_cascade::estimate::Weights;

use crate::accuracy::{Accuracy, Variant};
use crate::stats::{pct, spct, table};

fn variant_rows(variants: &[Variant]) -> Vec<Vec<String>> {
    variants
        .iter()
        .map(|v| {
            vec![
                v.name.clone(),
                pct(v.stats.median_abs),
                pct(v.stats.p95_abs),
                spct(v.stats.worst_under),
                spct(v.stats.worst_over),
                v.stats.n.to_string(),
            ]
        })
        .collect()
}

/// The markdown section.
pub fn markdown(a: &Accuracy) -> String {
    let header = [
        "estimator",
        "median abs err",
        "p95 abs err",
        "worst under",
        "worst over",
        "requests",
    ];
    let mut out = String::from(
        "## 3. Estimator accuracy\n\n\
         Per model family (exact counts for OpenAI ids, Claude, Llama), what bounds the error \
         after 3 observations and the cost of exact counts: section 11.\n\n\
         Yardstick: exact o200k_base counts (tiktoken-rs) of the same texts the estimator counts, \
         plus the same 4 tokens per message. Each fixture is replayed as the requests its agent \
         sent (`messages[..i]` for every call point `i` of `context_cascade::replay`); \
         calibration observes the \
         first 1, 3 or 10 requests (exact count as the provider's \"real\" count, \
         `Calibration::observe`, α 0.3, then frozen) and every variant is measured on the same \
         later requests (after the 10th; at most 20 per fixture, evenly spaced). The \
         *size-weighted rule* is the configurable alternative to SPEC's \
         (`calibration.prior_tokens = 32000`): the scale is `Σ real / Σ prior`, decaying by \
         1 − α per observation, with the starting scale counted as 32,000 prior tokens, so a \
         one-line first request no longer sets the scale.\n\n",
    );
    out.push_str(&table(&header, &variant_rows(&a.variants)));
    out.push_str("\n### Per fixture (whole transcript)\n\n");
    let rows: Vec<Vec<String>> = a
        .per_fixture
        .iter()
        .map(|f| {
            vec![
                format!("`{}`", f.name),
                f.messages.to_string(),
                f.exact_tokens.to_string(),
                spct(f.chars4_error),
                spct(f.prior_error),
                pct(f.calibrated3_median),
            ]
        })
        .collect();
    out.push_str(&table(
        &[
            "fixture",
            "messages",
            "o200k tokens",
            "chars/4",
            "SPEC prior",
            "after 3 obs (median, later requests)",
        ],
        &rows,
    ));
    out.push_str("\n### EMA α (SPEC weights)\n\n");
    let rows: Vec<Vec<String>> = a
        .alphas
        .iter()
        .map(|r| {
            vec![
                format!("{:.1}", r.alpha),
                format!("{} / {}", pct(r.after3.median_abs), pct(r.after3.p95_abs)),
                format!("{} / {}", pct(r.after10.median_abs), pct(r.after10.p95_abs)),
                format!("{} / {}", pct(r.rolling.median_abs), pct(r.rolling.p95_abs)),
            ]
        })
        .collect();
    out.push_str(&table(
        &["α", "after 3 obs (median / p95)", "after 10 obs", "rolling"],
        &rows,
    ));
    out.push_str(
        "\n### Refitted weights (least squares per message, each fixture weighing the same)\n\n",
    );
    let w = &a.fitted_weights;
    let s = Weights::default();
    out.push_str(&table(
        &[
            "",
            "letter",
            "digit",
            "whitespace",
            "other ASCII",
            "non-ASCII",
        ],
        &[
            vec![
                "SPEC".into(),
                format!("{:.3}", s.letter),
                format!("{:.3}", s.digit),
                format!("{:.3}", s.whitespace),
                format!("{:.3}", s.punctuation),
                format!("{:.3}", s.non_ascii),
            ],
            vec![
                "fitted on all fixtures".into(),
                format!("{:.3}", w.letter),
                format!("{:.3}", w.digit),
                format!("{:.3}", w.whitespace),
                format!("{:.3}", w.punctuation),
                format!("{:.3}", w.non_ascii),
            ],
        ],
    ));
    out.push_str("\nLeave-one-out (weights fitted on the other nine fixtures, measured on the held-out one):\n\n");
    out.push_str(&table(&header, &variant_rows(&a.loo)));
    if !a.pre_tokens.is_empty() {
        out.push_str(
            "\n### Against the `preTokens` Claude Code recorded\n\n\
             At each automatic compaction Claude Code logs the provider's own count of the \
             request. Caveat: that count includes Claude Code's system prompt and tool schemas, \
             which the log lacks, and Claude's tokenizer, not o200k. The last column is what \
             `ContextManager::estimator(model)` gives for the session's model (`meta.models`) \
             before its first observation: the catalog's starting scale for the tokenizer family \
             times the ×1.1 margin.\n\n",
        );
        let rows: Vec<Vec<String>> = a
            .pre_tokens
            .iter()
            .map(|p| {
                vec![
                    format!("`{}`", p.name),
                    p.message_index.to_string(),
                    p.pre_tokens.to_string(),
                    p.exact_o200k.to_string(),
                    format!("{:.0}", p.prior),
                    format!("{:.0}", p.chars4),
                    format!("{:.2}", p.pre_tokens as f64 / p.exact_o200k.max(1) as f64),
                    format!("{:.2}", p.pre_tokens as f64 / p.prior.max(1.0)),
                    format!(
                        "{:.0} ({:+.0}%)",
                        p.engine_uncalibrated,
                        (p.engine_uncalibrated / p.pre_tokens.max(1) as f64 - 1.0) * 100.0
                    ),
                ]
            })
            .collect();
        out.push_str(&table(
            &[
                "fixture",
                "at message",
                "preTokens",
                "o200k of the log",
                "SPEC prior",
                "chars/4",
                "preTokens ÷ o200k",
                "preTokens ÷ prior",
                "engine estimate before any observation (catalog scale × 1.1) vs preTokens",
            ],
            &rows,
        ));
    }
    out
}
