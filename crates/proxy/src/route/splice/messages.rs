//! The Messages (Anthropic) splicer: one `message_start` (the first round's), content
//! block indices renumbered over the rounds with the recall tool's blocks left out, and one
//! `message_delta` (stop reason, usage summed over the rounds) and `message_stop` at the end.

use std::collections::HashMap;

use context_cascade::Format;
use serde_json::{Value, json};

use super::Splicer;
use super::event::{Event, write_json};
use crate::recall::turn::{self, Asked};

/// One content block of the round, as the non-streaming answer would hold it.
struct Block {
    block: Value,
    /// A tool call's input, as its deltas bring it.
    partial_json: String,
}

pub(crate) struct Messages {
    tool: String,
    started: bool,
    /// The client's next block index.
    next_index: u64,
    /// This round: upstream block index → the client's (`None`: a recall call, held back).
    indices: HashMap<u64, Option<u64>>,
    blocks: Vec<(u64, Block)>,
    /// This round's usage: `message_start`'s, updated by `message_delta`'s.
    usage: Option<Value>,
    total: Option<Value>,
    /// This round's `message_delta`, held back.
    delta: Option<Value>,
    /// The last ended round's: the stream's ending (a round cut short has none).
    ending: Option<Value>,
    /// Whether the last round called a tool of the client's.
    client_calls: usize,
}

impl Messages {
    pub(crate) fn new(tool: String) -> Self {
        Messages {
            tool,
            started: false,
            next_index: 0,
            indices: HashMap::new(),
            blocks: Vec::new(),
            usage: None,
            total: None,
            delta: None,
            ending: None,
            client_calls: 0,
        }
    }

    /// The client's index for the upstream block of `json` (`None`: held back).
    fn client_index(&self, json: &Value) -> Option<u64> {
        let index = json.get("index").and_then(Value::as_u64)?;
        self.indices.get(&index).copied().flatten()
    }

    fn block_start(&mut self, json: &Value, out: &mut Vec<u8>) {
        let index = json.get("index").and_then(Value::as_u64).unwrap_or(0);
        let block = json.get("content_block").cloned().unwrap_or(Value::Null);
        let recall = block.get("type").and_then(Value::as_str) == Some("tool_use")
            && block.get("name").and_then(Value::as_str) == Some(self.tool.as_str());
        let partial_json = String::new();
        self.blocks.push((
            index,
            Block {
                block,
                partial_json,
            },
        ));
        if recall {
            self.indices.insert(index, None);
            return;
        }
        self.indices.insert(index, Some(self.next_index));
        self.forward_renumbered(json, self.next_index, out);
        self.next_index += 1;
    }

    fn block_delta(&mut self, json: &Value) {
        let index = json.get("index").and_then(Value::as_u64);
        let Some((_, block)) = self
            .blocks
            .iter_mut()
            .rev()
            .find(|(i, _)| Some(*i) == index)
        else {
            return;
        };
        let delta = json.get("delta").cloned().unwrap_or(Value::Null);
        let text = |key: &str| {
            delta
                .get(key)
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_owned()
        };
        let append = |block: &mut Value, key: &str, more: String| {
            let had = block
                .get(key)
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_owned();
            block[key] = json!(had + &more);
        };
        match delta.get("type").and_then(Value::as_str) {
            Some("text_delta") => append(&mut block.block, "text", text("text")),
            Some("thinking_delta") => append(&mut block.block, "thinking", text("thinking")),
            Some("signature_delta") => block.block["signature"] = json!(text("signature")),
            Some("input_json_delta") => block.partial_json.push_str(&text("partial_json")),
            _ => {}
        }
    }

    fn forward_renumbered(&self, json: &Value, index: u64, out: &mut Vec<u8>) {
        let mut json = json.clone();
        json["index"] = json!(index);
        write_json(json.get("type").and_then(Value::as_str), &json, out);
    }
}

impl Splicer for Messages {
    fn event(&mut self, event: &Event, out: &mut Vec<u8>) {
        let Some(json) = &event.json else {
            return event.write(out);
        };
        match event.kind() {
            "message_start" => {
                self.usage = json.pointer("/message/usage").cloned();
                if !self.started {
                    self.started = true;
                    event.write(out);
                }
            }
            "content_block_start" => self.block_start(json, out),
            "content_block_delta" | "content_block_stop" => {
                if event.kind() == "content_block_delta" {
                    self.block_delta(json);
                }
                if let Some(index) = self.client_index(json) {
                    self.forward_renumbered(json, index, out);
                }
            }
            "message_delta" => {
                match (&mut self.usage, json.get("usage")) {
                    (Some(Value::Object(usage)), Some(Value::Object(update))) => {
                        usage.extend(update.clone());
                    }
                    (usage, update) => *usage = update.cloned().or(usage.take()),
                }
                self.delta = Some(json.clone());
            }
            "message_stop" => {}
            _ => event.write(out),
        }
    }

    fn end_round(&mut self) -> (Asked, Value) {
        let content: Vec<Value> = (self.blocks.drain(..))
            .map(|(_, mut block)| {
                if !block.partial_json.is_empty() {
                    let input = serde_json::from_str(&block.partial_json).unwrap_or(json!({}));
                    block.block["input"] = input;
                }
                block.block
            })
            .collect();
        let answer = json!({"content": content});
        let asked = turn::asked(Format::Anthropic, &answer, &self.tool);
        self.client_calls = asked.client_calls;
        if let Some(usage) = self.usage.take() {
            match &mut self.total {
                Some(total) => turn::add_usage(total, &usage),
                None => self.total = Some(usage),
            }
        }
        self.indices.clear();
        self.ending = self.delta.take();
        (asked, answer)
    }

    fn finish(&mut self, out: &mut Vec<u8>) {
        let Some(mut delta) = self.ending.take() else {
            return;
        };
        let stop = delta.pointer("/delta/stop_reason").and_then(Value::as_str);
        if stop == Some("tool_use") && self.client_calls == 0 {
            delta["delta"]["stop_reason"] = json!("end_turn");
        }
        if let Some(total) = self.total.take() {
            delta["usage"] = total;
        }
        write_json(Some("message_delta"), &delta, out);
        write_json(Some("message_stop"), &json!({"type": "message_stop"}), out);
    }
}
