//! One module per subcommand; each exposes its clap `Args` and a `run` returning the
//! command's outcome.

pub mod classify;
pub mod compact;
pub mod inspect;
pub mod models;
pub mod replay;

use context_cascade::Format;

/// `--format`: forces the wire format instead of auto-detecting it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum FormatArg {
    /// OpenAI Chat Completions request body.
    Openai,
    /// Anthropic Messages request body.
    Anthropic,
    /// A bare JSON array of OpenAI-style messages.
    Bare,
}

impl From<FormatArg> for Format {
    fn from(arg: FormatArg) -> Format {
        match arg {
            FormatArg::Openai => Format::OpenAi,
            FormatArg::Anthropic => Format::Anthropic,
            FormatArg::Bare => Format::Bare,
        }
    }
}

/// `--summarizer`: who writes the summaries of strategy ④. Only the built-in offline
/// summarizer for now; endpoint URLs come with the LLM client crate.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum SummarizerArg {
    /// Deterministic extractive summary, no network.
    #[default]
    Offline,
}

impl SummarizerArg {
    /// Gives `manager` this summarizer.
    pub fn install(
        self,
        manager: context_cascade::ContextManager,
    ) -> context_cascade::ContextManager {
        match self {
            // ContextManager::new already holds the offline summarizer.
            SummarizerArg::Offline => manager,
        }
    }
}
