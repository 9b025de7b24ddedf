//! `cascade proxy`: the transparent HTTP proxy in front of an OpenAI- or
//! Anthropic-compatible upstream.

use std::net::SocketAddr;
use std::path::PathBuf;

use cascade_proxy::{AppState, ProxyConfig};

use crate::commands::SummarizerArgs;
use crate::error::CliError;

/// Flags of `cascade proxy`; each overrides the config file's value.
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
    /// TOML config file (upstream, windows per model, tools, summarizer, limits).
    #[arg(long, value_name = "FILE")]
    pub(crate) config: Option<PathBuf>,
    /// SQLite file for the summary cache, calibration, memory and sticky prefixes.
    #[arg(long, value_name = "PATH")]
    pub(crate) db: Option<PathBuf>,
    /// Never prepare LLM summaries in the background (`background_summaries = false`): the
    /// turn that needs ④ then waits for its summary.
    #[arg(long)]
    pub(crate) no_background_summaries: bool,
    /// Keep the state in Redis, shared by replicas (`redis://HOST:PORT[/DB]`); default SQLite.
    #[arg(long, value_name = "URL")]
    pub(crate) state: Option<String>,
    /// Serves the status page (`GET /`) to any host presenting this token (else loopback
    /// only). `admin_token` in --config keeps it out of the process list.
    #[arg(long, value_name = "TOKEN")]
    pub(crate) admin_token: Option<String>,
    /// Overrides the config file's `summarizer`, `summarizer_model`, `summarizer_protocol`.
    #[command(flatten)]
    pub(crate) summarizer: SummarizerArgs,
}

/// Builds the configuration and serves until Ctrl-C.
pub(crate) fn run(args: &ProxyArgs) -> Result<(), CliError> {
    let config = configure(args)?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(CliError::Runtime)?;
    runtime.block_on(async move {
        // The store, the secret and the HTTP client first: a bad --db fails before
        // "listening" is printed.
        let listen = config.listen;
        let upstream = config.upstream_base().to_owned();
        let state = AppState::new(config)?;
        let listener = tokio::net::TcpListener::bind(listen)
            .await
            .map_err(|e| CliError::bad_input("--listen", listen.to_string(), e.to_string()))?;
        if let Ok(address) = listener.local_addr() {
            eprintln!("cascade proxy: listening on http://{address}, upstream {upstream}");
        }
        let ctrl_c = async {
            let _ = tokio::signal::ctrl_c().await;
        };
        cascade_proxy::serve_state(state, listener, ctrl_c)
            .await
            .map_err(CliError::from)
    })
}

fn configure(args: &ProxyArgs) -> Result<ProxyConfig, CliError> {
    let mut config = match &args.config {
        Some(path) => ProxyConfig::load(path)
            .map_err(|e| CliError::bad_input(path.display().to_string(), "$", e.to_string()))?,
        None => ProxyConfig::new(String::new()),
    };
    if let Some(upstream) = &args.upstream {
        config.upstream = upstream.clone();
    }
    if config.upstream.trim().is_empty() {
        return Err(CliError::Usage(
            "proxy: an upstream is required: --upstream URL or `upstream` in --config".into(),
        ));
    }
    config
        .validate_upstream()
        .map_err(|e| CliError::Usage(format!("proxy: {e}")))?;
    if let Some(listen) = args.listen {
        config.listen = listen;
    }
    if args.window.is_some() {
        config.window = args.window;
    }
    if let Some(db) = &args.db {
        config.db_path = db.clone();
    }
    if args.no_background_summaries {
        config.background_summaries = false;
    }
    if let Some(state) = &args.state {
        config.state = Some(state.clone());
    }
    if let Some(token) = &args.admin_token {
        let token = cascade_proxy::AdminToken::new(token.clone())
            .map_err(|e| CliError::Usage(format!("proxy: --admin-token: {e}")))?;
        config.admin_token = Some(token);
    }
    if let Some(summarizer) = args.summarizer.spec() {
        config.summarizer = summarizer;
    }
    Ok(config)
}
