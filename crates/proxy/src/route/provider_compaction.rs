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
use serde::de::IgnoredAny;

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
    #[derive(serde::Deserialize)]
    struct Item {
        #[serde(default, rename = "type")]
        kind: Option<String>,
        #[serde(flatten)]
        _rest: IgnoredAny,
    }
    #[derive(serde::Deserialize)]
    #[serde(untagged)]
    enum Input {
        Items(Vec<Item>),
        Other(IgnoredAny),
    }
    #[derive(serde::Deserialize)]
    struct Envelope {
        #[serde(default)]
        compaction: Option<serde_json::Value>,
        #[serde(default)]
        input: Option<Input>,
    }
    let Ok(envelope) = serde_json::from_slice::<Envelope>(bytes) else {
        return false;
    };
    match format {
        Format::Anthropic => envelope.compaction.is_some_and(|c| !c.is_null()),
        Format::Responses => match envelope.input {
            Some(Input::Items(items)) => {
                (items.iter()).any(|i| i.kind.as_deref() == Some("compaction_trigger"))
            }
            _ => false,
        },
        _ => false,
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
    }
}
