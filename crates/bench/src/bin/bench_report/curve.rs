//! (4) The cost curve of a session: each long fixture replayed as an agent loop, tokens sent
//! per call and cumulative, without the cascade (until the request would overflow) and with
//! `ContextManager::prepare` before every call (the agent carries the prepared history
//! forward and calibrates from each call's count). Tokens are exact o200k_base counts of the
//! request actually sent.

use std::collections::{BTreeMap, HashMap};
use std::hash::{DefaultHasher, Hash, Hasher};
use std::path::Path;

use context_cascade::estimate::exact::ExactCounter;
use context_cascade::{
    Budget, CascadeConfig, ContextManager, Conversation, Format, Message, replay,
};
use plotters::prelude::*;

use crate::measured::Measured;
use crate::stats::table;

/// One replay.
#[derive(serde::Serialize)]
pub struct Curve {
    pub fixture: String,
    pub window: u64,
    /// Tokens sent at each call without the cascade (None once it would overflow).
    pub without: Vec<Option<u64>>,
    /// Tokens sent at each call with the cascade.
    pub with: Vec<u64>,
    /// 1-based call that would overflow without the cascade.
    pub overflow_call: Option<usize>,
    pub cumulative_without: u64,
    pub cumulative_with: u64,
    /// Calls whose request over the window even with the cascade.
    pub over_window_with: usize,
    /// Share of calls after the first whose request extends the previous request unchanged
    /// (prompt cache), as `context_cascade::replay` measures it.
    pub prefix_stable: f64,
    /// How often each strategy fired.
    pub strategies: BTreeMap<String, usize>,
    pub svg: String,
}

/// Exact counts of messages, cached by content so a replay costs one count per new message.
struct ExactCache<'a> {
    counter: &'a ExactCounter,
    counts: HashMap<u64, u64>,
}

impl ExactCache<'_> {
    fn message(&mut self, message: &Message) -> u64 {
        let mut hasher = DefaultHasher::new();
        format!("{:?}{:?}", message.role(), message.blocks()).hash(&mut hasher);
        let key = hasher.finish();
        let counter = self.counter;
        *self.counts.entry(key).or_insert_with(|| {
            let mut one = Conversation::new(Format::OpenAi);
            one.messages.push(message.clone());
            counter.count_conversation(&one) as u64
        })
    }

    fn conversation(&mut self, conversation: &Conversation) -> u64 {
        conversation.messages.iter().map(|m| self.message(m)).sum()
    }
}

/// Replays one fixture at one window.
pub fn replay(
    m: &Measured,
    window: u64,
    counter: &ExactCounter,
    out_dir: &Path,
) -> Result<Curve, String> {
    let manager = ContextManager::new(CascadeConfig::default());
    let budget = Budget::new(window, 0);
    let model = m.conversation.model().unwrap_or("").to_owned();
    let mut cache = ExactCache {
        counter,
        counts: HashMap::new(),
    };
    let (mut without, mut with) = (Vec::new(), Vec::new());
    let mut overflow_call = None;
    let mut strategies = BTreeMap::new();
    let run = replay::replay(&m.conversation, &manager, budget, |call, sent| {
        let raw = m.cum_exact[call.end];
        if overflow_call.is_none() && raw > window {
            overflow_call = Some(call.number);
        }
        without.push(if overflow_call.is_none() {
            Some(raw)
        } else {
            None
        });
        for step in &call.report.steps {
            *strategies
                .entry(step.strategy.as_str().to_owned())
                .or_insert(0) += 1;
        }
        // The exact count of the request sent stands for what the provider reports; the
        // agent calibrates from it before its next call.
        let prior = manager.prior(sent);
        let tokens = cache.conversation(sent);
        manager.observe(&model, prior, tokens);
        with.push(tokens);
    });
    let prefix_stable = pollster::block_on(run).stability.share();
    let short = m.name.split("__").last().unwrap_or(&m.name).to_owned();
    let svg = format!("curve-{short}-{}k.svg", window / 1000);
    let curve = Curve {
        fixture: m.name.clone(),
        window,
        cumulative_without: without.iter().flatten().sum(),
        cumulative_with: with.iter().sum(),
        over_window_with: with.iter().filter(|&&t| t > window).count(),
        prefix_stable,
        without,
        with,
        overflow_call,
        strategies,
        svg: svg.clone(),
    };
    plot(&curve, &out_dir.join(&svg)).map_err(|e| format!("{svg}: {e}"))?;
    Ok(curve)
}

fn plot(curve: &Curve, path: &Path) -> Result<(), Box<dyn std::error::Error>> {
    let root = SVGBackend::new(path, (1200, 450)).into_drawing_area();
    root.fill(&WHITE)?;
    let (left, right) = root.split_horizontally(600);
    let calls = curve.with.len().max(1);
    let max_call = curve
        .with
        .iter()
        .copied()
        .chain(curve.without.iter().flatten().copied())
        .chain([curve.window])
        .max()
        .unwrap_or(1);
    let mut chart = ChartBuilder::on(&left)
        .caption(
            format!(
                "{} — tokens per call, {}K window",
                curve.fixture,
                curve.window / 1000
            ),
            ("sans-serif", 15),
        )
        .margin(10)
        .x_label_area_size(35)
        .y_label_area_size(65)
        .build_cartesian_2d(1..calls, 0u64..max_call + max_call / 10)?;
    chart
        .configure_mesh()
        .x_desc("call")
        .y_desc("tokens sent")
        .draw()?;
    chart
        .draw_series(LineSeries::new(
            [(1, curve.window), (calls, curve.window)],
            BLACK.mix(0.4),
        ))?
        .label("window")
        .legend(|(x, y)| PathElement::new([(x, y), (x + 20, y)], BLACK.mix(0.4)));
    let without: Vec<(usize, u64)> = curve
        .without
        .iter()
        .enumerate()
        .filter_map(|(i, t)| t.map(|t| (i + 1, t)))
        .collect();
    chart
        .draw_series(LineSeries::new(without, RED.stroke_width(2)))?
        .label("without cascade (until overflow)")
        .legend(|(x, y)| PathElement::new([(x, y), (x + 20, y)], RED));
    chart
        .draw_series(LineSeries::new(
            curve.with.iter().enumerate().map(|(i, &t)| (i + 1, t)),
            BLUE.stroke_width(2),
        ))?
        .label("with cascade")
        .legend(|(x, y)| PathElement::new([(x, y), (x + 20, y)], BLUE));
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::LowerRight)
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .draw()?;

    let cumulative = |series: Vec<u64>| -> Vec<(usize, u64)> {
        series
            .into_iter()
            .scan(0u64, |acc, t| {
                *acc += t;
                Some(*acc)
            })
            .enumerate()
            .map(|(i, t)| (i + 1, t))
            .collect()
    };
    let cum_without = cumulative(curve.without.iter().flatten().copied().collect());
    let cum_with = cumulative(curve.with.clone());
    let max_cum = curve.cumulative_with.max(curve.cumulative_without).max(1);
    let mut chart = ChartBuilder::on(&right)
        .caption("cumulative tokens sent", ("sans-serif", 15))
        .margin(10)
        .x_label_area_size(35)
        .y_label_area_size(75)
        .build_cartesian_2d(1..calls, 0u64..max_cum + max_cum / 10)?;
    chart
        .configure_mesh()
        .x_desc("call")
        .y_desc("tokens (cumulative)")
        .draw()?;
    chart
        .draw_series(LineSeries::new(cum_without, RED.stroke_width(2)))?
        .label("without cascade (until overflow)")
        .legend(|(x, y)| PathElement::new([(x, y), (x + 20, y)], RED));
    chart
        .draw_series(LineSeries::new(cum_with, BLUE.stroke_width(2)))?
        .label("with cascade")
        .legend(|(x, y)| PathElement::new([(x, y), (x + 20, y)], BLUE));
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperLeft)
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .draw()?;
    root.present()?;
    Ok(())
}

/// The markdown section.
pub fn markdown(curves: &[Curve]) -> String {
    let mut out = String::from(
        "## 4. Cost curve of a session\n\n\
         Each fixture over 32K tokens replayed as an agent loop (`context_cascade::replay`): a \
         call at the end of every run of user messages and tool results, sending everything \
         before it. *Without*: the raw history, until the first \
         call whose request exceeds the window (it would fail with an overflow). *With*: the \
         agent runs `ContextManager::prepare` before every call, carries the prepared history \
         forward and calibrates from each call's count. Tokens: exact o200k_base of the request \
         sent; reserve 0. *Cache-stable*: share of the calls after the first whose request \
         extends the previous one unchanged (provider prompt caches hit).\n\n",
    );
    let rows: Vec<Vec<String>> = curves
        .iter()
        .map(|c| {
            vec![
                format!("`{}`", c.fixture),
                format!("{}K", c.window / 1000),
                c.with.len().to_string(),
                c.overflow_call
                    .map_or("never".into(), |k| format!("call {k}")),
                c.cumulative_without.to_string(),
                c.cumulative_with.to_string(),
                c.with.iter().max().copied().unwrap_or(0).to_string(),
                c.over_window_with.to_string(),
                format!("{:.0}%", c.prefix_stable * 100.0),
                c.strategies
                    .iter()
                    .map(|(k, v)| format!("{k}×{v}"))
                    .collect::<Vec<_>>()
                    .join(", "),
                format!("[svg](../bench/out/{})", c.svg),
            ]
        })
        .collect();
    out.push_str(&table(
        &[
            "fixture",
            "window",
            "calls",
            "overflows without",
            "cumulative without (until overflow)",
            "cumulative with",
            "largest request with",
            "calls over window with",
            "cache-stable",
            "strategies fired",
            "plot",
        ],
        &rows,
    ));
    out.push('\n');
    for c in curves {
        out.push_str(&format!(
            "![{} at {}K](../bench/out/{})\n\n",
            c.fixture,
            c.window / 1000,
            c.svg
        ));
    }
    out
}
