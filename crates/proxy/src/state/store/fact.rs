//! How much of one remembered fact a store keeps. A "please remember" message is stored and
//! put back into later requests' system prompt: one of megabytes would fill the store and
//! every later request with it. Both stores keep at most [`FACT_LIMIT`] bytes of a fact's
//! text, cut on a character boundary, and a note saying how many bytes were dropped, so that
//! the model knows the fact is incomplete.
//!
//! ```
//! use cascade_proxy::store::fact::{FACT_LIMIT, fact_head, fact_to_keep};
//!
//! let huge = format!("Please remember this log: {}", "x".repeat(20_000));
//! let kept = fact_to_keep(&huge);
//! assert!(kept.len() < FACT_LIMIT + 100);
//! assert!(kept.ends_with("bytes of this fact were not kept]"));
//! // What the client wrote is the part before the note.
//! assert!(huge.starts_with(fact_head(&kept)));
//! assert_eq!(fact_to_keep("remember K-42"), "remember K-42");
//! ```

use std::borrow::Cow;

/// The most bytes of a fact's own text a store keeps (the note comes on top). 8 KiB holds
/// any instruction a user asks to be remembered; past it, a message is a pasted document.
pub const FACT_LIMIT: usize = 8 * 1024;

/// What separates the kept head from the note.
const NOTE_START: &str = "\n[context-cascade: the remaining ";
const NOTE_END: &str = " bytes of this fact were not kept]";

/// The text a store keeps of `text`: all of it within [`FACT_LIMIT`], else its head cut on a
/// character boundary and a note naming how many bytes were dropped.
pub fn fact_to_keep(text: &str) -> Cow<'_, str> {
    if text.len() <= FACT_LIMIT {
        return Cow::Borrowed(text);
    }
    // `str::floor_char_boundary` is newer than the workspace's Rust 1.85.
    let cut = (0..=FACT_LIMIT)
        .rev()
        .find(|&at| text.is_char_boundary(at))
        .unwrap_or(0);
    let dropped = text.len() - cut;
    Cow::Owned(format!("{}{NOTE_START}{dropped}{NOTE_END}", &text[..cut]))
}

/// The part of a stored fact the client wrote: the whole text, or the head before the note
/// [`fact_to_keep`] added. A request that still carries the head carries the fact.
pub fn fact_head(stored: &str) -> &str {
    let Some(body) = stored.strip_suffix(NOTE_END) else {
        return stored;
    };
    match body.rfind(NOTE_START) {
        Some(at)
            if body[at + NOTE_START.len()..]
                .bytes()
                .all(|b| b.is_ascii_digit()) =>
        {
            &stored[..at]
        }
        _ => stored,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_long_fact_is_cut_on_a_character_boundary_and_says_what_went() {
        // Three-byte characters: FACT_LIMIT falls inside one of them.
        let text = "€".repeat(5_000);
        let kept = fact_to_keep(&text);
        let head = fact_head(&kept);
        assert!(head.len() <= FACT_LIMIT && head.len() > FACT_LIMIT - 3);
        assert!(text.starts_with(head));
        let dropped = text.len() - head.len();
        assert!(kept.ends_with(&format!(
            "remaining {dropped} bytes of this fact were not kept]"
        )));
    }

    #[test]
    fn a_short_fact_is_its_own_head() {
        assert!(matches!(
            fact_to_keep("remember x"),
            Cow::Borrowed("remember x")
        ));
        assert_eq!(fact_head("remember x"), "remember x");
        // A fact that only looks like a note at its end is left whole.
        let lookalike = "remember: bytes of this fact were not kept]";
        assert_eq!(fact_head(lookalike), lookalike);
        let odd = format!("remember{NOTE_START}many{NOTE_END}");
        assert_eq!(fact_head(&odd), odd);
    }
}
