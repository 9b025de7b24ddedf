//! Two proxy replicas sharing their state in a real Redis, against one replica alone: a
//! long real session replayed turn by turn, alternating between the replicas, at a window
//! that makes the cascade compact and summarize. The provider's prompt cache, the summary
//! bill and the user's remembered facts must not notice that the conversation moves; Redis
//! going away mid-session must not stop it. Needs `redis-server` (`--features redis-tests`).

#![allow(clippy::unwrap_used, clippy::expect_used, unreachable_pub)] // test code: a failure is a test failure

mod common;
#[path = "common/redis_server.rs"]
mod redis_server;

use std::borrow::Cow;
use std::collections::HashSet;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use cascade_proxy::{Provider, ProxyConfig};
use common::{Script, call_points, fixture_messages, parts, scripted, start_proxy};
use context_cascade::replay::PrefixStability;
use redis_server::RedisServer;
use serde_json::{Value, json};

/// The longest session of the fixtures (293 messages, 578k characters).
const LONG: &str = "claude-code__spotter__4d5611e5-main.json";
/// Small enough that the cascade compacts the session often (①–③: its bulk is tool
/// output, which the cascade shortens and prunes before it would summarize).
const WINDOW: u64 = 64_000;
/// A prose session (no tool output to shorten): the cascade must summarize (④).
const PROSE_WINDOW: u64 = 4_000;

/// The LLM summarizer asks for nine headings (the scripted upstream answers those).
fn is_summary_request(body: &[u8]) -> bool {
    let body: Value = serde_json::from_slice(body).unwrap_or_default();
    body["messages"][0]["content"]
        .as_str()
        .is_some_and(|s| s.contains("nine headings"))
}

struct Cluster {
    script: Arc<Script>,
    proxies: Vec<String>,
    client: reqwest::Client,
    window: u64,
}

/// `replicas` proxies on one scripted upstream, which also serves as the summarizer (so
/// that summaries are counted where they are paid for). With `state`, they share it; all
/// use the tenancy secret beside `db` (replicas must share it, as deployed).
async fn cluster(replicas: usize, state: Option<String>, db: &Path, window: u64) -> Cluster {
    let mut script = Script::new(u64::MAX);
    script.bytes_per_token = 4.0;
    let script = Arc::new(script);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let upstream = scripted::serve(script.clone(), listener).base;
    let mut proxies = Vec::new();
    for i in 0..replicas {
        let mut config = ProxyConfig::new(upstream.clone());
        config.window.discover = false;
        config.window.force = Some(window);
        config.state.path = match &state {
            Some(_) => db.join("shared.db"),
            // Each scenario's own file: a calibration persisted by an earlier one would
            // make this replica start from what the Redis pair starts without.
            None => db.join(format!("replica-{i}-{window}.db")),
        };
        config.state.url = state.clone();
        config.summarizer.endpoint = upstream.clone();
        config.summarizer.protocol = Some(Provider::OpenAi);
        config.summarizer.model = Some("summarizer".into());
        proxies.push(start_proxy(config).await.0);
    }
    Cluster {
        script,
        proxies,
        client: reqwest::Client::new(),
        window,
    }
}

struct Figures {
    calls: usize,
    compacted: usize,
    stability: PrefixStability,
    summaries: usize,
    distinct_summaries: usize,
}

/// Sends call `k` (the history up to message `end`) through replica k mod n; returns
/// whether the cascade changed it.
async fn send_call(cluster: &Cluster, messages: &[Value], k: usize, end: usize) -> bool {
    let proxy = &cluster.proxies[k % cluster.proxies.len()];
    let mut body = json!({"model": "gpt-4o", "messages": &messages[..end]});
    if cluster.window > PROSE_WINDOW {
        // An agent's output reserve; the prose window is too small for one.
        body["max_tokens"] = json!(4096);
    }
    let response = common::send_chat(&cluster.client, proxy, &body).await;
    assert_eq!(response.status(), 200, "call {k} ending at message {end}");
    let steps = response.headers().get("x-context-cascade");
    if let Some(steps) = steps
        && std::env::var_os("REPLAY_VERBOSE").is_some()
    {
        println!(
            "call {k} ending at {end}: {}",
            steps.to_str().unwrap_or("?")
        );
    }
    steps.is_some()
}

/// What the upstream saw: the calls' prefix stability and the summaries asked for.
fn figures(cluster: &Cluster, calls: usize, compacted: usize) -> Figures {
    let seen = cluster.script.seen();
    let (summaries, sent): (Vec<_>, Vec<_>) =
        seen.iter().partition(|s| is_summary_request(&s.body));
    assert_eq!(sent.len(), calls, "one upstream request per call");
    let sent: Vec<Vec<Cow<str>>> = sent.iter().map(|s| parts(&s.body)).collect();
    let distinct: HashSet<&[u8]> = summaries.iter().map(|s| &s.body[..]).collect();
    Figures {
        calls,
        compacted,
        stability: PrefixStability::of(&sent),
        summaries: summaries.len(),
        distinct_summaries: distinct.len(),
    }
}

/// Replays `messages` turn by turn, alternating between the replicas.
async fn replay_through(cluster: &Cluster, messages: &[Value]) -> Figures {
    let points = call_points(messages);
    let mut compacted = 0;
    for (k, &end) in points.iter().enumerate() {
        compacted += usize::from(send_call(cluster, messages, k, end).await);
    }
    figures(cluster, points.len(), compacted)
}

fn print(label: &str, f: &Figures) {
    println!(
        "{label}: {} calls, {} compacted, {}/{} upstream requests extend the previous one = {:.1}%, \
         {} summaries computed ({} distinct)",
        f.calls,
        f.compacted,
        f.stability.extending,
        f.stability.compared,
        f.stability.share() * 100.0,
        f.summaries,
        f.distinct_summaries
    );
}

async fn health(client: &reqwest::Client, proxy: &str) -> String {
    let response = client.get(format!("{proxy}/healthz")).send().await.unwrap();
    assert_eq!(response.status(), 200);
    response.text().await.unwrap()
}

fn temp_dir(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("cascade-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_replicas_on_redis_continue_a_session_like_one() {
    let messages = fixture_messages(LONG);
    let dir = temp_dir("replicas");
    let single = cluster(1, None, &dir, WINDOW).await;
    let one = replay_through(&single, &messages).await;
    print(
        &format!("one replica (SQLite), {LONG} at window {WINDOW}"),
        &one,
    );

    let server = RedisServer::start();
    let pair = cluster(2, Some(server.url(0)), &dir, WINDOW).await;
    let two = replay_through(&pair, &messages).await;
    print("two replicas (Redis), alternating", &two);
    assert!(one.compacted > 0, "the window must force compaction");
    assert_eq!(
        (two.stability.extending, two.stability.compared),
        (one.stability.extending, one.stability.compared),
        "prefix stability: two replicas as one"
    );
    assert_eq!(two.compacted, one.compacted);
    assert_eq!(two.summaries, one.summaries, "summaries computed");

    // A prose session, where the cascade summarizes: the same summaries, each paid once.
    let prose = common::history(14, 3000, "Go on with the next module.");
    let single_prose = cluster(1, None, &dir, PROSE_WINDOW).await;
    let one = replay_through(&single_prose, &prose).await;
    print(
        &format!("one replica (SQLite), prose session at window {PROSE_WINDOW}"),
        &one,
    );
    let pair_prose = cluster(2, Some(server.url(1)), &dir, PROSE_WINDOW).await;
    let two = replay_through(&pair_prose, &prose).await;
    print("two replicas (Redis), alternating", &two);
    assert!(one.summaries > 0, "the window must force summaries");
    assert_eq!(two.summaries, one.summaries, "summaries computed");
    assert_eq!(
        two.summaries, two.distinct_summaries,
        "each summary computed once"
    );
    assert_eq!(one.summaries, one.distinct_summaries);
    assert_eq!(
        (two.stability.extending, two.stability.compared),
        (one.stability.extending, one.stability.compared),
        "prefix stability: two replicas as one"
    );

    // A fact remembered through one replica is put back into a request through the other.
    let fact = "Please remember that the staging deploy key is K-42.";
    let first = json!({"model": "gpt-4o", "messages": common::history(2, 100, fact)});
    // The client compacted its own history and lost the request (same conversation: the
    // same system message).
    let later = common::history(2, 100, "Which key do we use for staging?");
    let second = json!({"model": "gpt-4o", "messages": later});
    for (proxy, body) in [(&pair.proxies[0], &first), (&pair.proxies[1], &second)] {
        let response = common::send_chat(&pair.client, proxy, body).await;
        assert_eq!(response.status(), 200);
    }
    let last = pair.script.seen().pop().unwrap();
    let sent = String::from_utf8_lossy(&last.body);
    assert!(
        sent.contains("K-42"),
        "the fact reached replica 1's request"
    );
    println!("a fact remembered through replica 0 is in the request through replica 1: K-42");
    drop(server);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_stopped_mid_session_degrades_then_recovers() {
    let messages = fixture_messages(LONG);
    let dir = temp_dir("redis-restart");
    let mut server = RedisServer::start();
    let pair = cluster(2, Some(server.url(0)), &dir, WINDOW).await;
    let points = call_points(&messages);
    let (stop_at, start_at) = (points.len() / 3, 2 * points.len() / 3);
    assert_eq!(health(&pair.client, &pair.proxies[0]).await, "ok\n");
    let mut compacted = 0;
    let mut degraded_calls = 0;
    for (k, &end) in points.iter().enumerate() {
        if k == stop_at {
            server.stop();
            let down = health(&pair.client, &pair.proxies[k % 2]).await;
            println!("call {k}: Redis stopped; healthz: {}", down.trim());
            assert!(
                down.starts_with("degraded: the state store is unavailable"),
                "{down}"
            );
        }
        if k == start_at {
            server.restart();
            let started = Instant::now();
            let proxy = &pair.proxies[k % 2];
            loop {
                let text = health(&pair.client, proxy).await;
                if text == "ok\n" {
                    break;
                }
                assert!(started.elapsed() < Duration::from_secs(10), "{text}");
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            println!(
                "call {k}: Redis restarted; healthz ok after {:?}",
                started.elapsed()
            );
        }
        let started = Instant::now();
        compacted += usize::from(send_call(&pair, &messages, k, end).await);
        if (stop_at..start_at).contains(&k) {
            degraded_calls += 1;
            assert!(
                started.elapsed() < Duration::from_secs(5),
                "call {k} blocked"
            );
        }
    }
    let figures = figures(&pair, points.len(), compacted);
    print("two replicas, Redis stopped for the middle third", &figures);
    println!("{degraded_calls} calls served while Redis was down, every call answered 200");
    for proxy in &pair.proxies {
        assert_eq!(health(&pair.client, proxy).await, "ok\n");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A conversation in each wire format whose first turn one replica compacted continues on
/// another with the same upstream request as on a proxy that never moved: the decision
/// is read back from Redis (Responses too: its record was once unreadable).
#[tokio::test]
async fn each_wire_format_keeps_its_decision_across_replicas() {
    use common::sticky::{WINDOW, Wire, assert_kept, send};
    let server = RedisServer::start();
    let dir = std::env::temp_dir().join(format!("cascade-replica-wires-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    for wire in [Wire::Chat, Wire::Anthropic, Wire::Responses] {
        let mut script = Script::new(u64::MAX);
        script.report_usage = false;
        let script = Arc::new(script);
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let upstream = scripted::serve(script.clone(), listener).base;
        let config = |state: Option<String>, db: &str| {
            let mut config = ProxyConfig::new(upstream.clone());
            config.window.discover = false;
            config.window.force = Some(WINDOW);
            config.state.path = dir.join(db);
            config.state.url = state;
            config
        };
        let client = reqwest::Client::new();
        let (first, second) = wire.turns(12, 1500);
        let (alone, _) = start_proxy(config(None, &format!("alone-{wire:?}.db"))).await;
        assert!(
            send(&client, &alone, wire, &first).await,
            "compaction needed"
        );
        send(&client, &alone, wire, &second).await;
        let shared = Some(server.url(0));
        let (a, _) = start_proxy(config(shared.clone(), "shared.db")).await;
        let (b, _) = start_proxy(config(shared, "shared.db")).await;
        assert!(send(&client, &a, wire, &first).await);
        send(&client, &b, wire, &second).await;
        let seen = script.seen();
        assert_eq!(seen.len(), 4, "{wire:?}: one upstream call per request");
        assert_kept(
            wire,
            (&seen[0].body, &seen[1].body),
            (&seen[2].body, &seen[3].body),
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}
