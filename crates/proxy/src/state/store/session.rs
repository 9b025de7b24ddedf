//! A conversation's sticky decisions as the store keeps them: one versioned record with a
//! typed wire format, written as JSON by both backends.
//!
//! A record that does not read as the current version (written by an older proxy, with
//! other message identities, or by something else) is absent: the conversation's next
//! request runs the cascade afresh, it does not fail.

use context_cascade::Format;

use context_cascade::MessageId;

/// The version this code writes and reads. 3: typed format (Responses too), xxh3-128
/// message identities (2 stored SHA-256 hashes and a format string). The identities are
/// the core's [`MessageId`], written as the same 32 hex digits as before it moved there;
/// a Responses record written before then named its messages by their re-written bytes
/// and now matches no request (its conversation runs afresh, as for an absent record).
pub const SESSION_VERSION: u32 = 3;

/// A conversation's sticky decisions, as `crate::state::stability` keeps them.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct StoredSession {
    /// [`SESSION_VERSION`] when written by this code.
    pub version: u32,
    /// The wire format of the conversation (`openai`, `anthropic`, `responses`).
    pub format: Format,
    /// The identities of the original incoming messages the decisions cover.
    pub originals: Vec<MessageId>,
    /// What went upstream in their place, see `crate::state::decisions`.
    pub decisions: String,
}

impl StoredSession {
    /// A record of the current version.
    pub fn new(format: Format, originals: Vec<MessageId>, decisions: String) -> Self {
        StoredSession {
            version: SESSION_VERSION,
            format,
            originals,
            decisions,
        }
    }

    /// The record as stored.
    pub fn to_bytes(&self) -> Vec<u8> {
        // Plain data (strings, numbers, a unit enum): writing it cannot fail.
        serde_json::to_vec(self).unwrap_or_default()
    }

    /// A stored record, or `None` when it is not one of the current version.
    pub fn from_bytes(bytes: &[u8]) -> Option<StoredSession> {
        #[derive(serde::Deserialize)]
        struct Version {
            version: u32,
        }
        let version: Version = serde_json::from_slice(bytes).ok()?;
        if version.version != SESSION_VERSION {
            return None;
        }
        serde_json::from_slice(bytes).ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_format_round_trips_and_other_versions_are_absent() {
        for format in [Format::OpenAi, Format::Anthropic, Format::Responses] {
            let session =
                StoredSession::new(format, vec![MessageId::of_bytes(b"a")], "0,-\n{}".into());
            let bytes = session.to_bytes();
            assert_eq!(StoredSession::from_bytes(&bytes), Some(session));
        }
        let old = StoredSession {
            version: 2,
            ..StoredSession::new(Format::OpenAi, Vec::new(), String::new())
        };
        assert_eq!(StoredSession::from_bytes(&old.to_bytes()), None);
        assert_eq!(StoredSession::from_bytes(b"openai"), None);
        let unknown = br#"{"version": 3, "format": "smtp", "originals": [], "decisions": ""}"#;
        assert_eq!(StoredSession::from_bytes(unknown), None);
    }
}
