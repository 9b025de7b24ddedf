//! Recall inside the scripted agent sessions: what the scripted model reads in a request
//! the proxy offered its recall tool in (the tool's name, the handles the markers carry),
//! the call it makes by a handle, and the follow-up the proxy sends back with the call and
//! its result appended. The model's calls carry the id tag [`RECALL_TAG`], so that the
//! follow-up is told from the agent's own tool results by id alone.

use serde_json::{Value, json};

use crate::agent::{Protocol, Reply};

/// The id tag of the scripted model's recall calls (`toolu_rc…`, `call_rc…`): the agents'
/// own calls are `toolu_0001`, `call_0001`, ...
pub const RECALL_TAG: &str = "rc";

/// What a handle line starts with (the core's `recall::handle_line`).
const HANDLE_LINE: &str = "recall handle: ";

/// Hex digits of a handle.
const HANDLE_DIGITS: usize = 12;

/// The recall tool's name when the request offers it: the proxy adds it after the client's
/// tools, named `context_recall` (or `context_recall_N` beside a client tool of that name).
pub fn offered_tool(body: &Value) -> Option<String> {
    let last = body["tools"].as_array()?.last()?;
    let name = (last["name"].as_str()).or_else(|| last["function"]["name"].as_str())?;
    name.starts_with("context_recall").then(|| name.to_owned())
}

/// The handles the request's history carries (a marker's handle line), each once, in the
/// order they first appear.
pub fn handles(protocol: Protocol, body: &Value) -> Vec<String> {
    let history = match protocol {
        Protocol::Anthropic => &body["messages"],
        Protocol::Responses => &body["input"],
    };
    // The serialized history: a handle line sits inside a JSON string, after an escaped
    // newline, and its 12 hex digits are written as they are.
    handles_in(&history.to_string())
}

/// The handles of the handle lines in `text`, each once, in order.
pub fn handles_in(text: &str) -> Vec<String> {
    let mut found: Vec<String> = Vec::new();
    for (at, _) in text.match_indices(HANDLE_LINE) {
        let rest = &text[at + HANDLE_LINE.len()..];
        let hex: String = rest.chars().take_while(char::is_ascii_hexdigit).collect();
        if hex.len() == HANDLE_DIGITS && !found.contains(&hex) {
            found.push(hex);
        }
    }
    found
}

/// The scripted model's recall call number `n` for `handle`, to the tool named `tool`.
pub fn call(n: u64, tool: &str, handle: &str) -> Reply {
    let tag = format!("{RECALL_TAG}{n:04}");
    Reply::Tool(tag, (tool.to_owned(), json!({"handle": handle})))
}

/// The result of the scripted model's recall call when the request is the proxy's
/// follow-up (its history ends with that call's result); `None` for any other request.
pub fn follow_up_result(protocol: Protocol, body: &Value) -> Option<String> {
    match protocol {
        Protocol::Anthropic => {
            let last = body["messages"].as_array()?.last()?;
            let blocks = last["content"].as_array()?;
            let prefix = format!("toolu_{RECALL_TAG}");
            let result = blocks.iter().rev().find(|b| {
                b["type"] == "tool_result"
                    && (b["tool_use_id"].as_str()).is_some_and(|id| id.starts_with(&prefix))
            })?;
            Some(text_of(&result["content"]))
        }
        Protocol::Responses => {
            let last = body["input"].as_array()?.last()?;
            let prefix = format!("call_{RECALL_TAG}");
            let ours = last["type"] == "function_call_output"
                && (last["call_id"].as_str()).is_some_and(|id| id.starts_with(&prefix));
            ours.then(|| text_of(&last["output"]))
        }
    }
}

/// Recall rounds the proxy has run for the client request `body` is a follow-up of: the
/// scripted model's recall results it carries (the client never sees them, so all belong
/// to the request being answered).
pub fn rounds_so_far(protocol: Protocol, body: &Value) -> usize {
    let ours = |id: &Value, prefix: &str| {
        id.as_str()
            .is_some_and(|id| id.starts_with(&format!("{prefix}{RECALL_TAG}")))
    };
    match protocol {
        Protocol::Anthropic => (body["messages"].as_array().into_iter().flatten())
            .filter_map(|m| m["content"].as_array())
            .flatten()
            .filter(|b| b["type"] == "tool_result" && ours(&b["tool_use_id"], "toolu_"))
            .count(),
        Protocol::Responses => (body["input"].as_array().into_iter().flatten())
            .filter(|i| i["type"] == "function_call_output" && ours(&i["call_id"], "call_"))
            .count(),
    }
}

/// A tool result's text: a string, or the text of its blocks.
fn text_of(content: &Value) -> String {
    match content {
        Value::String(text) => text.clone(),
        Value::Array(blocks) => (blocks.iter())
            .filter_map(|b| b["text"].as_str())
            .collect::<Vec<_>>()
            .join("\n"),
        _ => String::new(),
    }
}

/// Whether a recall result holds recalled text of these sessions: the proxy's answer by
/// handle (`[recalled <handle>: …]`) with a run of the script's command output in it (two
/// consecutive numbers of `seq`, one a line), not a "nothing is kept" line.
pub fn holds_recalled(text: &str) -> bool {
    if !text.starts_with("[recalled ") {
        return false;
    }
    let numbers: Vec<Option<u64>> = text.lines().map(|l| l.trim().parse().ok()).collect();
    numbers
        .windows(2)
        .any(|pair| matches!(pair, [Some(a), Some(b)] if *b == a + 1))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn anthropic_with(result: Value) -> Value {
        json!({"messages": [
            {"role": "user", "content": "run it"},
            {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_rc0001", "name": "context_recall", "input": {}}]},
            {"role": "user", "content": [result]},
        ]})
    }

    #[test]
    fn the_offered_tool_is_the_last_one_and_named_for_recall() {
        let offered = json!({"tools": [{"name": "Bash"}, {"name": "context_recall_2"}]});
        assert_eq!(offered_tool(&offered).as_deref(), Some("context_recall_2"));
        let chat = json!({"tools": [{"type": "function", "function": {"name": "context_recall"}}]});
        assert_eq!(offered_tool(&chat).as_deref(), Some("context_recall"));
        assert_eq!(offered_tool(&json!({"tools": [{"name": "Bash"}]})), None);
        assert_eq!(offered_tool(&json!({})), None);
    }

    #[test]
    fn handles_are_read_from_the_history_once_each_in_order() {
        let body = json!({"input": [
            {"type": "function_call_output", "call_id": "call_0001",
             "output": "[compacted: 1 result]\nrecall handle: 0123456789ab"},
            {"type": "message", "role": "user", "content": "recall handle: 0123456789ab\nrecall handle: ffffffffffff"},
            {"type": "message", "role": "user", "content": "recall handle: <12 hex digits> and recall handle: abc"},
        ], "tools": [{"description": "recall handle: aaaaaaaaaaaa"}]});
        assert_eq!(
            handles(Protocol::Responses, &body),
            ["0123456789ab", "ffffffffffff"]
        );
        assert!(handles(Protocol::Anthropic, &body).is_empty());
    }

    #[test]
    fn rounds_are_counted_from_the_recall_results_a_follow_up_carries() {
        let ours = anthropic_with(
            json!({"type": "tool_result", "tool_use_id": "toolu_rc0001", "content": "x"}),
        );
        assert_eq!(rounds_so_far(Protocol::Anthropic, &ours), 1);
        let agents = anthropic_with(
            json!({"type": "tool_result", "tool_use_id": "toolu_0001", "content": "x"}),
        );
        assert_eq!(rounds_so_far(Protocol::Anthropic, &agents), 0);
        let responses = json!({"input": [
            {"type": "function_call", "call_id": "call_rc0001", "name": "context_recall", "arguments": "{}"},
            {"type": "function_call_output", "call_id": "call_rc0001", "output": "a"},
            {"type": "function_call", "call_id": "call_rc0002", "name": "context_recall", "arguments": "{}"},
            {"type": "function_call_output", "call_id": "call_rc0002", "output": "b"},
            {"type": "function_call_output", "call_id": "call_0003", "output": "c"},
        ]});
        assert_eq!(rounds_so_far(Protocol::Responses, &responses), 2);
    }

    #[test]
    fn a_follow_up_is_told_by_the_recall_call_id() {
        let ours = anthropic_with(
            json!({"type": "tool_result", "tool_use_id": "toolu_rc0001", "content": "[recalled x: 1 of 1 part(s)]\n1\n2"}),
        );
        assert_eq!(
            follow_up_result(Protocol::Anthropic, &ours).as_deref(),
            Some("[recalled x: 1 of 1 part(s)]\n1\n2")
        );
        let agents = anthropic_with(
            json!({"type": "tool_result", "tool_use_id": "toolu_0001", "content": "1\n2"}),
        );
        assert_eq!(follow_up_result(Protocol::Anthropic, &agents), None);
        let responses = json!({"input": [
            {"type": "function_call", "call_id": "call_rc0002", "name": "context_recall", "arguments": "{}"},
            {"type": "function_call_output", "call_id": "call_rc0002", "output": "[recalled y]"},
        ]});
        assert_eq!(
            follow_up_result(Protocol::Responses, &responses).as_deref(),
            Some("[recalled y]")
        );
        let own = json!({"input": [{"type": "function_call_output", "call_id": "call_0002", "output": "x"}]});
        assert_eq!(follow_up_result(Protocol::Responses, &own), None);
    }

    #[test]
    fn recalled_text_must_be_an_answer_by_handle_with_the_commands_output() {
        assert!(holds_recalled(
            "[recalled 0123456789ab: 2 of 2 part(s)]\n4999\n5000\n"
        ));
        assert!(!holds_recalled(
            "[recall: nothing is kept under 0123456789ab]"
        ));
        assert!(!holds_recalled(
            "[recalled 0123456789ab: 1 of 1 part(s)]\nok\n"
        ));
        assert!(!holds_recalled("4999\n5000"));
        assert!(!holds_recalled("[recalled x]\n7\n9\n"));
    }

    #[test]
    fn the_call_carries_the_recall_tag_and_the_handle() {
        let Reply::Tool(tag, (name, input)) = call(3, "context_recall", "0123456789ab") else {
            panic!("a tool call");
        };
        assert_eq!(tag, "rc0003");
        assert_eq!(name, "context_recall");
        assert_eq!(input, json!({"handle": "0123456789ab"}));
    }
}
