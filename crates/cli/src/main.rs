//! `cascade`: the binary is [`cascade_cli::run`] on the process's arguments (the library
//! holds the commands so that the Python wheel's `cascade` runs the very same code).

use std::process::ExitCode;

// The allocator is the binary's choice, never the library's: the Python module links the
// library and keeps Python's allocator.
mod allocator;

fn main() -> ExitCode {
    allocator::tune();
    cascade_cli::on_worker_idle(allocator::release_thread_cache);
    ExitCode::from(cascade_cli::run(std::env::args_os()))
}
