//! A conversation keeps its compaction decision across a restart of the proxy (SQLite, the
//! same database), in every wire format, even when the proxy is stopped right after
//! answering: shutdown drains the requests in flight and flushes the state writes they
//! left pending. The stopped proxy runs in a runtime of its own, abandoned once it has
//! returned, as a process exit abandons its tasks.

#![allow(clippy::unwrap_used, clippy::expect_used, unreachable_pub)] // test code: a failure is a test failure

mod common;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use cascade_proxy::{AppState, ProxyConfig, serve_state};
use common::sticky::{WINDOW, Wire, assert_kept, send};
use common::{Script, scripted, start_proxy};

fn config(upstream: &str, db: &Path) -> ProxyConfig {
    let mut config = ProxyConfig::new(upstream);
    config.state.path = db.to_owned();
    config.window.force = Some(WINDOW);
    config.window.discover = false;
    config
}

fn temp_db(name: &str) -> PathBuf {
    let path = std::env::temp_dir().join(format!("cascade-{name}-{}.db", std::process::id()));
    let _ = std::fs::remove_file(&path);
    let _ = std::fs::remove_file(cascade_proxy::secret_path(&path));
    path
}

/// A proxy on a runtime of its own; [`Detached::stop`] stops it as SIGTERM does, then drops
/// whatever its runtime still runs.
struct Detached {
    url: String,
    stop: tokio::sync::oneshot::Sender<()>,
    thread: std::thread::JoinHandle<()>,
}

impl Detached {
    fn start(config: ProxyConfig) -> Detached {
        let (url_tx, url_rx) = std::sync::mpsc::channel();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let thread = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .enable_all()
                .build()
                .unwrap();
            runtime.block_on(async {
                let state = AppState::new(config).unwrap();
                let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
                url_tx
                    .send(format!("http://{}", listener.local_addr().unwrap()))
                    .unwrap();
                let shutdown = async {
                    let _ = stopped.await;
                };
                serve_state(state, listener, shutdown).await.unwrap();
            });
            // A process exit: tasks still running are abandoned, not awaited.
            runtime.shutdown_background();
        });
        Detached {
            url: url_rx.recv().unwrap(),
            stop,
            thread,
        }
    }

    async fn stop(self) {
        self.stop.send(()).unwrap();
        tokio::task::spawn_blocking(move || self.thread.join().unwrap())
            .await
            .unwrap();
    }
}

async fn keeps_its_decision_across_an_immediate_restart(wire: Wire) {
    let mut script = Script::new(u64::MAX);
    script.report_usage = false;
    let script = Arc::new(script);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let upstream = scripted::serve(script.clone(), listener).base;
    let client = reqwest::Client::new();
    // A long history (about 5 MB): its decisions take a while to encode, so the stop
    // comes while the write is pending (without the flush, this test fails).
    let (first, second) = wire.turns(40, 60_000);

    // Without a restart.
    let in_memory = Path::new(cascade_proxy::config::IN_MEMORY_DB);
    let (proxy, _state) = start_proxy(config(&upstream, in_memory)).await;
    assert!(
        send(&client, &proxy, wire, &first).await,
        "compaction needed"
    );
    send(&client, &proxy, wire, &second).await;

    // Stopped at once after the first answer, restarted on the same database.
    let db = temp_db(&format!("restart-{wire:?}"));
    let stopped = Detached::start(config(&upstream, &db));
    assert!(send(&client, &stopped.url, wire, &first).await);
    stopped.stop().await;
    let (restarted, _state) = start_proxy(config(&upstream, &db)).await;
    send(&client, &restarted, wire, &second).await;

    let seen = script.seen();
    assert_eq!(seen.len(), 4, "one upstream call per request");
    assert_kept(
        wire,
        (&seen[0].body, &seen[1].body),
        (&seen[2].body, &seen[3].body),
    );
    let _ = std::fs::remove_file(&db);
    let _ = std::fs::remove_file(cascade_proxy::secret_path(&db));
}

#[tokio::test]
async fn a_chat_conversation_keeps_its_decision_across_an_immediate_restart() {
    keeps_its_decision_across_an_immediate_restart(Wire::Chat).await;
}

#[tokio::test]
async fn an_anthropic_conversation_keeps_its_decision_across_an_immediate_restart() {
    keeps_its_decision_across_an_immediate_restart(Wire::Anthropic).await;
}

#[tokio::test]
async fn a_responses_conversation_keeps_its_decision_across_an_immediate_restart() {
    keeps_its_decision_across_an_immediate_restart(Wire::Responses).await;
}
