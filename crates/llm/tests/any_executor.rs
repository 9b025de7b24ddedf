//! The `Llm` and `Summarizer` impls driven by a plain `block_on` (as the CLI does), with no
//! Tokio runtime on the calling thread.

#![allow(clippy::unwrap_used, clippy::expect_used, unreachable_pub)] // test code: a failure is a test failure

mod common;

use std::time::Duration;

use cascade_llm::{ChatClient, ClientConfig, Executor, LlmSummarizer, Provider};
use context_cascade::summarizer::{Summarizer, SummaryRequest, section_heading};
use context_cascade::{Conversation, Format, Message, Role};
use context_cascade::{Llm, LlmError};
use serde_json::json;

/// A bare conversation of one user message.
fn hello() -> Conversation {
    let mut conversation = Conversation::new(Format::Bare);
    conversation
        .messages
        .push(Message::text(Role::User, "hello"));
    conversation
}

/// A chat completion answering "hi" that counted `prompt_tokens`.
fn hi(prompt_tokens: u64) -> axum::response::Response {
    common::json(
        200,
        json!({"choices": [{"message": {"content": "hi"}}], "usage": {"prompt_tokens": prompt_tokens}}),
    )
}

#[test]
fn calls_work_without_a_tokio_runtime() {
    // The scripted upstream runs on its own runtime's worker threads; this thread never
    // enters it.
    let server_runtime = tokio::runtime::Runtime::new().expect("runtime");
    let upstream = server_runtime.block_on(common::start(|_, request| {
        if request.body["messages"][0]["role"] == "system" {
            let summary = (0..9)
                .map(|i| format!("{}\n- item {i}", section_heading(i)))
                .collect::<Vec<_>>()
                .join("\n");
            common::json(
                200,
                json!({"choices": [{"message": {"content": summary}, "finish_reason": "stop"}]}),
            )
        } else {
            hi(7)
        }
    }));
    assert!(tokio::runtime::Handle::try_current().is_err());

    let client = ChatClient::new(
        ClientConfig::new(Provider::OpenAi, &upstream.base)
            .timeout(Duration::from_secs(10))
            .executor(Executor::Dedicated),
    )
    .expect("client");
    let conversation = hello();
    let completion = futures::executor::block_on(client.call(&conversation)).expect("call");
    assert_eq!(completion.prompt_tokens, Some(7));

    let summarizer = LlmSummarizer::new(client);
    let request = SummaryRequest::summarize(
        vec![Message::text(
            Role::User,
            "a long enough message to summarize ".repeat(40),
        )],
        500,
    );
    // Two at once, as the engine's concurrent chunk calls are.
    let (a, b) = futures::executor::block_on(futures::future::join(
        summarizer.summarize(&request),
        summarizer.summarize(&request),
    ));
    assert!(a.expect("summary").contains("- item 8"));
    assert!(b.is_ok());
    assert_eq!(upstream.hits(), 3);

    // The default executor is the current runtime: without one, the call says so instead
    // of starting a runtime behind the caller's back.
    let current =
        ChatClient::new(ClientConfig::new(Provider::OpenAi, &upstream.base)).expect("client");
    let error = futures::executor::block_on(current.call(&conversation)).unwrap_err();
    assert!(
        matches!(error, LlmError::Local(ref m) if m.contains("no Tokio runtime")),
        "{error:?}"
    );
    assert_eq!(upstream.hits(), 3);
}

#[test]
fn a_runtime_given_by_handle_carries_the_calls() {
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    let upstream = runtime.block_on(common::start(|_, _| hi(3)));
    let client = ChatClient::new(
        ClientConfig::new(Provider::OpenAi, &upstream.base)
            .executor(Executor::Handle(runtime.handle().clone())),
    )
    .expect("client");
    let conversation = hello();
    let completion = futures::executor::block_on(client.call(&conversation)).expect("call");
    assert_eq!(completion.prompt_tokens, Some(3));
}
