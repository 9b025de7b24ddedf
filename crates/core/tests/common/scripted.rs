//! Scripted doubles for the engine tests: an `Llm` and a `Summarizer` that answer from a
//! script (a closure of the call index and the request) and record every request they get,
//! plus the real provider error bodies the scripts answer with.

use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::task::Poll;

use context_cascade::BoxFuture;
use context_cascade::Conversation;
use context_cascade::SUMMARY_SECTIONS;
use context_cascade::estimate::{ClassCounts, Weights};
use context_cascade::summarizer::{Summarizer, SummaryError, SummaryRequest};
use context_cascade::{Completion, Llm, LlmError};

/// What both doubles do: answer `script(call_index, input)` (0-based) and keep a copy of
/// every input, in order.
struct Recording<I, F> {
    script: F,
    inputs: Mutex<Vec<I>>,
}

impl<I: Clone, F> Recording<I, F> {
    fn new(script: F) -> Self {
        Recording {
            script,
            inputs: Mutex::new(Vec::new()),
        }
    }

    fn answer<A>(&self, input: &I) -> A
    where
        F: Fn(usize, &I) -> A,
    {
        let index = {
            let mut inputs = self.inputs.lock().unwrap();
            inputs.push(input.clone());
            inputs.len() - 1
        };
        (self.script)(index, input)
    }

    fn inputs(&self) -> Vec<I> {
        self.inputs.lock().unwrap().clone()
    }
}

/// The answer of one scripted LLM call.
pub type LlmAnswer = Result<Completion<String>, LlmError>;

/// An `Llm` whose answers come from `script(call_index, conversation)` (0-based), and that
/// keeps a copy of every conversation it was sent.
pub struct ScriptedLlm<F> {
    recording: Recording<Conversation, F>,
}

impl<F> ScriptedLlm<F>
where
    F: Fn(usize, &Conversation) -> LlmAnswer + Send + Sync,
{
    pub fn new(script: F) -> Self {
        ScriptedLlm {
            recording: Recording::new(script),
        }
    }

    /// Every conversation sent so far, in order.
    pub fn received(&self) -> Vec<Conversation> {
        self.recording.inputs()
    }

    /// How many calls were made.
    pub fn calls(&self) -> usize {
        self.recording.inputs.lock().unwrap().len()
    }
}

impl<F> Llm for ScriptedLlm<F>
where
    F: Fn(usize, &Conversation) -> LlmAnswer + Send + Sync,
{
    type Output = String;

    fn call<'a>(&'a self, conversation: &'a Conversation) -> BoxFuture<'a, LlmAnswer> {
        Box::pin(std::future::ready(self.recording.answer(conversation)))
    }
}

/// A successful completion reporting `prompt_tokens`.
pub fn ok(prompt_tokens: Option<u64>) -> LlmAnswer {
    Ok(Completion {
        output: "done".to_owned(),
        prompt_tokens,
    })
}

/// The uncalibrated prior of a request, as the upstream doubles count it (the same number
/// as `ContextManager::prior`).
pub fn prior_of(conversation: &Conversation) -> f64 {
    Weights::default().prior(&ClassCounts::of_conversation(conversation))
}

/// An upstream tokenizer that counts `scale` times the prior.
pub fn count_of(conversation: &Conversation, scale: f64) -> u64 {
    (prior_of(conversation) * scale).ceil() as u64
}

/// Real overflow bodies, with and without the token counts quoted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Provider {
    OpenAi,
    Anthropic,
    LlamaCpp,
}

pub const PROVIDERS: [Provider; 3] = [Provider::OpenAi, Provider::Anthropic, Provider::LlamaCpp];

/// The provider's overflow answer quoting `observed` prompt tokens and its `limit`.
pub fn overflow_with_counts(provider: Provider, observed: u64, limit: u64) -> LlmError {
    match provider {
        Provider::OpenAi => LlmError::status(
            400,
            format!(
                r#"{{"error":{{"message":"This model's maximum context length is {limit} tokens. However, your messages resulted in {observed} tokens.","type":"invalid_request_error","code":"context_length_exceeded"}}}}"#
            ),
        ),
        Provider::Anthropic => LlmError::status(
            400,
            format!(
                r#"{{"type":"error","error":{{"type":"invalid_request_error","message":"prompt is too long: {observed} tokens > {limit} maximum"}}}}"#
            ),
        ),
        Provider::LlamaCpp => LlmError::status(
            400,
            format!(
                r#"{{"error":{{"code":400,"message":"the request exceeds the available context size. try increasing the context size or enable context shift","type":"exceed_context_size_error","n_prompt_tokens":{observed},"n_ctx":{limit}}}}}"#
            ),
        ),
    }
}

/// The provider's overflow answer without any number in it.
pub fn overflow_without_counts(provider: Provider) -> LlmError {
    match provider {
        Provider::OpenAi => LlmError::status(
            400,
            r#"{"error":{"message":"Your input exceeds the context window of this model. Please adjust your input and try again.","type":"invalid_request_error","param":"input","code":"context_length_exceeded"}}"#,
        ),
        Provider::Anthropic => LlmError::status(
            413,
            r#"{"type":"error","error":{"type":"request_too_large","message":"Request exceeds the maximum size"}}"#,
        ),
        Provider::LlamaCpp => LlmError::status(
            400,
            "400 the request exceeds the available context size, try increasing it",
        ),
    }
}

/// The answer of one scripted summarizer call.
pub type SummaryAnswer = Result<String, SummaryError>;

/// A `Summarizer` whose answers come from `script(call_index, request)` (0-based, in the
/// order the engine asks: chunks in order, then the merge), and that keeps every request.
pub struct ScriptedSummarizer<F> {
    recording: Recording<SummaryRequest, F>,
}

impl<F> ScriptedSummarizer<F>
where
    F: Fn(usize, &SummaryRequest) -> SummaryAnswer + Send + Sync,
{
    pub fn new(script: F) -> Self {
        ScriptedSummarizer {
            recording: Recording::new(script),
        }
    }

    /// Every request received so far, in order.
    pub fn requests(&self) -> Vec<SummaryRequest> {
        self.recording.inputs()
    }
}

impl<F> Summarizer for ScriptedSummarizer<F>
where
    F: Fn(usize, &SummaryRequest) -> SummaryAnswer + Send + Sync,
{
    fn id(&self) -> String {
        "scripted".to_owned()
    }

    fn summarize<'a>(&'a self, request: &'a SummaryRequest) -> BoxFuture<'a, SummaryAnswer> {
        Box::pin(std::future::ready(self.recording.answer(request)))
    }
}

/// A short summary in the nine sections, tagged so that a test can find it again.
pub fn nine_sections(tag: &str) -> String {
    SUMMARY_SECTIONS
        .iter()
        .enumerate()
        .map(|(i, title)| format!("## {}. {title}\n- {tag}", i + 1))
        .collect::<Vec<_>>()
        .join("\n")
}

/// An upstream with its own tokenizer (`scale` × the prior) that refuses anything over
/// `limit`, quoting its count, and otherwise answers, with its count as usage when `usage`.
pub fn enforcing_upstream(
    provider: Provider,
    scale: f64,
    limit: u64,
    usage: bool,
) -> ScriptedLlm<impl Fn(usize, &Conversation) -> LlmAnswer + Send + Sync> {
    ScriptedLlm::new(move |_, sent: &Conversation| {
        let count = count_of(sent, scale);
        if count > limit {
            Err(overflow_with_counts(provider, count, limit))
        } else {
            ok(usage.then_some(count))
        }
    })
}

/// An upstream that refuses the first `k` calls whatever they hold, quoting its count
/// (`scale` × the prior) and `limit` when `quoted`, then answers with its count as usage.
pub fn overflowing_upstream(
    k: usize,
    provider: Provider,
    quoted: bool,
    scale: f64,
    limit: u64,
) -> ScriptedLlm<impl Fn(usize, &Conversation) -> LlmAnswer + Send + Sync> {
    ScriptedLlm::new(move |i, sent: &Conversation| {
        let count = count_of(sent, scale);
        if i >= k {
            ok(Some(count))
        } else if quoted {
            Err(overflow_with_counts(provider, count, limit))
        } else {
            Err(overflow_without_counts(provider))
        }
    })
}

/// How a scripted summary call goes wrong.
#[derive(Debug, Clone, Copy)]
pub enum Fault {
    Failed,
    Timeout,
    Empty,
    Oversized,
    Truncated,
}

pub const FAULTS: [Fault; 5] = [
    Fault::Failed,
    Fault::Timeout,
    Fault::Empty,
    Fault::Oversized,
    Fault::Truncated,
];

pub fn faulty(fault: Fault, request: &SummaryRequest) -> SummaryAnswer {
    match fault {
        Fault::Failed => Err(SummaryError::Failed(
            "HTTP 500 from the summary model".into(),
        )),
        Fault::Timeout => Err(SummaryError::Timeout),
        Fault::Empty => Ok(" \n ".into()),
        // Everything it was given, twice over: larger than what it would replace.
        Fault::Oversized => Ok(format!("OVERSIZED {}", all_text(request).repeat(2))),
        Fault::Truncated => Err(SummaryError::Truncated),
    }
}

/// Every text a summary request holds: its messages, partials and previous summary.
pub fn all_text(request: &SummaryRequest) -> String {
    let mut out: Vec<String> = (request.messages().iter())
        .map(|m| m.text_content())
        .collect();
    out.extend(request.partials().iter().cloned());
    out.extend(request.previous_summary().map(str::to_owned));
    out.join("\n")
}

/// A summarizer whose first chunk cannot finish before a second chunk was asked for: it
/// proves the chunks are summarized concurrently. Awaited one by one, the first chunk gives
/// up after a bounded number of polls (a failure, not a hang).
pub struct Rendezvous {
    pub started: AtomicUsize,
}

impl Summarizer for Rendezvous {
    fn id(&self) -> String {
        "rendezvous".to_owned()
    }

    fn summarize<'a>(&'a self, request: &'a SummaryRequest) -> BoxFuture<'a, SummaryAnswer> {
        let index = self.started.fetch_add(1, Ordering::SeqCst);
        let merge = request.is_merge();
        let mut polls = 0;
        Box::pin(std::future::poll_fn(move |cx| {
            if merge {
                return Poll::Ready(Ok(nine_sections("MERGED")));
            }
            if index > 0 || self.started.load(Ordering::SeqCst) >= 2 {
                return Poll::Ready(Ok(nine_sections(&format!("CHUNK{}", index + 1))));
            }
            polls += 1;
            if polls > 1_000 {
                return Poll::Ready(Err(SummaryError::Failed("chunks run one by one".into())));
            }
            cx.waker().wake_by_ref();
            Poll::Pending
        }))
    }
}
