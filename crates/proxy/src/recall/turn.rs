//! One recall round on the wire, for a non-streaming answer in each format: the tool added
//! after the client's tools, the recall calls read from an answer, the follow-up request
//! with the calls and their results appended, the recall calls taken out of the answer
//! the client gets, and the usage of the rounds summed. Pure functions over JSON: the
//! route that runs the rounds does the I/O.

use serde_json::{Map, Value, json};

use context_cascade::Format;

/// A recall call the model made: its id and arguments.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct RecallCallSite {
    pub(crate) id: String,
    pub(crate) arguments: Value,
}

/// What an answer asks for: its recall calls, and how many calls of the client's own.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Asked {
    pub(crate) recall: Vec<RecallCallSite>,
    pub(crate) client_calls: usize,
}

/// Adds `definition` after the client's tools (a `tools` array is made when there is none).
pub(crate) fn add_tool(request: &mut Value, definition: Value) {
    let Some(object) = request.as_object_mut() else {
        return;
    };
    match object.get_mut("tools") {
        Some(Value::Array(tools)) => tools.push(definition),
        _ => {
            object.insert("tools".into(), Value::Array(vec![definition]));
        }
    }
}

/// The tool calls of an answer, split into recall calls (named `tool`) and the client's.
pub(crate) fn asked(format: Format, answer: &Value, tool: &str) -> Asked {
    let mut asked = Asked::default();
    for (name, id, arguments) in calls(format, answer) {
        if name == tool {
            asked.recall.push(RecallCallSite { id, arguments });
        } else {
            asked.client_calls += 1;
        }
    }
    asked
}

/// Every tool call of an answer: (name, id, arguments).
fn calls(format: Format, answer: &Value) -> Vec<(String, String, Value)> {
    let text = |v: &Value, key: &str| v.get(key).and_then(Value::as_str).unwrap_or("").to_owned();
    let items = |v: Option<&Value>| v.and_then(Value::as_array).cloned().unwrap_or_default();
    match format {
        Format::OpenAi | Format::Bare => items(answer.pointer("/choices/0/message/tool_calls"))
            .iter()
            .map(|call| {
                let function = call.get("function").cloned().unwrap_or(Value::Null);
                let arguments = function.get("arguments").cloned().unwrap_or(Value::Null);
                (text(&function, "name"), text(call, "id"), arguments)
            })
            .collect(),
        Format::Anthropic => items(answer.get("content"))
            .iter()
            .filter(|block| block.get("type").and_then(Value::as_str) == Some("tool_use"))
            .map(|block| {
                let input = block.get("input").cloned().unwrap_or(Value::Null);
                (text(block, "name"), text(block, "id"), input)
            })
            .collect(),
        Format::Responses => items(answer.get("output"))
            .iter()
            .filter(|item| item.get("type").and_then(Value::as_str) == Some("function_call"))
            .map(|item| {
                let arguments = item.get("arguments").cloned().unwrap_or(Value::Null);
                (text(item, "name"), text(item, "call_id"), arguments)
            })
            .collect(),
    }
}

/// Appends the answer's turn and the recall results (`(call id, text)`) to `request`, for
/// the next round.
pub(crate) fn follow_up(
    format: Format,
    request: &mut Value,
    answer: &Value,
    results: &[(String, String)],
) {
    let Some(object) = request.as_object_mut() else {
        return;
    };
    match format {
        Format::OpenAi | Format::Bare => {
            let message = (answer.pointer("/choices/0/message").cloned()).unwrap_or(Value::Null);
            let mut items = vec![message];
            items
                .extend((results.iter()).map(
                    |(id, text)| json!({"role": "tool", "tool_call_id": id, "content": text}),
                ));
            extend(object, "messages", items);
        }
        Format::Anthropic => {
            let content = answer.get("content").cloned().unwrap_or(json!([]));
            let blocks: Vec<Value> = (results.iter())
                .map(
                    |(id, text)| json!({"type": "tool_result", "tool_use_id": id, "content": text}),
                )
                .collect();
            let items = vec![
                json!({"role": "assistant", "content": content}),
                json!({"role": "user", "content": blocks}),
            ];
            extend(object, "messages", items);
        }
        Format::Responses => {
            if let Some(Value::String(text)) = object.get("input").cloned() {
                object.insert("input".into(), json!([{"role": "user", "content": text}]));
            }
            let mut items =
                (answer.get("output").and_then(Value::as_array).cloned()).unwrap_or_default();
            items.extend(results.iter().map(
                |(id, text)| json!({"type": "function_call_output", "call_id": id, "output": text}),
            ));
            extend(object, "input", items);
        }
    }
}

/// Appends `items` to the array under `key` (made when absent or not an array).
fn extend(object: &mut Map<String, Value>, key: &str, items: Vec<Value>) {
    match object.get_mut(key) {
        Some(Value::Array(list)) => list.extend(items),
        _ => {
            object.insert(key.into(), Value::Array(items));
        }
    }
}

/// Takes the recall calls (named `tool`) out of the answer the client gets; when no call is
/// left, the answer ends as a plain turn (`stop`, `end_turn`), so that the client never
/// sees the tool nor waits for a call it did not make.
pub(crate) fn strip_recall(format: Format, answer: &mut Value, tool: &str) {
    let named = |v: &Value, key: &str| v.get(key).and_then(Value::as_str) == Some(tool);
    match format {
        Format::OpenAi | Format::Bare => {
            let Some(message) = answer.pointer_mut("/choices/0/message") else {
                return;
            };
            let left = match message.get_mut("tool_calls") {
                Some(Value::Array(calls)) => {
                    calls.retain(|c| !c.get("function").is_some_and(|f| named(f, "name")));
                    calls.len()
                }
                _ => return,
            };
            if left == 0 {
                if let Some(object) = message.as_object_mut() {
                    object.remove("tool_calls");
                }
                if let Some(choice) = answer.pointer_mut("/choices/0") {
                    choice["finish_reason"] = json!("stop");
                }
            }
        }
        Format::Anthropic => {
            let Some(Value::Array(content)) = answer.get_mut("content") else {
                return;
            };
            content.retain(|b| {
                !(b.get("type").and_then(Value::as_str) == Some("tool_use") && named(b, "name"))
            });
            let left = content
                .iter()
                .any(|b| b.get("type").and_then(Value::as_str) == Some("tool_use"));
            if !left && answer.get("stop_reason").and_then(Value::as_str) == Some("tool_use") {
                answer["stop_reason"] = json!("end_turn");
            }
        }
        Format::Responses => {
            if let Some(Value::Array(output)) = answer.get_mut("output") {
                output.retain(|i| {
                    !(i.get("type").and_then(Value::as_str) == Some("function_call")
                        && named(i, "name"))
                });
            }
        }
    }
}

/// Adds the usage of one round (`round`) into `total` (every number, nested ones too: the
/// token details and cache counts of each format).
pub(crate) fn add_usage(total: &mut Value, round: &Value) {
    match (total, round) {
        (Value::Object(total), Value::Object(round)) => {
            for (key, value) in round {
                match total.get_mut(key) {
                    Some(slot) => add_usage(slot, value),
                    None => {
                        total.insert(key.clone(), value.clone());
                    }
                }
            }
        }
        (slot @ Value::Number(_), Value::Number(n)) => {
            if let (Some(a), Some(b)) = (slot.as_u64(), n.as_u64()) {
                *slot = json!(a + b);
            }
        }
        _ => {}
    }
}

#[cfg(test)]
#[path = "turn_tests.rs"]
mod tests;
