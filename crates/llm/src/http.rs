//! What every HTTP caller of a provider needs from a reqwest exchange, whoever makes it (the
//! [`crate::ChatClient`], the proxy's upstream): response headers in the form the core's
//! [`LlmError::Status`] keeps them, and a client error classified as the core's [`LlmError`].

use context_cascade::LlmError;

/// Response headers as (name, value) pairs in order, values read lossily as UTF-8 (a value
/// that is not UTF-8 is kept, not dropped: a proxy passes it back to its client).
pub fn header_pairs(headers: &reqwest::header::HeaderMap) -> Vec<(String, String)> {
    headers
        .iter()
        .map(|(name, value)| {
            let value = String::from_utf8_lossy(value.as_bytes()).into_owned();
            (name.as_str().to_owned(), value)
        })
        .collect()
}

/// A reqwest error as [`LlmError::Timeout`] when it is a timeout, else
/// [`LlmError::Transport`] with the whole cause chain (the text names the URL and the cause,
/// never a header, so it can be logged and shown).
pub fn transport_error(error: &reqwest::Error) -> LlmError {
    if error.is_timeout() {
        LlmError::Timeout
    } else {
        LlmError::Transport(error_chain(error))
    }
}

/// An error and its sources, `outer: inner: root` (reqwest's own message is terse).
pub(crate) fn error_chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(inner) = source {
        let inner_text = inner.to_string();
        if !text.contains(&inner_text) {
            text.push_str(": ");
            text.push_str(&inner_text);
        }
        source = inner.source();
    }
    text
}
