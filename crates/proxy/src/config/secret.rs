//! The admin token: a secret the configuration holds but never shows.

use sha2::{Digest, Sha256};

use super::ConfigError;

/// The token that opens the status page to other hosts. Its `Debug` does not show it (the
/// configuration is printed in places).
#[derive(Clone, PartialEq, Eq, serde::Deserialize)]
#[serde(try_from = "String")]
pub struct AdminToken(String);

impl AdminToken {
    /// A token; empty or blank ones are refused (they would open the page to anyone).
    pub fn new(token: impl Into<String>) -> Result<Self, ConfigError> {
        let token = token.into();
        if token.trim().is_empty() {
            return Err(ConfigError("admin_token must not be empty".into()));
        }
        Ok(AdminToken(token))
    }

    /// Whether `given` is the token, in time independent of where they differ.
    pub(crate) fn matches(&self, given: &str) -> bool {
        let (a, b) = (Sha256::digest(self.0.as_bytes()), Sha256::digest(given));
        let diff = a
            .iter()
            .zip(b.iter())
            .fold(0u8, |acc, (x, y)| acc | (x ^ y));
        diff == 0
    }
}

impl TryFrom<String> for AdminToken {
    type Error = ConfigError;

    fn try_from(token: String) -> Result<Self, Self::Error> {
        AdminToken::new(token)
    }
}

impl std::fmt::Debug for AdminToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("AdminToken(..)")
    }
}

impl serde::Serialize for AdminToken {
    /// Written as `"<hidden>"`: printed settings (`cascade config`) must not show it.
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str("<hidden>")
    }
}
