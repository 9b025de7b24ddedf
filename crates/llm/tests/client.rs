//! ChatClient against a scripted upstream on loopback, both protocols.

#![allow(clippy::unwrap_used, clippy::expect_used, unreachable_pub)] // test code: a failure is a test failure

mod common;

use std::time::Duration;

use cascade_llm::{ChatClient, ClientConfig, Provider, SseEvent};
use context_cascade::{Conversation, Format, Message, Role};
use context_cascade::{Llm, LlmError};
use futures::StreamExt;
use serde_json::json;

fn client(provider: Provider, base: &str) -> ChatClient {
    ChatClient::new(
        ClientConfig::new(provider, base)
            .api_key("sk-test")
            .model("test-model")
            .timeout(Duration::from_secs(10)),
    )
    .expect("client")
}

fn conversation(format: Format) -> Conversation {
    let mut conversation = Conversation::new(format);
    conversation
        .envelope
        .insert("model".into(), json!("client-model"));
    conversation.envelope.insert("messages".into(), json!(null));
    if format == Format::Anthropic {
        conversation.envelope.insert("max_tokens".into(), json!(64));
    }
    let mut pinned = Message::text(Role::User, "remember: deploy target is eu-west-1");
    pinned.fields_mut().insert("_pin".into(), json!(true));
    pinned.pin();
    conversation.messages.push(pinned);
    conversation
        .messages
        .push(Message::text(Role::User, "hello"));
    conversation
}

#[tokio::test]
async fn openai_call_sends_the_conversation_and_reads_usage() {
    let upstream = common::start(|_, _| {
        common::json(
            200,
            json!({"choices": [{"message": {"role": "assistant", "content": "hi"},
                "finish_reason": "stop"}], "usage": {"prompt_tokens": 1234, "completion_tokens": 2}}),
        )
    })
    .await;
    let client = client(Provider::OpenAi, &upstream.base);
    let completion = client
        .call(&conversation(Format::OpenAi))
        .await
        .expect("call");
    assert_eq!(completion.prompt_tokens, Some(1234));
    assert_eq!(completion.output["choices"][0]["message"]["content"], "hi");

    let request = &upstream.requests()[0];
    assert_eq!(request.path, "/v1/chat/completions");
    assert_eq!(request.headers["authorization"], "Bearer sk-test");
    assert_eq!(request.body["model"], "test-model");
    assert_eq!(request.body["messages"][1]["content"], "hello");
    assert!(
        !request.body.to_string().contains("_pin"),
        "pins are stripped"
    );
    assert!(request.body.get("stream").is_none());
}

#[tokio::test]
async fn anthropic_call_uses_its_headers_and_sums_cache_tokens() {
    let upstream = common::start(|_, _| {
        common::json(
            200,
            json!({"type": "message", "content": [{"type": "text", "text": "hi"}],
                "stop_reason": "end_turn",
                "usage": {"input_tokens": 100, "cache_read_input_tokens": 2000,
                    "cache_creation_input_tokens": 300, "output_tokens": 5}}),
        )
    })
    .await;
    // A base that already ends in /v1 is not doubled.
    let client = client(Provider::Anthropic, &format!("{}/v1/", upstream.base));
    let completion = client
        .call(&conversation(Format::Anthropic))
        .await
        .expect("call");
    assert_eq!(completion.prompt_tokens, Some(2400));

    let request = &upstream.requests()[0];
    assert_eq!(request.path, "/v1/messages");
    assert_eq!(request.headers["x-api-key"], "sk-test");
    assert_eq!(request.headers["anthropic-version"], "2023-06-01");
    assert!(request.headers.get("authorization").is_none());
    assert_eq!(request.body["max_tokens"], 64);
    assert_eq!(request.body["messages"][1]["content"], "hello");
}

#[tokio::test]
async fn a_bare_message_array_is_sent_as_an_openai_body() {
    let upstream = common::start(|_, _| common::json(200, json!({"choices": []}))).await;
    let client = client(Provider::OpenAi, &upstream.base);
    let mut bare = Conversation::new(Format::Bare);
    bare.messages.push(Message::text(Role::User, "hi"));
    let completion = client.call(&bare).await.expect("call");
    assert_eq!(completion.prompt_tokens, None);
    let body = &upstream.requests()[0].body;
    assert_eq!(body["model"], "test-model");
    assert_eq!(body["messages"][0]["content"], "hi");
}

fn data_events(events: &[SseEvent]) -> Vec<String> {
    events.iter().map(|e| e.data.clone()).collect()
}

#[tokio::test]
async fn openai_stream_delivers_events_and_the_final_usage() {
    let upstream = common::start(|_, _| {
        common::sse(vec![
            "data: {\"choices\":[{\"delta\":{\"content\":\"Hel\"}}],\"usage\":null}\n\n".into(),
            // An event split across two chunks.
            "data: {\"choices\":[{\"delta\":".into(),
            "{\"content\":\"lo\"}}],\"usage\":null}\n\n".into(),
            "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":321,\"completion_tokens\":2}}\n\n"
                .into(),
            "data: [DONE]\n\n".into(),
        ])
    })
    .await;
    let client = client(Provider::OpenAi, &upstream.base);
    let mut stream = client
        .stream(json!({"messages": [{"role": "user", "content": "hi"}]}))
        .await
        .expect("stream");
    let usage = stream.usage();
    assert_eq!(stream.status(), 200);
    let mut events = Vec::new();
    while let Some(event) = stream.next().await {
        events.push(event.expect("event"));
    }
    let data = data_events(&events);
    assert_eq!(data.len(), 4);
    assert!(data[1].contains("\"lo\""));
    assert_eq!(data[3], "[DONE]");
    assert_eq!(usage.get(), Some(321));

    let body = &upstream.requests()[0].body;
    assert_eq!(body["stream"], true);
    assert_eq!(body["stream_options"]["include_usage"], true);
}

#[tokio::test]
async fn anthropic_stream_delivers_named_events_and_usage() {
    let upstream = common::start(|_, _| {
        common::sse(vec![
            "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"usage\":{\"input_tokens\":40,\"cache_read_input_tokens\":1000,\"output_tokens\":1}}}\n\n".into(),
            "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"delta\":{\"type\":\"text_delta\",\"text\":\"hi\"}}\n\n".into(),
            "event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\"},\"usage\":{\"output_tokens\":7}}\n\n".into(),
            "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n".into(),
        ])
    })
    .await;
    let client = client(Provider::Anthropic, &upstream.base);
    let stream = client
        .stream(json!({"max_tokens": 10, "messages": [{"role": "user", "content": "hi"}]}))
        .await
        .expect("stream");
    let usage = stream.usage();
    let events: Vec<SseEvent> = stream.map(|e| e.expect("event")).collect().await;
    let names: Vec<&str> = events.iter().map(|e| e.event.as_str()).collect();
    assert_eq!(
        names,
        [
            "message_start",
            "content_block_delta",
            "message_delta",
            "message_stop"
        ]
    );
    // message_delta carried only output tokens: the input count from message_start stays.
    assert_eq!(usage.get(), Some(1040));
    assert!(upstream.requests()[0].body.get("stream_options").is_none());
}

#[tokio::test]
async fn an_overflow_answer_comes_back_as_a_status_error_the_engine_recognises() {
    let upstream = common::start(|_, _| common::json(400, common::openai_overflow())).await;
    for provider in [Provider::OpenAi, Provider::Anthropic] {
        let client = client(provider, &upstream.base);
        let error = client
            .complete(json!({"messages": []}))
            .await
            .expect_err("overflow");
        let LlmError::Status {
            status,
            headers,
            body,
        } = &error
        else {
            panic!("expected a status error, got {error:?}");
        };
        assert_eq!(*status, 400);
        assert!(body.contains("context_length_exceeded"));
        assert!(
            headers
                .iter()
                .any(|(k, v)| k == "x-request-id" && v == "req-1")
        );
        let overflow = error.overflow().expect("recognised as an overflow");
        assert_eq!(overflow.limit_tokens, Some(8192));
        assert_eq!(overflow.observed_tokens, Some(9000));
    }
    // The streaming call reports it before any event.
    let client = client(Provider::OpenAi, &upstream.base);
    let error = client
        .stream(json!({"messages": []}))
        .await
        .expect_err("overflow");
    assert!(error.overflow().is_some());
}

#[tokio::test]
async fn a_rate_limit_is_a_status_error_but_not_an_overflow() {
    let upstream = common::start(|_, _| {
        common::json(
            429,
            json!({"error": {"message": "Rate limit reached: tokens per minute", "type": "rate_limit"}}),
        )
    })
    .await;
    let error = client(Provider::OpenAi, &upstream.base)
        .complete(json!({"messages": []}))
        .await
        .expect_err("429");
    assert!(matches!(error, LlmError::Status { status: 429, .. }));
    assert!(error.overflow().is_none());
}

#[tokio::test]
async fn connection_refused_is_a_transport_error() {
    let base = common::refused_base().await;
    for provider in [Provider::OpenAi, Provider::Anthropic] {
        let client = client(provider, &base);
        let error = client
            .call(&conversation(Format::OpenAi))
            .await
            .expect_err("refused");
        assert!(matches!(error, LlmError::Transport(_)), "{error:?}");
        let error = client
            .stream(json!({"messages": []}))
            .await
            .expect_err("refused");
        assert!(matches!(error, LlmError::Transport(_)), "{error:?}");
    }
}

#[tokio::test]
async fn a_server_that_never_answers_is_a_timeout() {
    let base = common::start_silent().await;
    for provider in [Provider::OpenAi, Provider::Anthropic] {
        let client =
            ChatClient::new(ClientConfig::new(provider, &base).timeout(Duration::from_millis(200)))
                .expect("client");
        let error = client
            .complete(json!({"messages": []}))
            .await
            .expect_err("timeout");
        assert_eq!(error, LlmError::Timeout);
        let error = client
            .stream(json!({"messages": []}))
            .await
            .expect_err("timeout");
        assert_eq!(error, LlmError::Timeout);
    }
}

#[tokio::test]
async fn a_stream_that_stalls_ends_in_a_timeout() {
    let upstream = common::start(|_, _| common::stalled_stream()).await;
    let client = ChatClient::new(
        ClientConfig::new(Provider::OpenAi, &upstream.base).timeout(Duration::from_millis(300)),
    )
    .expect("client");
    let mut stream = client
        .stream(json!({"messages": []}))
        .await
        .expect("stream");
    let first = stream.next().await.expect("first event").expect("ok");
    assert_eq!(first.data, "{\"a\":1}");
    let second = stream.next().await.expect("an error, not the end");
    assert_eq!(second, Err(LlmError::Timeout));
}

#[tokio::test]
async fn a_non_json_success_body_is_a_transport_error() {
    let upstream = common::start(|_, _| {
        axum::response::Response::new(axum::body::Body::from("<html>gateway</html>"))
    })
    .await;
    let error = client(Provider::OpenAi, &upstream.base)
        .complete(json!({"messages": []}))
        .await
        .expect_err("not json");
    assert!(matches!(error, LlmError::Transport(ref m) if m.contains("not JSON")));
}
