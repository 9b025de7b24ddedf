//! What the bench binaries share.

use context_cascade::Conversation;
use context_cascade::format::{self, WriteOptions};

/// `conversation` written as the proxy sends it upstream: pins stripped, compact JSON. The
/// size every benchmark reports for a compacted request.
pub fn upstream_bytes(conversation: &Conversation) -> Result<Vec<u8>, String> {
    let options = WriteOptions {
        strip_pins: true,
        pretty: false,
    };
    format::to_vec(conversation, options).map_err(|e| e.to_string())
}
