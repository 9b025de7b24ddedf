//! The CLI's failures and the exit codes they map to.

/// The exit codes, as `cascade --help` shows them.
pub(crate) const EXIT_CODES: &str = "Exit codes:
  0  success
  1  the conversation cannot fit the window, even with every strategy (compact)
  2  bad input or usage, or an output file that cannot be written; one line on stderr:
     `cascade: <file>: <JSON path>: <what was expected>`
  3  the proxy could not start or stopped on an error (store, HTTP client, runtime);
     an address it cannot listen on is 2 (a bad --listen)";

/// Why a command stopped. Each variant prints as one line on stderr.
#[derive(Debug, thiserror::Error)]
pub(crate) enum CliError {
    /// Input that cannot be read or understood: `<file>: <JSON path>: <what was expected>`.
    #[error("{file}: {path}: {problem}")]
    BadInput {
        /// The file (or flag) the input came from.
        file: String,
        /// Where in it (a JSON path, `$` for the whole).
        path: String,
        /// What was expected.
        problem: String,
    },
    /// A file that cannot be written (output, report, plot).
    #[error("{file}: cannot write: {problem}")]
    Write {
        /// The file.
        file: String,
        /// Why it could not be written.
        problem: String,
    },
    /// The conversation cannot fit the window, even with every strategy applied.
    #[error("cannot fit: {reason}")]
    CannotFit {
        /// Why, in the engine's words.
        reason: String,
    },
    /// Flags that cannot work together, or a required one missing.
    #[error("{0}")]
    Usage(String),
    /// The proxy could not start (store, HTTP client) or stopped on an error.
    #[error("proxy: {0}")]
    Proxy(#[from] cascade_proxy::ProxyError),
    /// The async runtime the proxy runs on could not be started.
    #[error("proxy: could not start the runtime: {0}")]
    Runtime(#[source] std::io::Error),
}

impl CliError {
    /// Bad input in `file` at the JSON path `path`.
    pub(crate) fn bad_input(
        file: impl Into<String>,
        path: impl Into<String>,
        problem: impl Into<String>,
    ) -> Self {
        CliError::BadInput {
            file: file.into(),
            path: path.into(),
            problem: problem.into(),
        }
    }

    /// A write failure of `file`.
    pub(crate) fn write(file: impl Into<String>, problem: impl std::fmt::Display) -> Self {
        CliError::Write {
            file: file.into(),
            problem: problem.to_string(),
        }
    }

    /// The exit code (see [`EXIT_CODES`]): 1 when the conversation cannot fit, 2 for bad
    /// input, usage and write failures (as clap does for bad usage), 3 when the proxy could
    /// not run.
    pub(crate) fn exit_code(&self) -> u8 {
        match self {
            CliError::CannotFit { .. } => 1,
            CliError::BadInput { .. } | CliError::Write { .. } | CliError::Usage(_) => 2,
            CliError::Proxy(_) | CliError::Runtime(_) => 3,
        }
    }
}
