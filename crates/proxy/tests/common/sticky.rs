//! One conversation in each wire format, two turns of it, and what the upstream saw: the
//! scenario of the tests that check a conversation keeps its compaction decision wherever
//! its next request goes (a restarted proxy, another replica).

use serde_json::{Value, json};

use super::{LAST, history};

/// The window the scenario's first turn needs compacting under.
pub const WINDOW: u64 = 8000;

/// The wire formats whose conversations the proxy compacts.
#[derive(Debug, Clone, Copy)]
pub enum Wire {
    Chat,
    Anthropic,
    Responses,
}

impl Wire {
    pub fn path(self) -> &'static str {
        match self {
            Wire::Chat => "/v1/chat/completions",
            Wire::Anthropic => "/v1/messages",
            Wire::Responses => "/v1/responses",
        }
    }

    /// The body of a conversation with `messages` (OpenAI-style, the first one the system
    /// prompt) in this format.
    pub fn body(self, messages: &[Value]) -> Value {
        match self {
            Wire::Chat => json!({"model": "gpt-4o", "messages": messages}),
            Wire::Anthropic => super::anthropic_body("claude-sonnet-4-5", messages, false),
            Wire::Responses => json!({"model": "gpt-4o", "instructions": messages[0]["content"],
                                      "input": messages[1..].to_vec(), "max_output_tokens": 256}),
        }
    }

    /// The messages of a body as it went upstream.
    pub fn messages(self, body: &[u8]) -> Vec<Value> {
        let body: Value = serde_json::from_slice(body).unwrap();
        let key = match self {
            Wire::Responses => "input",
            _ => "messages",
        };
        body[key].as_array().unwrap().clone()
    }

    /// The two turns: a history of `exchanges` pairs of `chars` characters each, which the
    /// window cannot hold, then the same with one more exchange.
    pub fn turns(self, exchanges: usize, chars: usize) -> (Value, Value) {
        let mut messages = history(exchanges, chars, LAST);
        let first = self.body(&messages);
        messages.push(json!({"role": "assistant", "content": "Fixed the index."}));
        messages.push(json!({"role": "user", "content": "Thanks, now run the tests."}));
        (first, self.body(&messages))
    }
}

/// Sends `body` to `proxy` with the test credentials (the state is the credential's own).
pub async fn send(client: &reqwest::Client, proxy: &str, wire: Wire, body: &Value) -> bool {
    let response = client
        .post(format!("{proxy}{}", wire.path()))
        .header("authorization", "Bearer sk-test-123")
        .header("x-api-key", "ant-test-456")
        .header("anthropic-version", "2023-06-01")
        .json(body)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200, "{wire:?}");
    response.headers().contains_key("x-context-cascade")
}

/// Checks that the second turn's upstream request is the one a proxy that never moved
/// sent (`control`), and that it extends the first turn's (the compaction was re-applied,
/// so the provider's cached prefix holds).
pub fn assert_kept(wire: Wire, control: (&[u8], &[u8]), moved: (&[u8], &[u8])) {
    assert_eq!(
        String::from_utf8_lossy(moved.0),
        String::from_utf8_lossy(control.0),
        "{wire:?}: the first turn"
    );
    let (first, second) = (wire.messages(moved.0), wire.messages(moved.1));
    let kept = first
        .iter()
        .zip(&second)
        .take_while(|(a, b)| a == b)
        .count();
    assert_eq!(
        (kept, second.len()),
        (first.len(), first.len() + 2),
        "{wire:?}: the second turn extends the first"
    );
    assert_eq!(
        String::from_utf8_lossy(moved.1),
        String::from_utf8_lossy(control.1),
        "{wire:?}: the second turn is the one sent without the move"
    );
}
