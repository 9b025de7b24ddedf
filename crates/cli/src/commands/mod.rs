//! One module per subcommand; each exposes its clap `Args` and a `run` returning the
//! command's outcome.

pub mod classify;
pub mod compact;
pub mod inspect;
pub mod models;
pub mod proxy;
pub mod replay;

use std::sync::Arc;

use cascade_llm::{LlmSummarizer, Provider};
use std::path::Path;

use context_cascade::{Budget, ContextManager, Conversation, Format};

use crate::error::CliError;
use crate::window::WindowArgs;

/// `--format`: forces the wire format instead of auto-detecting it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum FormatArg {
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
pub struct CascadeArgs {
    #[command(flatten)]
    pub window: WindowArgs,
    /// Force the input format instead of detecting it.
    #[arg(long, value_enum)]
    pub format: Option<FormatArg>,
    #[command(flatten)]
    pub summarizer: SummarizerArgs,
}

/// A conversation read from its file, with the budget and the engine it is compacted with.
pub struct Loaded {
    /// The file's name as messages show it (`<stdin>` for standard input).
    pub name: String,
    pub conversation: Conversation,
    pub budget: Budget,
    pub manager: ContextManager,
}

impl CascadeArgs {
    /// Reads `file` (stdin when `None`), resolves the window and builds the engine.
    pub fn load(&self, file: Option<&Path>) -> Result<Loaded, CliError> {
        let (name, conversation) =
            crate::input::read_conversation(file, self.format.map(Into::into))?;
        let resolved = self.window.resolve(&conversation);
        let manager = self.summarizer.install(resolved.manager())?;
        Ok(Loaded {
            name,
            conversation,
            budget: resolved.budget,
            manager,
        })
    }
}

/// `--summarizer offline|URL`: who writes the summaries of strategy ④.
#[derive(Debug, Clone, clap::Args)]
pub struct SummarizerArgs {
    /// `offline` (deterministic, no network) or the base URL of an OpenAI-compatible
    /// endpoint (Anthropic with `--summarizer-api anthropic`); the key comes from
    /// CASCADE_SUMMARIZER_API_KEY.
    #[arg(long, value_name = "offline|URL", default_value = "offline")]
    pub summarizer: String,
    /// The model the summarizer endpoint is asked for.
    #[arg(long, value_name = "NAME")]
    pub summarizer_model: Option<String>,
    /// The protocol the summarizer endpoint speaks.
    #[arg(long, value_enum, default_value_t = ApiArg::Openai)]
    pub summarizer_api: ApiArg,
}

/// `--summarizer-api`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ApiArg {
    /// OpenAI Chat Completions (`/v1/chat/completions`).
    Openai,
    /// Anthropic Messages (`/v1/messages`).
    Anthropic,
}

impl SummarizerArgs {
    /// Gives `manager` this summarizer.
    pub fn install(&self, manager: ContextManager) -> Result<ContextManager, CliError> {
        if self.summarizer.eq_ignore_ascii_case("offline") {
            // ContextManager::new already holds the offline summarizer.
            return Ok(manager);
        }
        let provider = match self.summarizer_api {
            ApiArg::Openai => Provider::OpenAi,
            ApiArg::Anthropic => Provider::Anthropic,
        };
        let summarizer = LlmSummarizer::for_endpoint(
            provider,
            &self.summarizer,
            self.summarizer_model.as_deref(),
        )
        .map_err(|e| CliError::bad_input("--summarizer", &self.summarizer, e.to_string()))?;
        Ok(manager.with_summarizer(Arc::new(summarizer)))
    }
}
