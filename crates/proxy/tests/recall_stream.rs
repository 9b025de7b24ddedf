//! Recall on streamed answers, in the three wire formats: a scripted model that streams
//! calls `context_recall`, and the client reads one valid stream — no recall call, text
//! from both rounds, usage summed, one ending — through a real proxy on loopback. Also the
//! round limit and an answer that calls the recall tool and the client's own together.

#![allow(clippy::unwrap_used, clippy::expect_used, unreachable_pub)] // test code: a failure is a test failure

mod common;
#[allow(dead_code)] // shared with examples/recall_upstream.rs, which answers without streaming too
#[path = "recall_stream/script.rs"]
mod script;

use cascade_test_support::upstream;
use serde_json::{Value, json};

use script::{Mode, SECRET_LINE, Wire, log, model};

use common::recall::proxy;

/// The events of an SSE body: (event name, data).
fn events(body: &str) -> Vec<(Option<String>, String)> {
    (body.split("\n\n").filter(|b| !b.trim().is_empty()))
        .map(|block| {
            let mut name = None;
            let mut data = String::new();
            for line in block.lines() {
                if let Some(n) = line.strip_prefix("event: ") {
                    name = Some(n.to_owned());
                } else if let Some(d) = line.strip_prefix("data: ") {
                    data.push_str(d);
                }
            }
            (name, data)
        })
        .collect()
}

fn json_events(body: &str) -> Vec<Value> {
    (events(body).into_iter())
        .filter(|(_, data)| data != "[DONE]")
        .map(|(_, data)| serde_json::from_str(&data).unwrap_or_else(|e| panic!("{e}: {data}")))
        .collect()
}

fn request(wire: Wire) -> (&'static str, Value) {
    let text = |t: &str| json!([{"type": "text", "text": t}]);
    match wire {
        Wire::Chat => (
            "/v1/chat/completions",
            json!({"model": "gpt-4o", "stream": true,
            "stream_options": {"include_usage": true}, "messages": [
            {"role": "user", "content": "build it"},
            {"role": "assistant", "content": null, "tool_calls": [{"id": "b1", "type": "function",
                "function": {"name": "bash", "arguments": "{\"command\":\"cargo build\"}"}}]},
            {"role": "tool", "tool_call_id": "b1", "content": log()},
            {"role": "assistant", "content": "It ran."},
            {"role": "user", "content": "why did it fail?"}],
            "tools": [{"type": "function", "function": {"name": "bash",
                "parameters": {"type": "object"}}}]}),
        ),
        Wire::Messages => (
            "/v1/messages",
            json!({"model": "claude-sonnet-4", "max_tokens": 1000,
            "stream": true, "messages": [
            {"role": "user", "content": "build it"},
            {"role": "assistant", "content": [{"type": "tool_use", "id": "b1", "name": "bash",
                "input": {"command": "cargo build"}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "b1", "content": log()}]},
            {"role": "assistant", "content": text("It ran.")},
            {"role": "user", "content": "why did it fail?"}],
            "tools": [{"name": "bash", "input_schema": {"type": "object"}}]}),
        ),
        Wire::Responses => (
            "/v1/responses",
            json!({"model": "gpt-4o", "stream": true, "input": [
            {"role": "user", "content": "build it"},
            {"type": "function_call", "call_id": "b1", "name": "bash",
                "arguments": "{\"command\":\"cargo build\"}"},
            {"type": "function_call_output", "call_id": "b1", "output": log()},
            {"role": "assistant", "content": "It ran."},
            {"role": "user", "content": "why did it fail?"}],
            "tools": [{"type": "function", "name": "bash", "parameters": {"type": "object"}}]}),
        ),
    }
}

/// The client's stream for `wire` with the model in `mode`, and the upstream's hits.
async fn run(wire: Wire, mode: Mode) -> (String, usize) {
    let upstream = upstream::start(move |_, request| model(mode, wire, request)).await;
    let proxy = proxy(&upstream.base).await;
    let (path, body) = request(wire);
    let response = reqwest::Client::new()
        .post(format!("{proxy}{path}"))
        .header("authorization", "Bearer sk-dave")
        .header("x-api-key", "sk-dave")
        .header("anthropic-version", "2023-06-01")
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let text = response.text().await.unwrap();
    assert!(
        !text.contains("context_recall"),
        "the client saw the tool: {text}"
    );
    let offered = upstream
        .requests()
        .iter()
        .all(|r| r.body.to_string().contains("context_recall"));
    assert!(offered, "every upstream request offers the tool");
    (text, upstream.hits())
}

/// Chat: the content, the finish reasons and the usage chunks of a stream.
fn chat_parts(body: &str) -> (String, Vec<String>, Vec<Value>, Vec<Value>) {
    let all = events(body);
    assert_eq!(all.last().unwrap().1, "[DONE]", "{body}");
    assert_eq!(all.iter().filter(|(_, d)| d == "[DONE]").count(), 1);
    let (mut text, mut finishes, mut usages, mut calls) = (String::new(), vec![], vec![], vec![]);
    for chunk in json_events(body) {
        if !chunk["usage"].is_null() {
            usages.push(chunk["usage"].clone());
        }
        for choice in chunk["choices"].as_array().unwrap() {
            assert_eq!(choice["index"], 0, "one choice");
            text.push_str(choice["delta"]["content"].as_str().unwrap_or(""));
            if let Some(reason) = choice["finish_reason"].as_str() {
                finishes.push(reason.to_owned());
            }
            calls.extend(
                choice["delta"]["tool_calls"]
                    .as_array()
                    .cloned()
                    .unwrap_or_default(),
            );
        }
    }
    (text, finishes, usages, calls)
}

#[tokio::test]
async fn chat_a_streamed_recall_round_is_invisible_to_the_client() {
    let (body, hits) = run(Wire::Chat, Mode::Once).await;
    assert_eq!(hits, 2);
    let (text, finishes, usages, calls) = chat_parts(&body);
    assert_eq!(text, format!("Looking.{SECRET_LINE}"), "{body}");
    assert_eq!(finishes, ["stop"]);
    assert!(calls.is_empty(), "{calls:?}");
    assert_eq!(
        usages,
        [json!({"prompt_tokens": 200, "completion_tokens": 20, "total_tokens": 220})]
    );
    let roles = json_events(&body)
        .iter()
        .filter(|c| !c["choices"][0]["delta"]["role"].is_null())
        .count();
    assert_eq!(roles, 1, "the role is said once: {body}");
}

#[tokio::test]
async fn messages_a_streamed_recall_round_is_invisible_to_the_client() {
    let (body, hits) = run(Wire::Messages, Mode::Once).await;
    assert_eq!(hits, 2);
    let all = json_events(&body);
    let count = |kind: &str| all.iter().filter(|e| e["type"] == kind).count();
    assert_eq!(
        (
            count("message_start"),
            count("message_delta"),
            count("message_stop")
        ),
        (1, 1, 1)
    );
    assert_eq!(all.last().unwrap()["type"], "message_stop");
    let starts: Vec<_> = all
        .iter()
        .filter(|e| e["type"] == "content_block_start")
        .map(|e| e["index"].clone())
        .collect();
    assert_eq!(starts, [json!(0), json!(1)], "blocks renumbered: {body}");
    for event in all
        .iter()
        .filter(|e| e["type"].as_str().unwrap().starts_with("content_block"))
    {
        assert!(event["index"].as_u64().unwrap() < 2, "{event}");
    }
    let text: String = (all.iter())
        .filter_map(|e| e["delta"]["text"].as_str())
        .collect();
    assert_eq!(text, format!("Looking.{SECRET_LINE}"));
    let delta = all.iter().find(|e| e["type"] == "message_delta").unwrap();
    assert_eq!(delta["delta"]["stop_reason"], "end_turn");
    assert_eq!(delta["usage"]["input_tokens"], 200);
    assert_eq!(delta["usage"]["output_tokens"], 20);
}

#[tokio::test]
async fn responses_a_streamed_recall_round_is_invisible_to_the_client() {
    let (body, hits) = run(Wire::Responses, Mode::Once).await;
    assert_eq!(hits, 2);
    let all = json_events(&body);
    let count = |kind: &str| all.iter().filter(|e| e["type"] == kind).count();
    assert_eq!(
        (count("response.created"), count("response.completed")),
        (1, 1)
    );
    let sequence: Vec<u64> = all
        .iter()
        .map(|e| e["sequence_number"].as_u64().unwrap())
        .collect();
    assert_eq!(sequence, (0..all.len() as u64).collect::<Vec<_>>());
    let added: Vec<_> = (all.iter())
        .filter(|e| e["type"] == "response.output_item.added")
        .map(|e| e["output_index"].clone())
        .collect();
    assert_eq!(added, [json!(0), json!(1)], "{body}");
    let completed = &all.last().unwrap()["response"];
    assert_eq!(completed["id"], "resp_0", "the first response's id");
    assert_eq!(completed["usage"]["input_tokens"], 200);
    assert_eq!(completed["usage"]["total_tokens"], 220);
    let texts: Vec<_> = (completed["output"].as_array().unwrap().iter())
        .map(|i| i["content"][0]["text"].clone())
        .collect();
    assert_eq!(texts, [json!("Looking."), json!(SECRET_LINE)]);
}

#[tokio::test]
async fn a_streamed_recall_stops_after_three_rounds_without_the_tool() {
    for wire in [Wire::Chat, Wire::Messages, Wire::Responses] {
        let (body, hits) = run(wire, Mode::Always).await;
        assert_eq!(hits, 4, "the first call and three rounds");
        for n in 1..=4 {
            assert!(body.contains(&format!("Round {n}.")), "{body}");
        }
        let all = json_events(&body);
        match wire {
            Wire::Chat => {
                let (_, finishes, usages, calls) = chat_parts(&body);
                assert_eq!((finishes, calls.len()), (vec!["stop".to_owned()], 0));
                assert_eq!(usages[0]["prompt_tokens"], 400);
            }
            Wire::Messages => {
                let delta = all.iter().find(|e| e["type"] == "message_delta").unwrap();
                assert_eq!(delta["delta"]["stop_reason"], "end_turn");
                assert_eq!(delta["usage"]["input_tokens"], 400);
            }
            Wire::Responses => {
                let completed = &all.last().unwrap()["response"];
                assert_eq!(completed["output"].as_array().unwrap().len(), 4);
                assert_eq!(completed["usage"]["input_tokens"], 400);
            }
        }
    }
}

#[tokio::test]
async fn a_streamed_mixed_answer_gives_the_client_its_own_calls_only() {
    for wire in [Wire::Chat, Wire::Messages, Wire::Responses] {
        let (body, hits) = run(wire, Mode::Mixed).await;
        assert_eq!(
            hits, 1,
            "no recall round when the client's own calls are due"
        );
        assert!(body.contains("\"bash\""), "{body}");
        let all = json_events(&body);
        match wire {
            Wire::Chat => {
                let (_, finishes, _, calls) = chat_parts(&body);
                assert_eq!(finishes, ["tool_calls"]);
                assert!(calls.iter().all(|c| c["index"] == 0), "{calls:?}");
            }
            Wire::Messages => {
                let delta = all.iter().find(|e| e["type"] == "message_delta").unwrap();
                assert_eq!(delta["delta"]["stop_reason"], "tool_use");
                let starts: Vec<_> = all
                    .iter()
                    .filter(|e| e["type"] == "content_block_start")
                    .map(|e| e["index"].clone())
                    .collect();
                assert_eq!(starts, [json!(0), json!(1)]);
            }
            Wire::Responses => {
                let output = &all.last().unwrap()["response"]["output"];
                assert_eq!(output.as_array().unwrap().len(), 2, "{output}");
                assert_eq!(output[1]["name"], "bash");
            }
        }
    }
}

#[tokio::test]
async fn a_follow_up_cut_short_ends_the_stream_with_an_error_and_no_ending() {
    for wire in [Wire::Chat, Wire::Messages, Wire::Responses] {
        let (body, hits) = run(wire, Mode::CutFollowUp).await;
        assert_eq!(hits, 2);
        assert!(
            body.contains("Looking."),
            "the first round reached the client: {body}"
        );
        let all = json_events(&body);
        let last = all.last().unwrap();
        assert!(
            last["error"].is_object() || last["type"] == "error",
            "{body}"
        );
        let endings = ["message_delta", "message_stop", "response.completed"];
        assert!(
            !all.iter()
                .any(|e| endings.contains(&e["type"].as_str().unwrap_or(""))),
            "{body}"
        );
        assert!(
            !body.contains("[DONE]") && !body.contains("\"finish_reason\":\""),
            "{body}"
        );
    }
}
