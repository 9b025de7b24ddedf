//! Cost per session: every fixture replayed as an agent loop, each call priced with its
//! model's published prompt-cache rules (`context_cascade::cost`), under the cascade's
//! default, its variants, SPEC's rule, Claude Code's and Codex's own compaction and no
//! management; then the watermarks of ② and ③ tried by the same measure.

use std::sync::Arc;

use context_cascade::cost::{
    PRICES_AS_OF, Plan, Prices, SessionCost, price_session, standard_plans,
};
use context_cascade::estimate::CounterFor;
use context_cascade::estimate::exact::counter_for_model;
use context_cascade::{Budget, CascadeConfig, format};
use serde_json::{Value, json};

use crate::inputs::Fixture;

/// The windows every fixture is replayed at.
pub const WINDOWS: [u64; 2] = [128_000, 32_000];

/// One plan over every fixture at one window.
#[derive(serde::Serialize)]
pub struct PlanTotal {
    pub window: u64,
    pub plan: String,
    pub dollars: f64,
    pub calls: usize,
    pub over_window: usize,
    pub extending: usize,
    pub cache_read: u64,
    pub cache_write: u64,
    pub output: u64,
    pub summary_calls: usize,
    /// Fixtures with a call over the window.
    pub sessions_over: usize,
    pub per_fixture: Vec<(String, f64)>,
}

/// The fixture's model (its recorded model id), for its prices.
fn model_of(fixture: &Fixture) -> String {
    let meta = &fixture.meta;
    (meta.get("model").and_then(Value::as_str).map(str::to_owned))
        .or_else(|| {
            (meta.get("models").and_then(Value::as_object)).and_then(|m| m.keys().next().cloned())
        })
        .unwrap_or_else(|| "gpt-5".to_owned())
}

/// ②'s and ③'s watermarks tried, beside the default.
fn watermark_plans() -> Vec<(String, Plan)> {
    let variant = |name: &str, edit: &dyn Fn(&mut CascadeConfig)| {
        let mut config = CascadeConfig::default();
        edit(&mut config);
        let plan = Plan::Cascade {
            config: Box::new(config),
            ahead: false,
        };
        (name.to_owned(), plan)
    };
    vec![
        // The default before issue 27's measure: ② down to 0.60, ③ before a call to 0.60.
        variant("② 0.75 → 0.60, ③ to 0.60", &|c| {
            c.layer1.low_watermark = 0.60;
            c.recovery.preemptive_target = 0.60;
        }),
        variant("② 0.85 → 0.60, ③ to 0.60", &|c| {
            c.layer1.headroom_ratio = 0.85;
            c.layer1.low_watermark = 0.60;
            c.recovery.preemptive_target = 0.60;
        }),
        variant("② 0.85 → 0.45", &|c| c.layer1.headroom_ratio = 0.85),
        variant("② 0.75 → 0.35, ③ to 0.35", &|c| {
            c.layer1.low_watermark = 0.35;
            c.recovery.preemptive_target = 0.35;
        }),
        variant("③ at 0.95·E", &|c| c.recovery.preemptive_ratio = 0.95),
    ]
}

/// Every plan over every fixture at every window.
pub fn run(fixtures: &[Fixture]) -> Result<Vec<PlanTotal>, String> {
    // Every model counted with o200k_base, the yardstick of the other sections.
    let counters: CounterFor = Arc::new(|_: &str| counter_for_model("gpt-4o"));
    let mut plans = standard_plans(&CascadeConfig::default());
    plans.extend(watermark_plans());
    let mut totals = Vec::new();
    for window in WINDOWS {
        for (name, plan) in &plans {
            let mut total = PlanTotal {
                window,
                plan: name.clone(),
                dollars: 0.0,
                calls: 0,
                over_window: 0,
                extending: 0,
                cache_read: 0,
                cache_write: 0,
                output: 0,
                summary_calls: 0,
                sessions_over: 0,
                per_fixture: Vec::new(),
            };
            for fixture in fixtures {
                let model = model_of(fixture);
                let body = json!({"model": model, "messages": fixture.messages});
                let transcript = format::parse_value(body, None).map_err(|e| e.to_string())?;
                let prices = Prices::for_model(&model);
                let budget = Budget::new(window, 0);
                let cost: SessionCost = pollster::block_on(price_session(
                    &transcript,
                    budget,
                    plan,
                    Some(counters.clone()),
                    &prices,
                ));
                let billed = cost.total();
                total.dollars += cost.dollars;
                total.calls += cost.calls;
                total.over_window += cost.over_window;
                total.extending += cost.extending;
                total.cache_read += billed.cache_read;
                total.cache_write += billed.cache_write;
                total.output += billed.output;
                total.summary_calls += cost.summary_calls;
                total.sessions_over += usize::from(cost.over_window > 0);
                total.per_fixture.push((fixture.name.clone(), cost.dollars));
            }
            eprintln!("  cost: {window} {name}: ${:.2}", total.dollars);
            totals.push(total);
        }
    }
    Ok(totals)
}

fn mtok(tokens: u64) -> String {
    format!("{:.2}", tokens as f64 / 1e6)
}

/// The section's tables.
pub fn markdown(totals: &[PlanTotal], fixtures: usize) -> String {
    let mut out = format!(
        "## 13. Cost per session\n\n\
         Every fixture ({fixtures} sessions) replayed as an agent loop (`context_cascade::replay`'s call \
         points), each call priced with its model's published prices (as of {PRICES_AS_OF}; Claude \
         fixtures at Anthropic's, Llama and the SWE-agent demo at GPT-5's): the prefix the request \
         shares with the previous request sent is read from the cache, the rest is written \
         (Anthropic 1.25×, OpenAI no premium), the transcript's replies are the output. \
         Summaries are priced as calls (④'s summarizer as if a model wrote the offline summary; a \
         client's compaction sends the whole history once more and gets its summary back). Counted \
         with o200k_base. `cascade replay --cost FILE` prints the same for one transcript.\n\n"
    );
    for window in WINDOWS {
        let rows: Vec<&PlanTotal> = totals.iter().filter(|t| t.window == window).collect();
        let Some(base) = rows.first().map(|t| t.dollars) else {
            continue;
        };
        out += &format!(
            "### Window {}K\n\n| plan | USD, all sessions | × cascade | sessions with a call over the window | calls extending the previous | cache read (M tok) | written (M tok) | output (M tok) | summary calls |\n|---|---|---|---|---|---|---|---|---|\n",
            window / 1000
        );
        for t in rows {
            out += &format!(
                "| {} | {:.2} | {:.2}× | {} | {} of {} | {} | {} | {} | {} |\n",
                t.plan,
                t.dollars,
                t.dollars / base,
                t.sessions_over,
                t.extending,
                t.calls,
                mtok(t.cache_read),
                mtok(t.cache_write),
                mtok(t.output),
                t.summary_calls
            );
        }
        out += "\n";
    }
    out
}
