//! The Responses splicer: one response (the first round's `response.created` and
//! `in_progress`, one `response.completed` at the end whose output is every item the client
//! got and whose usage is summed), output indices renumbered over the rounds with the recall
//! tool's calls left out, sequence numbers running on.

use std::collections::{BTreeMap, HashMap};

use context_cascade::Format;
use serde_json::{Value, json};

use super::Splicer;
use super::event::{Event, write_json};
use crate::recall::turn::{self, Asked};

pub(crate) struct Responses {
    tool: String,
    rounds: usize,
    /// The first response's id: the one response the client sees.
    id: Option<Value>,
    sequence: u64,
    next_index: u64,
    /// This round: upstream output index → the client's (`None`: a recall call).
    indices: HashMap<u64, Option<u64>>,
    /// This round's finished items, in the upstream's order.
    items: BTreeMap<u64, Value>,
    /// Every item the client got, by the client's index.
    shown: BTreeMap<u64, Value>,
    /// This round's final event (`response.completed`, `incomplete` or `failed`), held.
    held: Option<(Option<String>, Value)>,
    /// The last ended round's: the stream's ending (a round cut short has none).
    ending: Option<(Option<String>, Value)>,
    usage: Option<Value>,
    total: Option<Value>,
}

impl Responses {
    pub(crate) fn new(tool: String) -> Self {
        Responses {
            tool,
            rounds: 0,
            id: None,
            sequence: 0,
            next_index: 0,
            indices: HashMap::new(),
            items: BTreeMap::new(),
            shown: BTreeMap::new(),
            held: None,
            ending: None,
            usage: None,
            total: None,
        }
    }

    /// Writes `json` with the next sequence number (when it carries one).
    fn forward(&mut self, name: Option<&str>, mut json: Value, out: &mut Vec<u8>) {
        if json.get("sequence_number").is_some() {
            json["sequence_number"] = json!(self.sequence);
            self.sequence += 1;
        }
        write_json(name, &json, out);
    }

    /// An event about one output item: renumbered, or held back for a recall call.
    fn item_event(&mut self, name: Option<&str>, mut json: Value, index: u64, out: &mut Vec<u8>) {
        let kind = json
            .get("type")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_owned();
        if kind == "response.output_item.added" && !self.indices.contains_key(&index) {
            let item = json.get("item");
            let recall = item.and_then(|i| i.get("type")).and_then(Value::as_str)
                == Some("function_call")
                && item.and_then(|i| i.get("name")).and_then(Value::as_str)
                    == Some(self.tool.as_str());
            let client = (!recall).then(|| {
                self.next_index += 1;
                self.next_index - 1
            });
            self.indices.insert(index, client);
        }
        if kind == "response.output_item.done"
            && let Some(item) = json.get("item")
        {
            self.items.insert(index, item.clone());
        }
        let Some(Some(client)) = self.indices.get(&index).copied() else {
            return;
        };
        if kind == "response.output_item.done"
            && let Some(item) = json.get("item")
        {
            self.shown.insert(client, item.clone());
        }
        json["output_index"] = json!(client);
        self.forward(name, json, out);
    }
}

impl Splicer for Responses {
    fn event(&mut self, event: &Event, out: &mut Vec<u8>) {
        let Some(json) = event.json.clone() else {
            return event.write(out);
        };
        let name = event.name.as_deref();
        match event.kind() {
            "response.created" | "response.in_progress" | "response.queued" => {
                if self.id.is_none() {
                    self.id = json.pointer("/response/id").cloned();
                }
                if self.rounds == 0 {
                    self.forward(name, json, out);
                }
            }
            "response.completed" | "response.incomplete" | "response.failed" => {
                self.usage = json.pointer("/response/usage").cloned();
                self.held = Some((event.name.clone(), json));
            }
            _ => match json.get("output_index").and_then(Value::as_u64) {
                Some(index) => self.item_event(name, json, index, out),
                None => self.forward(name, json, out),
            },
        }
    }

    fn end_round(&mut self) -> (Asked, Value) {
        let items: Vec<Value> = std::mem::take(&mut self.items).into_values().collect();
        let answer = json!({"output": items});
        let asked = turn::asked(Format::Responses, &answer, &self.tool);
        if let Some(usage) = self.usage.take().filter(|u| !u.is_null()) {
            match &mut self.total {
                Some(total) => turn::add_usage(total, &usage),
                None => self.total = Some(usage),
            }
        }
        self.indices.clear();
        self.rounds += 1;
        self.ending = self.held.take();
        (asked, answer)
    }

    fn finish(&mut self, out: &mut Vec<u8>) {
        let Some((name, mut json)) = self.ending.take() else {
            return;
        };
        if let Some(response) = json.get_mut("response") {
            if let Some(id) = &self.id {
                response["id"] = id.clone();
            }
            response["output"] =
                Value::Array(std::mem::take(&mut self.shown).into_values().collect());
            if let Some(total) = self.total.take() {
                response["usage"] = total;
            }
        }
        self.forward(name.as_deref(), json, out);
    }
}
