//! The proxy's configuration: a TOML file, then command-line flags on top.
//!
//! ```toml
//! listen = "127.0.0.1:8787"
//! upstream = "http://127.0.0.1:8080"
//! window = 32000                 # forces every model's window (like --window)
//! db = "/var/lib/cascade.db"     # SQLite file (":memory:" keeps nothing)
//! max_request_bytes = 33554432
//! upstream_timeout_secs = 600
//! discover = true                # ask the upstream for its window (llama.cpp, vLLM, Ollama)
//! sticky_prefix = true           # re-apply earlier compaction to a conversation's known prefix
//! compact_short_of_watermark = true  # SPEC's ②; false leaves ② to ③ when it cannot reach 0.6·E
//! calibration_prior_tokens = 32000   # size-weighted calibration; 0 (default) is SPEC's EMA
//! summarizer = "offline"         # or an OpenAI/Anthropic-compatible base URL
//! summarizer_model = "gpt-4o-mini"
//! summarizer_protocol = "openai"   # or "anthropic"; key in CASCADE_SUMMARIZER_API_KEY
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

use crate::error::ProxyError;

/// Default request body limit: 32 MiB.
pub const DEFAULT_MAX_REQUEST_BYTES: usize = 32 * 1024 * 1024;
/// Default time to wait for the upstream (headers, and between body chunks).
pub const DEFAULT_UPSTREAM_TIMEOUT: Duration = Duration::from_secs(600);
/// The SQLite path that keeps everything in memory (tests, throwaway runs).
pub const IN_MEMORY_DB: &str = ":memory:";

/// The environment variable that holds the LLM summarizer's API key.
pub use cascade_llm::SUMMARIZER_KEY_ENV;

/// Everything the proxy needs to run. Build it with [`ProxyConfig::new`] or
/// [`ProxyConfig::from_toml_str`] / [`ProxyConfig::load`], then override fields from flags.
#[derive(Debug, Clone)]
pub struct ProxyConfig {
    /// Address to listen on (used by callers that bind; [`crate::serve`] takes a listener).
    pub listen: SocketAddr,
    /// Base URL of the upstream; request paths are appended (`{upstream}/v1/messages`).
    pub upstream: String,
    /// Forces the context window of every model (`--window`).
    pub window: Option<u64>,
    /// Context windows per model id, from the config file.
    pub windows: BTreeMap<String, u64>,
    /// SQLite database file (summary cache, calibration, memory, sticky prefixes).
    pub db_path: PathBuf,
    /// Largest request body accepted; larger ones get 413.
    pub max_request_bytes: usize,
    /// Time allowed for the upstream to answer (and between two streamed chunks).
    pub upstream_timeout: Duration,
    /// Ask the upstream for its context window (llama.cpp `/props`, vLLM `/v1/models`,
    /// Ollama `/api/show`) when neither flag nor config names one.
    pub discover: bool,
    /// Tool names added to the built-in list of compactable tools (strategy ②).
    pub compactable_tools: Vec<String>,
    /// Tool names whose results are never compacted.
    pub never_compact_tools: Vec<String>,
    /// The summarizer of strategy ④.
    pub summarizer: SummarizerSpec,
    /// `[[model]]` catalog overrides, as TOML text (empty: none).
    pub catalog_toml: String,
    /// Re-apply the previous request's compaction to the known prefix of a conversation
    /// (prompt-cache stability). On by default; off runs the cascade afresh every time.
    pub sticky_prefix: bool,
    /// ② compacts even when it cannot reach its low watermark (SPEC, the default); `false`
    /// leaves such histories to ③, which keeps more prompt-cache prefixes (see
    /// `CascadeConfig::compact_short_of_watermark`).
    pub compact_short_of_watermark: bool,
    /// 0 (SPEC's EMA, the default) or the weight of the starting scale in prior tokens for
    /// the size-weighted calibration (see `CascadeConfig::calibration_prior_tokens`).
    pub calibration_prior_tokens: f64,
}

/// The file's shape; every key optional.
#[derive(Debug, Default, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct FileConfig {
    listen: Option<String>,
    upstream: Option<String>,
    window: Option<u64>,
    #[serde(default)]
    windows: BTreeMap<String, u64>,
    db: Option<PathBuf>,
    max_request_bytes: Option<usize>,
    upstream_timeout_secs: Option<u64>,
    discover: Option<bool>,
    sticky_prefix: Option<bool>,
    compact_short_of_watermark: Option<bool>,
    calibration_prior_tokens: Option<f64>,
    #[serde(default)]
    compactable_tools: Vec<String>,
    #[serde(default)]
    never_compact_tools: Vec<String>,
    summarizer: Option<String>,
    summarizer_model: Option<String>,
    /// `openai` or `anthropic`: the summarizer endpoint's protocol.
    summarizer_protocol: Option<String>,
    /// Checked here for shape, applied through the catalog.
    #[serde(default)]
    model: Vec<toml::Value>,
}

impl ProxyConfig {
    /// Defaults for an upstream: listen on 127.0.0.1:8787, default database, 32 MiB limit,
    /// 600 s timeout, discovery on, offline summarizer.
    pub fn new(upstream: impl Into<String>) -> Self {
        ProxyConfig {
            listen: SocketAddr::from(([127, 0, 0, 1], 8787)),
            upstream: upstream.into(),
            window: None,
            windows: BTreeMap::new(),
            db_path: default_db_path(),
            max_request_bytes: DEFAULT_MAX_REQUEST_BYTES,
            upstream_timeout: DEFAULT_UPSTREAM_TIMEOUT,
            discover: true,
            compactable_tools: Vec::new(),
            never_compact_tools: Vec::new(),
            summarizer: SummarizerSpec::Offline,
            catalog_toml: String::new(),
            sticky_prefix: true,
            compact_short_of_watermark: true,
            calibration_prior_tokens: 0.0,
        }
    }

    /// Reads a TOML config. `upstream` may be left out when a flag will give it.
    pub fn from_toml_str(text: &str) -> Result<Self, ProxyError> {
        let file: FileConfig =
            toml::from_str(text).map_err(|e| ProxyError::Config(e.to_string()))?;
        let mut config = ProxyConfig::new(file.upstream.unwrap_or_default());
        if let Some(listen) = file.listen {
            config.listen = listen.parse().map_err(|e| {
                ProxyError::Config(format!("listen = {listen:?}: not an address ({e})"))
            })?;
        }
        config.window = file.window;
        config.windows = file.windows;
        if let Some(db) = file.db {
            config.db_path = db;
        }
        if let Some(limit) = file.max_request_bytes {
            config.max_request_bytes = limit;
        }
        if let Some(secs) = file.upstream_timeout_secs {
            config.upstream_timeout = Duration::from_secs(secs);
        }
        if let Some(discover) = file.discover {
            config.discover = discover;
        }
        if let Some(sticky) = file.sticky_prefix {
            config.sticky_prefix = sticky;
        }
        if let Some(short) = file.compact_short_of_watermark {
            config.compact_short_of_watermark = short;
        }
        if let Some(tokens) = file.calibration_prior_tokens {
            if !tokens.is_finite() || tokens < 0.0 {
                return Err(ProxyError::Config(format!(
                    "calibration_prior_tokens = {tokens}: expected 0 or a positive number of tokens"
                )));
            }
            config.calibration_prior_tokens = tokens;
        }
        config.compactable_tools = file.compactable_tools;
        config.never_compact_tools = file.never_compact_tools;
        let api = match file.summarizer_protocol {
            Some(protocol) => Some(protocol.parse::<Provider>().map_err(|e| {
                ProxyError::Config(format!("summarizer_protocol = {protocol:?}: {e}"))
            })?),
            None => None,
        };
        if let Some(s) = file.summarizer {
            config.summarizer = SummarizerSpec::parse(&s, api, file.summarizer_model);
        }
        if !file.model.is_empty() {
            // Only the [[model]] tables: the catalog rejects keys it does not know.
            let mut table = toml::Table::new();
            table.insert("model".into(), toml::Value::Array(file.model));
            config.catalog_toml = table.to_string();
        }
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
        Ok(())
    }

    /// The upstream base URL without a trailing slash.
    pub fn upstream_base(&self) -> &str {
        self.upstream.trim_end_matches('/')
    }
}

/// `<data dir>/context-cascade/cascade.db`, or `cascade.db` in the working directory when
/// the platform has no data directory.
pub fn default_db_path() -> PathBuf {
    dirs::data_dir()
        .map(|d| d.join("context-cascade").join("cascade.db"))
        .unwrap_or_else(|| PathBuf::from("cascade.db"))
}

#[cfg(test)]
mod tests {
    use super::*;

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
        assert!(c.catalog_toml.contains("custom"));
        assert_eq!(c.max_request_bytes, DEFAULT_MAX_REQUEST_BYTES);
        assert_eq!(c.calibration_prior_tokens, 0.0);
    }

    #[test]
    fn calibration_rule_is_read_and_checked() {
        let c = ProxyConfig::from_toml_str("calibration_prior_tokens = 32000").unwrap();
        assert_eq!(c.calibration_prior_tokens, 32_000.0);
        let err = ProxyConfig::from_toml_str("calibration_prior_tokens = -1").unwrap_err();
        assert!(
            err.to_string().contains("calibration_prior_tokens"),
            "{err}"
        );
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
