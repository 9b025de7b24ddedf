//! The `Llm` trait the retry loop calls, and what a call can answer.
//!
//! The core has no HTTP and no runtime: an implementation (the `cascade-llm` clients, the
//! proxy's upstream, a scripted test double) sends the conversation and reports what came
//! back. The engine decides what an error means: a provider error whose body
//! [`crate::overflow::classify`] recognises is an overflow and is recovered from; anything
//! else goes back to the caller untouched.

use crate::BoxFuture;
use crate::conversation::Conversation;

/// A successful call: the implementation's output and the prompt tokens the provider
/// reported (`usage.prompt_tokens`, `usage.input_tokens` + cache tokens), when it did.
#[derive(Debug, Clone, PartialEq)]
pub struct Completion<T> {
    /// What the implementation made of the answer (a body, a stream, ...).
    pub output: T,
    /// The prompt tokens the provider reported, when it reported any.
    pub prompt_tokens: Option<u64>,
}

/// Why a call failed.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum LlmError {
    /// The provider answered with an error status. `headers` are kept so that a caller (the
    /// proxy) can pass a non-overflow error on exactly as it came.
    #[error("provider answered HTTP {status}: {}", preview(body))]
    Status {
        /// The HTTP status.
        status: u16,
        /// The response headers, in order.
        headers: Vec<(String, String)>,
        /// The response body (read lossily as UTF-8).
        body: String,
    },
    /// The provider could not be reached, or the connection broke.
    #[error("could not reach the provider: {0}")]
    Transport(String),
    /// The call failed on our side before or around the exchange, not the provider's: the
    /// request could not be written, or the task or runtime that carries it failed.
    /// Retrying will not help.
    #[error("could not make the call: {0}")]
    Local(String),
    /// The provider did not answer in time.
    #[error("the provider did not answer in time")]
    Timeout,
}

impl LlmError {
    /// A provider error answer with no headers worth keeping.
    pub fn status(status: u16, body: impl Into<String>) -> Self {
        LlmError::Status {
            status,
            headers: Vec::new(),
            body: body.into(),
        }
    }

    /// The context overflow this error reports, if it is one.
    pub fn overflow(&self) -> Option<crate::overflow::Overflow> {
        match self {
            LlmError::Status { status, body, .. } => crate::overflow::classify(Some(*status), body),
            _ => None,
        }
    }
}

/// The first 200 characters of an error body, for messages.
fn preview(body: &str) -> String {
    let mut out: String = body.chars().take(200).collect();
    if out.len() < body.len() {
        out.push('…');
    }
    out
}

/// A model endpoint the retry loop can call.
pub trait Llm: Send + Sync {
    /// What a successful call gives back (a response body, a stream, ...).
    type Output: Send;

    /// Sends the conversation as it is (pins already honoured; the implementation writes it
    /// with `_pin` stripped).
    fn call<'a>(
        &'a self,
        conversation: &'a Conversation,
    ) -> BoxFuture<'a, Result<Completion<Self::Output>, LlmError>>;
}
