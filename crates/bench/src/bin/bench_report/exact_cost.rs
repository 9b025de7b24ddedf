//! (11) The cost of exact counting per request, beside the prior, in one run: a ~100K- and
//! a ~1M-token request (section 1's scaled inputs), counted (a) on a first request, the
//! memo cold, and (b) on a request that extends it by one tool exchange, the memo warm from
//! the previous one — each body freshly parsed, as the proxy parses every request.

use std::time::Duration;

use context_cascade::estimate::exact::{Encoding, ExactCounter};
use context_cascade::estimate::{Estimator, TokenCounter};
use context_cascade::{CascadeConfig, Conversation, format};
use serde_json::{Value, json};

use crate::inputs::{self, Fixture};
use crate::stats::{Spread, ms, timed};

/// One request size's medians (milliseconds) and sample counts.
#[derive(serde::Serialize)]
pub struct CostRow {
    pub label: String,
    pub messages: usize,
    pub bytes: usize,
    pub exact_tokens: u64,
    /// Loading the o200k_base tokenizer (once per process, before any count).
    pub load: Spread,
    /// Parsing the body (what every request pays anyway), for scale.
    pub parse: Spread,
    /// The prior on a freshly parsed body: class counts of every message, then weights.
    pub prior: Spread,
    /// The exact count with an empty memo (first request of a session).
    pub exact_cold: Spread,
    /// The exact count of the request extended by one exchange, the memo warm.
    pub exact_extending: Spread,
    /// The exact count of the same request again (freshly parsed, every message memoized):
    /// the hashing part of an extending request.
    pub exact_repeat: Spread,
    /// The prior of that extending request (freshly parsed: the prior keeps no memo across
    /// requests).
    pub prior_extending: Spread,
}

/// A tool exchange to extend a request by: an assistant call and its ~1,000-token result,
/// the text made unique per `run` so that no run finds it memoized.
fn exchange(run: usize, output: &str) -> [Value; 2] {
    let id = format!("call_cost_{run}");
    [
        json!({"role": "assistant", "content": null, "tool_calls": [{"id": id, "type": "function",
            "function": {"name": "bash", "arguments": format!("{{\"command\":\"cat src/{run}.rs\"}}")}}]}),
        json!({"role": "tool", "tool_call_id": id, "content": format!("run {run}\n{output}")}),
    ]
}

/// The scaled requests repeat the fixtures; each text message gets its index appended, so
/// that a first request finds no message memoized (a real session rarely repeats one).
fn unique(mut messages: Vec<Value>) -> Vec<Value> {
    for (index, message) in messages.iter_mut().enumerate() {
        if let Some(Value::String(text)) = message.get_mut("content") {
            text.push_str(&format!(" #{index}"));
        }
    }
    messages
}

fn parse(messages: &[Value]) -> Result<Conversation, String> {
    let body = inputs::to_bytes(&inputs::request(messages.to_vec()));
    format::parse(&body, None).map_err(|e| e.to_string())
}

fn millis(samples: &[Duration]) -> Spread {
    Spread::of(&samples.iter().map(|d| ms(*d)).collect::<Vec<_>>())
}

/// A tool output from the fixtures, about 4,000 characters.
fn sample_output(fixtures: &[Fixture]) -> String {
    let text = fixtures
        .iter()
        .flat_map(|f| &f.messages)
        .filter(|m| m.get("role").and_then(Value::as_str) == Some("tool"))
        .filter_map(|m| m.get("content").and_then(Value::as_str))
        .find(|c| c.len() > 4_000)
        .unwrap_or("fn main() {}\n");
    text.chars().take(4_000).collect()
}

/// Measures both sizes; `runs` repetitions at 100K (a third as many at 1M, at least 3).
pub fn run(fixtures: &[Fixture], runs: usize) -> Result<Vec<CostRow>, String> {
    let output = sample_output(fixtures);
    let weights = CascadeConfig::default().weights;
    let prior = Estimator::new(weights, 1.0);
    let mut rows = Vec::new();
    for (label, tokens, runs) in [
        ("~100K tokens", 100_000.0, runs),
        ("~1M tokens", 1_000_000.0, (runs / 3).max(3)),
    ] {
        let messages = unique(inputs::scaled_messages(fixtures, tokens));
        let bytes = inputs::to_bytes(&inputs::request(messages.clone())).len();
        let (mut parse_t, mut prior_t, mut cold_t, mut load_t) = (vec![], vec![], vec![], vec![]);
        let (mut extending_t, mut prior_extending_t, mut repeat_t) = (vec![], vec![], vec![]);
        let mut exact_tokens = 0;
        for run in 0..runs {
            let body = inputs::to_bytes(&inputs::request(messages.clone()));
            let (parsed, elapsed) = timed(|| format::parse(&body, None));
            parse_t.push(elapsed);
            let conversation = parsed.map_err(|e| e.to_string())?;
            prior_t.push(timed(|| prior.tokens(&conversation)).1);

            // A new counter: its memo is empty, as on a session's first request.
            let (counter, elapsed) = timed(|| ExactCounter::new(Encoding::O200kBase));
            load_t.push(elapsed);
            let counter = counter.map_err(|e| e.to_string())?;
            let conversation = parse(&messages)?;
            let (count, elapsed) = timed(|| counter.request(&conversation));
            exact_tokens = count;
            cold_t.push(elapsed);

            // The same request again: every message found in the memo.
            let conversation = parse(&messages)?;
            repeat_t.push(timed(|| counter.request(&conversation)).1);

            // The next request: the same messages (freshly parsed) and one new exchange.
            let mut extended = messages.clone();
            extended.extend(exchange(run, &output));
            let conversation = parse(&extended)?;
            extending_t.push(timed(|| counter.request(&conversation)).1);
            // The exact path leaves the class counts uncomputed: the prior starts cold too.
            prior_extending_t.push(timed(|| prior.tokens(&conversation)).1);
        }
        rows.push(CostRow {
            label: label.into(),
            messages: messages.len(),
            bytes,
            exact_tokens,
            load: millis(&load_t),
            parse: millis(&parse_t),
            prior: millis(&prior_t),
            exact_cold: millis(&cold_t),
            exact_extending: millis(&extending_t),
            prior_extending: millis(&prior_extending_t),
            exact_repeat: millis(&repeat_t),
        });
    }
    Ok(rows)
}
