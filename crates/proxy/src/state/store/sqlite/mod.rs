//! The SQLite store (the embedded default): summary cache, EMA calibration per model,
//! remembered facts per conversation, and the sticky decisions of each conversation.
//!
//! What is kept, and for how long (SPEC "Proxy state"): the database, its journal files and
//! the tenancy secret are created 0600 in a 0700 directory. Conversation state is keyed by a
//! keyed hash of the credential and the conversation, never the credential. A sticky session
//! keeps the identities of the messages it covers and, per message sent upstream, either
//! "the client's message i" or the text the cascade wrote in its place (a summary, a
//! shortened tool output): never a copy of the messages the client sends again anyway.
//! Every row carries the time it was last written; rows older than the time to live go
//! ([`SqliteStore::evict`], run at open and every [`EVICT_INTERVAL`]), and a write that would
//! pass the size cap evicts the oldest rows first (`ledger`). What is evicted leaves no
//! readable text in the file or its journal, and the file gives its freed pages back
//! (`statements::prepare`). A remembered fact is kept up to [`super::fact::FACT_LIMIT`]
//! bytes. Calibration rows are per model and hold no content.
//!
//! Off the request path: one connection, owned by the store's own thread, which runs every
//! statement in the order they were asked for and the eviction pass on its timer. A request
//! sends its statement there and awaits the answer; it never holds a lock over SQLite, and
//! never pays for an eviction scan (a write at the cap deletes a few of the oldest rows by
//! index, on the store's thread). A store failure never fails a request (callers log it
//! and carry on without the cache). Whether a conversation has facts at all is answered
//! from memory, without the round trip (`fact_index`): most have none.

mod fact_index;
mod ledger;
mod statements;

use std::fs::OpenOptions;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::Path;
use std::sync::mpsc::{Receiver, RecvTimeoutError, Sender};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use context_cascade::{BoxFuture, Scale};
use rusqlite::Connection;

use self::fact_index::FactIndex;
use self::ledger::Ledger;
use super::fact::fact_to_keep;
use super::{Retention, StateStore, StoreError, StoreResult, StoredSession, now};
use crate::config::IN_MEMORY_DB;
use crate::error::ProxyError;

/// How often the store's thread runs an eviction pass (and once at open).
pub const EVICT_INTERVAL: Duration = Duration::from_secs(30);

/// A statement to run on the store's thread.
type Job = Box<dyn FnOnce(&mut Ledger) + Send>;

/// The last operation's error while the store fails (for `/healthz`).
type Failure = Arc<Mutex<Option<String>>>;

/// The SQLite store.
pub struct SqliteStore {
    jobs: Sender<Job>,
    failure: Failure,
    /// Which conversations have facts (the store's thread keeps it up to date).
    fact_index: Arc<FactIndex>,
}

impl std::fmt::Debug for SqliteStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SqliteStore").finish_non_exhaustive()
    }
}

/// How many prepared statements the connection keeps (it runs about forty distinct ones, per-table statements counted).
const STATEMENTS_KEPT: usize = 64;

impl SqliteStore {
    /// Opens (creating if needed) the database at `path`; `":memory:"` keeps it in memory.
    /// A directory it creates is 0700, the file 0600 (SQLite gives its journal files the
    /// database's mode). Evicts what `retention` no longer allows, then starts the store's
    /// thread.
    pub fn open(path: &Path, retention: Retention) -> Result<SqliteStore, ProxyError> {
        if path != Path::new(IN_MEMORY_DB) {
            prepare_file(path)?;
        }
        let connection = Connection::open(path)?;
        // Every statement a request runs stays prepared: parsing SQL was about a tenth of
        // the proxy's CPU per request (issue 27). Room for all of them, with the sweep's.
        connection.set_prepared_statement_cache_capacity(STATEMENTS_KEPT);
        statements::prepare(&connection)?;
        let mut ledger = Ledger::new(connection, retention)?;
        ledger.sweep(now())?;
        let fact_index = ledger.fact_index();
        let (jobs, receiver) = std::sync::mpsc::channel();
        let failure = Failure::default();
        let thread_failure = failure.clone();
        std::thread::Builder::new()
            .name("cascade-sqlite".into())
            .spawn(move || serve(ledger, &receiver, &thread_failure))?;
        Ok(SqliteStore {
            jobs,
            failure,
            fact_index,
        })
    }

    /// Runs `op` on the store's thread; the future resolves with its result.
    fn run<T, F>(&self, op: F) -> BoxFuture<'static, StoreResult<T>>
    where
        T: Send + 'static,
        F: FnOnce(&mut Ledger) -> rusqlite::Result<T> + Send + 'static,
    {
        let (reply, answer) = tokio::sync::oneshot::channel();
        let failure = self.failure.clone();
        let sent = self.jobs.send(Box::new(move |ledger| {
            let _ = reply.send(track(&failure, op(ledger)));
        }));
        Box::pin(async move {
            if sent.is_err() {
                return Err(ended());
            }
            answer.await.map_err(|_| ended())?.map_err(Into::into)
        })
    }

    /// Runs `op` on the store's thread and waits for it, blocking the caller (at startup,
    /// and for operators and tests: never on a request).
    fn blocking<T, F>(&self, op: F) -> StoreResult<T>
    where
        T: Send + 'static,
        F: FnOnce(&mut Ledger) -> rusqlite::Result<T> + Send + 'static,
    {
        let (reply, answer) = std::sync::mpsc::sync_channel(1);
        let failure = self.failure.clone();
        (self.jobs)
            .send(Box::new(move |ledger| {
                let _ = reply.send(track(&failure, op(ledger)));
            }))
            .map_err(|_| ended())?;
        answer.recv().map_err(|_| ended())?.map_err(Into::into)
    }

    /// Why the store is failing, while it is (`None` when its last operation succeeded).
    pub fn failure(&self) -> Option<String> {
        (self.failure.lock().unwrap_or_else(|p| p.into_inner())).clone()
    }

    /// One eviction pass as of `now` (what the store's timer runs): deletes conversation
    /// rows last written before `now - ttl`, then the oldest rows while the stored bytes
    /// pass the cap, and gives the freed pages back to the file system. Returns how many
    /// rows went.
    pub fn evict(&self, now: u64) -> StoreResult<usize> {
        self.blocking(move |ledger| ledger.sweep(now))
    }

    /// The bytes of conversation state stored (what the size cap counts), counted from the
    /// rows; it checks the running count the store keeps, which must agree.
    pub fn stored_bytes(&self) -> StoreResult<u64> {
        let (counted, kept) = self
            .blocking(|ledger| Ok((ledger::total_bytes(ledger.connection())?, ledger.stored())))?;
        if counted != kept {
            return Err(StoreError::Malformed(format!(
                "the running size {kept} disagrees with the rows' {counted} bytes"
            )));
        }
        Ok(counted)
    }

    /// Every persisted calibration scale.
    pub fn calibration(&self) -> StoreResult<Vec<(String, Scale)>> {
        self.blocking(|ledger| statements::calibration(ledger.connection()))
    }

    /// Every window learned from an overflow error: (model, limit, whether the limit counts
    /// the output reserve). Like the calibration it holds no content and is kept.
    pub fn learned_windows(&self) -> StoreResult<Vec<(String, u64, bool)>> {
        self.blocking(|ledger| statements::learned_windows(ledger.connection()))
    }

    /// How many conversations have a saved upstream request.
    pub fn session_count(&self) -> StoreResult<u64> {
        self.blocking(|ledger| statements::session_count(ledger.connection()))
    }
}

/// The store's thread: runs each statement as it comes, and an eviction pass whenever
/// [`EVICT_INTERVAL`] has passed since the last (between statements, never within one);
/// ends when the store is dropped, after the statements already sent.
fn serve(mut ledger: Ledger, jobs: &Receiver<Job>, failure: &Failure) {
    let mut next_eviction = Instant::now() + EVICT_INTERVAL;
    loop {
        let wait = next_eviction.saturating_duration_since(Instant::now());
        match jobs.recv_timeout(wait) {
            Ok(job) => job(&mut ledger),
            Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) => return,
        }
        if Instant::now() >= next_eviction {
            let evicted = track(failure, ledger.sweep(now()));
            match evicted {
                Ok(0) => {}
                Ok(rows) => tracing::debug!(rows, "evicted old proxy state"),
                Err(e) => tracing::warn!(error = %e, "could not evict old proxy state"),
            }
            next_eviction = Instant::now() + EVICT_INTERVAL;
        }
    }
}

/// Records whether an operation failed, for [`SqliteStore::failure`].
fn track<T>(failure: &Failure, result: rusqlite::Result<T>) -> rusqlite::Result<T> {
    let mut failure = failure.lock().unwrap_or_else(|p| p.into_inner());
    *failure = result.as_ref().err().map(ToString::to_string);
    result
}

fn ended() -> StoreError {
    StoreError::Unavailable("the SQLite store's thread has ended".into())
}

/// Creates the database's directory 0700 (when it does not exist) and the file 0600
/// (tightening an existing file's mode: it holds conversation state).
fn prepare_file(path: &Path) -> Result<(), ProxyError> {
    super::private_dir(path)?;
    if path.is_dir() {
        // Not a database: SQLite says so in its own words (a store error).
        return Ok(());
    }
    let file = OpenOptions::new()
        .create(true)
        .append(true)
        .mode(0o600)
        .open(path)?;
    file.set_permissions(std::fs::Permissions::from_mode(0o600))?;
    Ok(())
}

/// The trait over the store's thread: each future waits for its statement's answer.
impl StateStore for SqliteStore {
    fn summary<'a>(&'a self, key: &'a str) -> BoxFuture<'a, StoreResult<Option<(String, u64)>>> {
        let key = key.to_owned();
        self.run(move |l| statements::summary(l.connection(), &key))
    }

    fn put_summary<'a>(
        &'a self,
        key: &'a str,
        max_tokens: u64,
        summary: &'a str,
    ) -> BoxFuture<'a, StoreResult<()>> {
        let (key, summary) = (key.to_owned(), summary.to_owned());
        self.run(move |l| l.put_summary(&key, max_tokens, &summary))
    }

    fn calibration(&self) -> BoxFuture<'_, StoreResult<Vec<(String, Scale)>>> {
        self.run(|l| statements::calibration(l.connection()))
    }

    fn save_scale<'a>(&'a self, model: &'a str, scale: Scale) -> BoxFuture<'a, StoreResult<()>> {
        let model = model.to_owned();
        self.run(move |l| statements::save_scale(l.connection(), &model, scale))
    }

    fn learned_windows(&self) -> BoxFuture<'_, StoreResult<Vec<(String, u64, bool)>>> {
        self.run(|l| statements::learned_windows(l.connection()))
    }

    fn save_learned_window<'a>(
        &'a self,
        model: &'a str,
        limit: u64,
        counts_reserve: bool,
    ) -> BoxFuture<'a, StoreResult<()>> {
        let model = model.to_owned();
        self.run(move |l| {
            statements::save_learned_window(l.connection(), &model, limit, counts_reserve)
        })
    }

    fn add_fact<'a>(
        &'a self,
        conversation: &'a str,
        hash: &'a str,
        text: &'a str,
    ) -> BoxFuture<'a, StoreResult<bool>> {
        // Only the kept head crosses to the store's thread (8 KiB, not the 5 MB a client sent).
        let (conversation, hash, text) = (
            conversation.to_owned(),
            hash.to_owned(),
            fact_to_keep(text).into_owned(),
        );
        self.run(move |l| l.add_fact(&conversation, &hash, &text))
    }

    fn touch_facts<'a>(&'a self, conversation: &'a str) -> BoxFuture<'a, StoreResult<()>> {
        let conversation = conversation.to_owned();
        self.run(move |l| statements::touch_facts(l.connection(), &conversation))
    }

    fn facts<'a>(&'a self, conversation: &'a str) -> BoxFuture<'a, StoreResult<Vec<String>>> {
        // Most conversations have none: answered without a round trip to the thread.
        if !self.fact_index.may_hold(conversation) {
            return Box::pin(std::future::ready(Ok(Vec::new())));
        }
        let conversation = conversation.to_owned();
        self.run(move |l| statements::facts(l.connection(), &conversation))
    }

    fn save_session<'a>(
        &'a self,
        conversation: &'a str,
        session: &'a StoredSession,
    ) -> BoxFuture<'a, StoreResult<()>> {
        let (conversation, record) = (conversation.to_owned(), session.to_bytes());
        self.run(move |l| l.save_session(&conversation, &record))
    }

    fn session<'a>(
        &'a self,
        conversation: &'a str,
    ) -> BoxFuture<'a, StoreResult<Option<StoredSession>>> {
        let conversation = conversation.to_owned();
        self.run(move |l| statements::session(l.connection(), &conversation))
    }

    fn put_recall<'a>(
        &'a self,
        conversation: &'a str,
        rows: Vec<(String, Vec<u8>)>,
    ) -> BoxFuture<'a, StoreResult<()>> {
        let conversation = conversation.to_owned();
        self.run(move |l| l.put_recall(&conversation, &rows))
    }

    fn recall_rows<'a>(
        &'a self,
        conversation: &'a str,
    ) -> BoxFuture<'a, StoreResult<Vec<Vec<u8>>>> {
        let conversation = conversation.to_owned();
        self.run(move |l| statements::recall_rows(l.connection(), &conversation))
    }

    fn delete_session<'a>(&'a self, conversation: &'a str) -> BoxFuture<'a, StoreResult<()>> {
        let conversation = conversation.to_owned();
        self.run(move |l| l.delete_session(&conversation))
    }

    fn check(&self) -> BoxFuture<'_, ()> {
        Box::pin(std::future::ready(()))
    }

    fn failure(&self) -> Option<String> {
        SqliteStore::failure(self)
    }

    fn shared(&self) -> bool {
        false
    }
}
