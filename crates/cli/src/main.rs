//! `cascade`: the binary is [`cascade_cli::run`] on the process's arguments (the library
//! holds the commands so that the Python wheel's `cascade` runs the very same code).

use std::process::ExitCode;

fn main() -> ExitCode {
    ExitCode::from(cascade_cli::run(std::env::args_os()))
}
