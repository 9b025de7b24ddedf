//! `context_cascade._native`: the Rust side of the Python package `context_cascade`.
//!
//! Bodies cross as bytes, or as the caller's dict walked here into JSON (`walk.rs`) with the
//! answer rebuilt around the caller's unchanged objects (`rebuild.rs`); the report crosses as
//! JSON text, which the Python layer turns into its dataclass. Every call that works (compacting, estimating, the CLI) releases the
//! GIL, so other Python threads run meanwhile.

use pyo3::prelude::*;
use pyo3::types::PyBytes;

use cascade_cli::embed::{self, CompactOptions};
use context_cascade::catalog::Catalog;

mod errors;
mod manager;
mod rebuild;
mod summarizer;
mod walk;
mod work;

use errors::{NativeError, json_error, native_error};
use work::{compact_object, compact_with};

/// Compacts a request body (JSON bytes) as `cascade compact` does; returns
/// `(compacted bytes, report JSON)`. `summarizer` is a sync callable (see `summarizer.rs`).
#[pyfunction]
#[pyo3(signature = (body, window=None, model=None, reserve=None, config=None, pretty=false, summarizer=None))]
#[allow(clippy::too_many_arguments)] // the keyword arguments of the Python function
fn compact<'py>(
    py: Python<'py>,
    body: &[u8],
    window: Option<u64>,
    model: Option<String>,
    reserve: Option<u64>,
    config: Option<std::path::PathBuf>,
    pretty: bool,
    summarizer: Option<Py<PyAny>>,
) -> PyResult<(Bound<'py, PyBytes>, String)> {
    let options = work::options(py, window, model, reserve, config, pretty, summarizer);
    let (out, report, _) = compact_with(py, body, &options)?;
    Ok((out, report))
}

/// Compacts a dict or list body as [`compact`] does, walking it in Rust instead of through
/// `json.dumps`: `(compacted body, report JSON)`, where the unchanged top-level fields and
/// messages are the caller's objects; `None` when the body needs `json.dumps` (`walk.rs`).
#[pyfunction]
#[pyo3(signature = (body, window=None, model=None, reserve=None, config=None, summarizer=None))]
#[allow(clippy::too_many_arguments)] // the keyword arguments of the Python function
fn compact_dict<'py>(
    py: Python<'py>,
    body: &Bound<'py, PyAny>,
    window: Option<u64>,
    model: Option<String>,
    reserve: Option<u64>,
    config: Option<std::path::PathBuf>,
    summarizer: Option<Py<PyAny>>,
) -> PyResult<Option<(Bound<'py, PyAny>, String)>> {
    let options = work::options(py, window, model, reserve, config, false, summarizer);
    Ok(compact_object(py, body, &options)?.map(|(value, report, _)| (value, report)))
}

/// The engine's token estimate of a request body (JSON bytes).
#[pyfunction]
#[pyo3(signature = (body, model=None))]
fn estimate(py: Python<'_>, body: &[u8], model: Option<String>) -> PyResult<u64> {
    py.detach(|| embed::estimate(body, model.as_deref()).map_err(native_error))
}

/// Whether a provider's error body is a context-window overflow: JSON text with
/// `overflow`, `observed_tokens`, `limit_tokens`, `provider` (what `cascade classify` prints).
#[pyfunction]
#[pyo3(signature = (error_body, status=None))]
fn classify(error_body: &str, status: Option<u16>) -> PyResult<String> {
    let verdict = context_cascade::classify(status, error_body);
    let line = serde_json::json!({
        "overflow": verdict.is_some(),
        "observed_tokens": verdict.as_ref().and_then(|o| o.observed_tokens),
        "limit_tokens": verdict.as_ref().and_then(|o| o.limit_tokens),
        "provider": verdict.as_ref().and_then(|o| o.provider),
    });
    Ok(line.to_string())
}

/// The built-in model catalog as JSON text (what `cascade models --json` prints).
#[pyfunction]
fn catalog() -> PyResult<String> {
    serde_json::to_string(Catalog::builtin().entries()).map_err(json_error)
}

/// The catalog's answer for one model id, as JSON text.
#[pyfunction]
fn lookup(model: &str) -> PyResult<String> {
    serde_json::to_string(&Catalog::builtin().lookup(model)).map_err(json_error)
}

/// Times `cascade compact`'s in-process work (parse, compact, write; no process start, no
/// file) on `body` `runs` times, in seconds: the baseline of scripts/bench-python.py.
#[pyfunction]
#[pyo3(signature = (body, runs, window=None))]
fn _bench_compact(
    py: Python<'_>,
    body: &[u8],
    runs: usize,
    window: Option<u64>,
) -> PyResult<Vec<f64>> {
    let options = CompactOptions {
        window,
        ..CompactOptions::default()
    };
    py.detach(|| {
        (0..runs)
            .map(|_| {
                let start = std::time::Instant::now();
                let compacted = embed::compact(body, &options).map_err(native_error)?;
                let report = serde_json::to_string(&compacted.report).map_err(json_error)?;
                std::hint::black_box((compacted.body, report));
                Ok(start.elapsed().as_secs_f64())
            })
            .collect()
    })
}

/// Runs the `cascade` command line (`argv[0]` is the program name); returns the exit code.
/// For the console script, whose process runs this one command: its settings are the
/// binary's (a one-shot command's exact count may use the idle cores).
#[pyfunction]
fn run(py: Python<'_>, argv: Vec<String>) -> u8 {
    py.detach(|| {
        cascade_cli::settle_process(&argv);
        cascade_cli::run(argv)
    })
}

/// The Rust side of `context_cascade`.
#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("NativeError", m.py().get_type::<NativeError>())?;
    m.add_function(wrap_pyfunction!(compact, m)?)?;
    m.add_function(wrap_pyfunction!(compact_dict, m)?)?;
    m.add_function(wrap_pyfunction!(estimate, m)?)?;
    m.add_function(wrap_pyfunction!(classify, m)?)?;
    m.add_function(wrap_pyfunction!(catalog, m)?)?;
    m.add_function(wrap_pyfunction!(lookup, m)?)?;
    m.add_function(wrap_pyfunction!(run, m)?)?;
    m.add_function(wrap_pyfunction!(_bench_compact, m)?)?;
    m.add_class::<manager::Manager>()?;
    Ok(())
}
