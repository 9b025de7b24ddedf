//! Requests that ask the provider to compact, forwarded without the cascade: the
//! Anthropic `compaction` parameter (on-demand compaction: the provider summarizes every
//! message it is sent, so nothing may be removed first), a Responses `compaction_trigger`
//! item (Codex's remote compaction on `/v1/responses`), and `POST /v1/responses/compact`.
//! They go upstream byte for byte and the answer says so in the report header; the proxy
//! never adds `context_management` to them or to any request.

use axum::body::Body;
use axum::http::HeaderValue;
use axum::response::Response;
use context_cascade::Format;
use serde::de::{IgnoredAny, MapAccess, SeqAccess, Visitor};

use crate::error::{ErrorKind, error_response};
use crate::route::answer::REPORT_HEADER;
use crate::route::inbound::Inbound;
use crate::route::upstream::Upstream;

/// The standalone compaction route of the Responses API.
pub(crate) const COMPACT_ROUTE: &str = "/v1/responses/compact";
/// The report header's value for a request that asks the provider to compact.
pub(crate) const PROVIDER_COMPACTION: &str = "provider-compaction; forwarded untouched";

/// Whether a body asks the provider to compact (read without building the conversation;
/// invalid JSON is left to the cascade's error answer): an Anthropic body with a non-null
/// top-level `compaction`, or a Responses body with a `compaction_trigger` input item.
pub(crate) fn asks_provider_to_compact(format: Format, bytes: &[u8]) -> bool {
    // A body that asks names what it asks for, and a body without the name cannot: every
    // request takes this check, and a search for the name (~10 GB/s) spares the others a
    // parse of the whole body (~1 ms at 478 kB). The name with its quotes, as a key or a
    // `type` is written: in a string's text the quotes would be escaped, so a session that
    // talks about compaction is not parsed for it. JSON writers write ASCII letters as they
    // are; a name spelled with `\u` escapes is not recognised.
    let word: &[u8] = match format {
        Format::Anthropic => b"\"compaction\"",
        Format::Responses => b"\"compaction_trigger\"",
        _ => return false,
    };
    if memchr::memmem::find(bytes, word).is_none() {
        return false;
    }
    #[derive(serde::Deserialize)]
    struct Envelope {
        #[serde(default)]
        compaction: Option<serde_json::Value>,
        #[serde(default)]
        input: Option<Trigger>,
    }
    let Ok(envelope) = serde_json::from_slice::<Envelope>(bytes) else {
        return false;
    };
    match format {
        Format::Anthropic => envelope.compaction.is_some_and(|c| !c.is_null()),
        Format::Responses => envelope.input.is_some_and(|t| t.0),
        _ => false,
    }
}

/// Whether an `input` is a list of items one of which is a `compaction_trigger`. Read in
/// one pass that keeps nothing but each item's `type`: an untagged enum or a flattened
/// struct would first buffer the whole input (every string copied), about a millisecond
/// at 478 kB on every Responses request. Input that is not a list is not a trigger; a list
/// with an element that is not an item object fails the envelope (not a trigger).
struct Trigger(bool);

impl<'de> serde::Deserialize<'de> for Trigger {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(TriggerVisitor)
    }
}

struct TriggerVisitor;

impl<'de> Visitor<'de> for TriggerVisitor {
    type Value = Trigger;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("any input")
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Trigger, A::Error> {
        #[derive(serde::Deserialize)]
        struct Item {
            #[serde(default, rename = "type")]
            kind: Option<String>,
        }
        let mut found = false;
        while let Some(item) = seq.next_element::<Item>()? {
            found |= item.kind.as_deref() == Some("compaction_trigger");
        }
        Ok(Trigger(found))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Trigger, A::Error> {
        while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
        Ok(Trigger(false))
    }

    fn visit_str<E>(self, _: &str) -> Result<Trigger, E> {
        Ok(Trigger(false))
    }

    fn visit_bool<E>(self, _: bool) -> Result<Trigger, E> {
        Ok(Trigger(false))
    }

    fn visit_i64<E>(self, _: i64) -> Result<Trigger, E> {
        Ok(Trigger(false))
    }

    fn visit_u64<E>(self, _: u64) -> Result<Trigger, E> {
        Ok(Trigger(false))
    }

    fn visit_f64<E>(self, _: f64) -> Result<Trigger, E> {
        Ok(Trigger(false))
    }

    fn visit_unit<E>(self) -> Result<Trigger, E> {
        Ok(Trigger(false))
    }
}

/// Forwards `inbound` byte for byte; the answer carries `report` in the report header.
pub(crate) async fn forward_untouched(
    upstream: &Upstream,
    inbound: Inbound,
    report: &'static str,
) -> Response {
    let (format, path) = (inbound.format, inbound.path().to_owned());
    let Inbound { parts, bytes, .. } = inbound;
    let sent = (upstream)
        .forward(&path, parts.method, &parts.headers, Body::from(bytes))
        .await;
    match sent {
        Ok(mut response) => {
            let value = HeaderValue::from_static(report);
            response.headers_mut().insert(REPORT_HEADER, value);
            response
        }
        Err(error) => {
            let message = format!("context-cascade: could not reach the upstream: {error}");
            error_response(format, ErrorKind::Unreachable, &message)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn compaction_requests_are_read_from_the_envelope() {
        let on_demand =
            br#"{"model":"c","max_tokens":9,"compaction":{"type":"summarize"},"messages":[]}"#;
        assert!(asks_provider_to_compact(Format::Anthropic, on_demand));
        let threshold = br#"{"model":"c","context_management":{"edits":[{"type":"compact_20260112"}]},"messages":[]}"#;
        assert!(!asks_provider_to_compact(Format::Anthropic, threshold));
        let trigger = br#"{"model":"m","input":[{"type":"message","role":"user","content":"x"},{"type":"compaction_trigger"}]}"#;
        assert!(asks_provider_to_compact(Format::Responses, trigger));
        assert!(!asks_provider_to_compact(
            Format::Responses,
            br#"{"model":"m","input":"hi"}"#
        ));
        assert!(!asks_provider_to_compact(
            Format::Anthropic,
            br#"{"compaction":null}"#
        ));
        assert!(!asks_provider_to_compact(Format::Responses, b"not json"));
        // The word in a text is not an item: the body is parsed and read as before.
        let said =
            br#"{"model":"m","input":[{"role":"user","content":"what is a compaction_trigger?"}]}"#;
        assert!(!asks_provider_to_compact(Format::Responses, said));
        let said = br#"{"model":"c","messages":[{"role":"user","content":"compaction"}]}"#;
        assert!(!asks_provider_to_compact(Format::Anthropic, said));
        let quoted =
            br#"{"model":"c","messages":[{"role":"user","content":"the "compaction" key"}]}"#;
        assert!(!asks_provider_to_compact(Format::Anthropic, quoted));
        // Whitespace around the name is JSON's, not the name's.
        let spaced = br#"{"model":"c", "compaction" : {"type":"summarize"}, "messages":[]}"#;
        assert!(asks_provider_to_compact(Format::Anthropic, spaced));
    }

    /// Every shape of `input` reads as before the one-pass reader: only a list holding a
    /// `compaction_trigger` item is a trigger, and an odd `input` does not hide an
    /// Anthropic `compaction`.
    #[test]
    fn any_input_shape_is_read_in_one_pass() {
        let nested = br#"{"input":[{"type":"function_call_output","call_id":"c","output":[{"type":"input_text","text":"a \"q\""}]},{"role":"user","content":"x"},{"type":"compaction_trigger","extra":{"k":[1,2]}}]}"#;
        assert!(asks_provider_to_compact(Format::Responses, nested));
        for input in [
            "{}",
            r#"{"type":"compaction_trigger"}"#,
            "null",
            "3",
            "true",
            "[]",
            r#"[{"type":"message"}]"#,
            r#"["compaction_trigger"]"#,
            r#"[{"type":7}]"#,
        ] {
            let body = format!(r#"{{"model":"m","input":{input}}}"#);
            assert!(
                !asks_provider_to_compact(Format::Responses, body.as_bytes()),
                "{input}"
            );
        }
        let odd = br#"{"compaction":{"type":"summarize"},"input":{"a":1},"messages":[]}"#;
        assert!(asks_provider_to_compact(Format::Anthropic, odd));
        let odd = br#"{"compaction":{"type":"summarize"},"input":"x","messages":[]}"#;
        assert!(asks_provider_to_compact(Format::Anthropic, odd));
    }
}
