//! What the client is told about its prompt's size (`requests.gauge`).
//!
//! Claude Code and Codex decide when to compact their own history from the prompt size the
//! answer reports. Behind the cascade that figure is the size of what went upstream, which
//! reads low once the cascade has compacted: the client defers its own compaction, the
//! history it sends grows without bound and the cascade compacts it again on every turn.
//! With `gauge = "client"` (and by default on the Responses route: docs/proxy.md has the
//! measurements) the answer reports the size of what the client sent instead: the
//! upstream's own count scaled by the request's estimate before and after the cascade, so
//! the client's compaction fires near its threshold as it would without the proxy.
//!
//! Only the prompt counts are rescaled (Chat Completions `prompt_tokens` and its
//! `cached_tokens`; Responses `input_tokens` and its `cached_tokens`; Anthropic
//! `input_tokens`, `cache_read_input_tokens`, `cache_creation_input_tokens`), with
//! `total_tokens` moved by the same amount. Output counts and Anthropic's per-iteration
//! breakdown are left as the provider sent them. A body or event that carries no usage
//! passes through byte for byte.

use bytes::Bytes;
use serde_json::Value;

pub(crate) use crate::config::Gauge;

/// The prompt-count keys of a usage object, and the nested `cached_tokens` holders.
const PROMPT_KEYS: &[&str] = &[
    "prompt_tokens",
    "input_tokens",
    "cache_read_input_tokens",
    "cache_creation_input_tokens",
];
const DETAIL_KEYS: &[&str] = &["prompt_tokens_details", "input_tokens_details"];
/// Scales this close to 1 change nothing worth a rewrite.
const NEGLIGIBLE: f64 = 1e-3;

/// The factor a request's reported prompt counts are multiplied by, when it changes them:
/// the client's request estimated at `client` tokens went upstream as `sent`.
pub(crate) fn factor(client: u64, sent: u64) -> Option<f64> {
    if sent == 0 || client == 0 {
        return None;
    }
    let factor = client as f64 / sent as f64;
    ((factor - 1.0).abs() >= NEGLIGIBLE).then_some(factor)
}

/// Rescales the prompt counts of `usage` (a usage object) by `factor`.
fn rescale_usage(usage: &mut Value, factor: f64) {
    let Some(usage) = usage.as_object_mut() else {
        return;
    };
    let scale = |n: u64| (n as f64 * factor).round() as u64;
    let mut added: i64 = 0;
    for key in PROMPT_KEYS {
        if let Some(n) = usage.get(*key).and_then(Value::as_u64) {
            let scaled = scale(n);
            // Anthropic's cache counts are not inside `input_tokens`: each moves the total.
            added += scaled as i64 - n as i64;
            usage.insert((*key).to_owned(), Value::from(scaled));
        }
    }
    for key in DETAIL_KEYS {
        if let Some(details) = usage.get_mut(*key).and_then(Value::as_object_mut)
            && let Some(n) = details.get("cached_tokens").and_then(Value::as_u64)
        {
            details.insert("cached_tokens".to_owned(), Value::from(scale(n)));
        }
    }
    if let Some(total) = usage.get("total_tokens").and_then(Value::as_u64) {
        let total = (total as i64 + added).max(0) as u64;
        usage.insert("total_tokens".to_owned(), Value::from(total));
    }
}

/// Rescales every usage object of an answer or event: top-level `usage`, a Responses
/// event's `response.usage`, an Anthropic `message_start`'s `message.usage`. Returns whether
/// one was found.
fn rescale_value(value: &mut Value, factor: f64) -> bool {
    let mut found = false;
    for pointer in ["/usage", "/response/usage", "/message/usage"] {
        if let Some(usage) = value.pointer_mut(pointer).filter(|u| u.is_object()) {
            rescale_usage(usage, factor);
            found = true;
        }
    }
    found
}

/// A complete answer body with its prompt counts rescaled (the body as it came when it has
/// no usage or is not JSON).
pub(crate) fn rescale_body(body: Bytes, factor: f64) -> Bytes {
    let Ok(mut value) = serde_json::from_slice::<Value>(&body) else {
        return body;
    };
    if !rescale_value(&mut value, factor) {
        return body;
    }
    serde_json::to_vec(&value).map_or(body, Bytes::from)
}

/// Complete SSE events (a chunk that ends at an event boundary) with the prompt counts of
/// their `data` rescaled; events without usage keep their bytes.
pub(crate) fn rescale_events(chunk: Bytes, factor: f64) -> Bytes {
    if !chunk.windows(5).any(|w| w == b"usage") {
        return chunk;
    }
    let text = String::from_utf8_lossy(&chunk);
    let mut out = String::with_capacity(text.len() + 16);
    for line in text.split_inclusive('\n') {
        out.push_str(&rescale_data_line(line, factor).unwrap_or_else(|| line.to_owned()));
    }
    Bytes::from(out)
}

/// One `data:` line with its usage rescaled, when it has one.
fn rescale_data_line(line: &str, factor: f64) -> Option<String> {
    let payload = line.strip_prefix("data:")?;
    if !payload.contains("usage") {
        return None;
    }
    let ending = &payload[payload.trim_end_matches(['\r', '\n']).len()..];
    let json = payload.trim_end_matches(['\r', '\n']);
    let space = if json.starts_with(' ') { " " } else { "" };
    let mut value: Value = serde_json::from_str(json.trim_start()).ok()?;
    if !rescale_value(&mut value, factor) {
        return None;
    }
    Some(format!("data:{space}{value}{ending}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_factor_is_the_clients_size_over_what_was_sent() {
        assert_eq!(factor(30_000, 10_000), Some(3.0));
        assert_eq!(factor(10_000, 10_000), None);
        assert_eq!(factor(0, 10), None);
        assert_eq!(factor(10, 0), None);
    }

    #[test]
    fn prompt_counts_and_totals_move_output_counts_stay() {
        let body = json!({"id": "r", "usage": {"prompt_tokens": 100, "completion_tokens": 7,
            "total_tokens": 107, "prompt_tokens_details": {"cached_tokens": 40}}});
        let out = rescale_body(Bytes::from(body.to_string()), 2.5);
        let out: Value = serde_json::from_slice(&out).unwrap();
        assert_eq!(out["usage"]["prompt_tokens"], 250);
        assert_eq!(out["usage"]["completion_tokens"], 7);
        assert_eq!(out["usage"]["total_tokens"], 257);
        assert_eq!(out["usage"]["prompt_tokens_details"]["cached_tokens"], 100);
        let anthropic = json!({"usage": {"input_tokens": 10, "cache_read_input_tokens": 90,
            "cache_creation_input_tokens": 0, "output_tokens": 3}});
        let out = rescale_body(Bytes::from(anthropic.to_string()), 2.0);
        let out: Value = serde_json::from_slice(&out).unwrap();
        assert_eq!(out["usage"]["input_tokens"], 20);
        assert_eq!(out["usage"]["cache_read_input_tokens"], 180);
        assert_eq!(out["usage"]["output_tokens"], 3);
    }

    #[test]
    fn events_without_usage_keep_their_bytes() {
        let chunk = "event: message_start\r\ndata: {\"type\":\"message_start\",\"message\":{\"usage\":{\"input_tokens\":50}}}\r\n\r\nevent: ping\ndata: {\"type\":\"ping\"}\n\n";
        let out = rescale_events(Bytes::from(chunk), 2.0);
        let text = String::from_utf8(out.to_vec()).unwrap();
        assert!(text.starts_with("event: message_start\r\ndata: {"));
        assert!(text.contains("\"input_tokens\":100"));
        assert!(text.ends_with("}\r\n\r\nevent: ping\ndata: {\"type\":\"ping\"}\n\n"));
        let plain = Bytes::from_static(b"data: {\"delta\":\"hi\"}\n\n");
        assert_eq!(rescale_events(plain.clone(), 2.0), plain);
        let done = "data: {\"type\":\"response.completed\",\"response\":{\"usage\":{\"input_tokens\":9,\"output_tokens\":1,\"total_tokens\":10}}}\n\n";
        let out = rescale_events(Bytes::from(done), 3.0);
        let text = String::from_utf8(out.to_vec()).unwrap();
        assert!(text.contains("\"input_tokens\":27") && text.contains("\"total_tokens\":28"));
    }
}
