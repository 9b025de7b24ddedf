//! `--summarizer offline|URL` and its protocol: the one parser the `cascade` commands and
//! the proxy's configuration share, so that one URL means one protocol everywhere.

use crate::client::{ChatClient, ClientConfig};
use crate::error::ClientError;
use crate::executor::Executor;
use crate::provider::Provider;
use crate::summarizer::{LlmSummarizer, SUMMARIZER_KEY_ENV};

/// Who writes the summaries of strategy ④, as a user names it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SummarizerSpec {
    /// The core's deterministic extractive summarizer (no network).
    Offline,
    /// An LLM behind an OpenAI- or Anthropic-compatible endpoint; its key comes from
    /// [`crate::SUMMARIZER_KEY_ENV`].
    Endpoint(EndpointSpec),
}

/// A summarizer endpoint: where, which protocol, which model.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EndpointSpec {
    /// The base URL, as given.
    pub url: String,
    /// The protocol: as given, else [`Provider::guess_from_url`].
    pub provider: Provider,
    /// The model to ask for, if the endpoint needs one.
    pub model: Option<String>,
}

impl SummarizerSpec {
    /// Reads `offline` (any case; empty means the same) or a base URL. `api` is the
    /// protocol the user named (`--summarizer-api`, `summarizer.protocol` in the proxy file); without one the
    /// URL's host decides ([`Provider::guess_from_url`]).
    pub fn parse(text: &str, api: Option<Provider>, model: Option<String>) -> SummarizerSpec {
        let text = text.trim();
        if text.is_empty() || text.eq_ignore_ascii_case("offline") {
            return SummarizerSpec::Offline;
        }
        SummarizerSpec::Endpoint(EndpointSpec {
            url: text.to_owned(),
            provider: api.unwrap_or_else(|| Provider::guess_from_url(text)),
            model,
        })
    }

    /// The LLM summarizer this names (`None` for [`SummarizerSpec::Offline`]), its key read
    /// from [`crate::SUMMARIZER_KEY_ENV`], its calls run on `executor`. Fails on a URL that
    /// is not http(s).
    pub fn llm_summarizer(&self, executor: Executor) -> Result<Option<LlmSummarizer>, ClientError> {
        match self {
            SummarizerSpec::Offline => Ok(None),
            SummarizerSpec::Endpoint(endpoint) => endpoint.llm_summarizer(executor).map(Some),
        }
    }
}

impl EndpointSpec {
    /// The summarizer on this endpoint: asked for its model when given, with the key from
    /// [`SUMMARIZER_KEY_ENV`] when set, its calls run on `executor`.
    pub fn llm_summarizer(&self, executor: Executor) -> Result<LlmSummarizer, ClientError> {
        let mut config = ClientConfig::new(self.provider, &self.url).executor(executor);
        if let Some(model) = &self.model {
            config = config.model(model);
        }
        if let Ok(key) = std::env::var(SUMMARIZER_KEY_ENV) {
            config = config.api_key(key);
        }
        Ok(LlmSummarizer::new(ChatClient::new(config)?))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offline_and_urls_parse_with_one_protocol_rule() {
        assert_eq!(
            SummarizerSpec::parse(" Offline ", None, None),
            SummarizerSpec::Offline
        );
        assert_eq!(
            SummarizerSpec::parse("", None, None),
            SummarizerSpec::Offline
        );
        let endpoint = |text, api| match SummarizerSpec::parse(text, api, Some("m".into())) {
            SummarizerSpec::Endpoint(e) => Some((e.provider, e.model)),
            SummarizerSpec::Offline => None,
        };
        let anthropic = Some((Provider::Anthropic, Some("m".to_owned())));
        assert_eq!(endpoint("https://api.anthropic.com", None), anthropic);
        assert_eq!(
            endpoint("http://127.0.0.1:9", Some(Provider::Anthropic)),
            anthropic
        );
        assert_eq!(
            endpoint("https://api.anthropic.com", Some(Provider::OpenAi)),
            Some((Provider::OpenAi, Some("m".to_owned())))
        );
    }
}
