//! What every configuration group shares: the doc line of each key (so the reference in
//! `docs/configuration.md` is generated from the schema, not written beside it), and the
//! TOML-ish rendering of a value that the reference and `cascade config` both print.
//!
//! A group is declared once with [`settings_group!`](crate::settings_group): its fields,
//! their doc comments and their defaults. The macro writes the struct (serde, with
//! `default` and `deny_unknown_fields`), its `Default` and its [`Documented`] table, so a
//! key cannot be added without a default and a doc line, nor documented with a default it
//! does not have.

use serde_json::Value;

/// One key of a configuration table: its name, its doc comment, and, for a table of its
/// own, that table's keys.
#[derive(Debug, Clone, Copy)]
pub struct KeyDoc {
    /// The key as written in a file.
    pub key: &'static str,
    /// Its doc comment (lines joined by newlines, leading spaces trimmed when rendered).
    pub doc: &'static str,
    /// The keys of the table this key holds, when it is a group.
    pub group: Option<fn() -> Vec<KeyDoc>>,
}

impl KeyDoc {
    /// A key holding a value.
    pub const fn leaf(key: &'static str, doc: &'static str) -> Self {
        KeyDoc {
            key,
            doc,
            group: None,
        }
    }

    /// A key holding the table of `T`.
    pub fn group<T: Documented>(key: &'static str, doc: &'static str) -> Self {
        KeyDoc {
            key,
            doc,
            group: Some(T::keys),
        }
    }

    /// The doc comment on one line: its sentences joined, the comment markers' spaces gone.
    pub fn summary(&self) -> String {
        self.doc
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty())
            .collect::<Vec<_>>()
            .join(" ")
    }
}

/// A configuration table whose keys carry their doc comments.
pub trait Documented {
    /// Every key of the table, in declaration order.
    fn keys() -> Vec<KeyDoc>;
}

/// One key of a table with its value, flattened to its dotted path.
#[derive(Debug, Clone, PartialEq)]
pub struct Setting {
    /// `recovery.targets`, `window.models`, ...
    pub path: String,
    /// The value, written as TOML would (`0.75`, `"offline"`, `[0.75, 0.6, 0.5]`); `None`
    /// for an optional key that is unset.
    pub value: Option<String>,
    /// The key's doc comment on one line.
    pub doc: String,
}

/// Every leaf key of `T`'s table with its value in `value` (the table serialized with
/// serde), depth first in declaration order. A key the table does not document is listed
/// with an empty doc (a test of each schema checks that there is none).
pub fn flatten<T: Documented>(value: &Value) -> Vec<Setting> {
    let mut out = Vec::new();
    walk(&T::keys(), value, "", &mut out);
    out
}

fn walk(keys: &[KeyDoc], value: &Value, prefix: &str, out: &mut Vec<Setting>) {
    let empty = serde_json::Map::new();
    let table = value.as_object().unwrap_or(&empty);
    for key in keys {
        let path = format!("{prefix}{}", key.key);
        let field = table.get(key.key).unwrap_or(&Value::Null);
        match key.group {
            Some(inner) => walk(&inner(), field, &format!("{path}."), out),
            None => out.push(Setting {
                path,
                value: toml_value(field),
                doc: key.summary(),
            }),
        }
    }
    for (name, field) in table {
        if !keys.iter().any(|k| k.key == name) {
            out.push(Setting {
                path: format!("{prefix}{name}"),
                value: toml_value(field),
                doc: String::new(),
            });
        }
    }
}

/// `value` written as a TOML value on one line; `None` for null (TOML has no null: the key
/// is left out).
pub fn toml_value(value: &Value) -> Option<String> {
    Some(match value {
        Value::Null => return None,
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => n.to_string(),
        Value::String(s) => Value::String(s.clone()).to_string(),
        Value::Array(items) => {
            let items: Vec<String> = items.iter().filter_map(toml_value).collect();
            format!("[{}]", items.join(", "))
        }
        Value::Object(map) => {
            let items: Vec<String> = (map.iter())
                .filter_map(|(k, v)| Some(format!("{} = {}", toml_key(k), toml_value(v)?)))
                .collect();
            if items.is_empty() {
                "{}".to_owned()
            } else {
                format!("{{ {} }}", items.join(", "))
            }
        }
    })
}

/// A key written bare when TOML allows it, quoted otherwise.
fn toml_key(key: &str) -> String {
    let bare = !key.is_empty()
        && key
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
    if bare {
        key.to_owned()
    } else {
        Value::String(key.to_owned()).to_string()
    }
}

/// Declares a configuration group: a struct whose fields each have a doc comment and a
/// default. It derives `Debug`, `Clone`, `PartialEq` and serde (every key optional, unknown
/// keys an error naming the key), and implements `Default` and
/// [`Documented`](crate::settings::Documented). A field may carry `#[serde(...)]`
/// attributes after its doc comment.
///
/// ```
/// context_cascade::settings_group! {
///     /// How loud.
///     pub struct Volume {
///         /// The level, from 0 to 11.
///         pub level: u8 = 11,
///     }
/// }
/// use context_cascade::settings::Documented;
/// assert_eq!(Volume::default().level, 11);
/// assert_eq!(Volume::keys()[0].summary(), "The level, from 0 to 11.");
/// ```
#[macro_export]
macro_rules! settings_group {
    (
        $(#[doc = $group_doc:literal])*
        pub struct $name:ident {
            $(
                $(#[doc = $doc:literal])+
                $(#[serde($($serde:tt)*)])*
                pub $field:ident : $ty:ty = $default:expr,
            )*
        }
    ) => {
        $(#[doc = $group_doc])*
        #[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
        #[serde(default, deny_unknown_fields)]
        pub struct $name {
            $(
                $(#[doc = $doc])+
                $(#[serde($($serde)*)])*
                pub $field: $ty,
            )*
        }

        impl Default for $name {
            fn default() -> Self {
                $name { $($field: $default,)* }
            }
        }

        impl $crate::settings::Documented for $name {
            fn keys() -> Vec<$crate::settings::KeyDoc> {
                vec![$($crate::settings::KeyDoc::leaf(
                    $crate::settings::serde_name(stringify!($field), &[$(stringify!($($serde)*)),*]),
                    concat!($($doc, "\n"),+),
                )),*]
            }
        }
    };
}

/// The name serde reads a field by: its `rename = "..."` when one of its serde attributes
/// (given as text) has one, else the field's own name. Used by
/// [`settings_group!`](crate::settings_group).
#[doc(hidden)]
pub fn serde_name(field: &'static str, attributes: &[&'static str]) -> &'static str {
    for attribute in attributes {
        if let Some(start) = attribute.find("rename") {
            let rest = &attribute[start..];
            if let Some(open) = rest.find('"')
                && let Some(len) = rest[open + 1..].find('"')
            {
                return &rest[open + 1..open + 1 + len];
            }
        }
    }
    field
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_are_written_as_toml() {
        let value = serde_json::json!({"a": [0.75, 0.6], "b": "x\"y", "c": null, "d": {"m-1": 3, "a b": 4}});
        let map = value.as_object().unwrap();
        assert_eq!(toml_value(&map["a"]).unwrap(), "[0.75, 0.6]");
        assert_eq!(toml_value(&map["b"]).unwrap(), r#""x\"y""#);
        assert_eq!(toml_value(&map["c"]), None);
        assert_eq!(toml_value(&map["d"]).unwrap(), r#"{ m-1 = 3, "a b" = 4 }"#);
    }

    #[test]
    fn a_renamed_field_is_documented_by_its_file_name() {
        assert_eq!(
            serde_name("ttl", &["rename = \"ttl_secs\", with = \"x\""]),
            "ttl_secs"
        );
        assert_eq!(serde_name("ttl", &["with = \"x\""]), "ttl");
    }
}
