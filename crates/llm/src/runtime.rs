//! Lets the `Llm` and `Summarizer` implementations run under any executor.
//!
//! reqwest and `tokio::time` need a Tokio runtime. The proxy has one, but the CLI drives the
//! engine with a plain `block_on`; there the work is handed to a small background runtime
//! of this crate and its `JoinHandle` (which any executor can await) awaited instead.

use std::future::Future;
use std::sync::OnceLock;

/// Whether the caller already runs inside a Tokio runtime.
pub(crate) fn in_tokio() -> bool {
    tokio::runtime::Handle::try_current().is_ok()
}

/// Runs `future` on the background runtime and awaits its result from any executor.
pub(crate) async fn run_outside_tokio<F>(future: F) -> Result<F::Output, String>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    let runtime = background()?;
    runtime
        .spawn(future)
        .await
        .map_err(|e| format!("the request task failed: {e}"))
}

fn background() -> Result<&'static tokio::runtime::Runtime, String> {
    static RUNTIME: OnceLock<Result<tokio::runtime::Runtime, String>> = OnceLock::new();
    RUNTIME
        .get_or_init(|| {
            tokio::runtime::Builder::new_multi_thread()
                .worker_threads(1)
                .thread_name("cascade-llm")
                .enable_all()
                .build()
                .map_err(|e| format!("could not start the HTTP runtime: {e}"))
        })
        .as_ref()
        .map_err(Clone::clone)
}
