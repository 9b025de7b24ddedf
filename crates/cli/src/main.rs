//! `cascade`: the binary is [`cascade_cli::run`] on the process's arguments (the library
//! holds the commands so that the Python wheel's `cascade` runs the very same code).

use std::process::ExitCode;

// The allocator is the binary's choice, never the library's: the Python module links the
// library and keeps Python's allocator.
mod allocator;

fn main() -> ExitCode {
    allocator::tune();
    let args: Vec<std::ffi::OsString> = std::env::args_os().collect();
    // The proxy runs for days and gives freed pages back; any other command ends after one
    // job.
    if cascade_cli::settle_process(&args) {
        allocator::keep_freed_pages();
        cascade_cli::exit_after_command();
    }
    cascade_cli::on_worker_idle(allocator::release_thread_cache);
    ExitCode::from(cascade_cli::run(args))
}
