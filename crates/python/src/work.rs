//! What the Python-facing functions share: the error they raise and the GIL-free call of
//! the CLI's compaction.

use pyo3::exceptions::PyException;
use pyo3::prelude::*;
use pyo3::types::PyBytes;

use cascade_cli::embed::{self, CompactOptions, EmbedError};

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

/// Runs [`embed::compact`] with the GIL released: `(bytes, report JSON, calibration)`.
pub(crate) fn compact_with<'py>(
    py: Python<'py>,
    body: &[u8],
    options: &CompactOptions,
) -> PyResult<(Bound<'py, PyBytes>, String, context_cascade::Calibration)> {
    let (out, report, calibration) = py.detach(|| {
        let compacted = embed::compact(body, options).map_err(native_error)?;
        let report = serde_json::to_string(&compacted.report).map_err(json_error)?;
        Ok::<_, PyErr>((compacted.body, report, compacted.calibration))
    })?;
    Ok((PyBytes::new(py, &out), report, calibration))
}
