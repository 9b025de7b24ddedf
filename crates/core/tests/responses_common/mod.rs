//! Helpers of the Responses tests: the hand-made fixtures and generated Codex-like sessions
//! of any length.
#![allow(dead_code)]

use std::collections::{HashMap, HashSet};

use serde_json::{Value, json};

/// `fixtures/responses/` at the repository root.
fn dir() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/responses")
}

/// One fixture by file stem.
pub fn fixture(stem: &str) -> Value {
    let path = dir().join(format!("{stem}.json"));
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("fixture {}: {e}", path.display()));
    serde_json::from_str(&text).unwrap()
}

/// Every fixture: (file stem, body).
pub fn fixtures() -> Vec<(String, Value)> {
    let mut stems: Vec<String> = std::fs::read_dir(dir())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .map(|p| p.file_stem().unwrap().to_string_lossy().into_owned())
        .collect();
    stems.sort();
    stems
        .into_iter()
        .map(|s| (s.clone(), fixture(&s)))
        .collect()
}

/// A deterministic pseudo-random sequence (no dependency, same on every machine).
struct Lcg(u64);

impl Lcg {
    fn next(&mut self, below: u64) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        (self.0 >> 33) % below
    }
}

/// Shell output of about `chars` characters: file listings, compiler lines, test results.
fn shell_output(rng: &mut Lcg, chars: usize) -> String {
    let mut out = String::with_capacity(chars + 80);
    while out.len() < chars {
        let line = match rng.next(4) {
            0 => format!(
                "src/module_{}/file_{}.rs:{}: fn handle_{}(input: &str) -> Result<(), Error> {{",
                rng.next(30),
                rng.next(90),
                rng.next(900),
                rng.next(500)
            ),
            1 => format!(
                "warning: unused variable `x{}` --> src/lib.rs:{}:{}",
                rng.next(99),
                rng.next(700),
                rng.next(80)
            ),
            2 => format!("test tests::case_{} ... ok", rng.next(10_000)),
            _ => format!(
                "    {} | let value = compute({}, \"ß→✓\");",
                rng.next(999),
                rng.next(50)
            ),
        };
        out.push_str(&line);
        out.push('\n');
    }
    out
}

/// A Codex-like session: instructions, the developer and context messages, the task, then
/// `turns` turns of reasoning + calls (shell with outputs of about `output_chars`, an
/// apply_patch custom call now and then, parallel calls, a local shell call) with their
/// outputs, the assistant's words now and then, and a closing user message.
pub fn generated_session(turns: usize, output_chars: usize, seed: u64) -> Value {
    let mut rng = Lcg(seed);
    let mut input = vec![
        json!({"type": "message", "role": "developer", "content": [
            {"type": "input_text", "text": "<permissions instructions>\nsandbox_mode is workspace-write.\n</permissions instructions>"}]}),
        json!({"type": "message", "role": "user", "content": [
            {"type": "input_text", "text": "<environment_context>\n  <cwd>/work/repo</cwd>\n</environment_context>"}]}),
        json!({"type": "message", "role": "user", "content": [
            {"type": "input_text", "text": "Make every test in the workspace pass."}]}),
    ];
    for turn in 0..turns {
        let encrypted = format!(
            "gAAAAAB{}{}==",
            turn,
            "Qk".repeat(40 + rng.next(200) as usize)
        );
        input.push(json!({"type": "reasoning", "summary": [
            {"type": "summary_text", "text": format!("**Step {turn}**")}],
            "content": null, "encrypted_content": encrypted}));
        if turn % 3 == 1 {
            input.push(json!({"type": "message", "role": "assistant", "content": [
                {"type": "output_text", "text": format!("Turn {turn}: checking the next module.")}]}));
        }
        let calls = if turn % 7 == 6 { 2 } else { 1 };
        let ids: Vec<String> = (0..calls).map(|k| format!("call_{turn}_{k}")).collect();
        for id in &ids {
            let item = match turn % 5 {
                4 => json!({"type": "custom_tool_call", "status": "completed", "call_id": id,
                    "name": "apply_patch", "input": format!("*** Begin Patch\n*** Update File: src/f{turn}.rs\n@@\n-old\n+new\n*** End Patch\n")}),
                2 if turn % 2 == 0 => {
                    json!({"type": "local_shell_call", "id": format!("lsh_{turn}"),
                    "call_id": id, "status": "completed",
                    "action": {"type": "exec", "command": ["bash", "-lc", "cargo test"]}})
                }
                _ => json!({"type": "function_call", "name": "shell", "call_id": id,
                    "arguments": format!("{{\"command\":[\"bash\",\"-lc\",\"rg -n handle_{turn} src\"],\"workdir\":\"/work/repo\"}}")}),
            };
            input.push(item);
        }
        for id in &ids {
            let size = output_chars / 2 + rng.next(output_chars as u64) as usize;
            let output = shell_output(&mut rng, size);
            let item = match turn % 5 {
                4 => json!({"type": "custom_tool_call_output", "call_id": id, "output": output}),
                2 if turn % 2 == 0 => {
                    json!({"type": "local_shell_call_output", "id": id, "output": output})
                }
                _ => json!({"type": "function_call_output", "call_id": id, "output": output}),
            };
            input.push(item);
        }
        if turn % 10 == 9 {
            input.push(json!({"type": "message", "role": "user", "content": [
                {"type": "input_text", "text": format!("Keep going, {turn} done.")}]}));
        }
    }
    input.push(json!({"type": "message", "role": "user", "content": [
        {"type": "input_text", "text": "Now summarise what you changed."}]}));
    json!({
        "model": "gpt-5-codex",
        "instructions": "You are Codex, a coding agent. Use the shell to inspect and edit the repository.",
        "input": input,
        "tools": [{"type": "function", "name": "shell", "description": "Runs a shell command.",
            "strict": false, "parameters": {"type": "object", "properties": {
                "command": {"type": "array", "items": {"type": "string"}}}, "required": ["command"]}},
            {"type": "custom", "name": "apply_patch", "description": "Edits files."},
            {"type": "local_shell"}],
        "tool_choice": "auto",
        "parallel_tool_calls": true,
        "reasoning": {"effort": "medium", "summary": "auto"},
        "store": false,
        "stream": true,
        "include": ["reasoning.encrypted_content"],
        "prompt_cache_key": format!("session-{seed}")
    })
}

/// The `input` items of a body.
pub fn input(body: &Value) -> &Vec<Value> {
    body["input"].as_array().expect("input items")
}

/// The id that ties an item to its pair, and whether it is the call (or the output).
fn pair_key(item: &Value) -> Option<(String, bool)> {
    let kind = item["type"].as_str()?;
    if kind.ends_with("_call_output") {
        let id = item.get("call_id").or_else(|| item.get("id"))?;
        Some((id.as_str()?.to_owned(), false))
    } else if kind.ends_with("_call") {
        Some((item["call_id"].as_str()?.to_owned(), true))
    } else {
        None
    }
}

/// Every call has exactly one output after it, every output its call before it.
pub fn check_pairs(items: &[Value]) -> Result<(), String> {
    let mut open: HashSet<String> = HashSet::new();
    let mut seen: HashSet<String> = HashSet::new();
    for (i, item) in items.iter().enumerate() {
        match pair_key(item) {
            Some((id, true)) => {
                if !seen.insert(id.clone()) {
                    return Err(format!("item {i}: call {id} twice"));
                }
                open.insert(id);
            }
            Some((id, false)) if !open.remove(&id) => {
                return Err(format!("item {i}: output {id} without its call before it"));
            }
            _ => {}
        }
    }
    match open.into_iter().next() {
        Some(id) => Err(format!("call {id} has no output")),
        None => Ok(()),
    }
}

/// Every reasoning item of `out` is one of `original`'s, byte for byte, and the item after
/// it is the one that followed it there.
pub fn check_reasoning(original: &[Value], out: &[Value]) -> Result<usize, String> {
    let next_of: HashMap<String, &Value> = original
        .windows(2)
        .filter(|w| w[0]["type"] == "reasoning")
        .map(|w| (w[0].to_string(), &w[1]))
        .collect();
    let mut count = 0;
    for (i, item) in out.iter().enumerate() {
        if item["type"] != "reasoning" {
            continue;
        }
        let Some(expected) = next_of.get(&item.to_string()) else {
            return Err(format!("item {i}: reasoning not in the original"));
        };
        if out.get(i + 1) != Some(*expected) {
            return Err(format!(
                "item {i}: reasoning separated from what it preceded"
            ));
        }
        count += 1;
    }
    Ok(count)
}
