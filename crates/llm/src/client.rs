//! [`ChatClient`]: one HTTP endpoint (OpenAI Chat Completions or Anthropic Messages),
//! called with or without streaming, and the core's [`Llm`] trait on top of it.

use std::fmt;
use std::time::Duration;

use context_cascade::BoxFuture;
use context_cascade::Conversation;
use context_cascade::format::{WriteOptions, to_value};
use context_cascade::{Completion, Llm, LlmError};
use reqwest::header::{CONTENT_TYPE, HeaderMap, HeaderName, HeaderValue};
use serde_json::{Map, Value};

use crate::error::ClientError;
use crate::executor::{Executor, Runner};
use crate::http::{error_chain, header_pairs, transport_error};
use crate::provider::{Provider, usage_from_response};
use crate::stream::SseStream;

/// The `anthropic-version` header every Messages request carries.
pub const ANTHROPIC_VERSION: &str = "2023-06-01";
/// `max_tokens` put on an Anthropic request that has none (the API requires the field).
pub const DEFAULT_ANTHROPIC_MAX_TOKENS: u64 = 4096;
/// The timeout a [`ClientConfig`] starts with.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(120);

/// What a [`ChatClient`] talks to. Build with [`ClientConfig::new`] and the setters.
#[derive(Clone)]
pub struct ClientConfig {
    /// The endpoint's protocol.
    pub provider: Provider,
    /// The server's base URL, with or without a trailing `/v1` (`http://127.0.0.1:8080`,
    /// `https://api.openai.com/v1`).
    pub base_url: String,
    /// Sent as `Authorization: Bearer` (OpenAI) or `x-api-key` (Anthropic). Never logged.
    pub api_key: Option<String>,
    /// Replaces the request's `model` when set.
    pub model: Option<String>,
    /// Non-streaming: the whole call. Streaming: until the response headers, then between
    /// two reads of the body.
    pub timeout: Duration,
    /// The runtime the `Llm` and `Summarizer` implementations run on.
    pub executor: Executor,
}

impl ClientConfig {
    /// A configuration with no key, no model override and [`DEFAULT_TIMEOUT`].
    pub fn new(provider: Provider, base_url: impl Into<String>) -> Self {
        ClientConfig {
            provider,
            base_url: base_url.into(),
            api_key: None,
            model: None,
            timeout: DEFAULT_TIMEOUT,
            executor: Executor::Current,
        }
    }

    /// Sets the runtime the trait implementations run on.
    pub fn executor(mut self, executor: Executor) -> Self {
        self.executor = executor;
        self
    }

    /// Sets the API key.
    pub fn api_key(mut self, key: impl Into<String>) -> Self {
        self.api_key = Some(key.into());
        self
    }

    /// Sets the model that replaces the request's own.
    pub fn model(mut self, model: impl Into<String>) -> Self {
        self.model = Some(model.into());
        self
    }

    /// Sets the timeout.
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }
}

// Hand-written so that the key never reaches a log line.
impl fmt::Debug for ClientConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ClientConfig")
            .field("provider", &self.provider)
            .field("base_url", &self.base_url)
            .field("api_key", &self.api_key.as_ref().map(|_| "<redacted>"))
            .field("model", &self.model)
            .field("timeout", &self.timeout)
            .field("executor", &self.executor)
            .finish()
    }
}

/// An HTTP client for one endpoint. Cheap to clone (the connection pool is shared).
#[derive(Clone)]
pub struct ChatClient {
    http: reqwest::Client,
    provider: Provider,
    base_url: String,
    endpoint: reqwest::Url,
    headers: HeaderMap,
    model: Option<String>,
    timeout: Duration,
    runner: Runner,
}

impl fmt::Debug for ChatClient {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ChatClient")
            .field("provider", &self.provider)
            .field("endpoint", &self.endpoint.as_str())
            .field("model", &self.model)
            .field("timeout", &self.timeout)
            .field("executor", &self.runner)
            .finish_non_exhaustive()
    }
}

impl ChatClient {
    /// Builds a client; fails on a base URL that is not http(s) or a key that cannot be a
    /// header value.
    pub fn new(config: ClientConfig) -> Result<Self, ClientError> {
        let base_url = config.base_url.trim().trim_end_matches('/').to_owned();
        let endpoint = endpoint_url(&base_url, config.provider)?;
        let headers = auth_headers(config.provider, config.api_key.as_deref())?;
        let http = reqwest::Client::builder()
            .connect_timeout(config.timeout.min(Duration::from_secs(30)))
            // Bounds the wait between two reads, so a stalled stream ends in a timeout
            // without capping how long a healthy stream may run.
            .read_timeout(config.timeout)
            .build()
            .map_err(|e| ClientError::Http(error_chain(&e)))?;
        let runner = Runner::new(&config.executor)?;
        Ok(ChatClient {
            runner,
            http,
            provider: config.provider,
            base_url,
            endpoint,
            headers,
            model: config.model,
            timeout: config.timeout,
        })
    }

    /// The endpoint's protocol.
    pub fn provider(&self) -> Provider {
        self.provider
    }

    /// The base URL as configured (trailing `/` removed).
    pub fn base_url(&self) -> &str {
        &self.base_url
    }

    /// The URL requests are POSTed to (`…/v1/chat/completions` or `…/v1/messages`).
    pub fn endpoint(&self) -> &str {
        self.endpoint.as_str()
    }

    /// The model override, if any.
    pub fn model(&self) -> Option<&str> {
        self.model.as_deref()
    }

    /// The configured timeout.
    pub fn timeout(&self) -> Duration {
        self.timeout
    }

    /// Runs `future` on the client's [`Executor`] (what the trait implementations do).
    pub(crate) async fn run<F>(&self, future: F) -> Result<F::Output, LlmError>
    where
        F: std::future::Future + Send + 'static,
        F::Output: Send + 'static,
    {
        self.runner.run(future).await
    }

    /// The request body for a conversation: written in its own format with `_pin` markers
    /// stripped; a bare message array becomes an OpenAI body `{"model", "messages"}`. The
    /// conversation is not translated between formats, so pick the provider that matches it
    /// ([`Provider::for_format`]).
    pub fn request_body(&self, conversation: &Conversation) -> Result<Value, LlmError> {
        let options = WriteOptions {
            strip_pins: true,
            pretty: false,
        };
        let value = to_value(conversation, options)
            .map_err(|e| LlmError::Local(format!("could not write the request: {e}")))?;
        Ok(match value {
            Value::Array(messages) => {
                let mut body = Map::new();
                body.insert(
                    "model".into(),
                    Value::String(self.model.clone().unwrap_or_default()),
                );
                body.insert("messages".into(), Value::Array(messages));
                Value::Object(body)
            }
            other => other,
        })
    }

    /// A non-streaming call (needs a Tokio runtime) with a request body (`stream` is turned off, the model override
    /// applied). Returns the response JSON and the prompt tokens its usage reports.
    pub async fn complete(&self, body: Value) -> Result<Completion<Value>, LlmError> {
        let body = self.prepare(body, false)?;
        let response = self
            .http
            .post(self.endpoint.clone())
            .headers(self.headers.clone())
            .timeout(self.timeout)
            .json(&body)
            .send()
            .await
            .map_err(|e| transport_error(&e))?;
        let response = error_for_status(response).await?;
        let bytes = response.bytes().await.map_err(|e| transport_error(&e))?;
        let output: Value = serde_json::from_slice(&bytes)
            .map_err(|e| LlmError::Transport(format!("the provider's answer is not JSON: {e}")))?;
        let prompt_tokens = usage_from_response(self.provider, &output);
        Ok(Completion {
            output,
            prompt_tokens,
        })
    }

    /// A streaming call (needs a Tokio runtime; `stream: true`; OpenAI bodies also ask for
    /// `stream_options.include_usage` unless they set `stream_options` themselves). An error
    /// status comes back as [`LlmError::Status`] before any event; the events then arrive as
    /// the server sends them.
    pub async fn stream(&self, body: Value) -> Result<SseStream, LlmError> {
        let body = self.prepare(body, true)?;
        let request = self
            .http
            .post(self.endpoint.clone())
            .headers(self.headers.clone())
            .header(reqwest::header::ACCEPT, "text/event-stream")
            .json(&body)
            .send();
        let response = match tokio::time::timeout(self.timeout, request).await {
            Ok(sent) => sent.map_err(|e| transport_error(&e))?,
            Err(_) => return Err(LlmError::Timeout),
        };
        let response = error_for_status(response).await?;
        Ok(SseStream::from_response(self.provider, response))
    }

    /// Applies the model override and the stream flag to a request body.
    fn prepare(&self, body: Value, stream: bool) -> Result<Value, LlmError> {
        let Value::Object(mut body) = body else {
            return Err(LlmError::Local(
                "the request body must be a JSON object".into(),
            ));
        };
        if let Some(model) = &self.model {
            body.insert("model".into(), Value::String(model.clone()));
        }
        if stream {
            body.insert("stream".into(), Value::Bool(true));
            if self.provider == Provider::OpenAi && !body.contains_key("stream_options") {
                let mut options = Map::new();
                options.insert("include_usage".into(), Value::Bool(true));
                body.insert("stream_options".into(), Value::Object(options));
            }
        } else {
            body.remove("stream");
            body.remove("stream_options");
        }
        if self.provider == Provider::Anthropic && !body.contains_key("max_tokens") {
            body.insert(
                "max_tokens".into(),
                Value::from(DEFAULT_ANTHROPIC_MAX_TOKENS),
            );
        }
        Ok(Value::Object(body))
    }
}

/// Runs on the client's [`Executor`].
impl Llm for ChatClient {
    type Output = Value;

    fn call<'a>(
        &'a self,
        conversation: &'a Conversation,
    ) -> BoxFuture<'a, Result<Completion<Value>, LlmError>> {
        Box::pin(async move {
            let body = self.request_body(conversation)?;
            let client = self.clone();
            self.runner
                .run(async move { client.complete(body).await })
                .await?
        })
    }
}

/// `{base}/v1/{route}`, not doubling a `/v1` the base already ends with.
fn endpoint_url(base: &str, provider: Provider) -> Result<reqwest::Url, ClientError> {
    let bad = |reason: String| ClientError::BaseUrl {
        url: base.to_owned(),
        reason,
    };
    let joined = if base.ends_with("/v1") {
        format!("{base}/{}", provider.route())
    } else {
        format!("{base}/v1/{}", provider.route())
    };
    let url = reqwest::Url::parse(&joined).map_err(|e| bad(e.to_string()))?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err(bad(format!(
            "scheme {:?} is not http or https",
            url.scheme()
        )));
    }
    if url.host_str().is_none_or(str::is_empty) {
        return Err(bad("no host".into()));
    }
    Ok(url)
}

fn auth_headers(provider: Provider, key: Option<&str>) -> Result<HeaderMap, ClientError> {
    let mut headers = HeaderMap::new();
    headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    let secret = |value: String| {
        let mut value = HeaderValue::from_str(&value).map_err(|_| ClientError::ApiKey)?;
        value.set_sensitive(true);
        Ok::<_, ClientError>(value)
    };
    match provider {
        Provider::OpenAi => {
            if let Some(key) = key {
                headers.insert(
                    reqwest::header::AUTHORIZATION,
                    secret(format!("Bearer {key}"))?,
                );
            }
        }
        Provider::Anthropic => {
            headers.insert(
                HeaderName::from_static("anthropic-version"),
                HeaderValue::from_static(ANTHROPIC_VERSION),
            );
            if let Some(key) = key {
                headers.insert(
                    HeaderName::from_static("x-api-key"),
                    secret(key.to_owned())?,
                );
            }
        }
    }
    Ok(headers)
}

/// A non-2xx answer as [`LlmError::Status`], headers and body kept as they came.
async fn error_for_status(response: reqwest::Response) -> Result<reqwest::Response, LlmError> {
    let status = response.status();
    if status.is_success() {
        return Ok(response);
    }
    let headers = header_pairs(response.headers());
    // A body that breaks off mid-read still leaves a usable status.
    let body = response.text().await.unwrap_or_default();
    Err(LlmError::Status {
        status: status.as_u16(),
        headers,
        body,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoints_do_not_double_v1() {
        let url = |base: &str, p| endpoint_url(base, p).map(|u| u.to_string());
        assert_eq!(
            url("http://127.0.0.1:8080", Provider::OpenAi).as_deref(),
            Ok("http://127.0.0.1:8080/v1/chat/completions")
        );
        assert_eq!(
            url("https://api.anthropic.com/v1", Provider::Anthropic).as_deref(),
            Ok("https://api.anthropic.com/v1/messages")
        );
        assert!(url("ftp://x", Provider::OpenAi).is_err());
        assert!(url("not a url", Provider::OpenAi).is_err());
    }

    #[test]
    fn config_debug_hides_the_key() {
        let config = ClientConfig::new(Provider::OpenAi, "http://h").api_key("sk-secret");
        assert!(!format!("{config:?}").contains("sk-secret"));
    }

    #[test]
    fn prepare_sets_model_stream_and_max_tokens() {
        let client = ChatClient::new(
            ClientConfig::new(Provider::Anthropic, "http://127.0.0.1:1/").model("m2"),
        )
        .expect("client");
        let body = serde_json::json!({"model": "m1", "stream": true, "messages": []});
        let plain = client.prepare(body.clone(), false).expect("body");
        assert_eq!(plain["model"], "m2");
        assert!(plain.get("stream").is_none());
        assert_eq!(plain["max_tokens"], DEFAULT_ANTHROPIC_MAX_TOKENS);
        let streamed = client.prepare(body, true).expect("body");
        assert_eq!(streamed["stream"], true);
        assert!(streamed.get("stream_options").is_none());
    }
}
