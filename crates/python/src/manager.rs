//! `_native.Manager`: the options of a long-lived `context_cascade.ContextManager` and the
//! token scales it learns, kept across calls (each call restores them into the engine and
//! takes them back after).

use std::path::PathBuf;
use std::sync::{Mutex, PoisonError};

use pyo3::prelude::*;
use pyo3::types::PyBytes;

use cascade_cli::embed::{self, CompactOptions};
use context_cascade::Calibration;

use crate::errors::{json_error, native_error};
use crate::work::{compact_object, compact_with};

/// A cascade with fixed options whose calibration persists across calls.
#[pyclass(frozen, module = "context_cascade._native")]
pub(crate) struct Manager {
    options: CompactOptions,
    calibration: Mutex<Calibration>,
}

impl Manager {
    fn options(&self) -> CompactOptions {
        let calibration = self
            .calibration
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        CompactOptions {
            calibration: Some(calibration),
            ..self.options.clone()
        }
    }

    fn keep(&self, calibration: Calibration) {
        *self
            .calibration
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = calibration;
    }
}

#[pymethods]
impl Manager {
    #[new]
    #[pyo3(signature = (window=None, model=None, reserve=None, config=None, summarizer=None))]
    fn new(
        py: Python<'_>,
        window: Option<u64>,
        model: Option<String>,
        reserve: Option<u64>,
        config: Option<PathBuf>,
        summarizer: Option<Py<PyAny>>,
    ) -> Self {
        Manager {
            options: crate::work::options(py, window, model, reserve, config, false, summarizer),
            calibration: Mutex::new(Calibration::default()),
        }
    }

    /// Compacts `body` (JSON bytes) with the calibration so far: `(bytes, report JSON)`.
    fn compact<'py>(
        &self,
        py: Python<'py>,
        body: &[u8],
    ) -> PyResult<(Bound<'py, PyBytes>, String)> {
        let (out, report, calibration) = compact_with(py, body, &self.options())?;
        self.keep(calibration);
        Ok((out, report))
    }

    /// Compacts a dict or list body (see `compact_dict`): `None` when it needs `json.dumps`.
    fn compact_dict<'py>(
        &self,
        py: Python<'py>,
        body: &Bound<'py, PyAny>,
    ) -> PyResult<Option<(Bound<'py, PyAny>, String)>> {
        let Some((value, report, calibration)) = compact_object(py, body, &self.options())? else {
            return Ok(None);
        };
        self.keep(calibration);
        Ok(Some((value, report)))
    }

    /// Folds in the prompt tokens the provider reported for `body`.
    fn observe(&self, py: Python<'_>, body: &[u8], prompt_tokens: u64) -> PyResult<()> {
        let options = self.options();
        let calibration = py
            .detach(|| embed::observe(body, &options, prompt_tokens))
            .map_err(native_error)?;
        self.keep(calibration);
        Ok(())
    }

    /// The calibration (every model's token scale) as JSON text.
    fn calibration(&self) -> PyResult<String> {
        let calibration = self.options().calibration.unwrap_or_default();
        serde_json::to_string(&calibration).map_err(json_error)
    }
}
