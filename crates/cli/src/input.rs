//! Reading a command's input: a file, or standard input for `-` (or no file at all).

use std::io::Read;
use std::path::{Path, PathBuf};

use context_cascade::{Conversation, Format};

use crate::error::CliError;

/// The bytes of one input and the name to use for it in error messages.
#[derive(Debug)]
pub(crate) struct Input {
    /// The path as given, or `<stdin>`.
    pub(crate) name: String,
    pub(crate) bytes: Vec<u8>,
}

/// Reads `path`, or standard input when it is `None` or `-`.
pub(crate) fn read(path: Option<&Path>) -> Result<Input, CliError> {
    match path {
        None => read_stdin(),
        Some(p) if p == Path::new("-") => read_stdin(),
        Some(p) => {
            let name = p.display().to_string();
            let bytes = std::fs::read(p).map_err(|e| {
                let problem = match e.kind() {
                    std::io::ErrorKind::NotFound => "no such file".to_owned(),
                    std::io::ErrorKind::IsADirectory => "expected a file, found a directory".into(),
                    _ => format!("cannot read the file: {e}"),
                };
                CliError::bad_input(&name, "$", problem)
            })?;
            Ok(Input { name, bytes })
        }
    }
}

fn read_stdin() -> Result<Input, CliError> {
    let name = "<stdin>".to_owned();
    let mut bytes = Vec::new();
    std::io::stdin()
        .read_to_end(&mut bytes)
        .map_err(|e| CliError::bad_input(&name, "$", format!("cannot read standard input: {e}")))?;
    Ok(Input { name, bytes })
}

/// Parses a request body (or a bare message array), auto-detecting the format unless
/// `format` forces one. A parse error keeps the library's JSON path and problem. A body
/// whose object repeats a key is refused ([`context_cascade::format::parse_strict`]): the
/// parser keeps one of the values, so the body written back would not say what the
/// caller's said.
pub(crate) fn parse(input: &Input, format: Option<Format>) -> Result<Conversation, CliError> {
    context_cascade::format::parse_strict(&input.bytes, format)
        .map_err(|e| CliError::bad_input(&input.name, e.path, e.problem))
}

/// Reads and parses in one go.
pub(crate) fn read_conversation(
    path: Option<&Path>,
    format: Option<Format>,
) -> Result<(String, Conversation), CliError> {
    let input = read(path)?;
    let conversation = parse(&input, format)?;
    Ok((input.name, conversation))
}

/// Writes `bytes` to `path`, or to standard output when it is `None` or `-`.
pub(crate) fn write(path: Option<&PathBuf>, bytes: &[u8]) -> Result<(), CliError> {
    use std::io::Write;
    match path {
        Some(p) if p.as_os_str() != "-" => {
            std::fs::write(p, bytes).map_err(|e| CliError::write(p.display().to_string(), e))
        }
        _ => {
            let mut out = std::io::stdout().lock();
            match out.write_all(bytes).and_then(|()| out.flush()) {
                // The reader went away (`cascade models | head`): nothing left to say.
                Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
                other => other.map_err(|e| CliError::write("<stdout>", e)),
            }
        }
    }
}
