//! One module per subcommand; each exposes its clap `Args` and a `run` returning the
//! command's outcome.

pub(crate) mod classify;
pub(crate) mod compact;
pub(crate) mod config;
pub(crate) mod inspect;
pub(crate) mod models;
pub(crate) mod proxy;
pub(crate) mod replay;
mod replay_cost;

use std::sync::Arc;

use cascade_llm::{Executor, Provider, SummarizerSpec};
use std::path::Path;

use context_cascade::{Budget, ContextManager, Conversation, Format};

use crate::error::CliError;
use crate::window::WindowArgs;

/// `--format`: forces the wire format instead of auto-detecting it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum FormatArg {
    /// OpenAI Chat Completions request body.
    Openai,
    /// Anthropic Messages request body.
    Anthropic,
    /// A bare JSON array of OpenAI-style messages.
    Bare,
    /// OpenAI Responses request body (`instructions`, `input` items).
    Responses,
}

impl From<FormatArg> for Format {
    fn from(arg: FormatArg) -> Format {
        match arg {
            FormatArg::Openai => Format::OpenAi,
            FormatArg::Anthropic => Format::Anthropic,
            FormatArg::Bare => Format::Bare,
            FormatArg::Responses => Format::Responses,
        }
    }
}

/// The flags `compact` and `replay` share: the input format, the window, the summarizer.
#[derive(Debug, Clone, clap::Args)]
pub(crate) struct CascadeArgs {
    #[command(flatten)]
    pub(crate) window: WindowArgs,
    /// Force the input format instead of detecting it.
    #[arg(long, value_enum)]
    pub(crate) format: Option<FormatArg>,
    #[command(flatten)]
    pub(crate) summarizer: SummarizerArgs,
}

/// A conversation read from its file, with the budget and the engine it is compacted with.
pub(crate) struct Loaded {
    /// The file's name as messages show it (`<stdin>` for standard input).
    pub(crate) name: String,
    pub(crate) conversation: Conversation,
    pub(crate) budget: Budget,
    pub(crate) manager: ContextManager,
    /// The engine's settings and counters, for what prices a session (`replay --cost`).
    pub(crate) config: context_cascade::CascadeConfig,
    pub(crate) counters: Option<context_cascade::estimate::CounterFor>,
    /// The length of the body read: about what a compacted body written back takes at most.
    pub(crate) input_bytes: usize,
}

impl CascadeArgs {
    /// Reads `file` (stdin when `None`), resolves the window and builds the engine.
    pub(crate) fn load(&self, file: Option<&Path>) -> Result<Loaded, CliError> {
        self.load_input(crate::input::read(file)?)
    }

    /// As [`CascadeArgs::load`], for input already read (a body in memory).
    pub(crate) fn load_input(&self, input: crate::input::Input) -> Result<Loaded, CliError> {
        let conversation = crate::input::parse(&input, self.format.map(Into::into))?;
        let input_bytes = input.bytes.len();
        let name = input.name;
        let resolved = self.window.resolve(&conversation)?;
        let manager = self
            .summarizer
            .install(resolved.manager_for(&conversation))?;
        Ok(Loaded {
            name,
            conversation,
            budget: resolved.budget,
            manager,
            config: resolved.cascade().clone(),
            counters: resolved.counters(),
            input_bytes,
        })
    }
}

/// `--summarizer offline|URL` and its protocol and model: who writes the summaries of
/// strategy ④. `compact`, `replay` and `proxy` take the same flags and read them with the same
/// parser ([`SummarizerSpec::parse`]), so one URL means one protocol in every command.
#[derive(Debug, Clone, clap::Args)]
pub(crate) struct SummarizerArgs {
    /// `offline` (deterministic, no network) or the base URL of an OpenAI- or
    /// Anthropic-compatible endpoint; the key comes from CASCADE_SUMMARIZER_API_KEY.
    #[arg(long, value_name = "offline|URL")]
    pub(crate) summarizer: Option<String>,
    /// The model the summarizer endpoint is asked for.
    #[arg(long, value_name = "NAME")]
    pub(crate) summarizer_model: Option<String>,
    /// The protocol the summarizer endpoint speaks: `openai` (Chat Completions) or
    /// `anthropic` (Messages). Default: `anthropic` for a host on anthropic.com, else `openai`.
    #[arg(long, value_name = "openai|anthropic", value_parser = parse_provider)]
    pub(crate) summarizer_api: Option<Provider>,
}

/// clap's parser for `--summarizer-api` (the provider vocabulary of cascade-llm).
fn parse_provider(text: &str) -> Result<Provider, String> {
    text.parse::<Provider>().map_err(|e| e.to_string())
}

impl SummarizerArgs {
    /// What the flags name; `None` when `--summarizer` was not given.
    pub(crate) fn spec(&self) -> Option<SummarizerSpec> {
        let text = self.summarizer.as_deref()?;
        Some(SummarizerSpec::parse(
            text,
            self.summarizer_api,
            self.summarizer_model.clone(),
        ))
    }

    /// Gives `manager` this summarizer (the offline one when none was named).
    pub(crate) fn install(&self, manager: ContextManager) -> Result<ContextManager, CliError> {
        let spec = self.spec().unwrap_or(SummarizerSpec::Offline);
        // The engine is driven by `pollster::block_on`: the summarizer's HTTP calls need a
        // Tokio runtime of their own.
        match spec.llm_summarizer(Executor::Dedicated) {
            Ok(Some(summarizer)) => Ok(manager.with_summarizer(Arc::new(summarizer))),
            // ContextManager::new already holds the offline summarizer.
            Ok(None) => Ok(manager),
            Err(e) => Err(CliError::bad_input(
                "--summarizer",
                self.summarizer.as_deref().unwrap_or_default(),
                e.to_string(),
            )),
        }
    }
}
