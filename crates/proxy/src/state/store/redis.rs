//! The Redis store (`--state redis://HOST:PORT[/DB]`): the same state as SQLite, shared by
//! every proxy replica that points at the same Redis.
//!
//! Keys (all under `cascade:`), the same identities as SQLite's rows:
//! - `cascade:summary:{key}`: hash `s` (summary), `t` (token limit it was made under); the
//!   key is the summary cache's hash, which includes the tenant.
//! - `cascade:facts:{conversation}`: hash fact-hash → `{seq:020} {text}`; the conversation
//!   key is the tenant's keyed hash with the conversation (see `crate::state::tenancy`).
//! - `cascade:sticky:{conversation}`: the conversation's sticky decisions, one versioned
//!   record ([`StoredSession::to_bytes`]). (Version 2 kept a hash under `cascade:session:`,
//!   left to expire.)
//! - `cascade:calibration`, `cascade:windows`: hashes by model; no content, no TTL (like
//!   SQLite's tables, which eviction never touches).
//!
//! Time to live: every conversation key is written with `EXPIRE ttl` (and facts again when
//! they are put back into a request), so Redis drops what SQLite's sweep would.
//!
//! Size cap: SQLite counts its rows' bytes and a write that would pass `max_bytes` evicts
//! the oldest first. Redis cannot sum its keys cheaply, so the cap maps to two bounds:
//! (1) here, as in SQLite, no single entry larger than `max_bytes / 16` is written
//! ([`Retention::max_entry_bytes`]: 16 MiB at the default cap, far above any summary or
//! sticky decision list seen, and it keeps one conversation from taking the whole budget),
//! and a remembered fact is kept up to [`super::fact::FACT_LIMIT`] bytes and a note, as in
//! SQLite; (2) the total is Redis' own: run it with `maxmemory` set to the cap and
//! `maxmemory-policy volatile-lru`. Redis then evicts before the write that would pass
//! `maxmemory` (the same "a write that would pass the cap evicts first"), and since every
//! conversation key carries a TTL, that policy evicts the least recently used conversation
//! state first (SQLite: the oldest first) and never the calibration or learned windows,
//! which have no TTL.
//!
//! What an evicted or expired key leaves: nothing a client can read, and nothing in an RDB
//! snapshot taken after it went. An append-only file (`appendonly yes`) keeps the commands
//! that wrote it until Redis rewrites the file (`auto-aof-rewrite-percentage`, or
//! `BGREWRITEAOF`); an operator who needs evicted text gone from disk runs Redis without
//! the AOF (RDB or no persistence: this state is a cache, a lost Redis costs a re-run of
//! the cascade, not a wrong answer).
//!
//! Unreachable Redis: every operation is bounded by [`OP_TIMEOUT`]; after a connection
//! failure the store answers "unavailable" at once for [`BACKOFF`] (requests go on without
//! shared state, at no cost), then tries again. The connection manager reconnects by
//! itself; `/healthz` pings ([`StateStore::check`]) so health recovers without traffic.

use std::future::Future;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use context_cascade::{BoxFuture, Scale};
use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use redis::{AsyncCommands, RedisResult};

use super::fact::fact_to_keep;
use super::{Retention, StateStore, StoreError, StoreResult, StoredSession};
use crate::error::ProxyError;

/// The longest one Redis operation may take before the request goes on without it.
pub const OP_TIMEOUT: Duration = Duration::from_millis(300);
/// How long the store fails fast after a connection failure.
pub const BACKOFF: Duration = Duration::from_secs(1);
const PREFIX: &str = "cascade:";
const CALIBRATION: &str = "cascade:calibration";
const WINDOWS: &str = "cascade:windows";
/// The key kind of sticky decisions.
const SESSION: &str = "sticky";

/// The Redis store: one multiplexed, reconnecting connection ([`ConnectionManager`]) that
/// every request shares (Redis pipelines the commands of concurrent requests on it).
pub struct RedisStore {
    manager: ConnectionManager,
    retention: Retention,
    /// The last operation's error while the store fails (for `/healthz`).
    failure: Mutex<Option<String>>,
    /// Until when operations fail fast after a connection failure.
    down_until: Mutex<Option<Instant>>,
}

impl std::fmt::Debug for RedisStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisStore").finish_non_exhaustive()
    }
}

impl RedisStore {
    /// A store on the Redis at `url`, connected lazily (an unreachable Redis is a degraded
    /// proxy, not one that does not start). Must be called within a Tokio runtime.
    pub fn connect(url: &str, retention: Retention) -> Result<RedisStore, ProxyError> {
        let bad = |why: String| ProxyError::Config(format!("state {url:?}: {why}"));
        if tokio::runtime::Handle::try_current().is_err() {
            return Err(bad("the Redis store needs a Tokio runtime".into()));
        }
        let client = redis::Client::open(url).map_err(|e| bad(e.to_string()))?;
        let config = ConnectionManagerConfig::new()
            .set_connection_timeout(Some(OP_TIMEOUT))
            .set_response_timeout(Some(OP_TIMEOUT))
            .set_number_of_retries(1)
            .set_min_delay(Duration::from_millis(50))
            .set_max_delay(Duration::from_millis(200));
        let manager = ConnectionManager::new_lazy_with_config(client, config)
            .map_err(|e| bad(e.to_string()))?;
        Ok(RedisStore {
            manager,
            retention,
            failure: Mutex::new(None),
            down_until: Mutex::new(None),
        })
    }

    fn ttl_secs(&self) -> i64 {
        super::clamp_i64(self.retention.ttl.as_secs().max(1))
    }

    /// Runs `op` on a connection within [`OP_TIMEOUT`], failing fast during a back-off,
    /// and records the outcome for [`StateStore::failure`].
    async fn run<T, F, Fut>(&self, op: F) -> StoreResult<T>
    where
        F: FnOnce(ConnectionManager) -> Fut,
        Fut: Future<Output = RedisResult<T>>,
    {
        let down = *self.down_until.lock().unwrap_or_else(|p| p.into_inner());
        if down.is_some_and(|until| Instant::now() < until) {
            return Err(StoreError::Unavailable(
                "backing off after a failure".into(),
            ));
        }
        let result = self.timed(op(self.manager.clone())).await;
        self.track(&result);
        result
    }

    async fn timed<T>(&self, op: impl Future<Output = RedisResult<T>>) -> StoreResult<T> {
        match tokio::time::timeout(OP_TIMEOUT, op).await {
            Ok(result) => result.map_err(StoreError::Redis),
            Err(_) => Err(StoreError::Unavailable(format!(
                "no answer within {} ms",
                OP_TIMEOUT.as_millis()
            ))),
        }
    }

    fn track<T>(&self, result: &StoreResult<T>) {
        let mut failure = self.failure.lock().unwrap_or_else(|p| p.into_inner());
        let mut down = self.down_until.lock().unwrap_or_else(|p| p.into_inner());
        match result {
            Ok(_) => {
                *failure = None;
                *down = None;
            }
            Err(e) => {
                *failure = Some(e.to_string());
                let connection = match e {
                    StoreError::Redis(e) => {
                        e.is_io_error() || e.is_connection_dropped() || e.is_timeout()
                    }
                    _ => true,
                };
                if connection {
                    *down = Some(Instant::now() + BACKOFF);
                }
            }
        }
    }
}

fn key(kind: &str, id: &str) -> String {
    format!("{PREFIX}{kind}:{id}")
}

/// A stored scale, `scale observations [weight]`: a value written before the weight was
/// kept reads with weight 0 (it weighs as the starting scale, as it did then).
fn parse_scale(value: &str) -> Option<Scale> {
    let mut fields = value.split(' ');
    let scale = fields.next()?.parse().ok()?;
    let observations = fields.next()?.parse().ok()?;
    let weight = match fields.next() {
        Some(weight) => weight.parse().ok()?,
        None => 0.0,
    };
    fields.next().is_none().then_some(Scale {
        scale,
        observations,
        weight,
    })
}

fn malformed(what: &str, value: &str) -> StoreError {
    StoreError::Malformed(format!("{what}: {value:?}"))
}

impl StateStore for RedisStore {
    fn summary<'a>(&'a self, id: &'a str) -> BoxFuture<'a, StoreResult<Option<(String, u64)>>> {
        Box::pin(async move {
            let key = key("summary", id);
            let (summary, made_for): (Option<String>, Option<u64>) = self
                .run(|mut c| async move {
                    redis::cmd("HMGET")
                        .arg(&key)
                        .arg("s")
                        .arg("t")
                        .query_async(&mut c)
                        .await
                })
                .await?;
            Ok(summary.zip(made_for))
        })
    }

    fn put_summary<'a>(
        &'a self,
        id: &'a str,
        max_tokens: u64,
        summary: &'a str,
    ) -> BoxFuture<'a, StoreResult<()>> {
        Box::pin(async move {
            if !self.retention.fits("summary", id.len() + summary.len()) {
                return Ok(());
            }
            let key = key("summary", id);
            let ttl = self.ttl_secs();
            self.run(|mut c| async move {
                redis::pipe()
                    .atomic()
                    .cmd("HSET")
                    .arg(&key)
                    .arg("s")
                    .arg(summary)
                    .arg("t")
                    .arg(max_tokens)
                    .ignore()
                    .cmd("EXPIRE")
                    .arg(&key)
                    .arg(ttl)
                    .ignore()
                    .query_async(&mut c)
                    .await
            })
            .await
        })
    }

    fn calibration(&self) -> BoxFuture<'_, StoreResult<Vec<(String, Scale)>>> {
        Box::pin(async move {
            let all: Vec<(String, String)> = self
                .run(|mut c| async move { c.hgetall(CALIBRATION).await })
                .await?;
            let parse = |(model, value): (String, String)| {
                let scale = parse_scale(&value).ok_or_else(|| malformed("calibration", &value))?;
                Ok((model, scale))
            };
            all.into_iter().map(parse).collect()
        })
    }

    fn save_scale<'a>(&'a self, model: &'a str, scale: Scale) -> BoxFuture<'a, StoreResult<()>> {
        Box::pin(async move {
            // Rust writes an f64 in the shortest form that reads back to the same value.
            let value = format!("{} {} {}", scale.scale, scale.observations, scale.weight);
            self.run(|mut c| async move { c.hset(CALIBRATION, model, value).await })
                .await
        })
    }

    fn learned_windows(&self) -> BoxFuture<'_, StoreResult<Vec<(String, u64, bool)>>> {
        Box::pin(async move {
            let all: Vec<(String, String)> = self
                .run(|mut c| async move { c.hgetall(WINDOWS).await })
                .await?;
            let parse = |(model, value): (String, String)| {
                let (limit, counts) = value
                    .split_once(' ')
                    .and_then(|(l, c)| Some((l.parse().ok()?, c == "1")))
                    .ok_or_else(|| malformed("learned window", &value))?;
                Ok((model, limit, counts))
            };
            all.into_iter().map(parse).collect()
        })
    }

    fn save_learned_window<'a>(
        &'a self,
        model: &'a str,
        limit: u64,
        counts_reserve: bool,
    ) -> BoxFuture<'a, StoreResult<()>> {
        Box::pin(async move {
            let value = format!("{limit} {}", u8::from(counts_reserve));
            self.run(|mut c| async move { c.hset(WINDOWS, model, value).await })
                .await
        })
    }

    fn add_fact<'a>(
        &'a self,
        conversation: &'a str,
        hash: &'a str,
        text: &'a str,
    ) -> BoxFuture<'a, StoreResult<bool>> {
        Box::pin(async move {
            let text = fact_to_keep(text);
            if !self
                .retention
                .fits("fact", conversation.len() + hash.len() + text.len())
            {
                return Ok(false);
            }
            let facts = key("facts", conversation);
            let ttl = self.ttl_secs();
            // The order is the number of facts before it (SQLite: MAX(seq) + 1); two
            // replicas adding to one conversation at the same instant tie, and the hash
            // breaks the tie, as it does nowhere else: it is the rare case.
            let count: u64 = self
                .run(|mut c| async move { c.hlen(&facts).await })
                .await?;
            let key = key("facts", conversation);
            let value = format!("{:020} {text}", count + 1);
            let (added,): (bool,) = self
                .run(|mut c| async move {
                    redis::pipe()
                        .atomic()
                        .cmd("HSETNX")
                        .arg(&key)
                        .arg(hash)
                        .arg(value)
                        .cmd("EXPIRE")
                        .arg(&key)
                        .arg(ttl)
                        .ignore()
                        .query_async(&mut c)
                        .await
                })
                .await?;
            Ok(added)
        })
    }

    fn touch_facts<'a>(&'a self, conversation: &'a str) -> BoxFuture<'a, StoreResult<()>> {
        Box::pin(async move {
            let key = key("facts", conversation);
            let ttl = self.ttl_secs();
            self.run(|mut c| async move {
                redis::cmd("EXPIRE")
                    .arg(&key)
                    .arg(ttl)
                    .query_async::<()>(&mut c)
                    .await
            })
            .await
        })
    }

    fn facts<'a>(&'a self, conversation: &'a str) -> BoxFuture<'a, StoreResult<Vec<String>>> {
        Box::pin(async move {
            let key = key("facts", conversation);
            let all: Vec<(String, String)> = self
                .run(|mut c| async move { c.hgetall(&key).await })
                .await?;
            let mut facts = Vec::with_capacity(all.len());
            for (hash, value) in all {
                let (seq, text) = value
                    .split_once(' ')
                    .ok_or_else(|| malformed("fact", &value))?;
                facts.push((seq.to_owned(), hash, text.to_owned()));
            }
            facts.sort();
            Ok(facts.into_iter().map(|(_, _, text)| text).collect())
        })
    }

    fn put_recall<'a>(
        &'a self,
        conversation: &'a str,
        rows: Vec<(String, Vec<u8>)>,
    ) -> BoxFuture<'a, StoreResult<()>> {
        Box::pin(async move {
            let size: usize = rows
                .iter()
                .map(|(tag, sealed)| tag.len() + sealed.len())
                .sum();
            if rows.is_empty()
                || !self
                    .retention
                    .fits("recall chunks", conversation.len() + size)
            {
                return Ok(());
            }
            let key = key("recall", conversation);
            let ttl = self.ttl_secs();
            self.run(|mut c| async move {
                let mut pipe = redis::pipe();
                pipe.atomic();
                for (tag, sealed) in &rows {
                    pipe.cmd("HSETNX")
                        .arg(&key)
                        .arg(tag)
                        .arg(sealed.as_slice())
                        .ignore();
                }
                pipe.cmd("EXPIRE").arg(&key).arg(ttl).ignore();
                pipe.query_async::<()>(&mut c).await
            })
            .await
        })
    }

    fn recall_rows<'a>(
        &'a self,
        conversation: &'a str,
    ) -> BoxFuture<'a, StoreResult<Vec<Vec<u8>>>> {
        Box::pin(async move {
            let key = key("recall", conversation);
            let all: Vec<(String, Vec<u8>)> = self
                .run(|mut c| async move { c.hgetall(&key).await })
                .await?;
            // A hash has no order; the chunks say their own (handle and part) once opened.
            Ok(all.into_iter().map(|(_, sealed)| sealed).collect())
        })
    }

    fn save_session<'a>(
        &'a self,
        conversation: &'a str,
        session: &'a StoredSession,
    ) -> BoxFuture<'a, StoreResult<()>> {
        Box::pin(async move {
            let value = session.to_bytes();
            if !self
                .retention
                .fits("sticky decisions", conversation.len() + value.len())
            {
                return Ok(());
            }
            let key = key(SESSION, conversation);
            let ttl = self.ttl_secs();
            self.run(|mut c| async move {
                redis::cmd("SET")
                    .arg(&key)
                    .arg(value)
                    .arg("EX")
                    .arg(ttl)
                    .query_async(&mut c)
                    .await
            })
            .await
        })
    }

    fn session<'a>(
        &'a self,
        conversation: &'a str,
    ) -> BoxFuture<'a, StoreResult<Option<StoredSession>>> {
        Box::pin(async move {
            let key = key(SESSION, conversation);
            let value: Option<Vec<u8>> = self.run(|mut c| async move { c.get(&key).await }).await?;
            // A record of another version is absent, not an error.
            Ok(value.and_then(|bytes| StoredSession::from_bytes(&bytes)))
        })
    }

    fn delete_session<'a>(&'a self, conversation: &'a str) -> BoxFuture<'a, StoreResult<()>> {
        Box::pin(async move {
            let key = key(SESSION, conversation);
            self.run(|mut c| async move { c.del(&key).await }).await
        })
    }

    fn check(&self) -> BoxFuture<'_, ()> {
        Box::pin(async move {
            // Past any back-off: health must see Redis come back without traffic.
            let mut c = self.manager.clone();
            let result = self
                .timed(async move { redis::cmd("PING").query_async::<()>(&mut c).await })
                .await;
            self.track(&result);
        })
    }

    fn failure(&self) -> Option<String> {
        (self.failure.lock().unwrap_or_else(|p| p.into_inner())).clone()
    }

    fn shared(&self) -> bool {
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_scale_reads_with_or_without_its_weight() {
        let read = |text: &str| parse_scale(text).map(|s| (s.scale, s.observations, s.weight));
        assert_eq!(read("1.25 4 41234.5"), Some((1.25, 4, 41234.5)));
        // Written before the weight was kept: weighs as the starting scale.
        assert_eq!(read("1.25 4"), Some((1.25, 4, 0.0)));
        for malformed in ["1.25", "1.25 x", "1.25 4 w", "1.25 4 1 2", ""] {
            assert_eq!(read(malformed), None, "{malformed:?}");
        }
    }
}
