//! The token counts of short pieces that are not one token, remembered per thread.
//!
//! About one piece in twelve of agent transcripts is not a token by itself (a rare word, an
//! identifier, a run of symbols), and merging its bytes pair by pair took more than half
//! of the table lookups of an exact count. The same such pieces come back again and again
//! in a request (names, paths, identifiers), so their counts are kept in a small table per
//! thread, placed by the hash the vocabulary lookup computed anyway. A slot holds the
//! piece's bytes, so a hit is a piece seen before, never a collision: counts stay exact.
//! Per thread, so no lock: a proxy's worker threads each keep their own, 64 KB apiece.

use std::cell::RefCell;

/// Pieces up to this many bytes are remembered (most are far shorter).
pub(crate) const MAX_PIECE: usize = 28;
/// Slots in a thread's table (a power of two).
const SLOTS: usize = 2048;

/// One remembered piece: its bytes, its length (0: empty slot), its vocabulary's tag and
/// its count (at most one token per byte, so it fits a byte).
#[derive(Clone, Copy)]
struct Slot {
    bytes: [u8; MAX_PIECE],
    len: u8,
    vocab: u8,
    tokens: u8,
}

const EMPTY: Slot = Slot {
    bytes: [0; MAX_PIECE],
    len: 0,
    vocab: 0,
    tokens: 0,
};

thread_local! {
    static TABLE: RefCell<Vec<Slot>> = const { RefCell::new(Vec::new()) };
}

/// The slot of a piece whose hash is `hash` (the vocabulary places by the top bits; the
/// table by the low ones).
fn slot_of(hash: u64) -> usize {
    (hash as usize) & (SLOTS - 1)
}

/// The remembered count of `piece` under the vocabulary tagged `vocab`, if any.
#[inline]
pub(crate) fn get(vocab: u8, piece: &[u8], hash: u64) -> Option<usize> {
    TABLE.with(|table| {
        let table = table.try_borrow().ok()?;
        let slot = table.get(slot_of(hash))?;
        (usize::from(slot.len) == piece.len()
            && slot.vocab == vocab
            && slot.bytes.get(..piece.len()) == Some(piece))
        .then_some(usize::from(slot.tokens))
    })
}

/// Remembers that `piece` (at most [`MAX_PIECE`] bytes) counts `tokens` under `vocab`, in
/// place of what its slot held.
#[inline]
pub(crate) fn put(vocab: u8, piece: &[u8], hash: u64, tokens: usize) {
    let (Ok(len), Ok(tokens)) = (u8::try_from(piece.len()), u8::try_from(tokens)) else {
        return;
    };
    TABLE.with(|table| {
        let Ok(mut table) = table.try_borrow_mut() else {
            return;
        };
        if table.is_empty() {
            table.resize(SLOTS, EMPTY);
        }
        let mut slot = Slot {
            len,
            vocab,
            tokens,
            ..EMPTY
        };
        let Some(bytes) = slot.bytes.get_mut(..piece.len()) else {
            return;
        };
        bytes.copy_from_slice(piece);
        if let Some(place) = table.get_mut(slot_of(hash)) {
            *place = slot;
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A slot answers only for the very bytes and vocabulary it holds: a piece placed in the
    /// same slot, or the same piece under the other vocabulary, is not answered.
    #[test]
    fn a_slot_answers_only_for_its_own_piece() {
        assert_eq!(get(1, b"zyxwv", 7), None);
        put(1, b"zyxwv", 7, 3);
        assert_eq!(get(1, b"zyxwv", 7), Some(3));
        assert_eq!(get(2, b"zyxwv", 7), None);
        assert_eq!(get(1, b"zyxwu", 7), None);
        assert_eq!(get(1, b"zyxw", 7), None);
        assert_eq!(get(1, b"zyxwv", 7 + SLOTS as u64), Some(3));
        put(1, b"qqqqq", 7, 4);
        assert_eq!(get(1, b"zyxwv", 7), None);
        // Longer than a slot holds: not kept.
        let long = [b'a'; MAX_PIECE + 1];
        put(1, &long, 9, 5);
        assert_eq!(get(1, &long, 9), None);
    }
}
