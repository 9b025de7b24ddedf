//! The two wire protocols a [`crate::ChatClient`] speaks, and how to read their answers:
//! usage, the generated text, and whether the output was cut off by a length limit.

use std::fmt;
use std::str::FromStr;

use context_cascade::Format;
use serde_json::Value;

use crate::error::ClientError;

/// The API protocol of an endpoint.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Provider {
    /// OpenAI-compatible Chat Completions (`POST /v1/chat/completions`): OpenAI, vLLM,
    /// llama.cpp, Ollama, LM Studio, OpenRouter, ...
    OpenAi,
    /// Anthropic Messages (`POST /v1/messages`).
    Anthropic,
}

impl Provider {
    /// `"openai"` or `"anthropic"` (used in summarizer identities and logs).
    pub fn as_str(self) -> &'static str {
        match self {
            Provider::OpenAi => "openai",
            Provider::Anthropic => "anthropic",
        }
    }

    /// The route under `/v1` that takes a conversation.
    pub fn route(self) -> &'static str {
        match self {
            Provider::OpenAi => "chat/completions",
            Provider::Anthropic => "messages",
        }
    }

    /// The protocol an endpoint is assumed to speak when nobody said: Anthropic Messages for
    /// a host on `anthropic.com`, OpenAI Chat Completions for any other (the protocol most
    /// servers implement). The one guessing rule of every `--summarizer URL`.
    pub fn guess_from_url(url: &str) -> Provider {
        let host = reqwest::Url::parse(url.trim())
            .ok()
            .and_then(|u| u.host_str().map(str::to_ascii_lowercase));
        match host {
            Some(host) if host == "anthropic.com" || host.ends_with(".anthropic.com") => {
                Provider::Anthropic
            }
            _ => Provider::OpenAi,
        }
    }

    /// The protocol that carries a conversation of this format (a bare message array is
    /// OpenAI-style).
    pub fn for_format(format: Format) -> Provider {
        match format {
            Format::Anthropic => Provider::Anthropic,
            Format::OpenAi | Format::Bare | Format::Responses => Provider::OpenAi,
        }
    }
}

impl fmt::Display for Provider {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Provider {
    type Err = ClientError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.trim().to_ascii_lowercase().as_str() {
            "openai" | "open-ai" | "chat" | "chat-completions" => Ok(Provider::OpenAi),
            "anthropic" | "messages" => Ok(Provider::Anthropic),
            other => Err(ClientError::UnknownProvider(other.to_owned())),
        }
    }
}

/// Prompt tokens reported in a non-streaming response body: OpenAI `usage.prompt_tokens`;
/// Anthropic `usage.input_tokens + cache_read_input_tokens + cache_creation_input_tokens`
/// (cached tokens occupy the window too).
pub fn usage_from_response(provider: Provider, body: &Value) -> Option<u64> {
    prompt_tokens_of_usage(provider, body.get("usage")?)
}

/// Prompt tokens reported in a non-streaming response body given as bytes (see
/// [`usage_from_response`]); `None` when the bytes are not JSON.
pub fn usage_from_body(provider: Provider, body: &[u8]) -> Option<u64> {
    let value: Value = serde_json::from_slice(body).ok()?;
    usage_from_response(provider, &value)
}

/// Prompt tokens reported by one SSE event's `data`, if it carries any: an OpenAI chunk with
/// a non-null `usage` (the final chunk when `stream_options.include_usage` is set); Anthropic
/// `message_start` (`message.usage`) or a `message_delta` whose `usage` has input counts.
/// A count of 0 is no count: servers without usage reporting send zeros, and a prompt is
/// never empty. Cheap on events without usage (no JSON parse unless the text mentions it),
/// so a proxy can call it on every event it passes through.
pub fn usage_from_sse_event(provider: Provider, data: &str) -> Option<u64> {
    if !data.contains("usage") {
        return None;
    }
    let value: Value = serde_json::from_str(data.trim()).ok()?;
    let tokens = match provider {
        // Chat Completions puts `usage` on the chunk; the Responses API on the response of
        // its `response.completed` event.
        Provider::OpenAi => prompt_tokens_of_usage(
            provider,
            value
                .get("usage")
                .filter(|u| !u.is_null())
                .or_else(|| value.pointer("/response/usage"))?,
        ),
        Provider::Anthropic => {
            let usage = match value.get("type").and_then(Value::as_str) {
                Some("message_start") => value.get("message")?.get("usage")?,
                _ => value.get("usage")?,
            };
            prompt_tokens_of_usage(provider, usage)
        }
    };
    tokens.filter(|n| *n > 0)
}

fn prompt_tokens_of_usage(provider: Provider, usage: &Value) -> Option<u64> {
    match provider {
        // `prompt_tokens` in Chat Completions, `input_tokens` in the Responses API.
        Provider::OpenAi => ["prompt_tokens", "input_tokens"]
            .iter()
            .find_map(|k| usage.get(*k).and_then(Value::as_u64)),
        Provider::Anthropic => {
            if let Some(Value::Array(iterations)) = usage.get("iterations") {
                return first_message_iteration(iterations);
            }
            // A message_delta often carries only output_tokens: no prompt count then.
            let input = usage.get("input_tokens").and_then(Value::as_u64)?;
            let cached = ["cache_read_input_tokens", "cache_creation_input_tokens"]
                .iter()
                .filter_map(|k| usage.get(*k).and_then(Value::as_u64))
                .sum::<u64>();
            Some(input + cached)
        }
    }
}

/// The prompt of the request as sent, from Anthropic's `usage.iterations` (server-side
/// compaction and tool loops): the first `message` entry, or nothing when a `compaction`
/// entry comes before it (that message then read the provider's summary, not the request
/// sent, and the compaction's own usage is not the prompt's either).
fn first_message_iteration(iterations: &[Value]) -> Option<u64> {
    let first = iterations.iter().find(|i| {
        matches!(
            i.get("type").and_then(Value::as_str),
            Some("message" | "compaction")
        )
    })?;
    if first.get("type").and_then(Value::as_str) != Some("message") {
        return None;
    }
    prompt_tokens_of_usage(Provider::Anthropic, first)
}

/// Whether an Anthropic SSE event's `data` shows that the provider compacted the prompt
/// (a `compaction` content block, or a `compaction` entry in `usage.iterations`): the
/// prompt the answer reports is then not the request sent.
pub fn provider_compacted(data: &str) -> bool {
    if !data.contains("compaction") {
        return false;
    }
    let Ok(value) = serde_json::from_str::<Value>(data.trim()) else {
        return false;
    };
    let is_compaction = |v: &Value| v.get("type").and_then(Value::as_str) == Some("compaction");
    if value.get("content_block").is_some_and(is_compaction) {
        return true;
    }
    let usage = (value.get("usage")).or_else(|| value.get("message").and_then(|m| m.get("usage")));
    (usage
        .and_then(|u| u.get("iterations"))
        .and_then(Value::as_array))
    .is_some_and(|iterations| iterations.iter().any(is_compaction))
}

/// The generated text of a non-streaming response: OpenAI `choices[0].message.content`
/// (a string or text parts); Anthropic the `text` blocks of `content`, joined. `None` when
/// the body has no such field.
pub fn response_text(provider: Provider, body: &Value) -> Option<String> {
    match provider {
        Provider::OpenAi => {
            let content = body
                .get("choices")?
                .get(0)?
                .get("message")?
                .get("content")?;
            match content {
                Value::String(s) => Some(s.clone()),
                Value::Array(parts) => Some(join_text_parts(parts)),
                Value::Null => Some(String::new()),
                _ => None,
            }
        }
        Provider::Anthropic => match body.get("content")? {
            Value::Array(blocks) => Some(join_text_parts(blocks)),
            Value::String(s) => Some(s.clone()),
            _ => None,
        },
    }
}

fn join_text_parts(parts: &[Value]) -> String {
    parts
        .iter()
        .filter(|p| p.get("type").and_then(Value::as_str).unwrap_or("text") == "text")
        .filter_map(|p| p.get("text").and_then(Value::as_str))
        .collect::<Vec<_>>()
        .join("")
}

/// The error of a Responses API stream event that ends the response in failure
/// (`response.failed` with `response.error`, or a bare `error` event), as an error body
/// `{"error": {...}}` that [`context_cascade::classify`] reads like an error answer. `None`
/// for every other event (cheap: no JSON parse unless the text names a failure).
pub fn responses_failure(data: &str) -> Option<String> {
    if !data.contains("response.failed") && !data.contains("\"error\"") {
        return None;
    }
    let value: Value = serde_json::from_str(data.trim()).ok()?;
    let error = match value.get("type").and_then(Value::as_str)? {
        "response.failed" => value.pointer("/response/error")?,
        "error" => value.get("error").unwrap_or(&value),
        _ => return None,
    };
    Some(serde_json::json!({ "error": error }).to_string())
}

/// Whether the output was cut off by the output length limit: OpenAI
/// `finish_reason == "length"`, Anthropic `stop_reason == "max_tokens"`.
pub fn is_truncated(provider: Provider, body: &Value) -> bool {
    match provider {
        Provider::OpenAi => {
            body.get("choices")
                .and_then(|c| c.get(0))
                .and_then(|c| c.get("finish_reason"))
                .and_then(Value::as_str)
                == Some("length")
        }
        Provider::Anthropic => {
            body.get("stop_reason").and_then(Value::as_str) == Some("max_tokens")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn usage_is_read_from_both_response_shapes() {
        let openai = json!({"usage": {"prompt_tokens": 812, "completion_tokens": 3}});
        assert_eq!(usage_from_response(Provider::OpenAi, &openai), Some(812));
        let anthropic = json!({"usage": {"input_tokens": 10, "cache_read_input_tokens": 500,
            "cache_creation_input_tokens": 90, "output_tokens": 7}});
        assert_eq!(
            usage_from_response(Provider::Anthropic, &anthropic),
            Some(600)
        );
        assert_eq!(usage_from_response(Provider::OpenAi, &json!({})), None);
    }

    #[test]
    fn usage_is_read_from_stream_events() {
        let chunk = r#"{"choices":[],"usage":{"prompt_tokens":42,"completion_tokens":2}}"#;
        assert_eq!(usage_from_sse_event(Provider::OpenAi, chunk), Some(42));
        let no_usage = r#"{"choices":[{"delta":{"content":"hi"}}],"usage":null}"#;
        assert_eq!(usage_from_sse_event(Provider::OpenAi, no_usage), None);
        assert_eq!(usage_from_sse_event(Provider::OpenAi, "[DONE]"), None);
        let start = r#"{"type":"message_start","message":{"usage":{"input_tokens":30,"cache_read_input_tokens":5}}}"#;
        assert_eq!(usage_from_sse_event(Provider::Anthropic, start), Some(35));
        let delta = r#"{"type":"message_delta","usage":{"output_tokens":9}}"#;
        assert_eq!(usage_from_sse_event(Provider::Anthropic, delta), None);
        let delta_in = r#"{"type":"message_delta","usage":{"input_tokens":31,"output_tokens":9}}"#;
        assert_eq!(
            usage_from_sse_event(Provider::Anthropic, delta_in),
            Some(31)
        );
    }

    #[test]
    fn responses_usage_and_failures_are_read() {
        let body = json!({"object": "response", "usage": {"input_tokens": 70, "output_tokens": 2}});
        assert_eq!(usage_from_response(Provider::OpenAi, &body), Some(70));
        let done = r#"{"type":"response.completed","response":{"usage":{"input_tokens":55}}}"#;
        assert_eq!(usage_from_sse_event(Provider::OpenAi, done), Some(55));
        let failed = r#"{"type":"response.failed","response":{"error":{"code":"context_length_exceeded","message":"too long"}}}"#;
        let error = responses_failure(failed).unwrap();
        assert!(context_cascade::classify(Some(400), &error).is_some());
        let delta = r#"{"type":"response.output_text.delta","delta":"error"}"#;
        assert_eq!(responses_failure(delta), None);
    }

    #[test]
    fn text_and_truncation_are_read() {
        let openai =
            json!({"choices": [{"message": {"content": "abc"}, "finish_reason": "length"}]});
        assert_eq!(
            response_text(Provider::OpenAi, &openai).as_deref(),
            Some("abc")
        );
        assert!(is_truncated(Provider::OpenAi, &openai));
        let anthropic = json!({"content": [{"type": "text", "text": "a"}, {"type": "tool_use"},
            {"type": "text", "text": "b"}], "stop_reason": "end_turn"});
        assert_eq!(
            response_text(Provider::Anthropic, &anthropic).as_deref(),
            Some("ab")
        );
        assert!(!is_truncated(Provider::Anthropic, &anthropic));
    }

    #[test]
    fn zero_counts_and_bodies() {
        let zero = r#"{"type":"message_start","message":{"usage":{"input_tokens":0}}}"#;
        assert_eq!(usage_from_sse_event(Provider::Anthropic, zero), None);
        let body = br#"{"usage":{"prompt_tokens":9}}"#;
        assert_eq!(usage_from_body(Provider::OpenAi, body), Some(9));
        assert_eq!(usage_from_body(Provider::OpenAi, b"not json"), None);
    }

    #[test]
    fn the_protocol_is_guessed_from_the_host() {
        let guess = Provider::guess_from_url;
        assert_eq!(guess("https://api.anthropic.com"), Provider::Anthropic);
        assert_eq!(guess("http://API.Anthropic.com/v1"), Provider::Anthropic);
        assert_eq!(guess("https://api.openai.com/v1"), Provider::OpenAi);
        assert_eq!(guess("http://127.0.0.1:8080"), Provider::OpenAi);
        assert_eq!(
            guess("https://anthropic.com.evil.example"),
            Provider::OpenAi
        );
        assert_eq!(guess("not a url"), Provider::OpenAi);
    }

    #[test]
    fn provider_names_parse() {
        assert_eq!("OpenAI".parse::<Provider>().ok(), Some(Provider::OpenAi));
        assert_eq!(
            "anthropic".parse::<Provider>().ok(),
            Some(Provider::Anthropic)
        );
        assert!("gemini".parse::<Provider>().is_err());
    }

    #[test]
    fn anthropic_usage_iterations_give_the_prompt_of_the_request_sent() {
        // Shapes: anthropic-sdk-python types/beta/beta_usage.py, beta_message_iteration_usage.py,
        // beta_compaction_iteration_usage.py (fixtures/provider-compaction.json).
        let tool_loop = json!({"usage": {"input_tokens": 900, "output_tokens": 50,
            "iterations": [
                {"type": "message", "input_tokens": 300, "cache_read_input_tokens": 100,
                 "cache_creation_input_tokens": 0, "output_tokens": 20, "model": "m"},
                {"type": "message", "input_tokens": 500, "cache_read_input_tokens": 0,
                 "cache_creation_input_tokens": 0, "output_tokens": 30, "model": "m"}]}});
        assert_eq!(
            usage_from_response(Provider::Anthropic, &tool_loop),
            Some(400)
        );
        let compacted = json!({"usage": {"input_tokens": 2000, "output_tokens": 50,
            "iterations": [
                {"type": "compaction", "input_tokens": 180000, "cache_read_input_tokens": 0,
                 "cache_creation_input_tokens": 0, "output_tokens": 3000},
                {"type": "message", "input_tokens": 2000, "cache_read_input_tokens": 0,
                 "cache_creation_input_tokens": 0, "output_tokens": 50, "model": "m"}]}});
        assert_eq!(usage_from_response(Provider::Anthropic, &compacted), None);
        let plain = json!({"usage": {"input_tokens": 7, "output_tokens": 1}});
        assert_eq!(usage_from_response(Provider::Anthropic, &plain), Some(7));
    }

    #[test]
    fn a_compaction_block_or_iteration_in_a_stream_means_no_count() {
        let start = r#"{"type":"content_block_start","index":0,"content_block":{"type":"compaction","content":null,"encrypted_content":null}}"#;
        assert!(provider_compacted(start));
        let delta = r#"{"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":9,"iterations":[{"type":"compaction","input_tokens":9,"output_tokens":1}]}}"#;
        assert!(provider_compacted(delta));
        let text = r#"{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"compaction"}}"#;
        assert!(!provider_compacted(text));
    }
}
