//! Test harness: a scripted upstream and a proxy in front of it, both on 127.0.0.1:0.

#![allow(clippy::unwrap_used, clippy::expect_used, unreachable_pub)] // test code: a failure is a test failure
#![allow(dead_code)]

pub mod recall;
pub mod scripted;
pub mod sticky;

use std::sync::Arc;

use cascade_proxy::config::IN_MEMORY_DB;
use cascade_proxy::{AppState, ProxyConfig, serve_state};
use std::borrow::Cow;
use std::collections::BTreeMap;
use std::path::PathBuf;

use context_cascade::{Role, replay};
use serde_json::value::RawValue;
use serde_json::{Value, json};

#[allow(unused_imports)]
pub use scripted::{OpenAiFlavor, Script};

pub struct Harness {
    pub script: Arc<Script>,
    pub upstream: String,
    pub proxy: String,
    pub state: Arc<AppState>,
    pub client: reqwest::Client,
}

/// Starts the scripted upstream and a proxy in front of it. `configure` adjusts the proxy's
/// config (window, db path, ...); by default the database is in memory, discovery is off.
pub async fn start(script: Script, configure: impl FnOnce(&mut ProxyConfig)) -> Harness {
    let script = Arc::new(script);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let upstream = scripted::serve(script.clone(), listener).base;
    let mut config = ProxyConfig::new(upstream.clone());
    config.state.path = IN_MEMORY_DB.into();
    config.window.discover = false;
    configure(&mut config);
    let (proxy, state) = start_proxy(config).await;
    Harness {
        script,
        upstream,
        proxy,
        state,
        client: reqwest::Client::new(),
    }
}

/// Starts a proxy with `config`; returns its base URL and state.
pub async fn start_proxy(config: ProxyConfig) -> (String, Arc<AppState>) {
    let state = AppState::new(config).unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let proxy = format!("http://{}", listener.local_addr().unwrap());
    // The proxy's own accept loop (its client limits), as `cascade proxy` runs it.
    let served = state.clone();
    tokio::spawn(async move {
        let _ = serve_state(served, listener, std::future::pending()).await;
    });
    (proxy, state)
}

/// A prose sentence of about `chars` characters, numbered so that messages differ.
pub fn prose(n: usize, chars: usize) -> String {
    let base = format!(
        "Message {n}: the build of module {n} failed because the parser rejected an input. "
    );
    base.repeat(chars / base.len() + 1)[..chars].to_string()
}

/// An OpenAI-style history of `turns` user/assistant pairs, `chars` each, then a last user
/// message.
pub fn history(turns: usize, chars: usize, last: &str) -> Vec<Value> {
    let mut messages =
        vec![json!({"role": "system", "content": "You are a careful coding agent."})];
    for i in 0..turns {
        messages.push(json!({"role": "user", "content": prose(2 * i, chars)}));
        messages.push(json!({"role": "assistant", "content": prose(2 * i + 1, chars)}));
    }
    messages.push(json!({"role": "user", "content": last}));
    messages
}

/// The same history as an Anthropic body's `system` and `messages`.
pub fn anthropic_body(model: &str, messages: &[Value], stream: bool) -> Value {
    let system = messages[0]["content"].clone();
    json!({"model": model, "max_tokens": 256, "system": system,
           "messages": messages[1..].to_vec(), "stream": stream})
}

/// Fetches `/metrics` from the proxy.
pub async fn metrics_text(h: &Harness) -> String {
    h.client
        .get(format!("{}/metrics", h.proxy))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap()
}

/// The last user message of the test histories.
pub const LAST: &str = "Now fix the parser and tell me what changed.";

/// POSTs `body` to the proxy with the keys of both providers, as an SDK would.
pub async fn post(h: &Harness, path: &str, body: &Value) -> reqwest::Response {
    keyed_post(&h.client, format!("{}{path}", h.proxy))
        .header("anthropic-version", "2023-06-01")
        .json(body)
        .send()
        .await
        .unwrap()
}

/// A POST to `url` with the keys `post` sends: a proxy restarted on the same database finds
/// the state of the same tenant.
pub fn keyed_post(client: &reqwest::Client, url: String) -> reqwest::RequestBuilder {
    client
        .post(url)
        .header("authorization", "Bearer sk-test-123")
        .header("x-api-key", "ant-test-456")
}

/// POSTs `body` to the proxy at `proxy` as a Chat Completions request without credentials.
pub async fn send_chat(client: &reqwest::Client, proxy: &str, body: &Value) -> reqwest::Response {
    client
        .post(format!("{proxy}/v1/chat/completions"))
        .json(body)
        .send()
        .await
        .unwrap()
}

/// POSTs `body` to the proxy exactly as written, as a JSON request.
pub async fn post_raw(h: &Harness, path: &str, body: &'static str) -> reqwest::Response {
    h.client
        .post(format!("{}{path}", h.proxy))
        .header("content-type", "application/json")
        .body(body)
        .send()
        .await
        .unwrap()
}

/// The second request the upstream saw, as sent, after checking that it refused the first
/// (an overflow) and answered the second (the recovered request).
pub fn recovered_request(h: &Harness) -> Value {
    let seen = h.script.seen();
    assert_eq!(
        seen.iter().map(|s| s.status).collect::<Vec<_>>(),
        vec![400, 200]
    );
    serde_json::from_slice(&seen[1].body).unwrap()
}

/// A SQLite database file of one test, under the system's temporary folder: removed, with
/// the tenancy secret beside it, when made (a previous run's) and when dropped.
pub struct TempDb {
    pub path: PathBuf,
}

impl TempDb {
    pub fn new(name: &str) -> TempDb {
        let name = format!("cascade-proxy-{name}-{}.db", std::process::id());
        let db = TempDb {
            path: std::env::temp_dir().join(name),
        };
        db.remove();
        db
    }

    fn remove(&self) {
        let _ = std::fs::remove_file(&self.path);
        let _ = std::fs::remove_file(cascade_proxy::secret_path(&self.path));
    }
}

impl Drop for TempDb {
    fn drop(&mut self) {
        self.remove();
    }
}

/// Starts the scripted upstream and a proxy with its database in `db` and the window
/// `window`, so that a restart on the same file can be tested.
pub async fn start_on_disk(script: Script, db: &TempDb, window: u64) -> Harness {
    let path = db.path.clone();
    start(script, move |c| {
        c.window.force = Some(window);
        c.state.path = path;
    })
    .await
}

/// The config of a proxy restarted on `db` in front of `h`'s upstream, with the window
/// `window` and no discovery, as `start` configures the first one.
pub fn restart_config(h: &Harness, db: &TempDb, window: u64) -> ProxyConfig {
    let mut config = ProxyConfig::new(h.upstream.clone());
    config.state.path = db.path.clone();
    config.window.force = Some(window);
    config.window.discover = false;
    config
}

/// The messages of a vendored fixture transcript (`fixtures/transcripts/NAME`).
pub fn fixture_messages(fixture: &str) -> Vec<Value> {
    let path = cascade_test_support::fixture(&format!("transcripts/{fixture}"));
    let bytes = std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let fixture: Value = serde_json::from_slice(&bytes).unwrap();
    fixture["messages"].as_array().unwrap().clone()
}

/// The points where the agent called the model: `context_cascade::replay`'s rule, read from
/// the wire roles.
pub fn call_points(messages: &[Value]) -> Vec<usize> {
    let roles = messages.iter().map(|m| {
        let role = m["role"].as_str().unwrap_or("");
        Role::parse(role).unwrap_or_else(|| panic!("unknown role {role:?}"))
    });
    replay::call_points(roles)
}

/// A request body as parts, for `context_cascade::replay::extends`: every field besides
/// `messages` (as one part, byte for byte), then each message as sent, byte for byte.
pub fn parts(body: &[u8]) -> Vec<Cow<'_, str>> {
    let mut rest: BTreeMap<String, &RawValue> = serde_json::from_slice(body).unwrap();
    let messages: Vec<&RawValue> =
        serde_json::from_str(rest.remove("messages").unwrap().get()).unwrap();
    let rest = rest.iter().map(|(k, v)| format!("{k:?}:{}", v.get()));
    let mut parts = vec![Cow::Owned(rest.collect::<Vec<_>>().join(","))];
    parts.extend(messages.into_iter().map(|m| Cow::Borrowed(m.get())));
    parts
}
