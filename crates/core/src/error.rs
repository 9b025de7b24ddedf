//! Typed errors of the library.

/// A request body that could not be read: where (a JSON path such as
/// `$.messages[3].content`) and what was expected there.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{path}: {problem}")]
pub struct ParseError {
    /// Where: a JSON path such as `$.messages[3].content`.
    pub path: String,
    /// What was expected there.
    pub problem: String,
}

impl ParseError {
    /// A parse error at `path`.
    pub fn new(path: impl Into<String>, problem: impl Into<String>) -> Self {
        ParseError {
            path: path.into(),
            problem: problem.into(),
        }
    }
}

/// Every error the library returns.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    /// The request body could not be read.
    Parse(#[from] ParseError),
    #[error("could not write JSON: {0}")]
    /// The conversation could not be written as JSON.
    Write(String),
    #[error("tokenizer unavailable: {0}")]
    /// The exact tokenizer could not be loaded (feature `exact`).
    Tokenizer(String),
}
