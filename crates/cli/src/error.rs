//! The CLI's failures and the exit codes they map to.

use std::process::ExitCode;

/// Why a command stopped. Each variant prints as one line on stderr.
#[derive(Debug, thiserror::Error)]
pub enum CliError {
    /// Input that cannot be read or understood: `<file>: <JSON path>: <what was expected>`.
    #[error("{file}: {path}: {problem}")]
    BadInput {
        file: String,
        path: String,
        problem: String,
    },
    /// A file that cannot be written (output, report, plot).
    #[error("{file}: cannot write: {problem}")]
    Write { file: String, problem: String },
    /// The conversation cannot fit the window, even with every strategy applied.
    #[error("cannot fit: {reason}")]
    CannotFit { reason: String },
    /// Flags that cannot work together, or a required one missing.
    #[error("{0}")]
    Usage(String),
    /// The proxy could not start or stopped on an error.
    #[error("proxy: {0}")]
    Runtime(String),
}

impl CliError {
    /// Bad input in `file` at the JSON path `path`.
    pub fn bad_input(
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
    pub fn write(file: impl Into<String>, problem: impl std::fmt::Display) -> Self {
        CliError::Write {
            file: file.into(),
            problem: problem.to_string(),
        }
    }

    /// 1 when the conversation cannot fit, 2 for bad input and I/O failures (as clap does
    /// for bad usage).
    pub fn exit_code(&self) -> ExitCode {
        match self {
            CliError::CannotFit { .. } => ExitCode::from(1),
            CliError::BadInput { .. } | CliError::Write { .. } | CliError::Usage(_) => {
                ExitCode::from(2)
            }
            CliError::Runtime(_) => ExitCode::from(3),
        }
    }
}
