//! The status page on a real proxy (its own accept loop, on 127.0.0.1) in front of the
//! scripted upstream: after a few compacting requests `GET /` lists the conversation, its
//! compactions and its chart, and shows none of the conversation's content; with an admin
//! token the page needs it; other methods on `/` still go upstream.

#![allow(clippy::unwrap_used, clippy::expect_used, unreachable_pub)] // test code: a failure is a test failure

mod common;

use cascade_proxy::AdminToken;
use common::{Harness, Script, post, start};
use serde_json::{Value, json};

/// Words that only the conversation's content holds.
const CONTENT: [&str; 4] = [
    "PRIVATE_REQUEST",
    "private_module",
    "PRIVATE_OUTPUT",
    "PRIVATE_QUESTION",
];

/// An agent session of `turns` tool exchanges: file reads with long outputs.
fn session(turns: usize) -> Vec<Value> {
    let mut messages = vec![
        json!({"role": "system", "content": "You are a careful coding agent."}),
        json!({"role": "user", "content": "PRIVATE_REQUEST: fix the parser"}),
    ];
    for i in 0..turns {
        let id = format!("call_{i}");
        let path = format!("src/private_module/file_{i}.rs");
        messages.push(
            json!({"role": "assistant", "content": null, "tool_calls": [{"id": id,
            "type": "function", "function": {"name": "read_file",
            "arguments": json!({"path": path}).to_string()}}]}),
        );
        let output = format!("PRIVATE_OUTPUT of {path}: {}", "let x = 1; ".repeat(250));
        messages.push(json!({"role": "tool", "tool_call_id": id, "content": output}));
    }
    messages.push(json!({"role": "user", "content": "PRIVATE_QUESTION: what failed?"}));
    messages
}

/// Sends the session turn by turn (each request the whole history so far).
async fn replay(h: &Harness, turns: usize) -> usize {
    let mut compacted = 0;
    for n in (2..=turns).step_by(2) {
        let body = json!({"model": "gpt-4o", "max_tokens": 256, "messages": session(n)});
        let response = post(h, "/v1/chat/completions", &body).await;
        assert_eq!(response.status(), 200);
        compacted += usize::from(response.headers().contains_key("x-context-cascade"));
    }
    compacted
}

async fn get(h: &Harness, url: &str, bearer: Option<&str>) -> (u16, String) {
    let mut request = h.client.get(url);
    if let Some(token) = bearer {
        request = request.bearer_auth(token);
    }
    let response = request.send().await.unwrap();
    let status = response.status().as_u16();
    (status, response.text().await.unwrap())
}

#[tokio::test]
async fn the_page_lists_the_conversation_its_compactions_and_its_chart() {
    let h = start(Script::new(u64::MAX), |c| c.window.force = Some(8_000)).await;
    let compacted = replay(&h, 24).await;
    assert!(compacted > 0, "the window must force compaction");
    let response = h.client.get(format!("{}/", h.proxy)).send().await.unwrap();
    assert_eq!(response.status(), 200);
    let kind = response.headers()["content-type"]
        .to_str()
        .unwrap()
        .to_owned();
    assert!(kind.starts_with("text/html"), "{kind}");
    assert_eq!(response.headers()["cache-control"], "no-store");
    let html = response.text().await.unwrap();
    assert_eq!(html.matches("class=\"conversation\"").count(), 1);
    assert!(html.contains("<svg") && html.contains("<polyline class=\"sent\""));
    assert!(html.contains("<circle class=\"fired\""));
    assert!(html.contains("class=\"compactions\""));
    assert!(
        ["compact_tool_results", "prune_history", "summarize"]
            .iter()
            .any(|s| html.contains(s)),
        "no strategy named"
    );
    assert!(html.contains("gpt-4o"), "an admitted model is named");
    assert!(html.contains("prefix stability"));
    for word in CONTENT {
        assert!(!html.contains(word), "{word} leaked into the page");
    }
    assert!(html.len() < 32 * 1024, "{} bytes", html.len());
    // Other methods on `/` are still the upstream's (its 404), as before.
    let forwarded = h
        .client
        .post(format!("{}/", h.proxy))
        .body("{}")
        .send()
        .await
        .unwrap();
    assert_eq!(forwarded.status(), 404);
}

#[tokio::test]
async fn with_an_admin_token_the_page_needs_it() {
    let h = start(Script::new(u64::MAX), |c| {
        c.window.force = Some(8_000);
        c.status.admin_token = Some(AdminToken::new("let-me-in").unwrap());
    })
    .await;
    replay(&h, 8).await;
    let url = format!("{}/", h.proxy);
    let (status, body) = get(&h, &url, None).await;
    assert_eq!(status, 401, "{body}");
    assert_eq!(get(&h, &url, Some("wrong")).await.0, 401);
    let (status, html) = get(&h, &url, Some("let-me-in")).await;
    assert_eq!(status, 200);
    assert!(html.contains("class=\"conversation\""));
    // A browser passes it in the address; the page's links carry it on.
    let (status, html) = get(&h, &format!("{url}?token=let-me-in"), None).await;
    assert_eq!(status, 200);
    assert!(html.contains("token=let-me-in"));
}

#[tokio::test]
async fn the_token_is_read_from_the_config_file() {
    let config = cascade_proxy::ProxyConfig::from_toml_str(
        "upstream = \"http://127.0.0.1:9\"\n[status]\nadmin_token = \"abc\"\n",
    )
    .unwrap();
    assert_eq!(
        config.status.admin_token,
        Some(AdminToken::new("abc").unwrap())
    );
    assert!(
        cascade_proxy::ProxyConfig::from_toml_str("[status]\nadmin_token = \"\"\n").is_err(),
        "an empty token would open the page to anyone"
    );
}
