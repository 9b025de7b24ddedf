//! Where a value sits in a request body, as the JSON path a reading error names
//! (`$.messages[3].tool_calls[0].function`).
//!
//! The readers descend through every message, part and call of a request; a path written
//! out at each step cost an allocation and a formatting apiece (3% of the instructions of
//! `cascade compact` on a 1.2 MB body) for errors that almost never happen. A [`JsonPath`]
//! is a chain of borrowed steps on the stack, written out only when an error names it.

use std::fmt;

/// A JSON path, written out (`Display`) only when an error needs it.
#[derive(Debug, Clone, Copy)]
pub(crate) enum JsonPath<'a> {
    /// Where reading starts (`$`, `$.messages`).
    Root(&'static str),
    /// A key of the object at the first path.
    Key(&'a JsonPath<'a>, &'static str),
    /// An item of the array at the first path.
    Index(&'a JsonPath<'a>, usize),
}

impl<'a> JsonPath<'a> {
    /// The value at `key` of the object here.
    pub(crate) fn key(&'a self, key: &'static str) -> JsonPath<'a> {
        JsonPath::Key(self, key)
    }

    /// The `index`th item of the array here.
    pub(crate) fn index(&'a self, index: usize) -> JsonPath<'a> {
        JsonPath::Index(self, index)
    }
}

impl fmt::Display for JsonPath<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            JsonPath::Root(root) => f.write_str(root),
            JsonPath::Key(parent, key) => write!(f, "{parent}.{key}"),
            JsonPath::Index(parent, index) => write!(f, "{parent}[{index}]"),
        }
    }
}

impl From<&JsonPath<'_>> for String {
    fn from(path: &JsonPath<'_>) -> String {
        path.to_string()
    }
}

impl From<JsonPath<'_>> for String {
    fn from(path: JsonPath<'_>) -> String {
        path.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_the_steps_in_order() {
        let messages = JsonPath::Root("$.messages");
        let message = messages.index(3);
        let calls = message.key("tool_calls");
        let call = calls.index(0);
        assert_eq!(
            call.key("function").to_string(),
            "$.messages[3].tool_calls[0].function"
        );
        assert_eq!(String::from(&JsonPath::Root("$")), "$");
    }
}
