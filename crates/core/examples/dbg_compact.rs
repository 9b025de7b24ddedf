use context_cascade::*;
fn main() {
    let args: Vec<String> = std::env::args().collect();
    let v: serde_json::Value = serde_json::from_slice(&std::fs::read(&args[1]).unwrap()).unwrap();
    let body = serde_json::json!({"model":"gpt-4o","max_tokens":1024,"messages":v["messages"]});
    let mut c = format::parse(body.to_string().as_bytes(), None).unwrap();
    let m = ContextManager::new(CascadeConfig::default());
    let w: u64 = args[2].parse().unwrap();
    for pass in 0..2 {
        let r = pollster::block_on(m.compact_with_summary(&mut c, Budget::new(w, 1024)));
        println!("pass {pass}: {} -> {} msgs {} -> {}", r.tokens_before, r.tokens_after, r.messages_before, r.messages_after);
        for s in &r.steps { println!("  {:?} {:?} {} -> {} target {} : {}", s.strategy, s.level, s.tokens_before, s.tokens_after, s.target_tokens, s.detail); }
        for (i, msg) in c.messages.iter().enumerate() { let t: String = msg.text_content().chars().take(50).collect(); println!("    {i} {:?} {} {:?}", msg.role(), m.estimator("gpt-4o").message_tokens(msg), t); }
    }
}
