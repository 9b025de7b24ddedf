//! `cascade`: the binary is [`cascade_cli::run`] on the process's arguments (the library
//! holds the commands so that the Python wheel's `cascade` runs the very same code).

use std::process::ExitCode;

// The allocator is the binary's choice, never the library's: the Python module links the
// library and keeps Python's allocator.
mod allocator;

/// Threads a one-shot command's exact count may use (never more than the cores): counting is
/// bound by memory lookups, and past four threads a request's share per thread is small.
const COUNTING_THREADS: usize = 4;

fn main() -> ExitCode {
    allocator::tune();
    // The proxy runs for days and gives freed pages back; any other command ends after one
    // job. A `proxy` anywhere among the arguments keeps the proxy's settings (the safe side).
    if !std::env::args_os().any(|arg| arg == "proxy") {
        allocator::keep_freed_pages();
        // One job at a time: a large request's exact count may use the idle cores.
        context_cascade::estimate::set_counting_threads(COUNTING_THREADS);
    }
    cascade_cli::on_worker_idle(allocator::release_thread_cache);
    ExitCode::from(cascade_cli::run(std::env::args_os()))
}
