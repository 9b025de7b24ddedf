//! OpenAI's vocabularies as tables in the binary (laid out by `build.rs`), and byte-pair
//! merging over them: what a piece of text costs in tokens.
//!
//! Nothing is decoded at load: a lookup hashes the piece ([`super::table_hash::hash`]), reads
//! the slot and compares the token's bytes where they lie, so a process pays only for the
//! pages its lookups touch (about 4 MB for o200k_base once most of it is used) and not the
//! 80 ms and 40 MB of building tiktoken-rs's hash map.

use super::merged;
use super::table_hash::hash;

/// One encoding's tables (see `build.rs` for the layout).
#[derive(Clone, Copy)]
pub(crate) struct Vocab {
    tokens: &'static [u8],
    offsets: &'static [u8],
    slots: &'static [u8],
    /// log2 of the number of slots.
    bits: u32,
    /// Which vocabulary this is, for the memo of merged pieces ([`merged`]).
    tag: u8,
}

impl std::fmt::Debug for Vocab {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Vocab")
            .field("tokens", &self.len())
            .finish_non_exhaustive()
    }
}

macro_rules! tables {
    ($name:literal) => {
        (
            include_bytes!(concat!(env!("OUT_DIR"), "/", $name, ".tokens")).as_slice(),
            include_bytes!(concat!(env!("OUT_DIR"), "/", $name, ".offsets")).as_slice(),
            include_bytes!(concat!(env!("OUT_DIR"), "/", $name, ".slots")).as_slice(),
        )
    };
}

/// The rank no pair has: nothing to merge.
const NONE: u32 = u32::MAX;

/// Pieces up to this many bytes merge in a fixed array by tiktoken's quadratic scan; longer
/// ones (rare: long identifiers, runs of symbols, cut chunks) through a heap.
const SHORT_PIECE: usize = 128;

impl Vocab {
    /// o200k_base.
    pub(crate) fn o200k_base() -> Option<Vocab> {
        Vocab::new(tables!("o200k_base"), 1)
    }

    /// cl100k_base.
    pub(crate) fn cl100k_base() -> Option<Vocab> {
        Vocab::new(tables!("cl100k_base"), 2)
    }

    /// The tables, if their sizes agree (they always do when `build.rs` wrote them).
    fn new(
        (tokens, offsets, slots): (&'static [u8], &'static [u8], &'static [u8]),
        tag: u8,
    ) -> Option<Vocab> {
        let count = (slots.len() / 4).max(1);
        let bits = count.trailing_zeros();
        let consistent = count.is_power_of_two()
            && offsets.len() % 4 == 0
            && offsets.len() >= 8
            && read_u32(offsets, offsets.len() / 4 - 1) as usize == tokens.len();
        consistent.then_some(Vocab {
            tokens,
            offsets,
            slots,
            bits,
            tag,
        })
    }

    /// Ordinary tokens in the vocabulary.
    pub(crate) fn len(&self) -> usize {
        self.offsets.len() / 4 - 1
    }

    /// The rank of `bytes`, if they are one token.
    #[inline]
    pub(crate) fn rank(&self, bytes: &[u8]) -> Option<u32> {
        self.rank_hashed(bytes, hash(bytes))
    }

    /// [`Vocab::rank`] of `bytes` whose hash is `hash`.
    #[inline]
    fn rank_hashed(&self, bytes: &[u8], hash: u64) -> Option<u32> {
        let mask = (1usize << self.bits) - 1;
        let mut slot = (hash >> (64 - self.bits)) as usize;
        loop {
            let entry = read_u32(self.slots, slot);
            if entry == 0 {
                return None;
            }
            let rank = entry - 1;
            let start = read_u32(self.offsets, rank as usize) as usize;
            let end = read_u32(self.offsets, rank as usize + 1) as usize;
            if self.tokens.get(start..end) == Some(bytes) {
                return Some(rank);
            }
            slot = (slot + 1) & mask;
        }
    }

    #[inline]
    fn pair_rank(&self, piece: &[u8], start: usize, end: usize) -> u32 {
        piece
            .get(start..end)
            .and_then(|b| self.rank(b))
            .unwrap_or(NONE)
    }

    /// Tokens of one piece of a pre-tokenized text: 1 when the piece is a token, otherwise
    /// the parts left when byte pairs are merged lowest rank first (leftmost among equals),
    /// exactly as tiktoken merges.
    #[inline]
    pub(crate) fn piece_tokens(&self, piece: &[u8]) -> usize {
        if piece.len() <= 1 {
            return piece.len();
        }
        let hashed = hash(piece);
        if self.rank_hashed(piece, hashed).is_some() {
            return 1;
        }
        if piece.len() <= merged::MAX_PIECE {
            if let Some(tokens) = merged::get(self.tag, piece, hashed) {
                return tokens;
            }
            let tokens = self.merge_short(piece);
            merged::put(self.tag, piece, hashed, tokens);
            tokens
        } else if piece.len() <= SHORT_PIECE {
            self.merge_short(piece)
        } else {
            self.merge_long(piece)
        }
    }

    /// tiktoken's `_byte_pair_merge`, in arrays on the stack.
    fn merge_short(&self, piece: &[u8]) -> usize {
        let n = piece.len();
        // parts[i] = (start of part i, rank of part i merged with part i + 1).
        let mut starts = [0u32; SHORT_PIECE + 1];
        let mut ranks = [NONE; SHORT_PIECE + 1];
        for i in 0..n.saturating_sub(1) {
            starts[i] = i as u32;
            ranks[i] = self.pair_rank(piece, i, i + 2);
        }
        starts[n - 1] = (n - 1) as u32;
        starts[n] = n as u32;
        let mut len = n + 1;
        // The rank of the pair starting at part i once part i + 1 joined it.
        let merged = |starts: &[u32], len: usize, i: usize| {
            if i + 3 < len {
                self.pair_rank(piece, starts[i] as usize, starts[i + 3] as usize)
            } else {
                NONE
            }
        };
        loop {
            let mut min = (NONE, 0);
            for (i, &rank) in ranks[..len - 1].iter().enumerate() {
                if rank < min.0 {
                    min = (rank, i);
                }
            }
            if min.0 == NONE {
                return len - 1;
            }
            let i = min.1;
            if i > 0 {
                ranks[i - 1] = merged(&starts, len, i - 1);
            }
            ranks[i] = merged(&starts, len, i);
            starts.copy_within(i + 2..len, i + 1);
            ranks.copy_within(i + 2..len, i + 1);
            len -= 1;
        }
    }

    /// The same merge order through a heap of (rank, part) over a linked list of parts:
    /// O(n log n) for long pieces, where the scan is quadratic.
    fn merge_long(&self, piece: &[u8]) -> usize {
        use std::cmp::Reverse;
        use std::collections::BinaryHeap;
        let n = piece.len();
        // Part i starts at byte i until merged; next/prev link the parts still alive.
        let mut next: Vec<usize> = (1..=n).collect();
        let mut prev: Vec<usize> = (0..n).map(|i| i.wrapping_sub(1)).collect();
        let mut rank: Vec<u32> = (0..n)
            .map(|i| {
                if i + 1 < n {
                    self.pair_rank(piece, i, i + 2)
                } else {
                    NONE
                }
            })
            .collect();
        let mut heap: BinaryHeap<Reverse<(u32, usize)>> = (0..n)
            .filter(|&i| rank[i] != NONE)
            .map(|i| Reverse((rank[i], i)))
            .collect();
        let mut parts = n;
        let end_of = |next: &[usize], i: usize| if i < n { next[i] } else { n };
        while let Some(Reverse((r, i))) = heap.pop() {
            // Stale: the part was merged away, or its pair changed since.
            if rank[i] != r {
                continue;
            }
            let gone = next[i];
            let after = end_of(&next, gone);
            next[i] = after;
            if after < n {
                prev[after] = i;
            }
            rank[gone] = NONE;
            parts -= 1;
            rank[i] = if after < n {
                self.pair_rank(piece, i, end_of(&next, after))
            } else {
                NONE
            };
            if rank[i] != NONE {
                heap.push(Reverse((rank[i], i)));
            }
            let before = prev[i];
            if before < n {
                rank[before] = self.pair_rank(piece, before, after);
                if rank[before] != NONE {
                    heap.push(Reverse((rank[before], before)));
                }
            }
        }
        parts
    }
}

/// The `index`th little-endian u32 of `bytes` (0 past the end, which a table never reaches).
#[inline]
fn read_u32(bytes: &[u8], index: usize) -> u32 {
    match bytes.get(4 * index..4 * index + 4) {
        Some(&[a, b, c, d]) => u32::from_le_bytes([a, b, c, d]),
        _ => 0,
    }
}
