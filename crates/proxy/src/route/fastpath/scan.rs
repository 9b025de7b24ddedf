//! The fast path's scan of a body: its top-level keys, and its messages borrowed as the JSON
//! text they are (one validating pass, no allocation per string).
//!
//! An agent's next request is its previous one plus a few messages, so most of a body was
//! scanned already. [`Layout`] keeps where the previous body's messages ended and a keyed
//! hash of the bytes up to each end; [`Scan::read_after`] hashes the new body up to those
//! ends (far faster than scanning), takes the messages whose bytes and everything before
//! them are the same, and scans only from the last of them on. The parser is then in the
//! very state a whole scan would be in at that byte (the same bytes led there), so what is
//! read is what a whole scan reads.
//!
//! The hashes are chained: each message's is the hash of its bytes (and those between it
//! and the previous message) keyed by the previous message's hash, the first keyed by a
//! random key. So the messages a body shares with the previous one keep their places and
//! hashes as they were, and keeping the new body's layout hashes only its new messages.

use std::collections::HashMap;
use std::hash::BuildHasher;
use std::ops::Range;
use std::sync::{Arc, Mutex};

use context_cascade::format::utf8;
use context_cascade::{Format, MessageId};
use serde::de::{DeserializeSeed, Deserializer, MapAccess, Visitor};
use serde_json::value::RawValue;
use xxhash_rust::xxh3::xxh3_64_with_seed;

/// The body's top-level keys, the messages (a Responses body: its input items) as JSON text.
pub(super) struct Scan<'a> {
    pub(super) messages: Vec<&'a str>,
    pub(super) rest: Vec<(String, &'a str)>,
    /// How many of `rest` came before the messages (the envelope keeps the key's place).
    pub(super) messages_at: usize,
    /// The first messages, known from the previous body: where they lie in this one too,
    /// their hashes and identities.
    known: Vec<Place>,
}

/// What the fast path keeps of a scanned body to scan the next one from where they part.
pub(super) struct Layout {
    /// The keys before the messages and where their values lie.
    before: Vec<(String, Range<usize>)>,
    /// Where each message lies, and what it is.
    messages: Vec<Place>,
}

/// One message of a kept body: 32 bytes.
#[derive(Clone, Copy)]
struct Place {
    start: u32,
    end: u32,
    /// The keyed hash of the body up to the message's end: of the bytes since the previous
    /// message's end, keyed by that message's hash (the first by the process's key).
    digest: u64,
    id: MessageId,
}

impl Place {
    fn range(&self) -> Range<usize> {
        self.start as usize..self.end as usize
    }
}

impl Layout {
    /// How many messages it holds (what its memory is counted in).
    pub(super) fn len(&self) -> usize {
        self.messages.len()
    }
}

/// At most this many messages' places are kept, over every layout (1 MB); a full memory
/// starts over. Enough for dozens of long sessions at once; past that, the conversations
/// kept are the most recent ones since the last start-over. Kept small: it stays after a
/// load, and 200 heavy clients measured 10 s after their load 26.5–28.1 MB without layouts,
/// 28.2–30.0 MB with them (issue 23 bounds that figure at twice the idle ~15 MB).
const LAYOUT_MESSAGES: usize = 1 << 15;

/// The layout of each conversation's last scanned body, by the hash of the body's start
/// (`FastPath::prefix`: tenant, format, first 64 KiB), and the key of the hashes: random
/// per process, so that no client can make two different bodies hash alike.
pub(super) struct Layouts {
    seed: u64,
    kept: Mutex<(HashMap<u64, Arc<Layout>>, usize)>,
}

impl Layouts {
    pub(super) fn new() -> Self {
        let seed = std::collections::hash_map::RandomState::new().hash_one(0u8);
        Layouts {
            seed,
            kept: Mutex::default(),
        }
    }

    /// Scans `bytes`, after the previous body that started like it when one is kept.
    pub(super) fn scan<'a>(
        &self,
        format: Format,
        prefix: u64,
        bytes: &'a [u8],
    ) -> Option<Scan<'a>> {
        let previous = self.lock().0.get(&prefix).cloned();
        match previous {
            Some(previous) => Scan::read_after(format, bytes, &previous, self.seed),
            None => Scan::read(format, bytes),
        }
    }

    /// Keeps the layout of `scan` (of `bytes`, whose messages are `ids`) for the next body
    /// that starts like it.
    pub(super) fn keep(&self, prefix: u64, scan: &Scan<'_>, bytes: &[u8], ids: &[MessageId]) {
        // One body of more messages than any session holds would take the memory of many.
        if scan.messages.len() > LAYOUT_MESSAGES / 2 {
            return;
        }
        let Some(layout) = scan.layout(bytes, ids, self.seed) else {
            return;
        };
        let mut kept = self.lock();
        let (layouts, messages) = &mut *kept;
        if *messages + layout.len() > LAYOUT_MESSAGES {
            layouts.clear();
            *messages = 0;
        }
        *messages += layout.len();
        if let Some(replaced) = layouts.insert(prefix, Arc::new(layout)) {
            *messages = messages.saturating_sub(replaced.len());
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, (HashMap<u64, Arc<Layout>>, usize)> {
        self.kept.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// The key under which the messages are.
fn field(format: Format) -> &'static str {
    match format {
        Format::Responses => "input",
        _ => "messages",
    }
}

impl<'a> Scan<'a> {
    /// Scans `bytes` as a request of `format`: its messages under `messages`, or for the
    /// Responses API its items under `input` (an `input` string is left to the slow path).
    pub(super) fn read(format: Format, bytes: &'a [u8]) -> Option<Self> {
        Scan::read_text(format, utf8(bytes)?)
    }

    /// [`Scan::read`] of a body known to be text: checked once, so the parser checks no
    /// message's bytes again.
    fn read_text(format: Format, text: &'a str) -> Option<Self> {
        let mut deserializer = serde_json::Deserializer::from_str(text);
        let field = field(format);
        let scan = ScanSeed { field }.deserialize(&mut deserializer).ok()?;
        deserializer.end().ok()?;
        Some(scan)
    }

    /// [`Scan::read`] of a body that may extend the one `previous` was kept of: the messages
    /// whose bytes (and all before them) are the previous body's are taken as they were, and
    /// the rest is scanned from there: a copy of the body's remainder behind a header that
    /// puts the parser where it stood. `seed` keys the hashes.
    pub(super) fn read_after(
        format: Format,
        bytes: &'a [u8],
        previous: &Layout,
        seed: u64,
    ) -> Option<Self> {
        let same = shared_messages(bytes, previous, seed);
        let Some(last) = same.checked_sub(1) else {
            return Scan::read(format, bytes);
        };
        let shared = previous.messages.get(last)?.range();
        let text = utf8(bytes)?;
        // `[0` stands for the messages already read: the parser is inside the list, after
        // an element, as it was after the last shared message.
        let header = format!("{{\"{}\":[0", field(format));
        let remainder = text.get(shared.end..)?;
        let mut tail = String::with_capacity(header.len() + remainder.len());
        tail.push_str(&header);
        tail.push_str(remainder);
        let after = Scan::read_text(format, &tail)?;
        // A piece of the tail is the same bytes of the body, `shared.end - header.len()` on.
        let in_body = |piece: &str| {
            let at = (piece.as_ptr() as usize).checked_sub(tail.as_ptr() as usize)?;
            let start = (at + shared.end).checked_sub(header.len())?;
            text.get(start..start + piece.len())
        };
        let mut messages = (previous.messages.iter().take(same))
            .map(|place| text.get(place.range()))
            .collect::<Option<Vec<&'a str>>>()?;
        for piece in after.messages.iter().skip(1) {
            messages.push(in_body(piece)?);
        }
        let mut rest = (previous.before.iter())
            .map(|(key, range)| Some((key.clone(), text.get(range.clone())?)))
            .collect::<Option<Vec<_>>>()?;
        let messages_at = rest.len();
        for (key, value) in after.rest {
            rest.push((key, in_body(value)?));
        }
        let known = previous.messages.get(..same)?.to_vec();
        Some(Scan {
            messages,
            rest,
            messages_at,
            known,
        })
    }

    /// How many messages were taken from the previous body without a scan.
    #[cfg(test)]
    pub(super) fn known_len(&self) -> usize {
        self.known.len()
    }

    /// Every message's identity: those known from the previous body, the others hashed.
    pub(super) fn ids(&self) -> Vec<MessageId> {
        let hashed = (self.messages.iter().skip(self.known.len()))
            .map(|raw| MessageId::of_bytes(raw.as_bytes()));
        self.known
            .iter()
            .map(|place| place.id)
            .chain(hashed)
            .collect()
    }

    /// What to keep of this scan of `bytes` (whose messages are `ids`) to scan the next
    /// body from where they part; `None` when a piece does not lie in `bytes`.
    pub(super) fn layout(&self, bytes: &[u8], ids: &[MessageId], seed: u64) -> Option<Layout> {
        let range = |text: &str| {
            let start = (text.as_ptr() as usize).checked_sub(bytes.as_ptr() as usize)?;
            let end = start + text.len();
            (end <= bytes.len()).then_some(start..end)
        };
        let before = (self.rest.iter().take(self.messages_at))
            .map(|(key, value)| Some((key.clone(), range(value)?)))
            .collect::<Option<Vec<_>>>()?;
        // The known messages lie where they lay, after the same bytes: only the new ones
        // are hashed, from the last known one's hash on.
        let mut messages = Vec::with_capacity(self.messages.len());
        messages.extend_from_slice(&self.known);
        let (mut key, mut hashed) = self.known.last().map_or((seed, 0), |p| (p.digest, p.end));
        let new = self.messages.iter().zip(ids).skip(self.known.len());
        for (raw, id) in new {
            let range = range(raw)?;
            key = xxh3_64_with_seed(bytes.get(hashed as usize..range.end)?, key);
            hashed = u32::try_from(range.end).ok()?;
            messages.push(Place {
                start: u32::try_from(range.start).ok()?,
                end: hashed,
                digest: key,
                id: *id,
            });
        }
        Some(Layout { before, messages })
    }
}

/// How many of `previous`'s messages `bytes` holds at the same place, with the same bytes
/// before and in them (the keyed 64-bit hash up to each message's end agrees: with a key
/// no client knows, two different prefixes agree by chance once in 2^64). Only a value that
/// ends itself (an object, a list, a string) is taken: a number could go on in the new body.
fn shared_messages(bytes: &[u8], previous: &Layout, seed: u64) -> usize {
    let (mut key, mut hashed) = (seed, 0);
    let mut same = 0;
    for place in &previous.messages {
        let Some(part) = bytes.get(hashed..place.end as usize) else {
            break;
        };
        if !matches!(part.last(), Some(b'}' | b']' | b'"')) {
            break;
        }
        key = xxh3_64_with_seed(part, key);
        hashed = place.end as usize;
        if key != place.digest {
            break;
        }
        same += 1;
    }
    same
}

/// Reads a [`Scan`] whose messages are under `field`.
struct ScanSeed {
    field: &'static str,
}

impl<'de> DeserializeSeed<'de> for ScanSeed {
    type Value = Scan<'de>;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Scan<'de>, D::Error> {
        deserializer.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for ScanSeed {
    type Value = Scan<'de>;
    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a request object")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Scan<'de>, A::Error> {
        let mut messages = None;
        let mut rest = Vec::new();
        let mut messages_at = 0;
        while let Some(key) = map.next_key::<std::borrow::Cow<'de, str>>()? {
            if key == self.field && messages.is_none() {
                messages_at = rest.len();
                let raws = map.next_value::<Vec<&'de RawValue>>()?;
                messages = Some(raws.into_iter().map(RawValue::get).collect());
            } else {
                rest.push((key.into_owned(), map.next_value::<&'de RawValue>()?.get()));
            }
        }
        let messages = messages.ok_or_else(|| serde::de::Error::missing_field(self.field))?;
        Ok(Scan {
            messages,
            rest,
            messages_at,
            known: Vec::new(),
        })
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)] // test code: a failure is a test failure
    use super::*;

    /// What a scan says (messages, keys and values, where the messages were, identities),
    /// comparable across buffers.
    type Seen = (Vec<String>, Vec<(String, String)>, usize, Vec<MessageId>);

    fn seen(scan: &Scan<'_>) -> Seen {
        (
            scan.messages.iter().map(|m| (*m).to_owned()).collect(),
            (scan.rest.iter())
                .map(|(k, v)| (k.clone(), (*v).to_owned()))
                .collect(),
            scan.messages_at,
            scan.ids(),
        )
    }

    /// A body that extends the previous one, or changes it anywhere, or is not JSON at all
    /// past the shared part, reads as a whole scan reads it.
    #[test]
    fn reading_after_the_previous_body_reads_what_a_whole_scan_reads() {
        let first = br#"{"model":"m","messages":[{"role":"user","content":"a"}, {"role":"assistant","content":"b"}],"max_tokens":5}"#;
        let scan = Scan::read(Format::OpenAi, first).unwrap();
        let layout = scan.layout(first, &scan.ids(), 7).unwrap();
        let bodies: [&[u8]; 9] = [
            first,
            br#"{"model":"m","messages":[{"role":"user","content":"a"}, {"role":"assistant","content":"b"},{"role":"user","content":"c"}],"max_tokens":6,"stream":true}"#,
            br#"{"model":"m","messages":[{"role":"user","content":"a"}, {"role":"assistant","content":"B"}]}"#,
            br#"{"model":"n","messages":[{"role":"user","content":"a"}, {"role":"assistant","content":"b"}],"max_tokens":5}"#,
            br#"{"model":"m","messages":[{"role":"user","content":"a"}, {"role":"assistant","content":"b"}],"messages":[]}"#,
            br#"{"model":"m","messages":[{"role":"user","content":"a"}, {"role":"assistant","content":"b"}], oops}"#,
            br#"{"model":"m","messages":[{"role":"user","content":"a"}, {"role":"assistant","content":"b"}]} trailing"#,
            br#"{"model":"m","messages":[{"role":"user","content":"a"}"#,
            br#"{"model":"m","messages":[{"role":"user","content":"a"}, {"role":"assistant","content":"b"}5]}"#,
        ];
        for body in bodies {
            let whole = Scan::read(Format::OpenAi, body);
            let after = Scan::read_after(Format::OpenAi, body, &layout, 7);
            assert_eq!(
                whole.as_ref().map(seen),
                after.as_ref().map(seen),
                "{}",
                String::from_utf8_lossy(body)
            );
        }
        // The extended body took both messages from the previous one.
        let after = Scan::read_after(Format::OpenAi, bodies[1], &layout, 7).unwrap();
        assert_eq!(after.known.len(), 2);
        // Its layout lies in its own body: the next one reads after it in turn.
        let next = after.layout(bodies[1], &after.ids(), 7).unwrap();
        assert_eq!(next.len(), 3);
        // ... the very layout a whole scan of that body keeps (its known messages' hashes
        // taken, the new one's chained on).
        let whole = Scan::read(Format::OpenAi, bodies[1]).unwrap();
        let whole = whole.layout(bodies[1], &whole.ids(), 7).unwrap();
        let places = |l: &Layout| {
            (l.messages.iter())
                .map(|p| (p.start, p.end, p.digest, p.id))
                .collect::<Vec<_>>()
        };
        assert_eq!(places(&next), places(&whole));
        let again = Scan::read_after(Format::OpenAi, bodies[1], &next, 7).unwrap();
        assert_eq!(again.known.len(), 3);
        assert_eq!(
            seen(&again),
            seen(&Scan::read(Format::OpenAi, bodies[1]).unwrap())
        );
        // Another key finds nothing shared.
        let other = Scan::read_after(Format::OpenAi, bodies[1], &layout, 8).unwrap();
        assert!(other.known.is_empty());
    }
}
