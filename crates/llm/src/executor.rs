//! Where a client's calls run. reqwest and `tokio::time` need a Tokio runtime; the proxy has
//! one, but the CLI drives the engine with a plain `block_on`. Instead of starting a hidden
//! global runtime, each [`crate::ClientConfig`] says which runtime its calls use
//! ([`Executor`]); the choice is made once, where the client is built.

use std::fmt;
use std::future::Future;
use std::sync::Arc;

use context_cascade::LlmError;

use crate::error::ClientError;

/// Which Tokio runtime the `Llm` and `Summarizer` implementations run their HTTP calls on.
#[derive(Clone, Debug, Default)]
pub enum Executor {
    /// The runtime current where the call is awaited (the proxy's). Awaited outside any
    /// Tokio runtime, a call fails with [`LlmError::Local`].
    #[default]
    Current,
    /// A runtime of the caller's: calls are spawned on it, and can be awaited from any
    /// executor.
    Handle(tokio::runtime::Handle),
    /// A one-thread runtime the client starts and owns (its clones share it; it stops with
    /// the last one): for callers without a Tokio runtime of their own, such as the CLI's
    /// `pollster::block_on`. Calls can be awaited from any executor.
    Dedicated,
}

/// An [`Executor`] made ready: the runtime started for [`Executor::Dedicated`] lives here.
#[derive(Clone)]
pub(crate) struct Runner {
    handle: Option<tokio::runtime::Handle>,
    _owned: Option<Arc<OwnedRuntime>>,
}

impl fmt::Debug for Runner {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let kind = match (&self.handle, &self._owned) {
            (None, _) => "current",
            (Some(_), None) => "handle",
            (Some(_), Some(_)) => "dedicated",
        };
        f.write_str(kind)
    }
}

/// Shuts its runtime down without blocking, so that the last client may be dropped
/// anywhere (dropping a Tokio runtime inside another one would panic).
struct OwnedRuntime(Option<tokio::runtime::Runtime>);

impl Drop for OwnedRuntime {
    fn drop(&mut self) {
        if let Some(runtime) = self.0.take() {
            runtime.shutdown_background();
        }
    }
}

impl Runner {
    /// Starts the dedicated runtime if the choice asks for one.
    pub(crate) fn new(executor: &Executor) -> Result<Runner, ClientError> {
        Ok(match executor {
            Executor::Current => Runner {
                handle: None,
                _owned: None,
            },
            Executor::Handle(handle) => Runner {
                handle: Some(handle.clone()),
                _owned: None,
            },
            Executor::Dedicated => {
                let runtime = tokio::runtime::Builder::new_multi_thread()
                    .worker_threads(1)
                    .thread_name("cascade-llm")
                    .enable_all()
                    .build()
                    .map_err(|e| ClientError::Runtime(e.to_string()))?;
                Runner {
                    handle: Some(runtime.handle().clone()),
                    _owned: Some(Arc::new(OwnedRuntime(Some(runtime)))),
                }
            }
        })
    }

    /// Runs `future` on the chosen runtime and awaits its output from any executor.
    pub(crate) async fn run<F>(&self, future: F) -> Result<F::Output, LlmError>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        match &self.handle {
            Some(handle) => handle
                .spawn(future)
                .await
                .map_err(|e| LlmError::Local(format!("the request task failed: {e}"))),
            None if tokio::runtime::Handle::try_current().is_ok() => Ok(future.await),
            None => Err(LlmError::Local(
                "no Tokio runtime: build the client with Executor::Dedicated or Executor::Handle \
                 to call it from another executor"
                    .into(),
            )),
        }
    }
}
