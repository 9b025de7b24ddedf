//! How the two policies of [`CascadeConfig`](super::CascadeConfig) are written in a file:
//! the tool policy as the names it adds to the built-in lists, the remember policy as its
//! phrases.

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::remember::RememberPolicy;
use crate::tool_names::ToolPolicy;

crate::settings_group! {
    /// The tool lists of a file (`[tools]`).
    pub struct ToolLists {
        /// Tool names ② may compact, beyond the built-in list (any spelling: `my_reader`,
        /// `MyReader`).
        pub compactable: Vec<String> = Vec::new(),
        /// Tool names ② never compacts, whatever the lists say.
        pub never: Vec<String> = Vec::new(),
    }
}

/// `#[serde(with)]` for [`ToolPolicy`]: the built-in policy extended by [`ToolLists`].
pub(super) mod tools {
    use super::*;

    pub(crate) fn serialize<S: Serializer>(policy: &ToolPolicy, s: S) -> Result<S::Ok, S::Error> {
        let (compactable, never) = policy.listed_names();
        ToolLists { compactable, never }.serialize(s)
    }

    pub(crate) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<ToolPolicy, D::Error> {
        let lists = ToolLists::deserialize(d)?;
        Ok(ToolPolicy::default().with_names(&lists.compactable, &lists.never))
    }
}

/// `#[serde(with)]` for [`RememberPolicy`]: its phrase list, which replaces the default one.
pub(super) mod remember {
    use super::*;

    pub(crate) fn serialize<S: Serializer>(
        policy: &RememberPolicy,
        s: S,
    ) -> Result<S::Ok, S::Error> {
        policy.phrases().serialize(s)
    }

    pub(crate) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<RememberPolicy, D::Error> {
        Ok(RememberPolicy::from_phrases(Vec::<String>::deserialize(d)?))
    }
}
