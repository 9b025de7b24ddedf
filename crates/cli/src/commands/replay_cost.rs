//! `cascade replay --cost`: what a transcript's session costs, replayed as an agent loop
//! under the cascade and the alternatives, priced by `context_cascade::cost` (the same
//! figures as docs/benchmarks.md "Cost per session").

use context_cascade::cost::{PRICES_AS_OF, Prices, price_session, standard_plans};
use context_cascade::estimate::CounterFor;
use context_cascade::{Budget, CascadeConfig, Conversation};

use crate::chart::terminal_width;
use crate::table::{Align, Table, thousands};

/// The cost table of `conversation` at `budget`, every plan side by side.
pub(crate) fn render(
    name: &str,
    conversation: &Conversation,
    budget: Budget,
    config: &CascadeConfig,
    counters: Option<CounterFor>,
) -> String {
    let model = conversation.model().unwrap_or("");
    let prices = Prices::for_model(model);
    let mut out = format!(
        "{name}: window {} · reserve {} · priced as {} (per million tokens: input ${}, cache \
         read ${}, cache write ${}, output ${}; as of {PRICES_AS_OF})\n\
         cached: the prefix shared with the previous request sent · written: the rest of the \
         input · summaries: ④'s summarizer or the client's own compaction, priced as calls\n\n",
        thousands(budget.window),
        thousands(budget.reserve),
        prices.name,
        prices.input,
        prices.cache_read,
        prices.cache_write,
        prices.output,
    );
    let mut table = Table::new(&[
        ("plan", Align::Left),
        ("calls", Align::Right),
        ("over window", Align::Right),
        ("extend prev.", Align::Right),
        ("cached in", Align::Right),
        ("written in", Align::Right),
        ("out", Align::Right),
        ("summary calls", Align::Right),
        ("USD", Align::Right),
        ("× cascade", Align::Right),
    ]);
    let mut base = None;
    for (plan_name, plan) in standard_plans(config) {
        let cost = pollster::block_on(price_session(
            conversation,
            budget,
            &plan,
            counters.clone(),
            &prices,
        ));
        let total = cost.total();
        let base = *base.get_or_insert(cost.dollars);
        table.row(vec![
            plan_name,
            cost.calls.to_string(),
            cost.over_window.to_string(),
            cost.extending.to_string(),
            thousands(total.cache_read),
            thousands(total.cache_write),
            thousands(total.output),
            cost.summary_calls.to_string(),
            format!("{:.4}", cost.dollars),
            if base > 0.0 {
                format!("{:.2}×", cost.dollars / base)
            } else {
                "-".into()
            },
        ]);
    }
    out += &table.render(terminal_width());
    out += "\nA plan with calls over the window would have been refused there: its cost is not \
            comparable (no management is priced only to show what a session that fits costs).\n";
    out
}
