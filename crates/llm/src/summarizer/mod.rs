//! [`LlmSummarizer`]: strategy ④ backed by a model endpoint. The answer is checked before it
//! may enter a conversation (SPEC.md "Layer 3"): cut off by the length limit, empty, without
//! any of the nine headings, or larger than what it replaces is a failure. Transient errors
//! are retried with backoff; a run of failures opens a circuit breaker.

mod breaker;
pub mod prompt;

use std::sync::Arc;
use std::time::Duration;

use context_cascade::BoxFuture;
use context_cascade::LlmError;
use context_cascade::estimate::Estimator;
use context_cascade::summarizer::{
    Summarizer, SummaryError, SummaryRequest, section_heading, split_sections, validate,
};
use serde_json::{Value, json};

use crate::client::ChatClient;
use crate::provider::{Provider, is_truncated, response_text};
use breaker::Breaker;
use prompt::{TranscriptLimits, system_prompt, user_prompt};

/// Retries, breaker and transcript settings. `Default` is SPEC.md's: two retries after
/// 200 ms and 800 ms, breaker open after 3 consecutive failures for 5 minutes.
#[derive(Debug, Clone, PartialEq)]
pub struct SummarizerPolicy {
    /// The wait before each retry of a transient failure (connection error, timeout, 429,
    /// 5xx); its length is the number of retries.
    pub backoff: Vec<Duration>,
    /// Consecutive failed `summarize` calls (after their retries) that open the breaker.
    pub failure_threshold: u32,
    /// How long an open breaker answers `Unavailable` without calling the endpoint.
    pub cooldown: Duration,
    /// How much of the history the prompt shows.
    pub limits: TranscriptLimits,
}

impl Default for SummarizerPolicy {
    fn default() -> Self {
        SummarizerPolicy {
            backoff: vec![Duration::from_millis(200), Duration::from_millis(800)],
            failure_threshold: 3,
            cooldown: Duration::from_secs(300),
            limits: TranscriptLimits::default(),
        }
    }
}

/// A [`Summarizer`] that asks a model for the nine-section summary. Safe to call
/// concurrently (chunk summaries); the breaker is shared by all calls and clones. Runs on its
/// client's [`crate::Executor`].
#[derive(Debug, Clone)]
pub struct LlmSummarizer {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    client: ChatClient,
    policy: SummarizerPolicy,
    breaker: Breaker,
    estimator: Estimator,
}

impl LlmSummarizer {
    /// A summarizer on this client with the default policy.
    pub fn new(client: ChatClient) -> Self {
        LlmSummarizer::with_policy(client, SummarizerPolicy::default())
    }

    /// A summarizer with its own retry and breaker settings.
    pub fn with_policy(client: ChatClient, policy: SummarizerPolicy) -> Self {
        let breaker = Breaker::new(policy.failure_threshold, policy.cooldown);
        LlmSummarizer {
            inner: Arc::new(Inner {
                client,
                policy,
                breaker,
                estimator: Estimator::default(),
            }),
        }
    }

    /// The endpoint it calls.
    pub fn client(&self) -> &ChatClient {
        &self.inner.client
    }

    /// Its retry and breaker settings.
    pub fn policy(&self) -> &SummarizerPolicy {
        &self.inner.policy
    }

    /// The request body for a summary request (system prompt, transcript, `max_tokens`).
    pub fn request_body(&self, request: &SummaryRequest) -> Value {
        self.inner.request_body(request)
    }
}

impl Inner {
    fn request_body(&self, request: &SummaryRequest) -> Value {
        let model = self.client.model().unwrap_or_default();
        let system = system_prompt();
        let user = user_prompt(request, &self.policy.limits);
        let max_tokens = request.max_tokens().max(1);
        // Temperature 0: the same request gives (as far as the provider allows) the same
        // summary, so that one prepared ahead in the background and the one a synchronous
        // run would write agree, and a cached summary stands for a fresh one.
        match self.client.provider() {
            Provider::OpenAi => json!({
                "model": model,
                "messages": [
                    {"role": "system", "content": system},
                    {"role": "user", "content": user},
                ],
                "max_tokens": max_tokens,
                "temperature": 0,
            }),
            Provider::Anthropic => json!({
                "model": model,
                "max_tokens": max_tokens,
                "temperature": 0,
                "system": system,
                "messages": [{"role": "user", "content": user}],
            }),
        }
    }

    /// The whole `summarize`: input check, breaker, call, checks, breaker update.
    async fn summarize(&self, request: &SummaryRequest) -> Result<String, SummaryError> {
        let replaced = self.replaced_tokens(request);
        if replaced == 0 {
            // Bad input, not an endpoint failure: no call, no effect on the breaker.
            return Err(SummaryError::Failed("nothing to summarize".into()));
        }
        if let Some(remaining) = self.breaker.open_for() {
            return Err(SummaryError::Unavailable(format!(
                "{} consecutive failures; skipped for another {}s",
                self.policy.failure_threshold,
                remaining.as_secs() + 1
            )));
        }
        let outcome = self.summarize_once(request, replaced).await;
        match &outcome {
            Ok(_) => self.breaker.succeeded(),
            Err(error) => {
                if self.breaker.failed() {
                    tracing::warn!(%error, cooldown_s = self.policy.cooldown.as_secs(), "summarizer failing; circuit breaker open");
                } else {
                    tracing::debug!(%error, "summary failed");
                }
            }
        }
        outcome
    }
    /// The estimated size of what the summary replaces.
    fn replaced_tokens(&self, request: &SummaryRequest) -> u64 {
        let messages: u64 = request
            .messages()
            .iter()
            .map(|m| self.estimator.message_tokens(m))
            .sum();
        let previous = request
            .previous_summary()
            .map_or(0, |s| self.estimator.text_tokens(s));
        let partials: u64 = request
            .partials()
            .iter()
            .map(|p| self.estimator.text_tokens(p))
            .sum();
        messages + previous + partials
    }

    /// One summary: the call (with retries), then the checks.
    async fn summarize_once(
        &self,
        request: &SummaryRequest,
        replaced: u64,
    ) -> Result<String, SummaryError> {
        let body = self.request_body(request);
        let answer = self.call_with_retries(body).await.map_err(summary_error)?;
        let provider = self.client.provider();
        if is_truncated(provider, &answer) {
            return Err(SummaryError::Truncated);
        }
        let text = response_text(provider, &answer)
            .ok_or_else(|| SummaryError::Failed("the answer carries no text".into()))?;
        let text = clean_answer(&text);
        if text.is_empty() {
            return Err(SummaryError::Empty);
        }
        let summary = canonical_sections(text).ok_or_else(|| {
            SummaryError::Failed("the answer has none of the nine section headings".into())
        })?;
        validate(&summary, self.estimator.text_tokens(&summary), replaced)?;
        Ok(summary)
    }

    async fn call_with_retries(&self, body: Value) -> Result<Value, LlmError> {
        let mut retries = self.policy.backoff.iter();
        loop {
            match self.client.complete(body.clone()).await {
                Ok(completion) => return Ok(completion.output),
                Err(error) if is_transient(&error) => match retries.next() {
                    Some(wait) => {
                        tracing::debug!(%error, wait_ms = wait.as_millis() as u64, "summarizer call failed; retrying");
                        tokio::time::sleep(*wait).await;
                    }
                    None => return Err(error),
                },
                Err(error) => return Err(error),
            }
        }
    }
}

impl Summarizer for LlmSummarizer {
    fn id(&self) -> String {
        let client = &self.inner.client;
        format!(
            "llm/{}/{}/{}",
            client.provider(),
            client.base_url(),
            client.model().unwrap_or("default")
        )
    }

    fn summarize<'a>(
        &'a self,
        request: &'a SummaryRequest,
    ) -> BoxFuture<'a, Result<String, SummaryError>> {
        Box::pin(async move {
            let inner = self.inner.clone();
            let request = request.clone();
            self.inner
                .client
                .run(async move { inner.summarize(&request).await })
                .await
                .unwrap_or_else(|e| Err(SummaryError::Failed(e.to_string())))
        })
    }
}

/// Connection errors, timeouts, rate limits and server errors may pass; a 4xx will not.
fn is_transient(error: &LlmError) -> bool {
    match error {
        LlmError::Transport(_) | LlmError::Timeout => true,
        // Our own failure: the same request would fail the same way.
        LlmError::Local(_) => false,
        LlmError::Status { status, .. } => *status == 429 || *status >= 500,
    }
}

fn summary_error(error: LlmError) -> SummaryError {
    match error {
        LlmError::Timeout => SummaryError::Timeout,
        other => SummaryError::Failed(other.to_string()),
    }
}

/// Drops a reasoning block (`<think>…</think>`, as local reasoning models write it) and a
/// `[context summary]` first line the model may have copied; trims.
fn clean_answer(text: &str) -> &str {
    let text = text
        .rfind("</think>")
        .map_or(text, |end| &text[end + "</think>".len()..]);
    let text = text.trim();
    text.strip_prefix(context_cascade::SUMMARY_PREFIX)
        .map_or(text, str::trim)
}

/// A heading line is one that `split_sections` files under no section.
fn is_heading(line: &str) -> bool {
    !line.trim().is_empty() && split_sections(line).iter().all(Vec::is_empty)
}

/// The summary rewritten with the exact headings, in order, from its first heading on (a
/// preamble is dropped); a section the model left out reads `- none`. `None` when no heading
/// is recognised at all: then it is not a nine-section summary.
fn canonical_sections(text: &str) -> Option<String> {
    let start = text.lines().position(is_heading)?;
    let body: Vec<&str> = text.lines().skip(start).collect();
    let sections = split_sections(&body.join("\n"));
    let mut out = String::new();
    for (index, lines) in sections.iter().enumerate() {
        if index > 0 {
            out.push_str("\n\n");
        }
        out.push_str(&section_heading(index));
        if lines.is_empty() {
            out.push_str("\n- none");
        }
        for line in lines {
            out.push('\n');
            out.push_str(line);
        }
    }
    Some(out)
}

/// The environment variable that holds the API key of a summarizer endpoint (the CLI's
/// `--summarizer URL` and the proxy's `summarizer = "URL"`).
pub const SUMMARIZER_KEY_ENV: &str = "CASCADE_SUMMARIZER_API_KEY";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn canonical_form_drops_preamble_and_fills_missing_sections() {
        let text = "Here is the summary:\n**User intent and goals:**\n- fix it\n\n### 9. Next steps\n- run tests";
        let summary = canonical_sections(text).expect("headings");
        assert!(summary.starts_with("## 1. User intent and goals\n- fix it\n\n## 2."));
        assert!(summary.contains("## 3. Files and paths\n- none"));
        assert!(summary.ends_with("## 9. Next steps\n- run tests"));
        assert!(!summary.contains("Here is"));
        assert_eq!(canonical_sections("just prose\nmore prose"), None);
    }

    #[test]
    fn answers_are_cleaned() {
        assert_eq!(clean_answer("<think>hmm</think>\n\n## x"), "## x");
        assert_eq!(clean_answer("[context summary]\n## x "), "## x");
    }

    #[test]
    fn only_transient_errors_are_retried() {
        assert!(is_transient(&LlmError::Timeout));
        assert!(is_transient(&LlmError::status(503, "")));
        assert!(is_transient(&LlmError::status(429, "")));
        assert!(!is_transient(&LlmError::status(400, "")));
    }
}
