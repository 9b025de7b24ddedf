//! Requests built from the fixture transcripts, scaled to a chosen token size.
//!
//! Shared by the criterion bench (`benches/prepare.rs`) and the `bench_report` driver, so
//! both measure the same bytes. A fixture is an object whose `messages` are OpenAI chat
//! messages; a request is `{"model": "gpt-4o", "messages": [...]}`.

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use context_cascade::estimate::{ClassCounts, Weights};
use serde_json::{Value, json};

/// One transcript of `fixtures/transcripts`.
pub struct Fixture {
    /// File stem, e.g. `claude-code__spotter__258c7280-main`.
    pub name: String,
    /// The OpenAI-format messages.
    pub messages: Vec<Value>,
    /// The fixture's `meta` object (compaction points, provenance).
    pub meta: Value,
}

/// The fixture folder: `$CASCADE_FIXTURES`, else the repository's `fixtures/transcripts`
/// the repository.
pub fn fixtures_dir() -> PathBuf {
    match std::env::var_os("CASCADE_FIXTURES") {
        Some(dir) => PathBuf::from(dir),
        None => Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/transcripts"),
    }
}

/// Every fixture, sorted by name.
pub fn load_fixtures(dir: &Path) -> Result<Vec<Fixture>, String> {
    let entries = std::fs::read_dir(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let mut paths: Vec<PathBuf> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    paths.sort();
    let mut fixtures = Vec::new();
    for path in paths {
        let bytes = std::fs::read(&path).map_err(|e| format!("{}: {e}", path.display()))?;
        let mut value: Value =
            serde_json::from_slice(&bytes).map_err(|e| format!("{}: {e}", path.display()))?;
        let Some(messages) = value.get_mut("messages").map(Value::take) else {
            return Err(format!("{}: no \"messages\"", path.display()));
        };
        let Value::Array(messages) = messages else {
            return Err(format!("{}: \"messages\" is not an array", path.display()));
        };
        let name = path
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default();
        let meta = value
            .get_mut("meta")
            .map(Value::take)
            .unwrap_or(Value::Null);
        fixtures.push(Fixture {
            name,
            messages,
            meta,
        });
    }
    if fixtures.is_empty() {
        return Err(format!("{}: no fixtures", dir.display()));
    }
    Ok(fixtures)
}

/// A request body around some messages.
pub fn request(messages: Vec<Value>) -> Value {
    json!({ "model": "gpt-4o", "messages": messages })
}

/// Serializes a request body.
pub fn to_bytes(body: &Value) -> Vec<u8> {
    serde_json::to_vec(body).unwrap_or_default()
}

/// The prior estimate of one wire message, counted over what the library counts (content,
/// tool-call names and arguments) plus the per-message cost. Used only to size requests.
pub fn wire_tokens(message: &Value) -> f64 {
    let weights = Weights::default();
    let mut counts = ClassCounts {
        messages: 1,
        ..ClassCounts::default()
    };
    match message.get("content") {
        Some(Value::String(s)) => counts += ClassCounts::of_str(s),
        Some(Value::Null) | None => {}
        Some(other) => counts += ClassCounts::of_json(other),
    }
    for call in message
        .get("tool_calls")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        for key in ["name", "arguments"] {
            if let Some(s) = call
                .pointer(&format!("/function/{key}"))
                .and_then(Value::as_str)
            {
                counts += ClassCounts::of_str(s);
            }
        }
    }
    weights.prior(&counts)
}

fn role(message: &Value) -> &str {
    message.get("role").and_then(Value::as_str).unwrap_or("")
}

fn has_tool_calls(message: &Value) -> bool {
    message
        .get("tool_calls")
        .and_then(Value::as_array)
        .is_some_and(|calls| !calls.is_empty())
}

/// The messages of a fixture fit to be followed by another one: trailing assistant calls
/// that got no result (the run ended there) are dropped, so the concatenation stays a
/// valid request.
fn closed_messages(fixture: &Fixture) -> &[Value] {
    let mut end = fixture.messages.len();
    while end > 0
        && role(&fixture.messages[end - 1]) == "assistant"
        && has_tool_calls(&fixture.messages[end - 1])
    {
        end -= 1;
    }
    &fixture.messages[..end]
}

/// Appends `-{copy}` to every tool-call id of a message (copies after the first), so that a
/// repeated fixture keeps ids unique.
fn suffix_ids(message: &mut Value, copy: usize) {
    if copy == 0 {
        return;
    }
    if let Some(Value::String(id)) = message.get_mut("tool_call_id") {
        id.push_str(&format!("-{copy}"));
    }
    if let Some(Value::Array(calls)) = message.get_mut("tool_calls") {
        for call in calls {
            if let Some(Value::String(id)) = call.get_mut("id") {
                id.push_str(&format!("-{copy}"));
            }
        }
    }
}

/// Fixtures concatenated in name order (repeated as needed) until the prior reaches
/// `target_tokens`; only the first system message is kept, and the request never ends in
/// the middle of a tool exchange.
pub fn scaled_messages(fixtures: &[Fixture], target_tokens: f64) -> Vec<Value> {
    let mut out = Vec::new();
    let mut total = 0.0;
    let mut seen_ids: HashSet<String> = HashSet::new();
    let mut copy = 0usize;
    let mut has_system = false;
    'outer: for fixture in fixtures.iter().cycle() {
        // A fixture whose ids were used already (OpenHands numbers its calls toolu_01...)
        // gets a suffix.
        let clash = closed_messages(fixture).iter().any(|m| {
            m.get("tool_call_id")
                .and_then(Value::as_str)
                .is_some_and(|id| seen_ids.contains(id))
        });
        let suffix = if clash { copy } else { 0 };
        let messages = closed_messages(fixture);
        for (index, message) in messages.iter().enumerate() {
            if role(message) == "system" {
                if has_system {
                    continue;
                }
                has_system = true;
            }
            if role(message) != "tool" {
                // Stop at an exchange boundary: when the target is reached, or when this
                // exchange (a message and the tool results after it) would overshoot the
                // target by more than the request now falls short of it.
                let exchange: f64 = std::iter::once(message)
                    .chain(
                        messages[index + 1..]
                            .iter()
                            .take_while(|m| role(m) == "tool"),
                    )
                    .map(wire_tokens)
                    .sum();
                if total >= target_tokens
                    || total + exchange - target_tokens > target_tokens - total
                {
                    break 'outer;
                }
            }
            let mut message = message.clone();
            suffix_ids(&mut message, suffix);
            if let Some(id) = message.get("tool_call_id").and_then(Value::as_str) {
                seen_ids.insert(id.to_owned());
            }
            total += wire_tokens(&message);
            out.push(message);
        }
        copy += 1;
        if copy > 10_000 {
            break;
        }
    }
    // The request ends on a whole exchange: no trailing assistant call without results.
    while out
        .last()
        .is_some_and(|m| role(m) == "assistant" && has_tool_calls(m))
    {
        out.pop();
    }
    out
}

/// The named fixtures' messages, concatenated as they are (ids made unique).
pub fn concatenated(fixtures: &[&Fixture]) -> Vec<Value> {
    let mut out = Vec::new();
    for (copy, fixture) in fixtures.iter().enumerate() {
        for message in closed_messages(fixture) {
            let mut message = message.clone();
            suffix_ids(&mut message, copy);
            out.push(message);
        }
    }
    out
}

/// The sizes the preparation-cost measurements use: label and target tokens.
pub const SIZES: [(&str, f64); 3] = [("10K", 10_000.0), ("100K", 100_000.0), ("1M", 1_000_000.0)];
