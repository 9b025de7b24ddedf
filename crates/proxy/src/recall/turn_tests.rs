//! A recall round in each format: the calls read, the follow-up built, the answer stripped.

use serde_json::json;

use super::*;

const TOOL: &str = "context_recall";

#[test]
fn chat_a_recall_round_and_a_mixed_answer() {
    let mut request = json!({"model": "m", "messages": [{"role": "user", "content": "why?"}],
        "tools": [{"type": "function", "function": {"name": "bash"}}]});
    add_tool(
        &mut request,
        json!({"type": "function", "function": {"name": TOOL}}),
    );
    assert_eq!(request["tools"][1]["function"]["name"], TOOL);
    let answer = json!({"choices": [{"index": 0, "finish_reason": "tool_calls", "message": {
        "role": "assistant", "content": null, "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": TOOL, "arguments": "{\"query\":\"E0425\"}"}},
            {"id": "c2", "type": "function", "function": {"name": "bash", "arguments": "{}"}}]}}],
        "usage": {"prompt_tokens": 10, "completion_tokens": 2, "total_tokens": 12}});
    let asked = asked(Format::OpenAi, &answer, TOOL);
    assert_eq!((asked.recall.len(), asked.client_calls), (1, 1));
    assert_eq!(asked.recall[0].id, "c1");
    follow_up(
        Format::OpenAi,
        &mut request,
        &answer,
        &[("c1".into(), "found".into())],
    );
    let messages = request["messages"].as_array().unwrap();
    assert_eq!(messages.len(), 3);
    assert_eq!(
        messages[2],
        json!({"role": "tool", "tool_call_id": "c1", "content": "found"})
    );
    let mut client = answer.clone();
    strip_recall(Format::OpenAi, &mut client, TOOL);
    let calls = client["choices"][0]["message"]["tool_calls"]
        .as_array()
        .unwrap();
    assert_eq!(calls.len(), 1);
    assert_eq!(client["choices"][0]["finish_reason"], "tool_calls");
    let mut only_recall = answer;
    only_recall["choices"][0]["message"]["tool_calls"]
        .as_array_mut()
        .unwrap()
        .pop();
    strip_recall(Format::OpenAi, &mut only_recall, TOOL);
    assert!(
        only_recall["choices"][0]["message"]
            .get("tool_calls")
            .is_none()
    );
    assert_eq!(only_recall["choices"][0]["finish_reason"], "stop");
}

#[test]
fn messages_a_recall_round_appends_the_turn_and_its_results() {
    let mut request = json!({"model": "m", "messages": [{"role": "user", "content": "why?"}]});
    let answer = json!({"content": [{"type": "text", "text": "let me look"},
        {"type": "tool_use", "id": "t1", "name": TOOL, "input": {"handle": "3f9a1c2b7d40"}}],
        "stop_reason": "tool_use", "usage": {"input_tokens": 5, "output_tokens": 1}});
    let asked = asked(Format::Anthropic, &answer, TOOL);
    assert_eq!(asked.recall[0].arguments, json!({"handle": "3f9a1c2b7d40"}));
    follow_up(
        Format::Anthropic,
        &mut request,
        &answer,
        &[("t1".into(), "kept".into())],
    );
    assert_eq!(request["messages"][1]["role"], "assistant");
    assert_eq!(request["messages"][2]["content"][0]["tool_use_id"], "t1");
    let mut client = answer;
    strip_recall(Format::Anthropic, &mut client, TOOL);
    assert_eq!(client["content"].as_array().unwrap().len(), 1);
    assert_eq!(client["stop_reason"], "end_turn");
}

#[test]
fn responses_a_recall_round_turns_a_string_input_into_items() {
    let mut request = json!({"model": "m", "input": "why?"});
    let answer = json!({"output": [{"type": "reasoning", "id": "r1", "summary": []},
        {"type": "function_call", "id": "fc1", "call_id": "call_1", "name": TOOL, "arguments": "{\"query\":\"x\"}"}],
        "usage": {"input_tokens": 7, "output_tokens": 3, "total_tokens": 10}});
    assert_eq!(
        asked(Format::Responses, &answer, TOOL).recall[0].id,
        "call_1"
    );
    follow_up(
        Format::Responses,
        &mut request,
        &answer,
        &[("call_1".into(), "r".into())],
    );
    let input = request["input"].as_array().unwrap();
    assert_eq!(input.len(), 4);
    assert_eq!(input[0], json!({"role": "user", "content": "why?"}));
    assert_eq!(input[3]["type"], "function_call_output");
    let mut client = answer;
    strip_recall(Format::Responses, &mut client, TOOL);
    assert_eq!(client["output"].as_array().unwrap().len(), 1);
}

#[test]
fn usage_is_summed_over_the_rounds_nested_counts_included() {
    let mut total = json!({"prompt_tokens": 10, "completion_tokens": 2,
        "prompt_tokens_details": {"cached_tokens": 4}});
    add_usage(
        &mut total,
        &json!({"prompt_tokens": 15, "completion_tokens": 3,
        "prompt_tokens_details": {"cached_tokens": 10}, "total_tokens": 18}),
    );
    assert_eq!(
        total,
        json!({"prompt_tokens": 25, "completion_tokens": 5,
        "prompt_tokens_details": {"cached_tokens": 14}, "total_tokens": 18})
    );
}
