//! `cascade classify`: is this provider error a context-window overflow?

use std::path::PathBuf;

use context_cascade::classify;

use crate::error::CliError;

/// Flags of `cascade classify`.
#[derive(Debug, clap::Args)]
pub(crate) struct ClassifyArgs {
    /// The error body (any text: JSON, an SDK message, a log line); `-` or nothing for stdin.
    pub(crate) file: Option<PathBuf>,
    /// The HTTP status the body came with (a 429 is never an overflow).
    #[arg(long, value_name = "N")]
    pub(crate) status: Option<u16>,
}

/// Prints one JSON line: `{"overflow", "observed_tokens", "limit_tokens", "provider"}`.
pub(crate) fn run(args: &ClassifyArgs) -> Result<(), CliError> {
    let input = crate::input::read(args.file.as_deref())?;
    if input.bytes.iter().all(u8::is_ascii_whitespace) {
        return Err(CliError::bad_input(
            input.name,
            "$",
            "empty input: expected a provider's error body",
        ));
    }
    // Error bodies are text, but a stray invalid byte must not hide an overflow message.
    let body = String::from_utf8_lossy(&input.bytes);
    let verdict = classify(args.status, &body);
    let line = serde_json::json!({
        "overflow": verdict.is_some(),
        "observed_tokens": verdict.as_ref().and_then(|o| o.observed_tokens),
        "limit_tokens": verdict.as_ref().and_then(|o| o.limit_tokens),
        "provider": verdict.as_ref().and_then(|o| o.provider),
    });
    crate::input::write(None, format!("{line}\n").as_bytes())
}
