//! Exact token counts with OpenAI's o200k_base and cl100k_base (feature `exact`), with the
//! chat framing OpenAI documents. The vocabularies are tables in the binary
//! (`estimate::vocab`, laid out by `build.rs` from tiktoken-rs's copy of OpenAI's files) and
//! the pre-tokenizing patterns are written out (`estimate::pieces`): nothing is built at
//! load, and counting costs a byte scan plus one table lookup per word.
//! `tests/exact_tokenizer.rs` checks every text of every fixture message against tiktoken-rs
//! (docs/benchmarks.md §11 compares the implementations).
//!
//! Two uses. [`ExactCounter::count_conversation`] is the benchmarks' yardstick: the same
//! texts the prior counts, with the prior's fixed costs. The [`TokenCounter`] impl is what
//! the engine uses for OpenAI models ([`counter_for_model`]): per message 3 tokens of
//! framing plus the role, the name (+1) and the content; per request 3 tokens of reply
//! priming plus the `tools` definitions by the cookbook's rule (OpenAI cookbook, "How to
//! count tokens with tiktoken"). Every message's count is also memoized by its identity
//! ([`crate::MessageId`]): a request that extends the previous one tokenizes only its new
//! messages.
//!
//! The memo is process-wide (one per encoding, shared by every tenant of a proxy). That is
//! safe: it maps a hash of a message's bytes to a number of tokens, which any process could
//! compute from the same bytes, so it hands nothing of one tenant's content to another; and
//! it is bounded ([`MEMO_CAPACITY`] entries of 24 bytes, about 3 MB, cleared when full).

use std::collections::HashMap;
use std::hash::BuildHasherDefault;
use std::ops::Range;
use std::sync::{Mutex, OnceLock};

use rustc_hash::FxHasher;
use serde_json::Value;

use super::chunked::{Cutter, parts};
use super::counter::TokenCounter;
use super::pieces::Classes;
use super::vocab::Vocab;
use crate::conversation::{Block, Conversation, Message};
use crate::identity::MessageId;

/// The tokenizers available for exact counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Encoding {
    /// OpenAI's `o200k_base` (GPT-4o, GPT-4.1, GPT-5, o1/o3/o4).
    O200kBase,
    /// OpenAI's `cl100k_base` (GPT-4, GPT-3.5).
    Cl100kBase,
}

impl Encoding {
    /// The tokenizer of an OpenAI model id (a `provider/` prefix is ignored), following the
    /// catalog's OpenAI rows; `None` for any other model.
    pub fn for_model(model: &str) -> Option<Encoding> {
        let id = model.rsplit('/').next().unwrap_or(model);
        let id = id.strip_prefix("openai.").unwrap_or(id);
        const O200K: &[&str] = &[
            "gpt-5",
            "gpt-4.1",
            "gpt-4.5",
            "gpt-4o",
            "chatgpt-4o",
            "o1",
            "o3",
            "o4",
            "codex-mini",
        ];
        const CL100K: &[&str] = &["gpt-4", "gpt-3.5-turbo"];
        let family = |prefix: &&str| {
            id.strip_prefix(*prefix)
                .is_some_and(|rest| rest.is_empty() || rest.starts_with(['-', '.', ':']))
        };
        if O200K.iter().any(family) {
            Some(Encoding::O200kBase)
        } else if CL100K.iter().any(family) {
            Some(Encoding::Cl100kBase)
        } else {
            None
        }
    }

    /// The tokenizer's name.
    pub fn name(self) -> &'static str {
        match self {
            Encoding::O200kBase => "o200k_base",
            Encoding::Cl100kBase => "cl100k_base",
        }
    }
}

/// Chat framing per message (`<|start|>role<|message|>…<|end|>`), per `name`, and the
/// reply priming per request (OpenAI cookbook, for every model since gpt-3.5-turbo-0613).
const PER_MESSAGE: u64 = 3;
const PER_NAME: u64 = 1;
const REPLY_PRIMING: u64 = 3;
/// At most this many message counts are memoized; a full memo starts over.
pub const MEMO_CAPACITY: usize = 1 << 16;

/// Counts by message identity (equal messages bill equally).
type Memo = HashMap<MessageId, u64, BuildHasherDefault<FxHasher>>;

pub use super::chunked::CHUNK_BYTES;

/// A tokenizer, with its memo of message counts.
pub struct ExactCounter {
    encoding: Encoding,
    vocab: Vocab,
    classes: Classes,
    cutter: Cutter,
    memo: Mutex<Memo>,
}

impl std::fmt::Debug for ExactCounter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ExactCounter")
            .field("encoding", &self.encoding)
            .finish_non_exhaustive()
    }
}

/// The process-wide counter of an OpenAI model (loaded once, on first use), or `None` for
/// any other model or when the tokenizer cannot load (then the prior counts).
pub fn counter_for_model(model: &str) -> Option<&'static dyn TokenCounter> {
    static O200K: OnceLock<Option<ExactCounter>> = OnceLock::new();
    static CL100K: OnceLock<Option<ExactCounter>> = OnceLock::new();
    let encoding = Encoding::for_model(model)?;
    let cell = match encoding {
        Encoding::O200kBase => &O200K,
        Encoding::Cl100kBase => &CL100K,
    };
    let counter = cell.get_or_init(|| match ExactCounter::new(encoding) {
        Ok(counter) => Some(counter),
        Err(error) => {
            tracing::warn!(%error, "exact token counts unavailable: the prior counts instead");
            None
        }
    });
    counter.as_ref().map(|c| c as &'static dyn TokenCounter)
}

impl ExactCounter {
    /// The tokenizer of `encoding`: its tables (the vocabulary and the Unicode classes of its
    /// pattern) are in the binary, so this builds nothing.
    pub fn new(encoding: Encoding) -> Result<Self, crate::error::Error> {
        let vocab = match encoding {
            Encoding::O200kBase => Vocab::o200k_base(),
            Encoding::Cl100kBase => Vocab::cl100k_base(),
        }
        .ok_or_else(|| {
            crate::error::Error::Tokenizer(format!("{}: the built tables", encoding.name()))
        })?;
        Ok(ExactCounter {
            encoding,
            vocab,
            classes: Classes,
            cutter: Cutter::new(CHUNK_BYTES),
            memo: Mutex::new(Memo::default()),
        })
    }

    /// The tokenizer.
    pub fn encoding(&self) -> Encoding {
        self.encoding
    }

    /// Tokens of a text: exact when no piece of it is longer than [`CHUNK_BYTES`] (so
    /// for any ordinary text), otherwise with each longer piece counted in chunks
    /// (`estimate::chunked`), which can differ by under a token per cut.
    pub fn count(&self, text: &str) -> usize {
        let cuts = self.cutter.cuts(text, &|t, f| self.split(t, f));
        if cuts.is_empty() {
            return self.count_whole(text);
        }
        parts(text, &cuts).map(|part| self.count_whole(part)).sum()
    }

    /// Tokens of a text with no piece cut, as tiktoken's `encode_ordinary(text).len()`.
    pub(crate) fn count_whole(&self, text: &str) -> usize {
        let mut tokens = 0;
        let bytes = text.as_bytes();
        self.split(text, &mut |piece| {
            tokens += bytes
                .get(piece)
                .map_or(0, |piece| self.vocab.piece_tokens(piece));
        });
        tokens
    }

    /// Calls `piece` with the byte range of every piece of `text`, as the encoding's
    /// pattern splits it before merging.
    pub(crate) fn split(&self, text: &str, piece: &mut dyn FnMut(Range<usize>)) {
        match self.encoding {
            Encoding::O200kBase => self.classes.o200k(text, piece),
            Encoding::Cl100kBase => self.classes.cl100k(text, piece),
        }
    }

    /// The benchmarks' yardstick: tokens of a request counted over the same texts the
    /// prior counts, with the same fixed per-message and per-binary-block costs.
    pub fn count_conversation(&self, conversation: &Conversation) -> usize {
        let weights = crate::estimate::Weights::default();
        let mut total = 0usize;
        for message in &conversation.messages {
            total += weights.per_message as usize;
            total += self.count_blocks(message.blocks());
        }
        if let Some(tools) = conversation.tools() {
            total += self.count(&tools.to_string());
        }
        total
    }

    fn count_blocks(&self, blocks: &[Block]) -> usize {
        let mut total = 0;
        visit_blocks(blocks, &mut |piece| match piece {
            Piece::Text(text) => total += self.count(text),
            Piece::Binary => {
                total += crate::estimate::Weights::default().per_binary_block as usize;
            }
        });
        total
    }

    /// What a message bills, tokenized (the memo's miss path).
    fn bill(&self, message: &Message) -> u64 {
        let name = message.fields().get("name").and_then(Value::as_str);
        let mut total = PER_MESSAGE + self.count(message.role().as_str()) as u64;
        if let Some(name) = name {
            total += self.count(name) as u64 + PER_NAME;
        }
        total + self.count_blocks(message.blocks()) as u64
    }

    /// The `tools` definitions by the cookbook's rule: per function 7 tokens (10 on
    /// cl100k) plus `name:description`, per parameter 3 plus `name:type:description` (enums:
    /// −3 plus 3 and the value per item), 3 more when a function has parameters and 12 at
    /// the end. Other shapes count as their JSON text.
    fn tools(&self, tools: &Value) -> u64 {
        let Some(list) = tools.as_array().filter(|l| !l.is_empty()) else {
            return tools
                .as_array()
                .map_or(self.count(&tools.to_string()) as u64, |_| 0);
        };
        let per_function: i64 = match self.encoding {
            Encoding::O200kBase => 7,
            Encoding::Cl100kBase => 10,
        };
        let text = |v: Option<&Value>| v.and_then(Value::as_str).unwrap_or("").to_owned();
        let trim = |s: String| s.strip_suffix('.').map(str::to_owned).unwrap_or(s);
        let mut total: i64 = 12;
        for tool in list {
            let function = tool.get("function").unwrap_or(tool);
            let Some(name) = function.get("name").and_then(Value::as_str) else {
                total += self.count(&tool.to_string()) as i64;
                continue;
            };
            let description = trim(text(function.get("description")));
            total += per_function + self.count(&format!("{name}:{description}")) as i64;
            let properties = (function.get("parameters"))
                .and_then(|p| p.get("properties"))
                .and_then(Value::as_object);
            let Some(properties) = properties.filter(|p| !p.is_empty()) else {
                continue;
            };
            total += 3;
            for (key, property) in properties {
                total += 3;
                if let Some(items) = property.get("enum").and_then(Value::as_array) {
                    total -= 3;
                    for item in items {
                        let item = item
                            .as_str()
                            .map_or_else(|| item.to_string(), str::to_owned);
                        total += 3 + self.count(&item) as i64;
                    }
                }
                let kind = property.get("type").map_or_else(String::new, |t| {
                    t.as_str().map_or_else(|| t.to_string(), str::to_owned)
                });
                let description = trim(text(property.get("description")));
                total += self.count(&format!("{key}:{kind}:{description}")) as i64;
            }
        }
        total.max(0) as u64
    }
}

impl TokenCounter for ExactCounter {
    fn name(&self) -> &str {
        self.encoding.name()
    }

    fn message(&self, message: &Message) -> u64 {
        let key = MessageId::of(message);
        let memo = |m: &Mutex<Memo>| {
            m.lock()
                .unwrap_or_else(|p| p.into_inner())
                .get(&key)
                .copied()
        };
        if let Some(tokens) = memo(&self.memo) {
            return tokens;
        }
        let tokens = self.bill(message);
        let mut memo = self.memo.lock().unwrap_or_else(|p| p.into_inner());
        if memo.len() >= MEMO_CAPACITY {
            memo.clear();
        }
        memo.insert(key, tokens);
        tokens
    }

    fn request_overhead(&self, conversation: &Conversation) -> u64 {
        REPLY_PRIMING + conversation.tools().map_or(0, |t| self.tools(t))
    }

    fn text(&self, text: &str) -> u64 {
        self.count(text) as u64
    }
}

/// What a message's count depends on, as the tokenizer sees it.
enum Piece<'a> {
    Text(&'a str),
    Binary,
}

/// Every billed piece of some blocks, in order: texts, tool call names and arguments,
/// tool result contents, the JSON of opaque blocks; binary blocks as such.
fn visit_blocks(blocks: &[Block], f: &mut impl FnMut(Piece<'_>)) {
    for block in blocks {
        match block {
            Block::Text(t) => f(Piece::Text(&t.text)),
            Block::ToolCall(c) => {
                f(Piece::Text(&c.name));
                f(Piece::Text(&c.arguments_text()));
            }
            Block::ToolResult(r) => visit_blocks(&r.content, f),
            Block::Binary(_) => f(Piece::Binary),
            Block::Thinking(o) | Block::Other(o) => f(Piece::Text(&o.raw.to_string())),
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use crate::format::parse;

    /// The OpenAI cookbook's example conversation ("How to count tokens with tiktoken"),
    /// whose prompt tokens the API reported as 129 on gpt-4 / gpt-3.5-turbo and 124 on
    /// gpt-4o / gpt-4o-mini.
    fn cookbook(model: &str) -> Conversation {
        let body = serde_json::json!({"model": model, "messages": [
            {"role": "system", "content": "You are a helpful, pattern-following assistant that translates corporate jargon into plain English."},
            {"role": "system", "name": "example_user", "content": "New synergies will help drive top-line growth."},
            {"role": "system", "name": "example_assistant", "content": "Things working well together will increase revenue."},
            {"role": "system", "name": "example_user", "content": "Let's circle back when we have more bandwidth to touch base on opportunities for increased leverage."},
            {"role": "system", "name": "example_assistant", "content": "Let's talk later when we're less busy about how to do better."},
            {"role": "user", "content": "This late pivot means we don't have time to boil the ocean for the client deliverable."}
        ]});
        parse(body.to_string().as_bytes(), None).unwrap()
    }

    #[test]
    fn matches_the_prompt_tokens_openai_reported_for_the_cookbook_example() {
        for (model, billed) in [("gpt-4", 129), ("gpt-3.5-turbo", 129), ("gpt-4o", 124)] {
            let counter = counter_for_model(model).unwrap();
            assert_eq!(counter.request(&cookbook(model)), billed, "{model}");
        }
    }

    #[test]
    fn maps_openai_ids_to_their_tokenizer_and_nothing_else() {
        let o200k = Some(Encoding::O200kBase);
        let cl100k = Some(Encoding::Cl100kBase);
        for (model, expected) in [
            ("gpt-4o", o200k),
            ("gpt-4o-mini-2024-07-18", o200k),
            ("gpt-4.1-nano", o200k),
            ("gpt-5", o200k),
            ("openai/gpt-5-codex", o200k),
            ("o1", o200k),
            ("o3-mini", o200k),
            ("o4-mini", o200k),
            ("gpt-4", cl100k),
            ("gpt-4-turbo", cl100k),
            ("gpt-4-0613", cl100k),
            ("gpt-3.5-turbo-0125", cl100k),
            ("gpt-oss-120b", None),
            ("openai/openrouter-llama-4-maverick", None),
            ("claude-sonnet-4-5", None),
            ("o1x", None),
            ("", None),
        ] {
            assert_eq!(Encoding::for_model(model), expected, "{model}");
        }
    }

    #[test]
    fn counts_tools_by_the_cookbook_rule() {
        // The cookbook's function-calling example: 101 prompt tokens reported by the API on
        // gpt-4o / gpt-4o-mini.
        let body = serde_json::json!({"model": "gpt-4o", "messages": [
            {"role": "system", "content": "You are a helpful assistant that can answer to questions about the weather."},
            {"role": "user", "content": "What's the weather like in San Francisco?"}
        ], "tools": [{"type": "function", "function": {
            "name": "get_current_weather",
            "description": "Get the current weather in a given location",
            "parameters": {"type": "object", "properties": {
                "location": {"type": "string", "description": "The city and state, e.g. San Francisco, CA"},
                "unit": {"type": "string", "description": "The unit of temperature to return", "enum": ["celsius", "fahrenheit"]}
            }, "required": ["location"]}
        }}]});
        let conversation = parse(body.to_string().as_bytes(), None).unwrap();
        let counter = counter_for_model("gpt-4o").unwrap();
        assert_eq!(counter.request(&conversation), 101);
    }

    #[test]
    fn memoizes_per_message_and_changes_with_the_text() {
        let counter = ExactCounter::new(Encoding::O200kBase).unwrap();
        let a = Message::text(crate::Role::User, "hello there, general kenobi");
        let b = Message::text(crate::Role::User, "hello there, general grievous");
        let first = counter.message(&a);
        assert_eq!(counter.message(&a), first);
        assert_eq!(counter.memo.lock().unwrap().len(), 1);
        assert_eq!(counter.message(&b), counter.bill(&b));
        assert_eq!(counter.memo.lock().unwrap().len(), 2);
        assert_eq!(first, counter.bill(&a));
    }
}
