//! What the Python-facing functions share: the GIL-free call of the CLI's compaction, on
//! JSON bytes or on a dict walked in Rust.

use pyo3::prelude::*;
use pyo3::types::PyBytes;

use cascade_cli::embed::{self, CompactOptions};

use crate::errors::{json_error, native_error};

use crate::rebuild::rebuild;
use crate::walk::walk;

/// Runs [`embed::compact`] with the GIL released: `(bytes, report JSON, calibration)`.
pub(crate) fn compact_with<'py>(
    py: Python<'py>,
    body: &[u8],
    options: &CompactOptions,
) -> PyResult<(Bound<'py, PyBytes>, String, context_cascade::Calibration)> {
    let (out, report, calibration) = detached(py, body, options)?;
    Ok((PyBytes::new(py, &out), report, calibration))
}

/// A dict or list body: walked into JSON text in Rust, compacted with the GIL released, the
/// answer rebuilt around the caller's unchanged objects. `None` when the body holds
/// something only `json.dumps` converts (see `walk.rs`): the Python layer then does.
pub(crate) fn compact_object<'py>(
    py: Python<'py>,
    body: &Bound<'py, PyAny>,
    options: &CompactOptions,
) -> PyResult<Option<(Bound<'py, PyAny>, String, context_cascade::Calibration)>> {
    let Ok(walked) = walk(body) else {
        return Ok(None);
    };
    let (out, report, calibration) = detached(py, &walked.json, options)?;
    let value = rebuild(py, &walked, &out)?;
    Ok(Some((value, report, calibration)))
}

fn detached(
    py: Python<'_>,
    body: &[u8],
    options: &CompactOptions,
) -> PyResult<(Vec<u8>, String, context_cascade::Calibration)> {
    py.detach(|| {
        let compacted = embed::compact(body, options).map_err(native_error)?;
        let report = serde_json::to_string(&compacted.report).map_err(json_error)?;
        Ok((compacted.body, report, compacted.calibration))
    })
}

/// The options of one compaction from a Python call's keyword arguments (`summarizer`: a
/// Python callable, see `summarizer.rs`); no calibration yet.
pub(crate) fn options(
    py: Python<'_>,
    window: Option<u64>,
    model: Option<String>,
    reserve: Option<u64>,
    config: Option<std::path::PathBuf>,
    pretty: bool,
    summarizer: Option<Py<PyAny>>,
) -> CompactOptions {
    CompactOptions {
        window,
        model,
        reserve,
        config,
        pretty,
        summarizer: summarizer.map(|s| crate::summarizer::shared(py, s)),
        calibration: None,
    }
}
