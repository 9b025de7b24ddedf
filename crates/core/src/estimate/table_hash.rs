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
    let mut tail = 0u64;
    for (i, &b) in words.remainder().iter().enumerate() {
        tail |= u64::from(b) << (8 * i);
    }
    h = (h.rotate_left(5) ^ tail).wrapping_mul(K);
    h ^ (h >> 29)
}
