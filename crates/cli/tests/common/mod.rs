//! What the CLI's summarizer tests share.

use serde_json::{Value, json};

/// Long prose turns: nothing ② can compact and the recent turns alone overflow the pruning
/// target, so ③ cannot do and ④ must summarize.
pub fn session_messages() -> Vec<Value> {
    let prose = "The parser in src/lexer.rs still mishandles nested comments; ".repeat(30);
    let mut messages =
        vec![json!({"role": "user", "content": "Fix the nested comment bug in src/lexer.rs"})];
    for i in 0..20 {
        messages.push(json!({"role": "assistant", "content": format!("Step {i}: {prose}")}));
        messages.push(json!({"role": "user", "content": format!("Noted {i}. {prose}")}));
    }
    messages
}
