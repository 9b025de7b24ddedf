//! The proxy's state store: summary cache, calibration per model, windows learned from
//! overflow errors, remembered facts per conversation, and each conversation's sticky
//! decisions. One trait, [`StateStore`], two implementations:
//!
//! - [`sqlite::SqliteStore`], the embedded default (one machine);
//! - [`redis::RedisStore`] (`--state redis://HOST:PORT[/DB]`), shared by proxy replicas
//!   behind a load balancer, so that any replica continues any conversation with the same
//!   sticky prefix, summaries and memory.
//!
//! Both keep the same things under the same keys (SPEC "Proxy state"): conversation state
//! by the keyed hash of the credential together with the conversation (`crate::state::tenancy`),
//! summaries by a hash that includes the tenant, calibration and learned windows by model
//! (they hold no content). Both bound what they keep by a time to live and a size cap
//! ([`Retention`]). A store failure never fails a request: callers log it and carry on
//! without the state; [`StateStore::failure`] feeds `/healthz`.

pub mod fact;
pub mod redis;
pub mod session;
pub mod sqlite;

use std::fs::OpenOptions;
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use context_cascade::{BoxFuture, Scale};

use crate::config::{DEFAULT_STATE_MAX_BYTES, DEFAULT_STATE_TTL, ProxyConfig};
use crate::error::ProxyError;

pub use self::redis::RedisStore;
/// A stored session names its messages by the core's identity (one hash for every comparison).
pub use context_cascade::MessageId;
pub use session::StoredSession;
pub use sqlite::{EVICT_INTERVAL, SqliteStore};

/// How long conversation state is kept, and how much of it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Retention {
    /// Entries not written for this long are evicted.
    pub ttl: Duration,
    /// Beyond this many stored bytes, the oldest entries are evicted.
    pub max_bytes: u64,
}

impl Retention {
    /// The largest single entry either store writes: a sixteenth of the cap (16 MiB at the
    /// default), so that one conversation cannot push every other one out. A larger entry
    /// is not stored (logged, not an error): the request goes on without it.
    pub fn max_entry_bytes(&self) -> u64 {
        (self.max_bytes / 16).max(1)
    }

    /// Whether an entry of `bytes` may be written; logs the ones that may not.
    pub(crate) fn fits(&self, what: &str, bytes: usize) -> bool {
        let fits = bytes as u64 <= self.max_entry_bytes();
        if !fits {
            tracing::warn!(what, bytes, "not stored: larger than the per-entry cap");
        }
        fits
    }
}

impl Default for Retention {
    /// 7 days, 256 MiB.
    fn default() -> Self {
        Retention {
            ttl: DEFAULT_STATE_TTL,
            max_bytes: DEFAULT_STATE_MAX_BYTES,
        }
    }
}

pub use crate::error::StoreError;

/// What a store operation returns.
pub type StoreResult<T> = Result<T, StoreError>;

/// The state store the proxy's parts share.
///
/// Methods return [`BoxFuture`] rather than being `async fn`: the backend is chosen at run
/// time (`--state`), so the store is an `Arc<dyn StateStore>`, and a trait with `async fn`
/// is not dyn-compatible; boxed futures are also what the crate's other async trait
/// ([`context_cascade::summarizer::Summarizer`]) uses. SQLite's futures wait for the
/// store's own thread to run the statement (never on the caller's task); Redis' are real
/// network round trips, each bounded by a short timeout.
pub trait StateStore: Send + Sync {
    /// A cached summary and the token limit it was made under.
    fn summary<'a>(&'a self, key: &'a str) -> BoxFuture<'a, StoreResult<Option<(String, u64)>>>;
    /// Caches a summary made under `max_tokens`.
    fn put_summary<'a>(
        &'a self,
        key: &'a str,
        max_tokens: u64,
        summary: &'a str,
    ) -> BoxFuture<'a, StoreResult<()>>;
    /// Every persisted calibration scale.
    fn calibration(&self) -> BoxFuture<'_, StoreResult<Vec<(String, Scale)>>>;
    /// Persists one model's scale.
    fn save_scale<'a>(&'a self, model: &'a str, scale: Scale) -> BoxFuture<'a, StoreResult<()>>;
    /// Every window learned from an overflow error: (model, limit, whether the limit counts
    /// the output reserve).
    fn learned_windows(&self) -> BoxFuture<'_, StoreResult<Vec<(String, u64, bool)>>>;
    /// Persists the window learned for one model.
    fn save_learned_window<'a>(
        &'a self,
        model: &'a str,
        limit: u64,
        counts_reserve: bool,
    ) -> BoxFuture<'a, StoreResult<()>>;
    /// Stores a remembered fact; returns whether it was new.
    fn add_fact<'a>(
        &'a self,
        conversation: &'a str,
        hash: &'a str,
        text: &'a str,
    ) -> BoxFuture<'a, StoreResult<bool>>;
    /// Marks a conversation's facts as used now (the time to live counts from there).
    fn touch_facts<'a>(&'a self, conversation: &'a str) -> BoxFuture<'a, StoreResult<()>>;
    /// The facts remembered for a conversation, oldest first.
    fn facts<'a>(&'a self, conversation: &'a str) -> BoxFuture<'a, StoreResult<Vec<String>>>;
    /// Saves a conversation's last upstream request.
    fn save_session<'a>(
        &'a self,
        conversation: &'a str,
        session: &'a StoredSession,
    ) -> BoxFuture<'a, StoreResult<()>>;
    /// A conversation's last upstream request, if one was saved.
    fn session<'a>(
        &'a self,
        conversation: &'a str,
    ) -> BoxFuture<'a, StoreResult<Option<StoredSession>>>;
    /// Forgets a conversation's last upstream request.
    fn delete_session<'a>(&'a self, conversation: &'a str) -> BoxFuture<'a, StoreResult<()>>;
    /// Keeps a conversation's sealed recall chunks, each under its tag (`crate::recall`):
    /// a tag kept before is kept once, and marked used now.
    fn put_recall<'a>(
        &'a self,
        conversation: &'a str,
        rows: Vec<(String, Vec<u8>)>,
    ) -> BoxFuture<'a, StoreResult<()>>;
    /// Every sealed recall chunk of a conversation, oldest first.
    fn recall_rows<'a>(&'a self, conversation: &'a str)
    -> BoxFuture<'a, StoreResult<Vec<Vec<u8>>>>;
    /// Asks the backend whether it is reachable now (for `/healthz`); updates
    /// [`StateStore::failure`]. SQLite has nothing to ask: its last operation tells.
    fn check(&self) -> BoxFuture<'_, ()>;
    /// Why the store is failing, while it is (`None` when its last operation succeeded).
    fn failure(&self) -> Option<String>;
    /// Whether other proxy processes write the same state (Redis): then what a replica
    /// holds in memory may be stale, and what it writes must land before it answers.
    fn shared(&self) -> bool;
}

/// A store as opened, with the model-level state read at startup (SQLite reads it at once;
/// a shared store is followed in the background, see `crate::window::shared`).
pub struct Opened {
    /// The store.
    pub store: Arc<dyn StateStore>,
    /// The persisted calibration scales.
    pub calibration: Vec<(String, Scale)>,
    /// The persisted learned windows.
    pub windows: Vec<(String, u64, bool)>,
}

/// Opens the store `config` names: Redis for `state.url = "redis://..."`, else SQLite at
/// `state.path`. Redis is connected lazily: an unreachable Redis does not stop the proxy.
pub fn open(config: &ProxyConfig) -> Result<Opened, ProxyError> {
    let retention = Retention {
        ttl: config.state.ttl,
        max_bytes: config.state.max_bytes,
    };
    match &config.state.url {
        Some(url) => Ok(Opened {
            store: Arc::new(RedisStore::connect(url, retention)?),
            calibration: Vec::new(),
            windows: Vec::new(),
        }),
        None => {
            let store = SqliteStore::open(&config.state.path, retention)?;
            let calibration = store.calibration()?;
            let windows = store.learned_windows()?;
            Ok(Opened {
                store: Arc::new(store),
                calibration,
                windows,
            })
        }
    }
}

pub use crate::config::is_redis_url;

pub(crate) fn clamp_i64(value: u64) -> i64 {
    i64::try_from(value).unwrap_or(i64::MAX)
}

/// Seconds since the epoch.
pub(crate) fn now() -> u64 {
    (SystemTime::now().duration_since(UNIX_EPOCH)).map_or(0, |d| d.as_secs())
}

/// Creates the folder that holds `file` (the database, its tenancy secret) readable by its
/// owner only, when it does not exist yet: a fresh machine has no data directory.
pub(crate) fn private_dir(file: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    match file.parent() {
        Some(parent) if !parent.as_os_str().is_empty() && !parent.exists() => {
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(parent)
        }
        _ => Ok(()),
    }
}

/// Writes `bytes` to a new file readable by its owner only.
pub fn private_file(path: &Path, bytes: &[u8]) -> Result<(), ProxyError> {
    let mut file = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)?;
    file.write_all(bytes)?;
    Ok(())
}
