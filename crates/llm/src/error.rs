//! Errors of building a client (calls report the core's `LlmError`).

/// A client that cannot be built from its configuration.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ClientError {
    /// The base URL is not an http(s) URL.
    #[error("invalid base URL {url:?}: {reason}")]
    BaseUrl {
        /// The URL as given.
        url: String,
        /// What is wrong with it.
        reason: String,
    },
    /// A provider name that is neither `openai` nor `anthropic`.
    #[error("unknown provider {0:?}: expected \"openai\" or \"anthropic\"")]
    UnknownProvider(String),
    /// An API key that cannot be sent as an HTTP header value.
    #[error("the API key contains characters not allowed in an HTTP header")]
    ApiKey,
    /// The HTTP client could not be set up (TLS backend, ...).
    #[error("could not build the HTTP client: {0}")]
    Http(String),
    /// The dedicated runtime of [`crate::Executor::Dedicated`] could not be started.
    #[error("could not start the HTTP runtime: {0}")]
    Runtime(String),
}
