#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failure is a test failure

use super::*;
use crate::{Budget, CascadeConfig, Conversation, format};

fn tool_session(turns: usize, output_chars: usize) -> Conversation {
    let body = cascade_test_support::tool_session_body(turns, output_chars);
    format::parse_value(body, None).expect("valid test body")
}

fn price(transcript: &Conversation, window: u64, plan: &Plan) -> SessionCost {
    let prices = Prices::CLAUDE_SONNET;
    pollster::block_on(price_session(
        transcript,
        Budget::new(window, 0),
        plan,
        None,
        &prices,
    ))
}

#[test]
fn a_call_reads_the_shared_prefix_and_writes_the_rest() {
    let billed = Billed::call(1_000, 1_500, 10);
    assert_eq!((billed.cache_read, billed.cache_write), (1_000, 0));
    let billed = Billed::call(1_000, 400, 10);
    assert_eq!(
        (billed.cache_read, billed.cache_write, billed.input()),
        (400, 600, 1_000)
    );
    // OpenAI bills no write premium; Anthropic 1.25×, and reads at 0.1×.
    for prices in [Prices::GPT_4O, Prices::GPT_4_1, Prices::GPT_5] {
        assert_eq!(prices.cache_write, prices.input);
    }
    for prices in [
        Prices::CLAUDE_SONNET,
        Prices::CLAUDE_OPUS,
        Prices::CLAUDE_HAIKU,
    ] {
        assert!((prices.cache_write - 1.25 * prices.input).abs() < 1e-9);
        assert!((prices.cache_read - 0.1 * prices.input).abs() < 1e-9);
    }
    assert_eq!(Prices::for_model("claude-opus-4-6"), Prices::CLAUDE_OPUS);
    assert_eq!(
        Prices::for_model("anthropic/claude-haiku-4-5"),
        Prices::CLAUDE_HAIKU
    );
    assert_eq!(Prices::for_model("gpt-4o-mini"), Prices::GPT_4O);
    assert_eq!(
        Prices::for_model("openai/openrouter-llama-4-maverick"),
        Prices::GPT_5
    );
}

#[test]
fn a_session_that_fits_unmanaged_extends_on_every_call() {
    let transcript = tool_session(10, 400);
    let cost = price(&transcript, 1_000_000, &Plan::Unmanaged);
    assert_eq!(cost.calls, 11);
    assert_eq!(cost.extending, 10);
    assert_eq!(cost.over_window, 0);
    assert_eq!(cost.summary_calls, 0);
    // Every call reads the previous request from the cache: what is written over the session
    // is the last request (each message written once), what is read grows with every call.
    assert!(cost.agent.cache_read > cost.agent.cache_write);
    assert!(cost.dollars > 0.0);
    // The cascade with room to spare does nothing: the same bill.
    let config = CascadeConfig::default();
    let plan = Plan::Cascade {
        config: Box::new(config),
        ahead: false,
    };
    assert_eq!(price(&transcript, 1_000_000, &plan), cost);
}

#[test]
fn a_small_window_is_managed_by_every_plan_but_the_unmanaged_one() {
    let transcript = tool_session(30, 4_000);
    let window = 8_000;
    let unmanaged = price(&transcript, window, &Plan::Unmanaged);
    assert!(unmanaged.over_window > 0);
    for (name, plan) in standard_plans(&CascadeConfig::default()) {
        let cost = price(&transcript, window, &plan);
        assert_eq!(cost.calls, 31, "{name}");
        if matches!(plan, Plan::Unmanaged) {
            continue;
        }
        assert_eq!(cost.over_window, 0, "{name}");
        // Rewriting the history costs cache writes: fewer calls extend the previous one.
        assert!(cost.extending < 30, "{name}: {}", cost.extending);
        if let Plan::Client(rule) = plan {
            assert!(cost.summary_calls > 0, "{name}");
            assert!(rule.threshold(window) < window);
        }
    }
}

#[test]
fn the_clients_compact_at_their_published_thresholds() {
    assert_eq!(ClientRule::ClaudeCode.threshold(200_000), 167_000);
    assert_eq!(ClientRule::Codex.threshold(200_000), 180_000);
    assert_eq!(ClientRule::ClaudeCode.threshold(32_000), 26_720);
}
