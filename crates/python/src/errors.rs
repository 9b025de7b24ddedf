//! The error the Rust side raises; the Python layer (`_errors.py`) turns it into the typed
//! `CascadeError` subclasses.

use pyo3::exceptions::PyException;
use pyo3::prelude::*;

use cascade_cli::embed::EmbedError;

pyo3::create_exception!(
    _native,
    NativeError,
    PyException,
    "A failure of the Rust side: args are (kind, path, problem); the Python layer raises the typed error."
);

pub(crate) fn native_error(error: EmbedError) -> PyErr {
    match error {
        EmbedError::BadInput { path, problem } => NativeError::new_err(("parse", path, problem)),
        EmbedError::Usage(problem) => NativeError::new_err(("usage", "$".to_owned(), problem)),
    }
}

pub(crate) fn json_error(error: serde_json::Error) -> PyErr {
    NativeError::new_err(("usage", "$".to_owned(), error.to_string()))
}
