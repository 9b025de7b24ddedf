//! The Chat Completions splicer: one choice (index 0) whose deltas run on over the rounds
//! (the role said once, the recall tool's calls left out, the client's calls renumbered),
//! one `finish_reason` at the end, then the usage chunk (summed over the rounds) when the
//! upstream sent one, then `[DONE]`.

use std::collections::BTreeMap;

use context_cascade::Format;
use serde_json::{Map, Value, json};

use super::Splicer;
use super::event::{Event, write, write_json};
use crate::recall::turn::{self, Asked};

/// A tool call of the round: id, name, arguments so far, and the client's index for it
/// (`None`: a recall call, held back).
struct Call {
    id: String,
    name: String,
    arguments: String,
    client: Option<u64>,
}

pub(crate) struct Chat {
    tool: String,
    /// The first chunk (its id, model, created), the shape of the ending chunks.
    template: Option<Value>,
    rounds: usize,
    next_call: u64,
    content: String,
    calls: BTreeMap<u64, Call>,
    /// This round's finish reason and `[DONE]`, held back.
    finish: Option<Value>,
    done: bool,
    /// The last ended round's: the stream's ending (a round cut short has none).
    ending: (Option<Value>, bool),
    usage: Option<Value>,
    total: Option<Value>,
    client_calls: usize,
}

impl Chat {
    pub(crate) fn new(tool: String) -> Self {
        Chat {
            tool,
            template: None,
            rounds: 0,
            next_call: 0,
            content: String::new(),
            calls: BTreeMap::new(),
            finish: None,
            done: false,
            ending: (None, false),
            usage: None,
            total: None,
            client_calls: 0,
        }
    }

    /// Takes the round's recall calls out of `calls` and renumbers the client's.
    fn tool_calls(&mut self, calls: &mut Vec<Value>) {
        calls.retain_mut(|delta| {
            let index = delta.get("index").and_then(Value::as_u64).unwrap_or(0);
            let function = delta.get("function");
            let text = |key: &str| {
                (function.and_then(|f| f.get(key)).and_then(Value::as_str)).unwrap_or("")
            };
            let call = self.calls.entry(index).or_insert_with(|| {
                let recall = text("name") == self.tool;
                let client = (!recall).then(|| {
                    self.next_call += 1;
                    self.next_call - 1
                });
                Call {
                    id: String::new(),
                    name: text("name").to_owned(),
                    arguments: String::new(),
                    client,
                }
            });
            if let Some(id) = delta.get("id").and_then(Value::as_str) {
                call.id = id.to_owned();
            }
            call.arguments.push_str(text("arguments"));
            match call.client {
                Some(client) => {
                    delta["index"] = json!(client);
                    true
                }
                None => false,
            }
        });
    }

    /// The choice's delta as the client gets it; whether anything is left to send.
    fn choice(&mut self, choice: &mut Map<String, Value>) -> bool {
        choice.insert("index".into(), json!(0));
        if let Some(reason) = choice.insert("finish_reason".into(), Value::Null)
            && !reason.is_null()
        {
            self.finish = Some(reason);
        }
        let Some(Value::Object(delta)) = choice.get_mut("delta") else {
            return false;
        };
        if self.rounds > 0 {
            // The SDKs concatenate string fields of deltas: the role is said once.
            delta.remove("role");
        }
        if let Some(text) = delta.get("content").and_then(Value::as_str) {
            self.content.push_str(text);
        }
        if let Some(Value::Array(mut calls)) = delta.remove("tool_calls") {
            self.tool_calls(&mut calls);
            if !calls.is_empty() {
                delta.insert("tool_calls".into(), Value::Array(calls));
            }
        }
        !delta.is_empty()
    }

    /// A chunk shaped like the first, carrying `choices` and `usage`.
    fn chunk(&self, choices: Value, usage: Option<Value>) -> Value {
        let mut chunk = self.template.clone().unwrap_or(json!({}));
        chunk["choices"] = choices;
        match usage {
            Some(usage) => chunk["usage"] = usage,
            None => {
                chunk.as_object_mut().map(|c| c.remove("usage"));
            }
        }
        chunk
    }
}

impl Splicer for Chat {
    fn event(&mut self, event: &Event, out: &mut Vec<u8>) {
        if event.data.trim() == "[DONE]" {
            self.done = true;
            return;
        }
        let Some(Value::Object(mut chunk)) = event.json.clone() else {
            return event.write(out);
        };
        if chunk.contains_key("error") {
            return event.write(out);
        }
        if let Some(usage) = chunk.remove("usage").filter(|u| !u.is_null()) {
            self.usage = Some(usage);
        }
        let template = self
            .template
            .get_or_insert_with(|| Value::Object(chunk.clone()));
        if let Some(id) = template.get("id") {
            chunk.insert("id".into(), id.clone());
        }
        let Some(Value::Array(choices)) = chunk.get_mut("choices") else {
            return;
        };
        let mut choices = std::mem::take(choices);
        choices.truncate(1);
        let keep = match choices.first_mut() {
            Some(Value::Object(choice)) => self.choice(choice),
            _ => false,
        };
        if keep {
            chunk.insert("choices".into(), Value::Array(choices));
            write_json(event.name.as_deref(), &Value::Object(chunk), out);
        }
    }

    fn end_round(&mut self) -> (Asked, Value) {
        let calls: Vec<Value> = std::mem::take(&mut self.calls)
            .into_values()
            .map(|c| {
                json!({"id": c.id, "type": "function",
                    "function": {"name": c.name, "arguments": c.arguments}})
            })
            .collect();
        let content = std::mem::take(&mut self.content);
        let mut message = json!({"role": "assistant", "content": content});
        if !calls.is_empty() {
            message["tool_calls"] = Value::Array(calls);
        }
        let answer = json!({"choices": [{"message": message}]});
        let asked = turn::asked(Format::OpenAi, &answer, &self.tool);
        self.client_calls = asked.client_calls;
        if let Some(usage) = self.usage.take() {
            match &mut self.total {
                Some(total) => turn::add_usage(total, &usage),
                None => self.total = Some(usage),
            }
        }
        self.rounds += 1;
        self.ending = (self.finish.take(), std::mem::take(&mut self.done));
        (asked, answer)
    }

    fn finish(&mut self, out: &mut Vec<u8>) {
        let (finish, done) = std::mem::take(&mut self.ending);
        if let Some(mut reason) = finish {
            if reason == "tool_calls" && self.client_calls == 0 {
                reason = json!("stop");
            }
            let choice = json!([{"index": 0, "delta": {}, "finish_reason": reason}]);
            write_json(None, &self.chunk(choice, None), out);
        }
        if let Some(total) = self.total.take() {
            write_json(None, &self.chunk(json!([]), Some(total)), out);
        }
        if done {
            write(None, "[DONE]", out);
        }
    }
}
