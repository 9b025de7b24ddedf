//! A bare serde_json round trip as a process of its own: reads a JSON file, parses it into
//! a `serde_json::Value`, serializes it and writes it out. The yardstick of a whole
//! `cascade compact` process (`bench/model_ratio.py`): the least any tool that reads and
//! writes the request must do, trimming nothing.
//!
//! `round_trip FILE OUT`

use std::process::ExitCode;

fn round_trip(file: &str, out: &str) -> Result<(), String> {
    let bytes = std::fs::read(file).map_err(|e| format!("{file}: {e}"))?;
    let value: serde_json::Value =
        serde_json::from_slice(&bytes).map_err(|e| format!("{file}: {e}"))?;
    let written = serde_json::to_vec(&value).map_err(|e| format!("{file}: {e}"))?;
    std::fs::write(out, written).map_err(|e| format!("{out}: {e}"))
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [file, out] = args.as_slice() else {
        eprintln!("usage: round_trip FILE OUT");
        return ExitCode::from(2);
    };
    match round_trip(file, out) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("round_trip: {e}");
            ExitCode::FAILURE
        }
    }
}
