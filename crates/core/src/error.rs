//! Typed errors of the library.

/// A request body that could not be read: where (a JSON path such as
/// `$.messages[3].content`) and what was expected there.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{path}: {problem}")]
pub struct ParseError {
    pub path: String,
    pub problem: String,
}

impl ParseError {
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
    Parse(#[from] ParseError),
    #[error("could not write JSON: {0}")]
    Write(String),
    #[error("tokenizer unavailable: {0}")]
    Tokenizer(String),
}
