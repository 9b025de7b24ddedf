//! A window learned from an overflow error is persisted with the calibration: a restarted
//! proxy knows the limit before its first request, so it does not pay an overflow again.

#![allow(clippy::unwrap_used, clippy::expect_used, unreachable_pub)] // test code: a failure is a test failure

mod common;

use common::{LAST, Script, anthropic_body, history, metrics_text, post, start};
use serde_json::{Value, json};

const MODEL: &str = "claude-sonnet-4-5";

/// A request well over the scripted upstream's 6,000-token limit.
fn big_body() -> Value {
    let mut messages = history(8, 600, LAST);
    for i in 0..24 {
        messages.insert(
            messages.len() - 1,
            json!({"role": if i % 2 == 0 {"user"} else {"assistant"},
                   "content": common::prose(i, 1500)}),
        );
    }
    anthropic_body(MODEL, &messages, false)
}

fn overflows(script: &Script) -> usize {
    script.seen().iter().filter(|s| s.status == 400).count()
}

#[tokio::test]
async fn a_learned_window_survives_a_restart() {
    let dir = std::env::temp_dir().join(format!("cascade-learned-{}", std::process::id()));
    let db = dir.join("cascade.db");
    let body = big_body();

    let first = start(Script::new(6000), |c| c.state.path = db.clone()).await;
    let response = post(&first, "/v1/messages", &body).await;
    assert_eq!(response.status(), 200, "{}", response.text().await.unwrap());
    assert_eq!(
        overflows(&first.script),
        1,
        "the first proxy learns the limit once"
    );
    drop(first);

    let second = start(Script::new(6000), |c| c.state.path = db.clone()).await;
    let text = metrics_text(&second).await;
    assert!(
        text.contains(&format!(
            "cascade_learned_window_tokens{{model=\"{MODEL}\"}} 6000"
        )),
        "{text}"
    );
    let response = post(&second, "/v1/messages", &body).await;
    assert_eq!(response.status(), 200, "{}", response.text().await.unwrap());
    assert_eq!(
        overflows(&second.script),
        0,
        "the restarted proxy already knows it"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
