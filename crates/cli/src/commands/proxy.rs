//! `cascade proxy`: the transparent HTTP proxy in front of an OpenAI- or
//! Anthropic-compatible upstream. Its settings (`--config FILE` and the flags on top) are
//! also what `cascade config` prints.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use cascade_proxy::{AppState, ProxyConfig};

use crate::commands::SummarizerArgs;
use crate::error::CliError;

/// Flags of `cascade proxy` (and `cascade config`); each overrides one key of the config
/// file (`cascade_proxy::config::FLAGS` lists them).
#[derive(Debug, clap::Args)]
pub(crate) struct ProxyArgs {
    /// Base URL of the upstream (`http://127.0.0.1:8080`, `https://api.openai.com`).
    #[arg(long, value_name = "URL")]
    pub(crate) upstream: Option<String>,
    /// Address to listen on.
    #[arg(long, value_name = "ADDR")]
    pub(crate) listen: Option<SocketAddr>,
    /// Context window for every model (else: config, upstream discovery, catalog).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    pub(crate) window: Option<u64>,
    /// TOML config file (docs/configuration.md lists its keys).
    #[arg(long, value_name = "FILE")]
    pub(crate) config: Option<PathBuf>,
    /// SQLite file for the summary cache, calibration, memory and sticky prefixes.
    #[arg(long, value_name = "PATH")]
    pub(crate) db: Option<PathBuf>,
    /// Never prepare LLM summaries in the background (`summarizer.background = false`): the
    /// turn that needs ④ then waits for its summary.
    #[arg(long)]
    pub(crate) no_background_summaries: bool,
    /// Keep the state in Redis, shared by replicas (`redis://HOST:PORT[/DB]`); default SQLite.
    #[arg(long, value_name = "URL")]
    pub(crate) state: Option<String>,
    /// Serves the status page (`GET /`) to any host presenting this token (else loopback
    /// only). `[status] admin_token` in --config keeps it out of the process list.
    #[arg(long, value_name = "TOKEN")]
    pub(crate) admin_token: Option<String>,
    /// Override the config file's `[summarizer]` endpoint, model and protocol.
    #[command(flatten)]
    pub(crate) summarizer: SummarizerArgs,
}

/// The effective settings: the file's, with the flags on top.
pub(crate) struct Settings {
    pub(crate) config: ProxyConfig,
    /// The config file's text, when there is one.
    pub(crate) file: Option<String>,
    /// The keys the flags set.
    pub(crate) flags: Vec<&'static str>,
}

/// Builds the configuration and serves until Ctrl-C.
pub(crate) fn run(args: &ProxyArgs) -> Result<(), CliError> {
    let config = args.settings()?.config;
    if config.upstream.trim().is_empty() {
        return Err(CliError::Usage(
            "proxy: an upstream is required: --upstream URL or `upstream` in --config".into(),
        ));
    }
    config
        .validate_upstream()
        .map_err(|e| CliError::Usage(format!("proxy: {e}")))?;
    // A worker out of work gives back what its allocator caches for it, and a thread of the
    // blocking pool (where requests are parsed and compacted) ends a second after its last
    // task instead of ten, taking its stack and its cache with it: after a load both held
    // MBs that stayed (docs/benchmarks.md, "Hardening").
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .on_thread_park(crate::worker_idle)
        .thread_keep_alive(Duration::from_secs(1))
        .build()
        .map_err(CliError::Runtime)?;
    runtime.block_on(async move {
        // The store, the secret and the HTTP client first: a bad --db fails before
        // "listening" is printed.
        let listen = config.listen;
        // A password in the URL is not echoed to the console.
        let upstream = cascade_proxy::config::redact_url(config.upstream_base());
        let state = AppState::new(config)?;
        let listener = tokio::net::TcpListener::bind(listen)
            .await
            .map_err(|e| CliError::bad_input("--listen", listen.to_string(), e.to_string()))?;
        // Ctrl-C or SIGTERM: the requests in flight finish and pending state writes land.
        // Installed before "listening" is printed: whoever waits for that line (a script,
        // the Python wheel's `cascade`) may signal at once and must find the handler there.
        let stop = cascade_proxy::stop_signal()?;
        if let Ok(address) = listener.local_addr() {
            eprintln!("cascade proxy: listening on http://{address}, upstream {upstream}");
        }
        cascade_proxy::serve_state(state, listener, stop)
            .await
            .map_err(CliError::from)
    })
}

impl ProxyArgs {
    /// The config file (or the defaults), then each flag given, recording its key; the
    /// result is validated as a file is.
    pub(crate) fn settings(&self) -> Result<Settings, CliError> {
        let (mut config, file) = match &self.config {
            Some(path) => {
                let (config, text) =
                    ProxyConfig::read(path).map_err(|e| CliError::Usage(e.to_string()))?;
                (config, Some(text))
            }
            None => (ProxyConfig::default(), None),
        };
        let mut flags = Vec::new();
        let mut set = |key: &'static str| flags.push(key);
        if let Some(upstream) = &self.upstream {
            config.upstream = upstream.clone();
            set("upstream");
        }
        if let Some(listen) = self.listen {
            config.listen = listen;
            set("listen");
        }
        if self.window.is_some() {
            config.window.force = self.window;
            set("window.force");
        }
        if let Some(db) = &self.db {
            config.state.path = db.clone();
            set("state.path");
        }
        if let Some(state) = &self.state {
            config.state.url = Some(state.clone());
            set("state.url");
        }
        if self.no_background_summaries {
            config.summarizer.background = false;
            set("summarizer.background");
        }
        if let Some(token) = &self.admin_token {
            let token = cascade_proxy::AdminToken::new(token.clone())
                .map_err(|e| CliError::Usage(format!("proxy: --admin-token: {e}")))?;
            config.status.admin_token = Some(token);
            set("status.admin_token");
        }
        let summarizer = &self.summarizer;
        if let Some(endpoint) = &summarizer.summarizer {
            config.summarizer.endpoint = endpoint.clone();
            set("summarizer.endpoint");
        }
        if let Some(model) = &summarizer.summarizer_model {
            config.summarizer.model = Some(model.clone());
            set("summarizer.model");
        }
        if let Some(protocol) = summarizer.summarizer_api {
            config.summarizer.protocol = Some(protocol);
            set("summarizer.protocol");
        }
        config
            .validate()
            .map_err(|e| CliError::Usage(format!("proxy: {e}")))?;
        Ok(Settings {
            config,
            file,
            flags,
        })
    }
}
