//! Client-supplied text in a log line: a bounded prefix, never the whole.
//!
//! A model name, a header value or a path comes from whoever sent the request, and may be
//! megabytes long: logged whole, one 5 MB model name wrote 10 MB of log per request. Every
//! log field that carries such text goes through [`clipped`], which keeps its first
//! [`LOGGED_CHARS`] characters and says how long the whole was; control characters are
//! escaped, so that a name cannot forge a log line of its own.
//!
//! ```
//! use context_cascade::logged::clipped;
//!
//! assert_eq!(clipped("gpt-4o").to_string(), "gpt-4o");
//! let long = "x".repeat(5_000_000);
//! let shown = clipped(&long).to_string();
//! assert!(shown.ends_with("…(5000000 bytes)") && shown.len() < 200);
//! assert_eq!(format!("{:?}", clipped("a\nb")), "\"a\\nb\"");
//! ```

use std::fmt;

/// Characters of a client-supplied text that a log line keeps.
pub const LOGGED_CHARS: usize = 96;

/// `text` as a log field shows it: at most [`LOGGED_CHARS`] characters, then `…(N bytes)`
/// when it was longer. `Display` writes it bare, `Debug` quoted (as `tracing` shows a
/// `&str` field); both escape control characters.
pub fn clipped(text: &str) -> Clipped<'_> {
    let cut = text.char_indices().nth(LOGGED_CHARS).map(|(at, _)| at);
    Clipped {
        shown: &text[..cut.unwrap_or(text.len())],
        total: cut.map(|_| text.len()),
    }
}

/// What [`clipped`] returns: a prefix and, when it is not the whole, the whole's length.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct Clipped<'a> {
    shown: &'a str,
    total: Option<usize>,
}

impl Clipped<'_> {
    fn write(&self, f: &mut fmt::Formatter<'_>, quoted: bool) -> fmt::Result {
        if quoted {
            f.write_str("\"")?;
        }
        for c in self.shown.chars() {
            if c.is_control() || (quoted && matches!(c, '"' | '\\')) {
                write!(f, "{}", c.escape_debug())?;
            } else {
                write!(f, "{c}")?;
            }
        }
        if let Some(total) = self.total {
            write!(f, "…({total} bytes)")?;
        }
        if quoted {
            f.write_str("\"")?;
        }
        Ok(())
    }
}

impl fmt::Display for Clipped<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.write(f, false)
    }
}

impl fmt::Debug for Clipped<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.write(f, true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_text_is_shown_whole_and_long_text_is_cut_on_a_character() {
        assert_eq!(clipped("").to_string(), "");
        let exact = "é".repeat(LOGGED_CHARS);
        assert_eq!(clipped(&exact).to_string(), exact);
        let long = "é".repeat(LOGGED_CHARS + 1);
        let shown = clipped(&long).to_string();
        assert_eq!(
            shown,
            format!("{}…({} bytes)", "é".repeat(LOGGED_CHARS), long.len())
        );
    }

    #[test]
    fn control_characters_cannot_start_a_line_of_their_own() {
        let forged = "m\r\n2026-01-01T00:00:00Z  INFO admin logged in\u{1b}[0m";
        let shown = clipped(forged).to_string();
        assert!(!shown.contains(['\r', '\n', '\u{1b}']), "{shown}");
        assert!(shown.starts_with("m\\r\\n2026"));
        assert_eq!(format!("{:?}", clipped("say \"hi\"")), "\"say \\\"hi\\\"\"");
    }
}
