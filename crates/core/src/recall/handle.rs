//! Handles: the short names under which removed content is kept, written into the markers
//! that stand where it was.
//!
//! A handle is 48 bits of xxh3 over what was removed (the [`MessageId`]s of removed
//! messages, or a tool result's call id and text), written as 12 hex digits: short enough
//! to cost a few tokens in every marker, stable (the same removal always gets the same
//! handle, so a request resent with the same history writes the same bytes and the
//! provider's prompt cache holds), and wide enough that two removals of one conversation
//! do not share one. A chunk of a removal is `handle/part` (parts count from 1).

use std::fmt;
use std::str::FromStr;

use xxhash_rust::xxh3::Xxh3;

use crate::conversation::Message;
use crate::identity::MessageId;

/// Hex digits of a handle.
const DIGITS: usize = 12;
/// The bits a handle keeps of its hash.
const MASK: u64 = (1 << (DIGITS * 4)) - 1;

/// The name of one removal's originals in a recall store.
///
/// ```
/// use context_cascade::recall::Handle;
///
/// let handle: Handle = "3f9a1c2b7d40".parse()?;
/// assert_eq!(handle.to_string(), "3f9a1c2b7d40");
/// assert!("3f9a".parse::<Handle>().is_err());
/// # Ok::<(), context_cascade::recall::RecallError>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Handle(u64);

impl Handle {
    /// The handle of a range of removed messages (③, ④, ⑤).
    pub fn of_messages<'m>(messages: impl IntoIterator<Item = &'m Message>) -> Handle {
        let mut hasher = Xxh3::new();
        hasher.update(b"messages\xff");
        for message in messages {
            hasher.update(&MessageId::of(message).as_u128().to_le_bytes());
        }
        Handle(hasher.digest() & MASK)
    }

    /// The handle of a tool result's text (② compacts it whole, ① cuts its tail):
    /// `what` tells the two apart, so that the cut tail and the whole text get two handles.
    pub fn of_result(what: &str, call_id: &str, text: &str) -> Handle {
        let mut hasher = Xxh3::new();
        for part in [what, call_id, text] {
            hasher.update(part.as_bytes());
            hasher.update(b"\xff");
        }
        Handle(hasher.digest() & MASK)
    }

    /// The 48 bits.
    pub fn as_u64(self) -> u64 {
        self.0
    }
}

impl fmt::Display for Handle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:012x}", self.0)
    }
}

impl FromStr for Handle {
    type Err = super::RecallError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let text = text.trim();
        let hex = text.len() == DIGITS && text.bytes().all(|b| b.is_ascii_hexdigit());
        (hex.then(|| u64::from_str_radix(text, 16).ok()))
            .flatten()
            .map(|bits| Handle(bits & MASK))
            .ok_or_else(|| super::RecallError::BadHandle(text.chars().take(40).collect()))
    }
}

impl serde::Serialize for Handle {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> serde::Deserialize<'de> for Handle {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = <std::borrow::Cow<'de, str>>::deserialize(deserializer)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}

/// What a `handle` argument names: a whole removal, or one of its chunks (`handle/part`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct HandleRef {
    /// The removal.
    pub handle: Handle,
    /// One chunk of it (from 1), or every chunk.
    pub part: Option<u32>,
}

impl FromStr for HandleRef {
    type Err = super::RecallError;

    /// Reads `3f9a1c2b7d40` or `3f9a1c2b7d40/2`; a model may quote it with the marker's
    /// words around it (`recall handle: 3f9a1c2b7d40`), which are ignored.
    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let text = text
            .trim()
            .trim_matches(|c: char| c == '`' || c == '"' || c == '\'');
        let text = text.rsplit([' ', ':']).next().unwrap_or(text);
        let (handle, part) = match text.split_once('/') {
            Some((handle, part)) => {
                let part = (part.trim().parse::<u32>().ok())
                    .filter(|p| *p > 0)
                    .ok_or_else(|| {
                        super::RecallError::BadHandle(text.chars().take(40).collect())
                    })?;
                (handle, Some(part))
            }
            None => (text, None),
        };
        Ok(HandleRef {
            handle: handle.parse()?,
            part,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::conversation::Role;

    #[test]
    fn the_same_removal_gets_the_same_handle_and_another_another() {
        let a = [Message::text(Role::User, "fix the build")];
        let b = [Message::text(Role::User, "fix the tests")];
        assert_eq!(Handle::of_messages(&a), Handle::of_messages(&a.clone()));
        assert_ne!(Handle::of_messages(&a), Handle::of_messages(&b));
        let whole = Handle::of_result("compacted", "call_1", "output");
        assert_ne!(whole, Handle::of_result("truncated", "call_1", "output"));
        assert_eq!(whole.to_string().len(), 12);
        assert_eq!(whole.to_string().parse::<Handle>().ok(), Some(whole));
    }

    #[test]
    fn a_reference_reads_a_handle_or_one_of_its_chunks() {
        let handle = Handle::of_result("compacted", "1", "x");
        let text = handle.to_string();
        let whole: HandleRef = text.parse().expect("a handle");
        assert_eq!((whole.handle, whole.part), (handle, None));
        let part: HandleRef = format!("{text}/3").parse().expect("a chunk");
        assert_eq!(part.part, Some(3));
        let quoted: HandleRef = format!("recall handle: {text}").parse().expect("quoted");
        assert_eq!(quoted.handle, handle);
        assert!(format!("{text}/0").parse::<HandleRef>().is_err());
        assert!("zz".parse::<HandleRef>().is_err());
    }
}
