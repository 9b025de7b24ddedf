//! The key a tenant's removed originals are sealed with, and the tags that name them.
//!
//! The key is derived from the client's credential (HKDF-SHA256, the installation's secret
//! as salt), so a copy of the database alone opens nothing, and neither does the secret
//! without the credential; the credential itself is never stored. A client without a
//! credential (a local model) gets a key from the secret alone. Each chunk is sealed with
//! XChaCha20-Poly1305 under a fresh random nonce. The rows are found by a tag, HMAC-SHA256
//! of the handle and part under a second derived key: the database never holds a handle,
//! which is a hash of content a guess could be checked against.

use chacha20poly1305::aead::{Aead, AeadCore, KeyInit, OsRng};
use chacha20poly1305::{XChaCha20Poly1305, XNonce};
use hkdf::Hkdf;
use sha2::Sha256;

/// Bytes of a nonce, written before each ciphertext.
const NONCE: usize = 24;

/// A tenant's recall key (sealing and tagging). Never stored, never logged.
#[derive(Clone)]
pub(crate) struct RecallKey {
    seal: [u8; 32],
    tag: [u8; 32],
}

impl std::fmt::Debug for RecallKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("RecallKey(…)")
    }
}

/// A sealed chunk that does not open under the key given (another tenant's, or damaged).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("a recall chunk does not open under this key")]
pub(crate) struct Unopened;

impl RecallKey {
    /// The key for `credential` (the request's credential headers, as the tenancy reads
    /// them) under the installation's `secret`.
    pub(crate) fn derive(secret: &[u8; 32], credential: &[u8]) -> RecallKey {
        let hkdf = Hkdf::<Sha256>::new(Some(secret), credential);
        let mut seal = [0u8; 32];
        let mut tag = [0u8; 32];
        // Both lengths are 32, far under HKDF-SHA256's limit of 255·32: expand cannot fail.
        let _ = hkdf.expand(b"context-cascade recall seal v1", &mut seal);
        let _ = hkdf.expand(b"context-cascade recall tag v1", &mut tag);
        RecallKey { seal, tag }
    }

    /// `plaintext` sealed: nonce, then ciphertext and tag.
    pub(crate) fn seal(&self, plaintext: &[u8]) -> Vec<u8> {
        let cipher = XChaCha20Poly1305::new((&self.seal).into());
        let nonce = XChaCha20Poly1305::generate_nonce(&mut OsRng);
        // Encryption into a Vec fails only past the cipher's length limit (256 GiB).
        let sealed = cipher.encrypt(&nonce, plaintext).unwrap_or_default();
        let mut out = Vec::with_capacity(NONCE + sealed.len());
        out.extend_from_slice(&nonce);
        out.extend_from_slice(&sealed);
        out
    }

    /// What `sealed` holds, if it was sealed under this key.
    pub(crate) fn open(&self, sealed: &[u8]) -> Result<Vec<u8>, Unopened> {
        if sealed.len() < NONCE {
            return Err(Unopened);
        }
        let (nonce, ciphertext) = sealed.split_at(NONCE);
        let cipher = XChaCha20Poly1305::new((&self.seal).into());
        (cipher.decrypt(XNonce::from_slice(nonce), ciphertext)).map_err(|_| Unopened)
    }

    /// The tag a row is found by: HMAC-SHA256 of `name` (a handle and part) under the
    /// tag key, hex.
    pub(crate) fn tag(&self, name: &str) -> String {
        // HKDF-Extract is HMAC(salt, input keying material): HMAC-SHA256 under the tag key.
        let (mac, _) = Hkdf::<Sha256>::extract(Some(&self.tag), name.as_bytes());
        hex::encode(mac)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_chunk_opens_under_its_tenants_key_only() {
        let secret = [7u8; 32];
        let alice = RecallKey::derive(&secret, b"authorization\0Bearer sk-alice\0");
        let bob = RecallKey::derive(&secret, b"authorization\0Bearer sk-bob\0");
        let sealed = alice.seal(b"the secret is swordfish");
        assert!(!sealed.windows(9).any(|w| w == b"swordfish"));
        assert_eq!(
            alice.open(&sealed).as_deref(),
            Ok(&b"the secret is swordfish"[..])
        );
        assert_eq!(bob.open(&sealed), Err(Unopened));
        assert_ne!(
            alice.seal(b"x"),
            alice.seal(b"x"),
            "a fresh nonce each time"
        );
        assert_ne!(alice.tag("h/1"), bob.tag("h/1"));
        assert_eq!(alice.tag("h/1"), alice.tag("h/1"));
        let other_install = RecallKey::derive(&[8u8; 32], b"authorization\0Bearer sk-alice\0");
        assert_eq!(other_install.open(&sealed), Err(Unopened));
    }
}
