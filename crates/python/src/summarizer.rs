//! A Python callable as the cascade's summarizer (strategy ④).
//!
//! The callable gets one dict and returns the summary text; the Python layer makes an
//! async callable synchronous (awaited by asyncio on a worker thread) before it gets here.
//! It is called with the GIL taken again from the thread that released it for the work.

use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};

use context_cascade::BoxFuture;
use context_cascade::Message;
use context_cascade::summarizer::{Summarizer, SummaryError, SummaryRequest};

/// Calls `callable(request: dict) -> str`.
pub(crate) struct PySummarizer {
    callable: Py<PyAny>,
    id: String,
}

impl PySummarizer {
    pub(crate) fn new(py: Python<'_>, callable: Py<PyAny>) -> Self {
        let bound = callable.bind(py);
        let name = bound
            .getattr("__qualname__")
            .or_else(|_| bound.get_type().getattr("__qualname__"))
            .and_then(|n| n.extract::<String>())
            .unwrap_or_else(|_| "callable".to_owned());
        PySummarizer {
            callable,
            id: format!("python:{name}"),
        }
    }

    fn call(&self, request: &SummaryRequest) -> Result<String, SummaryError> {
        Python::attach(|py| {
            let argument = request_dict(py, request).map_err(|e| failed(py, &e))?;
            let answer = self
                .callable
                .bind(py)
                .call1((argument,))
                .map_err(|e| failed(py, &e))?;
            answer.extract::<String>().map_err(|_| {
                SummaryError::Failed("the Python summarizer must return a str".to_owned())
            })
        })
    }
}

fn failed(py: Python<'_>, error: &PyErr) -> SummaryError {
    let kind = error
        .get_type(py)
        .name()
        .map(|n| n.to_string())
        .unwrap_or_else(|_| "Exception".to_owned());
    SummaryError::Failed(format!(
        "Python summarizer raised {kind}: {}",
        error.value(py)
    ))
}

/// `{"kind": "summarize", "messages": [...], "previous_summary", "max_tokens"}` (each message
/// as [`message_dict`]) or `{"kind": "merge", "partials": [...], "max_tokens"}`.
fn request_dict<'py>(py: Python<'py>, request: &SummaryRequest) -> PyResult<Bound<'py, PyDict>> {
    let dict = PyDict::new(py);
    match request {
        SummaryRequest::Summarize {
            messages,
            previous_summary,
            max_tokens,
        } => {
            dict.set_item("kind", "summarize")?;
            let list = PyList::empty(py);
            for message in messages {
                list.append(message_dict(py, message)?)?;
            }
            dict.set_item("messages", list)?;
            dict.set_item("previous_summary", previous_summary.as_deref())?;
            dict.set_item("max_tokens", *max_tokens)?;
        }
        SummaryRequest::Merge {
            partials,
            max_tokens,
        } => {
            dict.set_item("kind", "merge")?;
            dict.set_item("partials", partials.clone())?;
            dict.set_item("max_tokens", *max_tokens)?;
        }
    }
    Ok(dict)
}

/// One message in a form that is the same whatever the request's wire format:
/// `{"role", "content": its text, "tool_calls": [{"id", "name", "arguments"}],
/// "tool_results": [{"tool_call_id", "name", "content"}]}`, the two lists only when it has
/// some. A summary must say what the tools did: their calls and outputs are what a long
/// agent session mostly consists of.
fn message_dict<'py>(py: Python<'py>, message: &Message) -> PyResult<Bound<'py, PyDict>> {
    let item = PyDict::new(py);
    item.set_item("role", message.role().as_str())?;
    item.set_item("content", message.text_content())?;
    let calls = PyList::empty(py);
    for call in message.tool_calls() {
        let entry = PyDict::new(py);
        entry.set_item("id", &call.id)?;
        entry.set_item("name", &call.name)?;
        entry.set_item("arguments", call.arguments_text().as_ref())?;
        calls.append(entry)?;
    }
    if !calls.is_empty() {
        item.set_item("tool_calls", calls)?;
    }
    let results = PyList::empty(py);
    for result in message.tool_results() {
        let entry = PyDict::new(py);
        entry.set_item("tool_call_id", &result.call_id)?;
        entry.set_item("name", result.tool_name.as_deref())?;
        entry.set_item("content", result.joined_text())?;
        results.append(entry)?;
    }
    if !results.is_empty() {
        item.set_item("tool_results", results)?;
    }
    Ok(item)
}

impl Summarizer for PySummarizer {
    fn id(&self) -> String {
        self.id.clone()
    }

    fn summarize<'a>(
        &'a self,
        request: &'a SummaryRequest,
    ) -> BoxFuture<'a, Result<String, SummaryError>> {
        Box::pin(async move { self.call(request) })
    }
}

/// `callable` as the engine's summarizer.
pub(crate) fn shared(py: Python<'_>, callable: Py<PyAny>) -> std::sync::Arc<dyn Summarizer> {
    std::sync::Arc::new(PySummarizer::new(py, callable))
}
