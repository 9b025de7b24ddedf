//! Whose state it is: everything the proxy keeps about a conversation is keyed by the
//! client's credential as well as the conversation (SPEC "Proxy state"), so that nothing
//! learned from one API key reaches a request made with another.
//!
//! The credential itself is never stored: it goes through HMAC-SHA256 under a secret made
//! once per installation (32 random bytes in a 0600 file beside the database). Without the
//! secret, the stored keys cannot be tested against a guessed credential.

use std::io::Read;
use std::path::{Path, PathBuf};

use axum::http::HeaderMap;
use sha2::{Digest, Sha256};

use crate::config::IN_MEMORY_DB;
use crate::error::ProxyError;
use crate::state::sealing::RecallKey;
use crate::state::store::private_file;

/// The headers that carry a client's credential (OpenAI, Anthropic).
const CREDENTIAL_HEADERS: &[&str] = &["authorization", "x-api-key"];
const BLOCK: usize = 64;

/// The per-installation secret and the keys derived from it.
pub(crate) struct Tenancy {
    secret: [u8; 32],
}

impl std::fmt::Debug for Tenancy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tenancy").finish_non_exhaustive()
    }
}

/// The secret file beside `db`: `cascade.db` → `cascade.db.secret`.
pub fn secret_path(db: &Path) -> PathBuf {
    let mut name = db.as_os_str().to_owned();
    name.push(".secret");
    PathBuf::from(name)
}

/// A startup error that names the secret's path and what to do about it.
fn unwritable(path: &Path, error: ProxyError) -> ProxyError {
    ProxyError::Config(format!(
        "{}: the tenancy secret cannot be read or created ({error}); make its folder writable \
         or pass --db PATH (the secret is kept beside it, also with --state redis://)",
        path.display()
    ))
}

impl Tenancy {
    /// The secret beside the database at `db` (created 0600 the first time); an in-memory
    /// database gets a secret that lives as long as the process.
    pub(crate) fn open(db: &Path) -> Result<Tenancy, ProxyError> {
        if db == Path::new(IN_MEMORY_DB) {
            return Ok(Tenancy {
                secret: random_bytes()?,
            });
        }
        let path = secret_path(db);
        match std::fs::read(&path) {
            Ok(bytes) => {
                let secret = bytes.try_into().map_err(|_| {
                    ProxyError::Config(format!("{}: not a 32-byte secret", path.display()))
                })?;
                Ok(Tenancy { secret })
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                let secret = random_bytes()?;
                // With `--state redis://` nothing else creates the folder (a fresh machine).
                let created = super::store::private_dir(&path)
                    .map_err(ProxyError::from)
                    .and_then(|()| private_file(&path, &secret));
                created.map_err(|e| unwritable(&path, e))?;
                Ok(Tenancy { secret })
            }
            Err(e) => Err(unwritable(&path, e.into())),
        }
    }

    /// The tenant of a request: the keyed hash of its credential headers (a request
    /// without any is the anonymous tenant, which is still one tenant).
    pub(crate) fn tenant(&self, headers: &HeaderMap) -> Tenant {
        Tenant(hex::encode(hmac_sha256(&self.secret, &credential(headers))))
    }

    /// The key a request's removed originals are sealed with: derived from its credential
    /// and the installation's secret, never stored (`crate::recall`).
    pub(crate) fn recall_key(&self, headers: &HeaderMap) -> RecallKey {
        RecallKey::derive(&self.secret, &credential(headers))
    }

    /// The store key of `conversation` for `tenant`.
    pub(crate) fn scoped(tenant: &str, conversation: &str) -> String {
        let mut hasher = Sha256::new();
        hasher.update(tenant.as_bytes());
        hasher.update([0]);
        hasher.update(conversation.as_bytes());
        hex::encode(hasher.finalize())
    }
}

/// Whose state a request may reach: the keyed hash of its credential. Made only by
/// [`Tenancy::tenant`] (never empty, never a shared default), and passed explicitly to
/// everything that keys state by it: the conversation keys ([`Tenancy::scoped`]) and the
/// summary cache ([`crate::state::summary_cache::CachingSummarizer::for_tenant`]).
#[derive(Clone, PartialEq, Eq)]
pub(crate) struct Tenant(String);

impl std::ops::Deref for Tenant {
    type Target = str;

    fn deref(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for Tenant {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // A keyed hash, not a secret; shortened in logs all the same.
        write!(f, "Tenant({}…)", &self.0[..self.0.len().min(8)])
    }
}

/// The credential headers of a request, names and values, as one message.
fn credential(headers: &HeaderMap) -> Vec<u8> {
    let mut message = Vec::new();
    for name in CREDENTIAL_HEADERS {
        message.extend_from_slice(name.as_bytes());
        message.push(0);
        for value in headers.get_all(*name) {
            message.extend_from_slice(value.as_bytes());
            message.push(0);
        }
    }
    message
}

/// HMAC-SHA256 (RFC 2104) of `message` under `key`.
fn hmac_sha256(key: &[u8], message: &[u8]) -> [u8; 32] {
    let mut block = [0u8; BLOCK];
    if key.len() > BLOCK {
        block[..32].copy_from_slice(&Sha256::digest(key));
    } else {
        block[..key.len()].copy_from_slice(key);
    }
    let pad = |byte: u8| block.map(|b| b ^ byte);
    let inner = Sha256::new()
        .chain_update(pad(0x36))
        .chain_update(message)
        .finalize();
    Sha256::new()
        .chain_update(pad(0x5c))
        .chain_update(inner)
        .finalize()
        .into()
}

fn random_bytes() -> Result<[u8; 32], ProxyError> {
    let mut secret = [0u8; 32];
    std::fs::File::open("/dev/urandom")?.read_exact(&mut secret)?;
    Ok(secret)
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    #[test]
    fn hmac_matches_rfc_4231() {
        // Test case 2.
        let mac = hmac_sha256(b"Jefe", b"what do ya want for nothing?");
        assert_eq!(
            hex::encode(mac),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
        );
    }

    #[test]
    fn credentials_give_different_tenants_and_are_not_stored() {
        let tenancy = Tenancy { secret: [1; 32] };
        let mut a = HeaderMap::new();
        a.insert("authorization", HeaderValue::from_static("Bearer sk-A"));
        let mut b = HeaderMap::new();
        b.insert("authorization", HeaderValue::from_static("Bearer sk-B"));
        assert_ne!(tenancy.tenant(&a), tenancy.tenant(&b));
        assert_eq!(tenancy.tenant(&a), tenancy.tenant(&a.clone()));
        assert!(!tenancy.tenant(&a).contains("sk-A"));
        assert!(
            !tenancy.tenant(&HeaderMap::new()).is_empty(),
            "anonymous is one tenant"
        );
        let other = Tenancy { secret: [2; 32] };
        assert_ne!(tenancy.tenant(&a), other.tenant(&a));
        // Recall's key: one per credential and installation, so one tenant's seal opens
        // nothing of another's.
        let sealed = tenancy.recall_key(&a).seal(b"kept");
        assert!(tenancy.recall_key(&a).open(&sealed).is_ok());
        assert!(tenancy.recall_key(&b).open(&sealed).is_err());
        assert!(other.recall_key(&a).open(&sealed).is_err());
    }
}
