//! The proxy's configuration: a TOML file read with serde into one schema, then the
//! command-line flags on top. Every key is optional; an unknown key is an error naming the
//! key and its line. The `[cascade]` table is the library's [`CascadeConfig`], validated by
//! the library. The full reference, generated from this schema, is `docs/configuration.md`.
//!
//! ```toml
//! listen = "127.0.0.1:8787"
//! upstream = "http://127.0.0.1:8080"
//!
//! [window]
//! force = 32000                  # every model's window (like --window)
//! discover = true                # ask the upstream (llama.cpp, vLLM, Ollama)
//! models = { "llama-3.1-8b" = 16384 }
//!
//! [state]
//! path = "/var/lib/cascade.db"   # SQLite file (":memory:" keeps nothing)
//! # url = "redis://127.0.0.1:6379/0"   # replicas share their state in Redis instead
//!
//! [summarizer]
//! endpoint = "https://api.openai.com"  # or "offline"; key in CASCADE_SUMMARIZER_API_KEY
//! model = "gpt-4o-mini"
//!
//! [cascade.tools]
//! compactable = ["my_reader"]
//!
//! [[model]]                      # catalog overrides (see context_cascade::catalog)
//! id = "my-model"
//! context_window = 65536
//! ```
//!
//! This module is a leaf: it names no other module of the proxy ([`ConfigError`] becomes a
//! `ProxyError` where the proxy starts).

mod reference;
mod secret;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use cascade_llm::{Provider, SummarizerSpec};
use context_cascade::CascadeConfig;
use context_cascade::catalog::{Catalog, ModelEntry};
use context_cascade::settings::{Documented, KeyDoc};

pub use reference::{FLAGS, Source, reference_markdown, settings_with_sources};
pub use secret::AdminToken;

/// Default request body limit: 32 MiB.
pub const DEFAULT_MAX_REQUEST_BYTES: usize = 32 * 1024 * 1024;
/// Default time to wait for the upstream (headers, and between body chunks).
pub const DEFAULT_UPSTREAM_TIMEOUT: Duration = Duration::from_secs(600);
/// Default time a client has to send its request head: an agent sends it at once, and a
/// head that takes longer holds a connection slot.
pub const DEFAULT_HEADER_READ_TIMEOUT: Duration = Duration::from_secs(10);
/// Default time a client has to send its request body.
pub const DEFAULT_BODY_READ_TIMEOUT: Duration = Duration::from_secs(120);
/// Default limit on open client connections.
pub const DEFAULT_MAX_CONNECTIONS: usize = 1024;
/// The share of `limits.max_connections` one client address may hold without a complete
/// request head, unless `limits.max_unfinished_heads_per_peer` says otherwise: 256 of the
/// default 1024, far above what a fleet of agents on one host has in that state at once (a
/// head follows its connection within milliseconds), and leaving three quarters to others.
pub const DEFAULT_UNFINISHED_HEADS_SHARE: usize = 4;
/// Default time to live of stored state: 7 days.
pub const DEFAULT_STATE_TTL: Duration = Duration::from_secs(7 * 24 * 3600);
/// Default cap on stored state: 256 MiB.
pub const DEFAULT_STATE_MAX_BYTES: u64 = 256 * 1024 * 1024;
/// Default memory for sticky prefixes in front of the store, in MiB: none but the records
/// being written. Reading a 100K-token conversation's prefix back from the store adds about
/// 1.5 ms to its request, while every MiB kept costs about 2 MiB of RSS after a load
/// (fragmentation included) and stays: 200 heavy clients left 2.6x the idle RSS at 8 MiB,
/// 1.7x at 0 (docs/benchmarks.md, "Hardening").
pub const DEFAULT_STICKY_MEMORY_MB: u64 = 0;
/// Default bound on background summary jobs running at once.
pub const DEFAULT_BACKGROUND_JOBS: usize = 4;
/// The SQLite path that keeps everything in memory (tests, throwaway runs).
pub const IN_MEMORY_DB: &str = ":memory:";

/// A configuration that cannot work, on one line naming the key (and, read from a file, the
/// file and the line): `FILE:3:1: unknown field `forced``,
/// `cascade.recovery.targets[1] = 1.3: expected a share of E in (0, 1]`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct ConfigError(pub String);

/// The environment variable that holds the LLM summarizer's API key.
pub use cascade_llm::SUMMARIZER_KEY_ENV;

/// Everything the proxy needs to run, in the shape of its file (at most ten top-level
/// keys). Build it with [`ProxyConfig::new`] or [`ProxyConfig::from_toml_str`] /
/// [`ProxyConfig::load`], then override fields from flags.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ProxyConfig {
    /// Address to listen on (used by callers that bind; [`crate::serve`] takes a listener).
    pub listen: SocketAddr,
    /// Base URL of the upstream; request paths are appended (`{upstream}/v1/messages`).
    #[serde(serialize_with = "redacted::url")]
    pub upstream: String,
    /// Which context window each model gets.
    pub window: WindowSettings,
    /// `[[model]]` tables: catalog overrides, checked by [`Catalog::with_overrides_toml`].
    #[serde(rename = "model")]
    pub model_overrides: Vec<ModelEntry>,
    /// Where conversation state (summaries, calibration, memory, sticky prefixes) is kept.
    pub state: StateSettings,
    /// Bounds on clients and the upstream.
    pub limits: LimitSettings,
    /// Who writes ④'s summaries, and whether they are prepared ahead.
    pub summarizer: SummarizerSettings,
    /// What the proxy does to each request besides the cascade.
    pub requests: RequestSettings,
    /// The status page.
    pub status: StatusSettings,
    /// The engine's configuration: the library's schema.
    pub cascade: CascadeConfig,
    /// The model catalog: the built-in table with the file's `[[model]]` overrides.
    #[serde(skip, default = "Catalog::builtin")]
    pub catalog: Catalog,
}

context_cascade::settings_group! {
    /// `[window]`: which context window each model gets (before the catalog).
    pub struct WindowSettings {
        /// Forces the context window of every model (`--window`).
        pub force: Option<u64> = None,
        /// Ask the upstream for its context window (llama.cpp `/props`, vLLM `/v1/models`,
        /// Ollama `/api/show`) when neither `force` nor `models` names one.
        pub discover: bool = true,
        /// Context windows per model id (`{ "llama-3.1-8b" = 16384 }`).
        pub models: BTreeMap<String, u64> = BTreeMap::new(),
    }
}

context_cascade::settings_group! {
    /// `[state]`: where conversation state is kept, and for how long.
    pub struct StateSettings {
        /// The SQLite file (`":memory:"` keeps nothing); with `url`, it holds only the
        /// tenancy secret, which replicas must share (`--db`). Default:
        /// `<data dir>/context-cascade/cascade.db`.
        pub path: PathBuf = default_db_path(),
        /// `redis://HOST:PORT[/DB]`: keep the state in Redis, shared by replicas (`--state`).
        #[serde(serialize_with = "redacted::optional_url")]
        pub url: Option<String> = None,
        /// State unused for this many seconds is evicted.
        #[serde(rename = "ttl_secs", with = "seconds")]
        pub ttl: Duration = DEFAULT_STATE_TTL,
        /// Cap on the stored state's bytes; beyond it the least recently used entries go.
        pub max_bytes: u64 = DEFAULT_STATE_MAX_BYTES,
    }
}

context_cascade::settings_group! {
    /// `[limits]`: bounds on clients and on the upstream.
    pub struct LimitSettings {
        /// Largest request body accepted; larger ones get 413.
        pub max_request_bytes: usize = DEFAULT_MAX_REQUEST_BYTES,
        /// Open client connections at most. Beyond it, a few more are accepted to answer
        /// `/healthz` (and 503 with `retry-after` to anything else); further ones wait
        /// until one closes.
        pub max_connections: usize = DEFAULT_MAX_CONNECTIONS,
        /// Connections one client address (an IPv6 /64) may hold open without having sent
        /// a complete request head; a newer one closes its oldest. Connections that have
        /// sent a request are not counted, so any number of agents on one host are served.
        /// Default: a quarter of `max_connections` (256).
        pub max_unfinished_heads_per_peer: Option<usize> = None,
        /// Seconds allowed for the upstream to answer (and between two streamed chunks).
        #[serde(rename = "upstream_timeout_secs", with = "seconds")]
        pub upstream_timeout: Duration = DEFAULT_UPSTREAM_TIMEOUT,
        /// Seconds a client has to send its request head (the first from connecting, a
        /// later one on a kept-alive connection from the answer before it); a slower one is
        /// disconnected.
        #[serde(rename = "header_read_timeout_secs", with = "seconds")]
        pub header_read_timeout: Duration = DEFAULT_HEADER_READ_TIMEOUT,
        /// Seconds a client has to send its request body; a slower one gets 408.
        #[serde(rename = "body_read_timeout_secs", with = "seconds")]
        pub body_read_timeout: Duration = DEFAULT_BODY_READ_TIMEOUT,
        /// MiB of sticky prefixes (what went upstream per conversation) kept in memory in
        /// front of the store, which keeps them all. A conversation not in memory is read
        /// back from the store on its next request (about 1.5 ms for a 100K-token history);
        /// each MiB kept holds about 2 MiB of RSS once a load has passed. 0 keeps only the
        /// records still being written.
        pub sticky_memory_mb: u64 = DEFAULT_STICKY_MEMORY_MB,
    }
}

context_cascade::settings_group! {
    /// `[summarizer]`: who writes ④'s summaries (`--summarizer`).
    pub struct SummarizerSettings {
        /// `"offline"` (deterministic, no network) or the base URL of an OpenAI- or
        /// Anthropic-compatible endpoint; its key comes from CASCADE_SUMMARIZER_API_KEY.
        #[serde(serialize_with = "redacted::url")]
        pub endpoint: String = "offline".to_owned(),
        /// The model the endpoint is asked for.
        pub model: Option<String> = None,
        /// `"openai"` or `"anthropic"`: the endpoint's protocol (default: guessed from the
        /// URL's host, `anthropic` on anthropic.com).
        #[serde(with = "protocol")]
        pub protocol: Option<Provider> = None,
        /// Prepare ④'s summaries in the background once a conversation is past
        /// `cascade.background.summary_ratio`·E, so that the compaction turn does not wait
        /// for them (an LLM summarizer only: offline summaries take no time).
        pub background: bool = true,
        /// Background summary jobs running at once, at most.
        pub background_jobs: usize = DEFAULT_BACKGROUND_JOBS,
    }
}

/// What the client is told the prompt took.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Gauge {
    /// `client` on the Responses route, `upstream` on the others (the default). A Responses
    /// client that compacts by itself (Codex) sends its whole history to the provider's
    /// compaction, which the proxy passes on untouched: it must see that history's size, or
    /// it compacts too late and its compaction overflows. A Messages or Chat client's
    /// compaction is a request like any other, which the cascade fits; there reporting what
    /// went upstream kept more requests extending the previous one (docs/proxy.md has the
    /// figures for both clients).
    #[default]
    Auto,
    /// The usage of what was sent upstream, as the provider reported it.
    Upstream,
    /// The size of what the client sent: the upstream's count scaled by the request's own
    /// estimate before and after the cascade.
    Client,
}

impl Gauge {
    /// Whether answers to requests of `format` report the size of what the client sent.
    pub fn reports_client_size(self, format: context_cascade::Format) -> bool {
        match self {
            Gauge::Auto => format == context_cascade::Format::Responses,
            Gauge::Upstream => false,
            Gauge::Client => true,
        }
    }
}

context_cascade::settings_group! {
    /// `[requests]`: what the proxy does to each request besides the cascade.
    pub struct RequestSettings {
        /// Re-apply the previous request's compaction to the known prefix of a conversation
        /// (prompt-cache stability); off runs the cascade afresh every time.
        pub sticky_prefix: bool = true,
        /// Send a request the cascade would leave as it is upstream without parsing it into
        /// a conversation (same bytes, same decision).
        pub fast_path: bool = true,
        /// What an answer's usage tells the client its prompt took: `"upstream"`, the usage
        /// of what went upstream, as reported; `"client"`, the size of what the client sent
        /// (the upstream's count scaled by the request's estimate before and after the
        /// cascade), so that a client's own compaction fires near its threshold; or
        /// `"auto"`, `client` on the Responses route (Codex compacts through the provider)
        /// and `upstream` on the others.
        pub gauge: Gauge = Gauge::default(),
        /// Keep what the cascade removes (sealed with a key from the client's credential)
        /// and give the model a `context_recall` tool to get it back by handle or search.
        /// Streamed requests too (the recall rounds spliced into one stream). Off by default:
        /// a round's follow-up is added after the budget the request was fitted to
        /// (docs/proxy.md, "The default").
        pub recall: bool = false,
    }
}

context_cascade::settings_group! {
    /// `[status]`: the status page (`GET /`).
    pub struct StatusSettings {
        /// Opens the status page to any client presenting it (`--admin-token`); without it
        /// the page is served to loopback clients only. Printed as `"<hidden>"`.
        pub admin_token: Option<AdminToken> = None,
    }
}

impl Default for ProxyConfig {
    /// No upstream, listen on 127.0.0.1:8787, every group at its default.
    fn default() -> Self {
        ProxyConfig {
            listen: SocketAddr::from(([127, 0, 0, 1], 8787)),
            upstream: String::new(),
            window: WindowSettings::default(),
            model_overrides: Vec::new(),
            state: StateSettings::default(),
            limits: LimitSettings::default(),
            summarizer: SummarizerSettings::default(),
            requests: RequestSettings::default(),
            status: StatusSettings::default(),
            cascade: CascadeConfig::default(),
            catalog: Catalog::builtin(),
        }
    }
}

impl Documented for ProxyConfig {
    fn keys() -> Vec<KeyDoc> {
        vec![
            KeyDoc::leaf("listen", "Address to listen on (`--listen`)."),
            KeyDoc::leaf(
                "upstream",
                "Base URL of the upstream (`--upstream`); request paths are appended.",
            ),
            KeyDoc::group::<WindowSettings>("window", "Which context window each model gets."),
            KeyDoc::leaf(
                "model",
                "`[[model]]` tables: catalog overrides (`id`, `context_window`, `prefix`, \
                 `token_scale`, `note`).",
            ),
            KeyDoc::group::<StateSettings>("state", "Where conversation state is kept."),
            KeyDoc::group::<LimitSettings>("limits", "Bounds on clients and the upstream."),
            KeyDoc::group::<SummarizerSettings>("summarizer", "Who writes ④'s summaries."),
            KeyDoc::group::<RequestSettings>("requests", "What the proxy does to each request."),
            KeyDoc::group::<StatusSettings>("status", "The status page."),
            KeyDoc::group::<CascadeConfig>("cascade", "The engine: the library's schema."),
        ]
    }
}

impl SummarizerSettings {
    /// The summarizer these settings name.
    pub fn spec(&self) -> SummarizerSpec {
        SummarizerSpec::parse(&self.endpoint, self.protocol, self.model.clone())
    }
}

impl ProxyConfig {
    /// The defaults (see [`Default`]) for an upstream.
    pub fn new(upstream: impl Into<String>) -> Self {
        ProxyConfig {
            upstream: upstream.into(),
            ..ProxyConfig::default()
        }
    }

    /// Reads a TOML config. `upstream` may be left out when a flag will give it.
    pub fn from_toml_str(text: &str) -> Result<Self, ConfigError> {
        let mut config: ProxyConfig =
            toml::from_str(text).map_err(|e| ConfigError(one_line_error(text, &e)))?;
        config.catalog = Catalog::builtin()
            .with_overrides_toml(text)
            .map_err(|e| ConfigError(e.to_string()))?;
        config.validate()?;
        Ok(config)
    }

    /// Reads a TOML config file; errors name the file (and the line where TOML gives one).
    pub fn load(path: &Path) -> Result<Self, ConfigError> {
        Self::read(path).map(|(config, _)| config)
    }

    /// [`ProxyConfig::load`], with the file's text (to tell which keys it set).
    pub fn read(path: &Path) -> Result<(Self, String), ConfigError> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| ConfigError(format!("{}: {e}", path.display())))?;
        let config = Self::from_toml_str(&text).map_err(|ConfigError(m)| {
            // `FILE:LINE:COLUMN: ...` where TOML gave a place, else `FILE: ...`.
            if m.starts_with(|c: char| c.is_ascii_digit()) {
                ConfigError(format!("{}:{m}", path.display()))
            } else {
                ConfigError(format!("{}: {m}", path.display()))
            }
        })?;
        Ok((config, text))
    }

    /// Rejects values that cannot work, naming their key: zero windows and limits, a state
    /// URL that is not Redis, no background job, and every cascade setting
    /// ([`CascadeConfig::validate`]).
    pub fn validate(&self) -> Result<(), ConfigError> {
        let bad = |key: &str, value: &dyn std::fmt::Display, expected: &str| {
            Err(ConfigError(format!("{key} = {value}: expected {expected}")))
        };
        if self.window.force == Some(0) {
            return bad("window.force", &0, "a positive number of tokens");
        }
        if let Some((model, _)) = self.window.models.iter().find(|(_, w)| **w == 0) {
            return bad(&format!("window.models.{model:?}"), &0, "a positive number");
        }
        if self.limits.max_request_bytes == 0 {
            return bad("limits.max_request_bytes", &0, "a positive number of bytes");
        }
        if self.limits.max_connections == 0 {
            return bad("limits.max_connections", &0, "at least 1");
        }
        if self.limits.max_unfinished_heads_per_peer == Some(0) {
            return bad("limits.max_unfinished_heads_per_peer", &0, "at least 1");
        }
        if self.limits.header_read_timeout.is_zero() {
            return bad("limits.header_read_timeout_secs", &0, "at least 1 second");
        }
        if let Some(url) = &self.state.url
            && !is_redis_url(url)
        {
            return bad("state.url", &format!("{url:?}"), "redis://HOST:PORT[/DB]");
        }
        if self.summarizer.background_jobs == 0 {
            return bad(
                "summarizer.background_jobs",
                &0,
                "at least 1 (summarizer.background = false turns them off)",
            );
        }
        self.cascade
            .validate()
            .map_err(|e| ConfigError(format!("cascade.{e}")))
    }

    /// Rejects an upstream that is not an `http://` or `https://` URL with a host, so that
    /// a typo fails at startup rather than as a 502 on every request.
    pub fn validate_upstream(&self) -> Result<(), ConfigError> {
        let text = self.upstream_base();
        if text.is_empty() {
            return Err(ConfigError("no upstream URL given".into()));
        }
        let bad = |why: &str| ConfigError(format!("upstream {text:?}: {why}"));
        let url = reqwest::Url::parse(text).map_err(|e| bad(&e.to_string()))?;
        if !matches!(url.scheme(), "http" | "https") {
            return Err(bad("expected an http:// or https:// URL"));
        }
        if url.host_str().is_none_or(str::is_empty) {
            return Err(bad("the URL has no host"));
        }
        Ok(())
    }

    /// Connections one client address may hold without a complete request head:
    /// `limits.max_unfinished_heads_per_peer`, else a quarter of `limits.max_connections`
    /// (at least 1).
    pub fn max_unfinished_heads_per_peer(&self) -> usize {
        let share = self.limits.max_connections / DEFAULT_UNFINISHED_HEADS_SHARE;
        (self.limits.max_unfinished_heads_per_peer).unwrap_or(share.max(1))
    }

    /// The upstream base URL without a trailing slash.
    pub fn upstream_base(&self) -> &str {
        self.upstream.trim_end_matches('/')
    }
}

/// TOML's error on one line: `LINE:COLUMN: message` where it gives a place.
fn one_line_error(text: &str, error: &toml::de::Error) -> String {
    let message = error.message().trim().replace('\n', " ");
    match error.span() {
        Some(span) => {
            let before = &text[..span.start.min(text.len())];
            let line = before.matches('\n').count() + 1;
            let column = before.len() - before.rfind('\n').map_or(0, |i| i + 1) + 1;
            format!("{line}:{column}: {message}")
        }
        None => message,
    }
}

/// Whether `text` names a Redis state store (`redis://`, or `rediss://` which the build
/// does not support and the Redis store rejects with a reason).
pub fn is_redis_url(text: &str) -> bool {
    text.starts_with("redis://") || text.starts_with("rediss://")
}

/// `<data dir>/context-cascade/cascade.db`, or `cascade.db` in the working directory when
/// the platform has no data directory.
pub fn default_db_path() -> PathBuf {
    dirs::data_dir()
        .map(|d| d.join("context-cascade").join("cascade.db"))
        .unwrap_or_else(|| PathBuf::from("cascade.db"))
}

/// `url` as it may be shown (startup lines, logs, `cascade config`): a password in it is
/// replaced by `***`. A text that does not parse as a URL but has `scheme://…@` loses its
/// whole user part.
pub fn redact_url(url: &str) -> String {
    match reqwest::Url::parse(url) {
        Ok(mut parsed) if parsed.password().is_some() => {
            // Only fails for URLs that cannot have a password, which this one has.
            let _ = parsed.set_password(Some("***"));
            parsed.to_string()
        }
        Ok(_) => url.to_owned(),
        Err(_) => match (url.find("://"), url.rfind('@')) {
            (Some(scheme), Some(at)) if at > scheme => {
                format!("{}***@{}", &url[..scheme + 3], &url[at + 1..])
            }
            _ => url.to_owned(),
        },
    }
}

/// `#[serde(serialize_with)]` for URLs, written with [`redact_url`] (a printed configuration
/// never shows a password).
mod redacted {
    use serde::Serializer;

    pub(super) fn url<S: Serializer>(value: &str, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&super::redact_url(value))
    }

    pub(super) fn optional_url<S: Serializer>(
        value: &Option<String>,
        s: S,
    ) -> Result<S::Ok, S::Error> {
        match value {
            Some(value) => url(value, s),
            None => s.serialize_none(),
        }
    }
}

/// `#[serde(with)]` for a duration written as whole seconds (`ttl_secs = 604800`).
mod seconds {
    use std::time::Duration;

    use serde::{Deserialize, Deserializer, Serializer};

    pub(super) fn serialize<S: Serializer>(value: &Duration, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_u64(value.as_secs())
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
        u64::deserialize(d).map(Duration::from_secs)
    }
}

/// `#[serde(with)]` for the summarizer's protocol, by the name `--summarizer-api` takes.
mod protocol {
    use cascade_llm::Provider;
    use serde::de::Error as _;
    use serde::{Deserialize, Deserializer, Serializer};

    pub(super) fn serialize<S: Serializer>(
        value: &Option<Provider>,
        s: S,
    ) -> Result<S::Ok, S::Error> {
        match value {
            Some(provider) => s.serialize_some(provider.as_str()),
            None => s.serialize_none(),
        }
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(
        d: D,
    ) -> Result<Option<Provider>, D::Error> {
        match Option::<String>::deserialize(d)? {
            Some(name) => name
                .parse::<Provider>()
                .map(Some)
                .map_err(|e| D::Error::custom(format!("{name:?}: {e}"))),
            None => Ok(None),
        }
    }
}

#[cfg(test)]
mod tests;
