//! A dict (or list) body as JSON text, written by walking it in Rust: what
//! `json.dumps(body, separators=(",", ":"))` says, in the escaping the engine's writer uses,
//! without the detour through Python's encoder. While writing it keeps where each top-level
//! field and each message went, so that the answer can hand the caller's own objects back for
//! what the cascade left as it was (`rebuild.rs`).
//!
//! Only plain JSON types are walked: exact `dict` with `str` keys, `list`, `str`, `int`,
//! finite `float`, `bool`, `None`. Anything else (tuples, subclasses with their own
//! `items()`, non-str keys, NaN, lone surrogates, cycles) is left to `json.dumps`, whose
//! conversions and errors the Python layer then keeps as they were.

use std::ops::Range;

use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyBytes, PyDict, PyFloat, PyInt, PyList, PyString};

/// The engine's JSON parser refuses deeper bodies (serde_json's recursion limit is 128); a
/// cycle would never end. Both go to `json.dumps`, which names the problem as before.
const MAX_DEPTH: usize = 128;

/// Something the walk leaves to `json.dumps`.
pub(crate) struct Unsupported;

/// A value of the caller's and where its JSON text is in [`Walked::json`].
pub(crate) struct Part<'py> {
    pub(crate) span: Range<usize>,
    pub(crate) value: Bound<'py, PyAny>,
}

/// The JSON text of a body and where its parts are in it.
pub(crate) struct Walked<'py> {
    pub(crate) json: Vec<u8>,
    /// The top-level fields of an object body, in order (empty for an array body).
    pub(crate) fields: Vec<(String, Part<'py>)>,
    /// Whether the body is an object (else a bare array, whose elements are the messages).
    pub(crate) object: bool,
    /// The key of an object body's message array (`messages`, else a Responses body's
    /// `input`) when it is an array.
    pub(crate) items_key: Option<String>,
    /// The elements of the message array.
    pub(crate) items: Vec<Part<'py>>,
}

/// Walks `body` (a dict or a list); `Err(Unsupported)` when `json.dumps` should do it.
pub(crate) fn walk<'py>(body: &Bound<'py, PyAny>) -> Result<Walked<'py>, Unsupported> {
    walk_with(body, body.py().version_info() >= (3, 10))
}

/// [`walk`], borrowing each string's UTF-8 or not (the tests run both on one Python).
fn walk_with<'py>(body: &Bound<'py, PyAny>, borrow: bool) -> Result<Walked<'py>, Unsupported> {
    let mut writer = Writer {
        out: Vec::with_capacity(1 << 16),
        borrow,
    };
    let mut walked = Walked {
        json: Vec::new(),
        fields: Vec::new(),
        object: false,
        items_key: None,
        items: Vec::new(),
    };
    if let Ok(list) = body.cast_exact::<PyList>() {
        walked.items = writer.elements(list.iter())?;
        walked.json = writer.out;
        return Ok(walked);
    }
    let dict = body.cast_exact::<PyDict>().map_err(|_| Unsupported)?;
    walked.object = true;
    // The engine reads `input` as the messages of a Responses body only without `messages`.
    let items_key = if dict.contains("messages").map_err(|_| Unsupported)? {
        "messages"
    } else {
        "input"
    };
    writer.out.push(b'{');
    for (n, (key, value)) in dict.iter().enumerate() {
        if n > 0 {
            writer.out.push(b',');
        }
        let key = key.cast_into_exact::<PyString>().map_err(|_| Unsupported)?;
        let key = writer.key(&key)?;
        let start = writer.out.len();
        if key == items_key && value.is_exact_instance_of::<PyList>() {
            let list = value.cast_exact::<PyList>().map_err(|_| Unsupported)?;
            walked.items = writer.elements(list.iter())?;
            walked.items_key = Some(key.clone());
        } else {
            writer.value(&value, 1)?;
        }
        let span = start..writer.out.len();
        walked.fields.push((key, Part { span, value }));
    }
    writer.out.push(b'}');
    walked.json = writer.out;
    Ok(walked)
}

/// The JSON text being written.
struct Writer {
    out: Vec<u8>,
    /// Whether strings lend their UTF-8 (Python 3.10 and later, see [`utf8`]).
    borrow: bool,
}

impl Writer {
    /// Writes a top-level `[a,b,...]`; returns each element's part.
    fn elements<'py>(
        &mut self,
        elements: impl Iterator<Item = Bound<'py, PyAny>>,
    ) -> Result<Vec<Part<'py>>, Unsupported> {
        let mut parts = Vec::new();
        self.out.push(b'[');
        for (n, value) in elements.enumerate() {
            if n > 0 {
                self.out.push(b',');
            }
            let start = self.out.len();
            self.value(&value, 2)?;
            parts.push(Part {
                span: start..self.out.len(),
                value,
            });
        }
        self.out.push(b']');
        Ok(parts)
    }

    /// Writes a top-level key and its colon; returns the key.
    fn key(&mut self, key: &Bound<'_, PyString>) -> Result<String, Unsupported> {
        let bytes = utf8(key, self.borrow)?;
        write_str(&mut self.out, bytes.as_bytes());
        self.out.push(b':');
        String::from_utf8(bytes.as_bytes().to_vec()).map_err(|_| Unsupported)
    }

    fn value(&mut self, value: &Bound<'_, PyAny>, depth: usize) -> Result<(), Unsupported> {
        if depth > MAX_DEPTH {
            return Err(Unsupported);
        }
        if let Ok(text) = value.cast_exact::<PyString>() {
            write_str(&mut self.out, utf8(text, self.borrow)?.as_bytes());
            return Ok(());
        }
        if let Ok(dict) = value.cast_exact::<PyDict>() {
            self.out.push(b'{');
            for (n, (key, value)) in dict.iter().enumerate() {
                if n > 0 {
                    self.out.push(b',');
                }
                let key = key.cast_into_exact::<PyString>().map_err(|_| Unsupported)?;
                write_str(&mut self.out, utf8(&key, self.borrow)?.as_bytes());
                self.out.push(b':');
                self.value(&value, depth + 1)?;
            }
            self.out.push(b'}');
            return Ok(());
        }
        if let Ok(list) = value.cast_exact::<PyList>() {
            return self.sequence(list.iter(), depth);
        }
        if value.is_none() {
            self.out.extend_from_slice(b"null");
            return Ok(());
        }
        if let Ok(flag) = value.cast_exact::<PyBool>() {
            let text: &[u8] = if flag.is_true() { b"true" } else { b"false" };
            self.out.extend_from_slice(text);
            return Ok(());
        }
        if value.is_exact_instance_of::<PyInt>() {
            return self.int(value);
        }
        if value.is_exact_instance_of::<PyFloat>() {
            return self.float(value);
        }
        // A tuple too goes to json.dumps: shared back unchanged it would stay a tuple where
        // json.loads of the answer has a list.
        Err(Unsupported)
    }

    fn sequence<'py>(
        &mut self,
        elements: impl Iterator<Item = Bound<'py, PyAny>>,
        depth: usize,
    ) -> Result<(), Unsupported> {
        self.out.push(b'[');
        for (n, value) in elements.enumerate() {
            if n > 0 {
                self.out.push(b',');
            }
            self.value(&value, depth + 1)?;
        }
        self.out.push(b']');
        Ok(())
    }

    fn int(&mut self, value: &Bound<'_, PyAny>) -> Result<(), Unsupported> {
        if let Ok(n) = value.extract::<i64>() {
            self.out.extend_from_slice(n.to_string().as_bytes());
            return Ok(());
        }
        // Beyond 64 bits: the decimal digits, as json.dumps writes them (the engine keeps them).
        let digits = value.str().map_err(|_| Unsupported)?;
        self.out
            .extend_from_slice(utf8(&digits, self.borrow)?.as_bytes());
        Ok(())
    }

    /// `float.__repr__`, as json.dumps writes a float: the shortest text that reads back as
    /// the same number. NaN and the infinities are not JSON (json.dumps writes them anyway
    /// and the engine then refuses the body: left to that path, to keep its error).
    fn float(&mut self, value: &Bound<'_, PyAny>) -> Result<(), Unsupported> {
        let number = value.extract::<f64>().map_err(|_| Unsupported)?;
        if !number.is_finite() {
            return Err(Unsupported);
        }
        let text = value.repr().map_err(|_| Unsupported)?;
        self.out
            .extend_from_slice(utf8(&text, self.borrow)?.as_bytes());
        Ok(())
    }
}

/// A string's UTF-8 bytes. From Python 3.10 on, `PyUnicode_AsUTF8AndSize` (stable ABI from
/// 3.10) lends them: an ASCII string's own buffer, else a UTF-8 copy the string keeps. The
/// stable ABI of 3.9 has only `PyUnicode_AsUTF8String`, a new `bytes` object per string.
/// A lone surrogate cannot be UTF-8: json.dumps escapes it and the engine then refuses it;
/// left to that path.
fn utf8<'a>(text: &'a Bound<'_, PyString>, borrow: bool) -> Result<Utf8<'a>, Unsupported> {
    if borrow {
        let mut size: ffi::Py_ssize_t = 0;
        // SAFETY: `text` is a live str (the GIL is held); the buffer it returns stays valid
        // while the string lives, which `'a` ties to `text`. The symbol is exported by every
        // CPython 3 (checked: `borrow` is only true from 3.10, where it is stable ABI).
        let data = unsafe { PyUnicode_AsUTF8AndSize(text.as_ptr(), &mut size) };
        if data.is_null() {
            PyErr::take(text.py());
            return Err(Unsupported);
        }
        let size = usize::try_from(size).map_err(|_| Unsupported)?;
        // SAFETY: `data` points at `size` initialized bytes (see above).
        let bytes = unsafe { std::slice::from_raw_parts(data.cast::<u8>(), size) };
        return Ok(Utf8::Borrowed(bytes));
    }
    text.encode_utf8().map(Utf8::Owned).map_err(|_| Unsupported)
}

unsafe extern "C" {
    // In the stable ABI from Python 3.10; pyo3-ffi declares it only for builds that target
    // 3.10 or later, and this one targets 3.9.
    fn PyUnicode_AsUTF8AndSize(
        unicode: *mut ffi::PyObject,
        size: *mut ffi::Py_ssize_t,
    ) -> *const std::ffi::c_char;
}

enum Utf8<'a> {
    Borrowed(&'a [u8]),
    Owned(Bound<'a, PyBytes>),
}

impl Utf8<'_> {
    fn as_bytes(&self) -> &[u8] {
        match self {
            Utf8::Borrowed(bytes) => bytes,
            Utf8::Owned(bytes) => bytes.as_bytes(),
        }
    }
}

/// What serde_json writes for each byte (the engine's writer): 0 for the byte itself, else
/// the letter after the backslash (`u`: `\u00XX`).
const ESCAPE: [u8; 256] = {
    let mut table = [0u8; 256];
    let mut byte = 0;
    while byte < 0x20 {
        table[byte] = b'u';
        byte += 1;
    }
    table[0x08] = b'b';
    table[0x09] = b't';
    table[0x0a] = b'n';
    table[0x0c] = b'f';
    table[0x0d] = b'r';
    table[b'"' as usize] = b'"';
    table[b'\\' as usize] = b'\\';
    table
};

/// A JSON string escaped as serde_json escapes it (UTF-8 as is; `"`, `\` and control
/// characters escaped, `\u00XX` in lower case), so that a message the cascade leaves alone is
/// written back as the same bytes.
fn write_str(out: &mut Vec<u8>, text: &[u8]) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    out.reserve(text.len() + 2);
    out.push(b'"');
    // `text[start..]` is not written yet; the next byte to escape is searched from `at`.
    let mut start = 0;
    let mut at = 0;
    while at < text.len() {
        let found = match text.get(at..at + 8).map(<[u8; 8]>::try_from) {
            Some(Ok(word)) => match escapes(u64::from_le_bytes(word)) {
                0 => {
                    at += 8;
                    continue;
                }
                // The lowest flagged byte is exact (see `escapes`).
                mask => at + mask.trailing_zeros() as usize / 8,
            },
            _ => match text[at..].iter().position(|&b| ESCAPE[usize::from(b)] != 0) {
                Some(offset) => at + offset,
                None => break,
            },
        };
        let byte = text[found];
        out.extend_from_slice(&text[start..found]);
        match ESCAPE[usize::from(byte)] {
            b'u' => {
                let digits = [HEX[usize::from(byte >> 4)], HEX[usize::from(byte & 0xf)]];
                out.extend_from_slice(b"\\u00");
                out.extend_from_slice(&digits);
            }
            letter => out.extend_from_slice(&[b'\\', letter]),
        }
        start = found + 1;
        at = found + 1;
    }
    out.extend_from_slice(&text[start..]);
    out.push(b'"');
}

/// The bytes of eight (little-endian) that are control characters, `"` or `\\`: the high bit
/// of each such byte set ("Bit Twiddling Hacks"' `hasless`). A borrow can flag a byte above
/// a flagged one by mistake, never one below, so the lowest flag is exact. Most text has
/// no escape for dozens of bytes: skipping eight at a time keeps the walk fast.
fn escapes(word: u64) -> u64 {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGH: u64 = 0x8080_8080_8080_8080;
    let below = |x: u64, n: u64| x.wrapping_sub(ONES * n) & !x & HIGH;
    let control = below(word, 0x20);
    let quote = below(word ^ (ONES * u64::from(b'"')), 1);
    let backslash = below(word ^ (ONES * u64::from(b'\\')), 1);
    control | quote | backslash
}

#[cfg(test)]
mod tests {
    use pyo3::prelude::*;

    use super::{walk_with, write_str};

    /// Python 3.9's path (a `bytes` copy of each string) and 3.10's (the borrowed UTF-8)
    /// write the same JSON: serde_json's compact text of the same body.
    #[test]
    fn the_copied_and_the_borrowed_utf8_write_the_same_json() {
        let text = r#"{"model":"m","messages":[{"role":"user","content":"é \"q\" \\ \n 漢 🦀 \u0001"},{"role":"assistant","content":null,"n":123456789012345678901234,"f":0.1,"e":1e-07,"ok":true,"tags":[]}],"input":"x"}"#;
        Python::initialize();
        Python::attach(|py| {
            let loads = py.import("json").unwrap().getattr("loads").unwrap();
            let body = loads.call1((text,)).unwrap();
            let Ok(copied) = walk_with(&body, false) else {
                panic!("the copying walk refused a plain body")
            };
            let Ok(borrowed) = walk_with(&body, true) else {
                panic!("the borrowing walk refused a plain body")
            };
            assert_eq!(String::from_utf8_lossy(&copied.json), text);
            assert_eq!(copied.json, borrowed.json);
            assert_eq!(borrowed.items_key.as_deref(), Some("messages"));
            assert_eq!(borrowed.items.len(), 2);
            let second = &borrowed.json[borrowed.items[1].span.clone()];
            assert!(second.starts_with(br#"{"role":"assistant""#) && second.ends_with(b"[]}"));
        });
    }

    /// Every string is written exactly as the engine's writer (serde_json) writes it: an
    /// unchanged message must come back as the same bytes to be recognized.
    #[test]
    fn strings_are_escaped_as_serde_json_escapes_them() {
        let mut samples: Vec<String> = vec![
            String::new(),
            "plain ascii text of some length".to_owned(),
            "quote \" backslash \\ slash / tab \t nl \n cr \r bs \u{8} ff \u{c}".to_owned(),
            "nul \u{0} unit sep \u{1f} del \u{7f} é ü 漢字 🦀 \u{2028}".to_owned(),
            "12345678\"2345678\\23456789".to_owned(),
            "\n\n\"\"\\\\\u{1}\u{2}ab\ncd\"ef\\gh\u{1f}\t\r\n".to_owned(),
        ];
        // Each special byte at every position of an eight-byte word and across words.
        for special in ['"', '\\', '\n', '\u{1}', '\u{1f}', ' ', '~', '\u{80}'] {
            for at in 0..17 {
                let mut text = "x".repeat(at);
                text.push(special);
                text.push_str(&"y".repeat(17 - at));
                samples.push(text);
            }
        }
        for text in samples {
            let mut ours = Vec::new();
            write_str(&mut ours, text.as_bytes());
            let theirs = serde_json::to_vec(&text).unwrap_or_default();
            assert_eq!(
                String::from_utf8_lossy(&ours),
                String::from_utf8_lossy(&theirs)
            );
        }
    }
}
