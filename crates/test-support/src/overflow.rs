//! Overflow error bodies as providers send them, read from `fixtures/overflow-errors.json`
//! (the vectors the classifier is tested on) instead of written by hand in each test.

use serde_json::Value;

/// A provider whose overflow answer a scripted upstream imitates.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OverflowKind {
    /// OpenAI Chat Completions, `context_length_exceeded`.
    OpenAi,
    /// Anthropic Messages, `prompt is too long: N tokens > M maximum`.
    Anthropic,
    /// llama.cpp's server, `exceed_context_size_error`.
    LlamaCpp,
}

impl OverflowKind {
    /// The fixture's `provider` value, and the window and prompt sizes its body states.
    fn vector(self) -> (&'static str, u64, u64) {
        match self {
            OverflowKind::OpenAi => ("OpenAI Chat Completions", 4097, 4294),
            OverflowKind::Anthropic => ("Anthropic (via exe.dev LLM gateway)", 200_000, 200_251),
            OverflowKind::LlamaCpp => ("llama.cpp llama-server", 8192, 14_429),
        }
    }
}

/// The HTTP status and body of the provider's overflow answer, exactly as the fixture has it.
pub fn overflow_body(kind: OverflowKind) -> (u16, String) {
    let (provider, _, _) = kind.vector();
    let path = crate::fixture("overflow-errors.json");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let vectors: Vec<Value> = serde_json::from_str(&text).expect("overflow-errors.json");
    vectors
        .iter()
        .find(|v| {
            v["provider"] == provider
                && v["is_overflow"] == true
                && v["http_status"].is_u64()
                && v["body"].as_str().is_some_and(|b| b.starts_with('{'))
        })
        .map(|v| {
            let status = v["http_status"].as_u64().expect("status") as u16;
            (status, v["body"].as_str().expect("body").to_owned())
        })
        .unwrap_or_else(|| panic!("no {provider} overflow vector in the fixtures"))
}

/// The same body with the window and prompt sizes of the test (`window` tokens allowed,
/// `prompt` tokens sent), for an upstream that enforces its own limit.
pub fn overflow_body_sized(kind: OverflowKind, window: u64, prompt: u64) -> (u16, String) {
    let (_, fixture_window, fixture_prompt) = kind.vector();
    let (status, body) = overflow_body(kind);
    // Through markers, so that a new number containing the other old one stays intact.
    let body = body
        .replace(&fixture_prompt.to_string(), "\u{0}prompt")
        .replace(&fixture_window.to_string(), "\u{0}window")
        .replace("\u{0}prompt", &prompt.to_string())
        .replace("\u{0}window", &window.to_string());
    (status, body)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kind_has_a_fixture_body_and_takes_the_test_sizes() {
        for kind in [
            OverflowKind::OpenAi,
            OverflowKind::Anthropic,
            OverflowKind::LlamaCpp,
        ] {
            let (status, body) = overflow_body(kind);
            assert_eq!(status, 400, "{kind:?}");
            assert!(serde_json::from_str::<Value>(&body).is_ok(), "{kind:?}");
            // A prompt that contains the fixture's window digits stays whole.
            let (_, sized) = overflow_body_sized(kind, 8192, 18_192);
            assert!(sized.contains("18192") && sized.contains("8192"), "{sized}");
        }
        let (_, openai) = overflow_body_sized(OverflowKind::OpenAi, 100, 250);
        assert!(
            openai.contains("maximum context length is 100 tokens"),
            "{openai}"
        );
        assert!(openai.contains("resulted in 250 tokens"), "{openai}");
    }
}
