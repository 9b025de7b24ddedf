//! One module per subcommand; each exposes its clap `Args` and a `run` returning the
//! command's outcome.

pub mod classify;
pub mod inspect;
pub mod models;

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
