//! A recall call and its answer: the text the model reads as the tool's result.

use serde_json::Value;

use super::RecallError;
use super::chunk::Chunk;
use super::handle::HandleRef;
use super::rank::Index;
use crate::estimate::Estimator;

/// Tokens an answer may take by default: a few chunks (a chunk is at most
/// [`super::CHUNK_CHARS`] characters, about 300–400 tokens of code or logs).
pub const ANSWER_TOKENS: u64 = 2_000;

/// Chunks one search answer returns at most.
const MAX_RESULTS: usize = 5;

/// What the model asked for: a handle (a removal, or one chunk of it), or a search.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RecallCall {
    /// The chunks of one removal (or one chunk), in order.
    Handle(HandleRef),
    /// The best-ranked chunks for a query.
    Query(String),
}

impl RecallCall {
    /// Reads the tool's arguments: `{"handle": "..."}` or `{"query": "..."}` (a handle wins
    /// when both are given; an empty string counts as absent). The arguments may come as
    /// the JSON text Chat Completions and Responses carry.
    pub fn from_arguments(arguments: &Value) -> Result<RecallCall, RecallError> {
        let parsed;
        let object = match arguments {
            Value::String(text) => {
                parsed = serde_json::from_str::<Value>(text)
                    .map_err(|e| RecallError::BadArguments(format!("not JSON: {e}")))?;
                &parsed
            }
            other => other,
        };
        let Some(object) = object.as_object() else {
            return Err(RecallError::BadArguments("expected an object".into()));
        };
        let field = |name: &str| {
            (object.get(name).and_then(Value::as_str))
                .map(str::trim)
                .filter(|s| !s.is_empty())
        };
        if let Some(handle) = field("handle") {
            return Ok(RecallCall::Handle(handle.parse()?));
        }
        match field("query") {
            Some(query) => Ok(RecallCall::Query(query.to_owned())),
            None => Err(RecallError::BadArguments(
                "give `query` (words to search for) or `handle` (from a marker)".into(),
            )),
        }
    }
}

/// A recall's answer.
#[derive(Debug, Clone, PartialEq)]
pub struct Recalled {
    /// What the model reads.
    pub text: String,
    /// The chunks in it, in the order written (`handle/part`).
    pub chunks: Vec<String>,
    /// Estimated tokens of `text`.
    pub tokens: u64,
}

/// Answers `call` from `index` within `max_tokens` (at least one chunk is always written
/// when one matches). By handle: the removal's chunks in order, then what was left out.
/// By query: the best-ranked chunks, a chunk whose text repeats an earlier one's skipped.
pub fn answer(index: &Index, call: &RecallCall, max_tokens: u64) -> Recalled {
    let estimator = Estimator::default();
    match call {
        RecallCall::Handle(reference) => {
            let chunks: Vec<&Chunk> = (index.chunks().iter())
                .filter(|c| c.handle == reference.handle)
                .filter(|c| reference.part.is_none_or(|p| p == c.part))
                .collect();
            if chunks.is_empty() {
                let text = format!(
                    "[recall: nothing is kept under {}{}]",
                    reference.handle,
                    reference.part.map(|p| format!("/{p}")).unwrap_or_default()
                );
                return finish(text, Vec::new(), &estimator);
            }
            let (body, written) = within(&chunks, max_tokens, &estimator, false);
            let last = chunks.len();
            let mut text = format!(
                "[recalled {}: {} of {last} part(s)]\n{body}",
                reference.handle,
                written.len()
            );
            if written.len() < last {
                text.push_str(&format!(
                    "[parts {}-{last} not shown for space: ask for {}/{} or search with a query]",
                    written.len() + 1,
                    reference.handle,
                    written.len() + 1
                ));
            }
            finish(text, written, &estimator)
        }
        RecallCall::Query(query) => {
            let ranked = index.rank(query);
            if ranked.is_empty() {
                let text = format!("[recall: nothing removed matches {query:?}]");
                return finish(text, Vec::new(), &estimator);
            }
            let mut seen = std::collections::HashSet::new();
            let best: Vec<&Chunk> = (ranked.iter())
                .map(|(chunk, _)| *chunk)
                .filter(|chunk| seen.insert(chunk.text.as_str()))
                .take(MAX_RESULTS)
                .collect();
            let (body, written) = within(&best, max_tokens, &estimator, true);
            let text = format!(
                "[recalled for {query:?}: {} of {} matching part(s), best first]\n{body}",
                written.len(),
                ranked.len()
            );
            finish(text, written, &estimator)
        }
    }
}

/// The chunks that fit `max_tokens` (the first always), each under a header line when
/// `headers`, and the references written.
fn within(
    chunks: &[&Chunk],
    max_tokens: u64,
    estimator: &Estimator,
    headers: bool,
) -> (String, Vec<String>) {
    let mut body = String::new();
    let mut written = Vec::new();
    let mut spent = 0;
    for chunk in chunks {
        let reference = format!("{}/{}", chunk.handle, chunk.part);
        let header = if headers {
            format!("--- {reference} of {} ---\n", chunk.parts)
        } else {
            String::new()
        };
        let cost = estimator.text_tokens(&header) + estimator.text_tokens(&chunk.text);
        if !written.is_empty() && spent + cost > max_tokens {
            break;
        }
        spent += cost;
        body.push_str(&header);
        body.push_str(&chunk.text);
        if !chunk.text.ends_with('\n') {
            body.push('\n');
        }
        written.push(reference);
    }
    (body, written)
}

fn finish(text: String, chunks: Vec<String>, estimator: &Estimator) -> Recalled {
    let tokens = estimator.text_tokens(&text);
    Recalled {
        text,
        chunks,
        tokens,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::recall::{Handle, Removal};

    fn index() -> (Index, Handle) {
        let text: String = (0..400)
            .map(|i| format!("test case_{i} ... ok\n"))
            .collect::<String>()
            + "test parse_window ... FAILED\n";
        let removal = Removal {
            handle: Handle::of_result("t", "1", &text),
            text,
        };
        (Index::build(removal.chunks(300)), removal.handle)
    }

    #[test]
    fn arguments_name_a_handle_or_a_query() {
        let (_, handle) = index();
        let by_handle = RecallCall::from_arguments(
            &serde_json::json!({"handle": handle.to_string(), "query": "x"}),
        );
        assert!(matches!(by_handle, Ok(RecallCall::Handle(r)) if r.handle == handle));
        let text = serde_json::Value::String(r#"{"query": "parse_window"}"#.into());
        assert_eq!(
            RecallCall::from_arguments(&text),
            Ok(RecallCall::Query("parse_window".into()))
        );
        assert!(RecallCall::from_arguments(&serde_json::json!({"query": " "})).is_err());
        assert!(RecallCall::from_arguments(&serde_json::json!([1])).is_err());
        assert!(RecallCall::from_arguments(&serde_json::json!({"handle": "nope"})).is_err());
    }

    #[test]
    fn a_search_answers_within_its_budget_best_first() {
        let (index, _) = index();
        let found = answer(
            &index,
            &RecallCall::Query("parse_window FAILED".into()),
            200,
        );
        assert!(
            found.text.contains("test parse_window ... FAILED"),
            "{}",
            found.text
        );
        assert!(found.tokens <= 260, "{}", found.tokens);
        let missing = answer(&index, &RecallCall::Query("zebra".into()), 200);
        assert!(missing.text.starts_with("[recall: nothing removed matches"));
    }

    #[test]
    fn a_handle_answers_its_parts_in_order_and_says_what_it_left_out() {
        let (index, handle) = index();
        let whole = answer(
            &index,
            &RecallCall::Handle(HandleRef { handle, part: None }),
            300,
        );
        assert!(whole.text.contains("not shown for space"), "{}", whole.text);
        assert_eq!(whole.chunks.first(), Some(&format!("{handle}/1")));
        let part = answer(
            &index,
            &RecallCall::Handle(HandleRef {
                handle,
                part: Some(2),
            }),
            300,
        );
        assert_eq!(part.chunks, vec![format!("{handle}/2")]);
        let other = Handle::of_result("t", "2", "y");
        let none = answer(
            &index,
            &RecallCall::Handle(HandleRef {
                handle: other,
                part: None,
            }),
            300,
        );
        assert!(none.text.starts_with("[recall: nothing is kept under"));
    }
}
