//! The proxy's configuration: a TOML file, then command-line flags on top.
//!
//! ```toml
//! listen = "127.0.0.1:8787"
//! upstream = "http://127.0.0.1:8080"
//! window = 32000                 # forces every model's window (like --window)
//! db = "/var/lib/cascade.db"     # SQLite file (":memory:" keeps nothing)
//! state = "redis://127.0.0.1:6379/0"  # replicas share their state in Redis (default: SQLite)
//! max_request_bytes = 33554432
//! upstream_timeout_secs = 600
//! header_read_timeout_secs = 30  # a client must send its request head within this
//! body_read_timeout_secs = 120   # ... and its body within this
//! max_connections = 1024         # more wait until one closes
//! state_ttl_secs = 604800        # stored state unused this long is evicted (7 days)
//! state_max_bytes = 268435456    # stored state beyond this evicts the oldest entries
//! discover = true                # ask the upstream for its window (llama.cpp, vLLM, Ollama)
//! sticky_prefix = true           # re-apply earlier compaction to a conversation's known prefix
//! compact_short_of_watermark = false # default; true: SPEC's ②, which compacts even short of 0.6·E
//! preemptive_target = 0.6        # ③ before a call cuts to this share of E (SPEC: 0.75)
//! background_summaries = true    # prepare ④'s LLM summary ahead, past 0.8·E (LLM summarizer only)
//! background_jobs = 4            # background summaries running at once, at most
//! background_summary_ratio = 0.8 # the pre-threshold, a share of E below the preemptive 0.9
//! background_forecasts = 4       # distinct next requests (④ ranges) prepared for, at most
//! prepared_summary_gap = 0.0     # > 0: a summary of a range's first messages may stand in
//!                                # when the rest is at most this share (named by the trail)
//! admin_token = "..."            # opens the status page (GET /) to other hosts with this token
//! fast_path = true               # send a request the cascade would not change without parsing it
//! calibration_prior_tokens = 32000   # size-weighted calibration; 0 (default) is SPEC's EMA
//! summarizer = "offline"         # or an OpenAI/Anthropic-compatible base URL
//! summarizer_model = "gpt-4o-mini"
//! summarizer_protocol = "openai"   # or "anthropic" (default: guessed from the URL's host);
//!                                  # key in CASCADE_SUMMARIZER_API_KEY
//! compactable_tools = ["my_reader"]
//! never_compact_tools = ["notes"]
//!
//! [windows]                      # per model, before discovery and the catalog
//! "llama-3.1-8b" = 16384
//!
//! [[model]]                      # catalog overrides (see context_cascade::catalog)
//! id = "my-model"
//! context_window = 65536
//! ```

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use cascade_llm::{Provider, SummarizerSpec};
use context_cascade::CascadeConfig;
use context_cascade::catalog::Catalog;
use serde::Deserialize;
use serde::de::{self, Deserializer, IgnoredAny, MapAccess, Visitor};

use crate::error::ProxyError;

/// Default request body limit: 32 MiB.
pub const DEFAULT_MAX_REQUEST_BYTES: usize = 32 * 1024 * 1024;
/// Default time to wait for the upstream (headers, and between body chunks).
pub const DEFAULT_UPSTREAM_TIMEOUT: Duration = Duration::from_secs(600);
/// Default time a client has to send its request head.
pub const DEFAULT_HEADER_READ_TIMEOUT: Duration = Duration::from_secs(30);
/// Default time a client has to send its request body.
pub const DEFAULT_BODY_READ_TIMEOUT: Duration = Duration::from_secs(120);
/// Default limit on open client connections.
pub const DEFAULT_MAX_CONNECTIONS: usize = 1024;
/// Default time to live of stored state: 7 days.
pub const DEFAULT_STATE_TTL: Duration = Duration::from_secs(7 * 24 * 3600);
/// Default cap on stored state: 256 MiB.
pub const DEFAULT_STATE_MAX_BYTES: u64 = 256 * 1024 * 1024;
/// The SQLite path that keeps everything in memory (tests, throwaway runs).
pub const IN_MEMORY_DB: &str = ":memory:";

/// The environment variable that holds the LLM summarizer's API key.
pub use cascade_llm::SUMMARIZER_KEY_ENV;

/// Everything the proxy needs to run: its own settings, the summarizer, the engine's
/// [`CascadeConfig`] and the model [`Catalog`], each in the type its owner defines (nothing
/// is copied field by field). Build it with [`ProxyConfig::new`] or
/// [`ProxyConfig::from_toml_str`] / [`ProxyConfig::load`], then override fields from flags.
///
/// The file is flat (the keys of the module example); its shape is this struct's
/// `Deserialize`: the proxy's keys by name, the summarizer keys through
/// [`SummarizerSpec::parse`], the cascade keys into a [`CascadeConfig`] (the last section,
/// which rejects any key nobody took), `[[model]]` tables read by the catalog itself.
#[derive(Debug, Clone, serde::Deserialize)]
#[serde(default)]
pub struct ProxyConfig {
    /// Address to listen on (used by callers that bind; [`crate::serve`] takes a listener).
    #[serde(deserialize_with = "address")]
    pub listen: SocketAddr,
    /// Base URL of the upstream; request paths are appended (`{upstream}/v1/messages`).
    pub upstream: String,
    /// Forces the context window of every model (`--window`).
    pub window: Option<u64>,
    /// Context windows per model id, from the config file.
    pub windows: BTreeMap<String, u64>,
    /// SQLite database file (summary cache, calibration, memory, sticky prefixes).
    #[serde(rename = "db")]
    pub db_path: PathBuf,
    /// Largest request body accepted; larger ones get 413.
    pub max_request_bytes: usize,
    /// Time allowed for the upstream to answer (and between two streamed chunks).
    #[serde(rename = "upstream_timeout_secs", deserialize_with = "seconds")]
    pub upstream_timeout: Duration,
    /// Time a client has to send its request head; a slower one is disconnected.
    #[serde(rename = "header_read_timeout_secs", deserialize_with = "seconds")]
    pub header_read_timeout: Duration,
    /// Time a client has to send its request body; a slower one gets 408.
    #[serde(rename = "body_read_timeout_secs", deserialize_with = "seconds")]
    pub body_read_timeout: Duration,
    /// Open client connections at most; further ones wait until one closes.
    pub max_connections: usize,
    /// Stored conversation state (facts, sticky decisions, summaries) unused for this long
    /// is evicted.
    #[serde(rename = "state_ttl_secs", deserialize_with = "seconds")]
    pub state_ttl: Duration,
    /// Cap on the stored state's bytes; beyond it the least recently used entries go.
    pub state_max_bytes: u64,
    /// Ask the upstream for its context window (llama.cpp `/props`, vLLM `/v1/models`,
    /// Ollama `/api/show`) when neither flag nor config names one.
    pub discover: bool,
    /// Re-apply the previous request's compaction to the known prefix of a conversation
    /// (prompt-cache stability). On by default; off runs the cascade afresh every time.
    pub sticky_prefix: bool,
    /// Prepare ④'s summaries in the background once a conversation is past
    /// `background_summary_ratio`·E, so that the compaction turn does not wait for them.
    /// On by default; it only acts with an LLM summarizer (offline summaries take no time).
    pub background_summaries: bool,
    /// Background summary jobs running at once, at most (at least 1).
    pub background_jobs: usize,
    /// `redis://HOST:PORT[/DB]`: keep the state in Redis, shared by replicas (`--state`);
    /// `None` keeps it in the SQLite file `db` (which then only holds the tenancy secret
    /// beside it: replicas must share that secret file).
    pub state: Option<String>,
    /// Opens the status page (`GET /`) to any client presenting it; without it the page is
    /// served to loopback clients only.
    pub admin_token: Option<AdminToken>,
    /// Send a request the cascade would leave as it is upstream without parsing it into a
    /// conversation (same bytes, same decision; see the proxy's fastpath module). On by
    /// default.
    pub fast_path: bool,
    /// `[[model]]` tables: read by [`Catalog::with_overrides_toml`] from the same text, only
    /// accepted here.
    #[serde(rename = "model")]
    model_tables: IgnoredAny,
    /// The summarizer of strategy ④ (`summarizer`, `summarizer_model`,
    /// `summarizer_protocol`).
    #[serde(flatten, deserialize_with = "summarizer_keys")]
    pub summarizer: SummarizerSpec,
    /// The engine's configuration (`compactable_tools`, `never_compact_tools`,
    /// `compact_short_of_watermark`, `preemptive_target`, `calibration_prior_tokens`,
    /// `background_summary_ratio`, `background_forecasts`, `prepared_summary_gap`; the rest
    /// at their defaults).
    /// Must stay the last flattened field: it rejects the keys no one before it took.
    #[serde(flatten, deserialize_with = "cascade_keys")]
    pub cascade: CascadeConfig,
    /// The model catalog: the built-in table with the file's `[[model]]` overrides.
    #[serde(skip, default = "Catalog::builtin")]
    pub catalog: Catalog,
}

impl Default for ProxyConfig {
    /// No upstream, listen on 127.0.0.1:8787, default database, 32 MiB limit, 600 s
    /// timeout, discovery and sticky prefixes on, offline summarizer, SPEC's cascade.
    fn default() -> Self {
        ProxyConfig {
            listen: SocketAddr::from(([127, 0, 0, 1], 8787)),
            upstream: String::new(),
            window: None,
            windows: BTreeMap::new(),
            db_path: default_db_path(),
            max_request_bytes: DEFAULT_MAX_REQUEST_BYTES,
            upstream_timeout: DEFAULT_UPSTREAM_TIMEOUT,
            header_read_timeout: DEFAULT_HEADER_READ_TIMEOUT,
            body_read_timeout: DEFAULT_BODY_READ_TIMEOUT,
            max_connections: DEFAULT_MAX_CONNECTIONS,
            state_ttl: DEFAULT_STATE_TTL,
            state_max_bytes: DEFAULT_STATE_MAX_BYTES,
            discover: true,
            sticky_prefix: true,
            background_summaries: true,
            background_jobs: DEFAULT_BACKGROUND_JOBS,
            state: None,
            admin_token: None,
            fast_path: true,
            model_tables: IgnoredAny,
            summarizer: SummarizerSpec::Offline,
            cascade: CascadeConfig::default(),
            catalog: Catalog::builtin(),
        }
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
    pub fn from_toml_str(text: &str) -> Result<Self, ProxyError> {
        let mut config: ProxyConfig =
            toml::from_str(text).map_err(|e| ProxyError::Config(e.to_string()))?;
        config.catalog = Catalog::builtin()
            .with_overrides_toml(text)
            .map_err(|e| ProxyError::Config(e.to_string()))?;
        config.validate()?;
        Ok(config)
    }

    /// Reads a TOML config file.
    pub fn load(path: &Path) -> Result<Self, ProxyError> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| ProxyError::Config(format!("{}: {e}", path.display())))?;
        Self::from_toml_str(&text).map_err(|e| match e {
            ProxyError::Config(m) => ProxyError::Config(format!("{}: {m}", path.display())),
            other => other,
        })
    }

    /// Rejects values that cannot work (zero windows, a zero body limit).
    pub fn validate(&self) -> Result<(), ProxyError> {
        if self.window == Some(0) {
            return Err(ProxyError::Config("window must be positive".into()));
        }
        if let Some((model, _)) = self.windows.iter().find(|(_, w)| **w == 0) {
            return Err(ProxyError::Config(format!(
                "windows.{model:?} must be positive"
            )));
        }
        if self.max_request_bytes == 0 {
            return Err(ProxyError::Config(
                "max_request_bytes must be positive".into(),
            ));
        }
        if let Some(url) = &self.state
            && !is_redis_url(url)
        {
            return Err(ProxyError::Config(format!(
                "state = {url:?}: expected redis://HOST:PORT[/DB]"
            )));
        }
        if self.max_connections == 0 {
            return Err(ProxyError::Config(
                "max_connections must be positive".into(),
            ));
        }
        Ok(())
    }

    /// Rejects an upstream that is not an `http://` or `https://` URL with a host, so that
    /// a typo fails at startup rather than as a 502 on every request.
    pub fn validate_upstream(&self) -> Result<(), ProxyError> {
        let text = self.upstream_base();
        if text.is_empty() {
            return Err(ProxyError::Config("no upstream URL given".into()));
        }
        let bad = |why: &str| ProxyError::Config(format!("upstream {text:?}: {why}"));
        let url = reqwest::Url::parse(text).map_err(|e| bad(&e.to_string()))?;
        if !matches!(url.scheme(), "http" | "https") {
            return Err(bad("expected an http:// or https:// URL"));
        }
        if url.host_str().is_none_or(str::is_empty) {
            return Err(bad("the URL has no host"));
        }
        Ok(())
    }

    /// The upstream base URL without a trailing slash.
    pub fn upstream_base(&self) -> &str {
        self.upstream.trim_end_matches('/')
    }
}

/// `listen = "127.0.0.1:8787"`.
fn address<'de, D: Deserializer<'de>>(deserializer: D) -> Result<SocketAddr, D::Error> {
    let text = String::deserialize(deserializer)?;
    text.parse()
        .map_err(|e| de::Error::custom(format!("listen = {text:?}: not an address ({e})")))
}

/// `upstream_timeout_secs = 600`.
fn seconds<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Duration, D::Error> {
    u64::deserialize(deserializer).map(Duration::from_secs)
}

/// The summarizer's three keys, read by the parser `cascade --summarizer` uses.
fn summarizer_keys<'de, D: Deserializer<'de>>(deserializer: D) -> Result<SummarizerSpec, D::Error> {
    #[derive(serde::Deserialize)]
    struct Keys {
        summarizer: Option<String>,
        summarizer_model: Option<String>,
        /// `openai` or `anthropic`: the endpoint's protocol (else guessed from the URL).
        summarizer_protocol: Option<String>,
    }
    let keys = Keys::deserialize(deserializer)?;
    let api =
        match keys.summarizer_protocol {
            Some(protocol) => Some(protocol.parse::<Provider>().map_err(|e| {
                de::Error::custom(format!("summarizer_protocol = {protocol:?}: {e}"))
            })?),
            None => None,
        };
    Ok(match keys.summarizer {
        Some(text) => SummarizerSpec::parse(&text, api, keys.summarizer_model),
        None => SummarizerSpec::Offline,
    })
}

/// The cascade keys of the file, applied to SPEC's [`CascadeConfig`]; any other key left
/// at this point is unknown to every section and rejected (a misspelt key must not vanish).
fn cascade_keys<'de, D: Deserializer<'de>>(deserializer: D) -> Result<CascadeConfig, D::Error> {
    deserializer.deserialize_map(CascadeKeys)
}

struct CascadeKeys;

impl<'de> Visitor<'de> for CascadeKeys {
    type Value = CascadeConfig;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("the proxy's configuration table")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<CascadeConfig, A::Error> {
        let mut config = CascadeConfig::default();
        let (mut compactable, mut never) = (Vec::<String>::new(), Vec::<String>::new());
        while let Some(key) = map.next_key::<String>()? {
            match key.as_str() {
                "compactable_tools" => compactable = map.next_value()?,
                "never_compact_tools" => never = map.next_value()?,
                "compact_short_of_watermark" => {
                    config.compact_short_of_watermark = map.next_value()?
                }
                "preemptive_target" => {
                    let share: f64 = map.next_value()?;
                    if !(share > 0.0 && share <= 1.0) {
                        return Err(de::Error::custom(format!(
                            "preemptive_target = {share}: expected a share of the window in (0, 1]"
                        )));
                    }
                    config.preemptive_target = share;
                }
                "background_summary_ratio" => {
                    let ratio: f64 = map.next_value()?;
                    if !(ratio > 0.0 && ratio <= config.preemptive_ratio) {
                        return Err(de::Error::custom(format!(
                            "background_summary_ratio = {ratio}: expected a share of the window above 0 and at most the preemptive {}",
                            config.preemptive_ratio
                        )));
                    }
                    config.background_summary_ratio = ratio;
                }
                "background_forecasts" => {
                    let forecasts: usize = map.next_value()?;
                    if forecasts == 0 {
                        return Err(de::Error::custom(
                            "background_forecasts = 0: expected at least 1 (background_summaries = false turns them off)",
                        ));
                    }
                    config.background_forecasts = forecasts;
                }
                "prepared_summary_gap" => {
                    let share: f64 = map.next_value()?;
                    if !(0.0..1.0).contains(&share) {
                        return Err(de::Error::custom(format!(
                            "prepared_summary_gap = {share}: expected a share of the summarized range from 0 (off) to below 1"
                        )));
                    }
                    config.prepared_summary_gap = share;
                }
                "calibration_prior_tokens" => {
                    let tokens: f64 = map.next_value()?;
                    if !tokens.is_finite() || tokens < 0.0 {
                        return Err(de::Error::custom(format!(
                            "calibration_prior_tokens = {tokens}: expected 0 or a positive number of tokens"
                        )));
                    }
                    config.calibration_prior_tokens = tokens;
                }
                other => return Err(de::Error::custom(format!("unknown key `{other}`"))),
            }
        }
        config.tools = config.tools.with_names(&compactable, &never);
        Ok(config)
    }
}

/// `<data dir>/context-cascade/cascade.db`, or `cascade.db` in the working directory when
/// the platform has no data directory.
pub fn default_db_path() -> PathBuf {
    dirs::data_dir()
        .map(|d| d.join("context-cascade").join("cascade.db"))
        .unwrap_or_else(|| PathBuf::from("cascade.db"))
}

/// Default bound on background summary jobs running at once.
pub const DEFAULT_BACKGROUND_JOBS: usize = 4;

/// Whether `text` names a Redis state store (`redis://`, or `rediss://` which the build
/// does not support and the Redis store rejects with a reason).
pub fn is_redis_url(text: &str) -> bool {
    text.starts_with("redis://") || text.starts_with("rediss://")
}

/// The token that opens the status page to other hosts. Its `Debug` does not show it (the
/// configuration is printed in places).
#[derive(Clone, PartialEq, Eq, serde::Deserialize)]
#[serde(try_from = "String")]
pub struct AdminToken(String);

impl AdminToken {
    /// A token; empty or blank ones are refused (they would open the page to anyone).
    pub fn new(token: impl Into<String>) -> Result<Self, ProxyError> {
        let token = token.into();
        if token.trim().is_empty() {
            return Err(ProxyError::Config("admin_token must not be empty".into()));
        }
        Ok(AdminToken(token))
    }

    /// Whether `given` is the token, in time independent of where they differ.
    pub(crate) fn matches(&self, given: &str) -> bool {
        use sha2::{Digest, Sha256};
        let (a, b) = (Sha256::digest(self.0.as_bytes()), Sha256::digest(given));
        let diff = a
            .iter()
            .zip(b.iter())
            .fold(0u8, |acc, (x, y)| acc | (x ^ y));
        diff == 0
    }
}

impl TryFrom<String> for AdminToken {
    type Error = ProxyError;

    fn try_from(token: String) -> Result<Self, Self::Error> {
        AdminToken::new(token)
    }
}

impl std::fmt::Debug for AdminToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("AdminToken(..)")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use context_cascade::tool_names::ToolPolicy;

    #[test]
    fn file_values_are_read() {
        let text = r#"
            listen = "127.0.0.1:9000"
            upstream = "http://up:8080/"
            db = ":memory:"
            upstream_timeout_secs = 5
            summarizer = "offline"
            compactable_tools = ["my_reader"]
            [windows]
            "small" = 4096
            [[model]]
            id = "custom"
            context_window = 65536
        "#;
        let c = ProxyConfig::from_toml_str(text).unwrap();
        assert_eq!(c.listen.port(), 9000);
        assert_eq!(c.upstream_base(), "http://up:8080");
        assert_eq!(c.windows.get("small"), Some(&4096));
        assert_eq!(c.upstream_timeout, Duration::from_secs(5));
        assert_eq!(c.db_path, PathBuf::from(IN_MEMORY_DB));
        assert_eq!(c.catalog.lookup("custom").context_window, 65536);
        assert_eq!(c.max_request_bytes, DEFAULT_MAX_REQUEST_BYTES);
        assert_eq!(c.cascade.calibration_prior_tokens, 0.0);
        assert!(!c.cascade.compact_short_of_watermark);
        assert_eq!(c.cascade.preemptive_target, 0.6);
    }

    #[test]
    fn cascade_keys_reach_the_cascade_config() {
        let text = "compact_short_of_watermark = true\npreemptive_target = 0.75\nnever_compact_tools = [\"Read\"]\nupstream = \"http://u\"";
        let c = ProxyConfig::from_toml_str(text).unwrap();
        assert!(c.cascade.compact_short_of_watermark);
        assert_eq!(c.cascade.preemptive_target, 0.75);
        let zero = "preemptive_target = 0\nupstream = \"http://u\"";
        assert!(ProxyConfig::from_toml_str(zero).is_err());
        assert_eq!(c.upstream, "http://u");
        let args = serde_json::json!({"file_path": "/a"});
        assert!(ToolPolicy::default().is_compactable("Read", &args));
        assert!(!c.cascade.tools.is_compactable("Read", &args));
        let bad_model = "[[model]]\nid = \"m\"\ncontext_window = 0";
        assert!(ProxyConfig::from_toml_str(bad_model).is_err());
        let unknown_in_model = "[[model]]\nid = \"m\"\ncontext_window = 9\nwindow = 1";
        assert!(ProxyConfig::from_toml_str(unknown_in_model).is_err());
    }

    #[test]
    fn calibration_rule_is_read_and_checked() {
        let c = ProxyConfig::from_toml_str("calibration_prior_tokens = 32000").unwrap();
        assert_eq!(c.cascade.calibration_prior_tokens, 32_000.0);
        let err = ProxyConfig::from_toml_str("calibration_prior_tokens = -1").unwrap_err();
        assert!(
            err.to_string().contains("calibration_prior_tokens"),
            "{err}"
        );
    }

    #[test]
    fn the_stand_in_gap_is_read_and_checked() {
        let c = ProxyConfig::from_toml_str("prepared_summary_gap = 0.5").unwrap();
        assert_eq!(c.cascade.prepared_summary_gap, 0.5);
        assert_eq!(ProxyConfig::default().cascade.prepared_summary_gap, 0.0);
        let err = ProxyConfig::from_toml_str("prepared_summary_gap = 1.0").unwrap_err();
        assert!(err.to_string().contains("prepared_summary_gap"), "{err}");
    }

    #[test]
    fn unknown_keys_and_zero_windows_are_rejected() {
        assert!(ProxyConfig::from_toml_str("upstrem = \"x\"").is_err());
        assert!(ProxyConfig::from_toml_str("window = 0").is_err());
        assert!(ProxyConfig::from_toml_str("[windows]\nm = 0").is_err());
    }

    #[test]
    fn summarizer_keys_are_read() {
        let c = ProxyConfig::from_toml_str("summarizer = \"offline\"").unwrap();
        assert_eq!(c.summarizer, SummarizerSpec::Offline);
        let text = "summarizer = \"http://x\"\nsummarizer_model = \"m\"\nsummarizer_protocol = \"anthropic\"";
        let SummarizerSpec::Endpoint(e) = ProxyConfig::from_toml_str(text).unwrap().summarizer
        else {
            panic!("an endpoint")
        };
        assert_eq!(
            (e.provider, e.model.as_deref()),
            (Provider::Anthropic, Some("m"))
        );
        assert!(ProxyConfig::from_toml_str("summarizer_protocol = \"gemini\"").is_err());
    }
}
