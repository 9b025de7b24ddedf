//! The proxy's typed errors, and error answers in each wire format's own shape.

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use context_cascade::Format;
use serde_json::json;

/// Why the proxy could not start or run.
#[derive(Debug, thiserror::Error)]
pub enum ProxyError {
    /// The configuration (file or flags) is not usable.
    #[error("invalid proxy configuration: {0}")]
    Config(String),
    /// The SQLite store could not be opened or used.
    #[error("store error: {0}")]
    Store(#[from] rusqlite::Error),
    /// The state store (SQLite or Redis) failed.
    #[error("state store error: {0}")]
    State(#[from] StoreError),
    /// A file or socket operation failed.
    #[error("I/O error: {0}")]
    Io(#[from] std::io::Error),
    /// The HTTP client could not be built.
    #[error("HTTP client error: {0}")]
    Client(String),
}

impl From<crate::config::ConfigError> for ProxyError {
    fn from(error: crate::config::ConfigError) -> Self {
        ProxyError::Config(error.0)
    }
}

/// Why a store operation failed.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// SQLite failed.
    #[error("SQLite: {0}")]
    Sqlite(#[from] rusqlite::Error),
    /// Redis answered with an error, or the connection failed.
    #[error("Redis: {0}")]
    Redis(#[from] ::redis::RedisError),
    /// Redis did not answer in time (or was recently unreachable: see
    /// the Redis store's back-off).
    #[error("Redis unavailable: {0}")]
    Unavailable(String),
    /// A stored value did not read back (written by something else, or truncated).
    #[error("malformed stored value: {0}")]
    Malformed(String),
}

/// What kind of problem an error answer reports; it picks the `type` the SDKs expect.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    /// The request body is not a valid request (400).
    InvalidRequest,
    /// The body is larger than the proxy accepts (413).
    TooLarge,
    /// The conversation could not be made to fit (400, `context_length_exceeded`).
    ContextLength,
    /// The client did not send its request in time (408).
    ClientTimeout,
    /// The upstream could not be reached (502).
    Unreachable,
    /// The upstream did not answer in time (504).
    Timeout,
    /// Something inside the proxy failed (500).
    Internal,
}

impl ErrorKind {
    /// The HTTP status of the answer.
    pub fn status(self) -> StatusCode {
        match self {
            ErrorKind::InvalidRequest | ErrorKind::ContextLength => StatusCode::BAD_REQUEST,
            ErrorKind::TooLarge => StatusCode::PAYLOAD_TOO_LARGE,
            ErrorKind::ClientTimeout => StatusCode::REQUEST_TIMEOUT,
            ErrorKind::Unreachable => StatusCode::BAD_GATEWAY,
            ErrorKind::Timeout => StatusCode::GATEWAY_TIMEOUT,
            ErrorKind::Internal => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    fn openai_type(self) -> (&'static str, Option<&'static str>) {
        match self {
            ErrorKind::InvalidRequest => ("invalid_request_error", None),
            ErrorKind::TooLarge => ("invalid_request_error", Some("request_too_large")),
            ErrorKind::ClientTimeout => ("invalid_request_error", Some("request_timeout")),
            ErrorKind::ContextLength => ("invalid_request_error", Some("context_length_exceeded")),
            ErrorKind::Unreachable => ("upstream_error", Some("upstream_unreachable")),
            ErrorKind::Timeout => ("upstream_error", Some("upstream_timeout")),
            ErrorKind::Internal => ("server_error", None),
        }
    }

    fn anthropic_type(self) -> &'static str {
        match self {
            ErrorKind::InvalidRequest | ErrorKind::ContextLength | ErrorKind::ClientTimeout => {
                "invalid_request_error"
            }
            ErrorKind::TooLarge => "request_too_large",
            ErrorKind::Unreachable | ErrorKind::Internal => "api_error",
            ErrorKind::Timeout => "timeout_error",
        }
    }
}

/// An error answer in the shape the client's SDK parses: OpenAI
/// `{"error":{"message","type","param","code"}}`, Anthropic
/// `{"type":"error","error":{"type","message"}}`. Other routes get the OpenAI shape.
pub fn error_response(format: Format, kind: ErrorKind, message: &str) -> Response {
    let body = match format {
        Format::Anthropic => json!({
            "type": "error",
            "error": {"type": kind.anthropic_type(), "message": message},
        }),
        Format::OpenAi | Format::Bare | Format::Responses => {
            let (kind_type, code) = kind.openai_type();
            json!({
                "error": {
                    "message": message,
                    // SDKs and agents look for the code in both places.
                    "type": code.unwrap_or(kind_type),
                    "param": null,
                    "code": code,
                }
            })
        }
    };
    let mut response = (kind.status(), body.to_string()).into_response();
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shapes_follow_the_format() {
        let r = error_response(Format::Anthropic, ErrorKind::TooLarge, "big");
        assert_eq!(r.status(), StatusCode::PAYLOAD_TOO_LARGE);
        let r = error_response(Format::OpenAi, ErrorKind::ContextLength, "long");
        assert_eq!(r.status(), StatusCode::BAD_REQUEST);
        assert_eq!(
            error_response(Format::OpenAi, ErrorKind::Timeout, "t").status(),
            StatusCode::GATEWAY_TIMEOUT
        );
    }
}
