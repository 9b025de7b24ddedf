//! The hash of a token's bytes that places it in the rank table: shared by the build script,
//! which lays the table out, and `estimate::vocab`, which looks pieces up in it; the two
//! must agree bit for bit.

/// The multiplier of FxHash (a fast, well-mixed multiplicative hash).
const K: u64 = 0x517c_c1b7_2722_0a95;

/// 64 bits of hash of `bytes`, eight bytes at a time; the table slot is its top bits.
#[inline]
pub(crate) fn hash(bytes: &[u8]) -> u64 {
    let mut h = (bytes.len() as u64).wrapping_mul(K);
    let mut words = bytes.chunks_exact(8);
    for word in &mut words {
        let w = u64::from_le_bytes([
            word[0], word[1], word[2], word[3], word[4], word[5], word[6], word[7],
        ]);
        h = (h.rotate_left(5) ^ w).wrapping_mul(K);
    }
    let tail = tail_word(words.remainder());
    h = (h.rotate_left(5) ^ tail).wrapping_mul(K);
    h ^ (h >> 29)
}

/// The last 0–7 bytes of a piece as a little-endian word, zero above them: four or more in
/// two overlapping 4-byte loads, one to three as the first, middle and last byte, instead of
/// byte by byte (most pieces are shorter than 8 bytes, so this is most of the hash). Where
/// the reads overlap they hold the same bytes at the same places.
#[inline]
fn tail_word(rest: &[u8]) -> u64 {
    let n = rest.len();
    if n >= 4 {
        let low = u32::from_le_bytes([rest[0], rest[1], rest[2], rest[3]]);
        let high = u32::from_le_bytes([rest[n - 4], rest[n - 3], rest[n - 2], rest[n - 1]]);
        u64::from(low) | u64::from(high) << (8 * (n - 4))
    } else if n > 0 {
        u64::from(rest[0])
            | u64::from(rest[n / 2]) << (8 * (n / 2))
            | u64::from(rest[n - 1]) << (8 * (n - 1))
    } else {
        0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The two loads give the word the bytes make one by one, at every length a tail has.
    #[test]
    fn the_tail_word_is_the_bytes_in_order() {
        let bytes = [0x11u8, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77];
        for n in 0..=7 {
            let expected = (bytes[..n].iter().enumerate())
                .fold(0u64, |word, (i, &b)| word | u64::from(b) << (8 * i));
            assert_eq!(tail_word(&bytes[..n]), expected, "{n} bytes");
        }
    }
}
