//! The recall tool as each wire format declares it, and the name it takes.
//!
//! The definition is a constant for a given format and name, so that a request that
//! carries it carries the same bytes every time and the provider's prompt cache holds.

use serde_json::{Value, json};

use crate::conversation::Format;

/// The tool's name, unless the client already has a tool of that name.
pub const RECALL_TOOL: &str = "context_recall";

/// What the model reads about the tool.
pub const DESCRIPTION: &str = "Brings back content that was removed from this conversation to \
save context. Markers such as [compacted: ...], [truncated: ...] and [context compacted: ...] \
are followed by a line `recall handle: <12 hex digits>`: pass that as `handle` to get the \
removed content back (`<handle>/N` for its part N). Or pass `query`, a few distinctive words \
(a file path, an error message, a command, a function name), to search everything removed.";

/// The name the tool takes: [`RECALL_TOOL`], or the first `context_recall_N` (N from 2)
/// that `taken` (the client's own tool names) does not hold.
pub fn name_among<'a>(taken: impl IntoIterator<Item = &'a str> + Clone) -> String {
    let free = |name: &str| !taken.clone().into_iter().any(|t| t == name);
    if free(RECALL_TOOL) {
        return RECALL_TOOL.to_owned();
    }
    (2..)
        .map(|n| format!("{RECALL_TOOL}_{n}"))
        .find(|name| free(name))
        .unwrap_or_else(|| RECALL_TOOL.to_owned())
}

/// The JSON schema of the arguments.
fn parameters() -> Value {
    json!({
        "type": "object",
        "properties": {
            "query": {"type": "string", "description": "Words to search the removed content for."},
            "handle": {"type": "string", "description": "A handle from a marker, optionally /N for one part."}
        }
    })
}

/// The tool's entry in a request's `tools`, in `format`'s shape (a bare message array
/// takes Chat Completions'). Responses function tools are strict unless told otherwise,
/// and a strict schema must require every property: this one asks for one of two.
pub fn definition(format: Format, name: &str) -> Value {
    match format {
        Format::Anthropic => json!({
            "name": name,
            "description": DESCRIPTION,
            "input_schema": parameters(),
        }),
        Format::Responses => json!({
            "type": "function",
            "name": name,
            "description": DESCRIPTION,
            "parameters": parameters(),
            "strict": false,
        }),
        Format::OpenAi | Format::Bare => json!({
            "type": "function",
            "function": {"name": name, "description": DESCRIPTION, "parameters": parameters()},
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_name_steps_aside_for_a_client_tool() {
        assert_eq!(name_among(["bash", "read"]), "context_recall");
        assert_eq!(name_among(["context_recall"]), "context_recall_2");
        assert_eq!(
            name_among(["context_recall", "context_recall_2"]),
            "context_recall_3"
        );
    }

    #[test]
    fn each_format_declares_it_in_its_own_shape() {
        assert_eq!(definition(Format::OpenAi, "r")["function"]["name"], "r");
        assert_eq!(
            definition(Format::Anthropic, "r")["input_schema"]["type"],
            "object"
        );
        assert_eq!(definition(Format::Responses, "r")["strict"], false);
        assert_eq!(
            definition(Format::Responses, "r"),
            definition(Format::Responses, "r")
        );
    }
}
