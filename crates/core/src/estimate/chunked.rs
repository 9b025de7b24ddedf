//! Where to cut a text before BPE, so that no piece costs more than a chunk.
//!
//! A tokenizer first splits text into pieces with its pattern (a word with its leading
//! space, up to three digits, a run of punctuation, a run of whitespace), then merges each
//! piece's bytes pair by pair. tiktoken merges a long piece with about 56 bytes of working
//! memory per byte and a heap whose cost per byte grows with the piece: ten megabytes of
//! letters with no space are one piece, which took 7.6–41 s and 540 MB to count (issue 23).
//! [`Cutter`] finds the pieces longer than a chunk and cuts them every chunk, so that each
//! part is merged alone, in memory that stays in cache.
//!
//! Exactness: when no piece is longer than the chunk, nothing is cut and the text is
//! counted whole, exactly as before. A cut piece counts as the sum of its parts, which
//! differs from the piece's own count by the tokens that would have spanned the cuts:
//! under one token per cut, 0.1–0.25 on average for random letters or punctuation and
//! none for a repeated character (`tests::a_cut_moves_the_count_by_less_than_a_token`).

use std::ops::Range;

/// The longest piece merged whole, in bytes. Far longer than any piece of ordinary text
/// (words, numbers, indentation), short enough that merging one costs well under a
/// millisecond and a megabyte.
pub const CHUNK_BYTES: usize = 8 * 1024;

/// How a tokenizer splits a text into pieces: calls the second argument with each piece's
/// byte range, in order.
pub(crate) type Split<'a> = &'a dyn Fn(&str, &mut dyn FnMut(Range<usize>));

/// Finds the pieces longer than a chunk and where to cut them.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Cutter {
    chunk: usize,
}

impl Cutter {
    /// A cutter of pieces longer than `chunk` bytes (at least 4: a cut lands on a
    /// character boundary).
    pub(crate) fn new(chunk: usize) -> Self {
        Cutter {
            chunk: chunk.max(4),
        }
    }

    /// Byte offsets to cut `text` at, in order: none when no piece (as `split` finds them)
    /// is longer than the chunk, otherwise every chunk bytes inside each longer piece.
    pub(crate) fn cuts(&self, text: &str, split: Split<'_>) -> Vec<usize> {
        let mut cuts = Vec::new();
        if !may_hold_a_piece_over(text.as_bytes(), self.chunk) {
            return cuts;
        }
        split(text, &mut |piece| {
            if piece.end - piece.start > self.chunk {
                self.cut_every_chunk(text, piece, &mut cuts);
            }
        });
        cuts
    }

    /// Cuts inside `range` every chunk bytes, each cut moved back to a character boundary.
    fn cut_every_chunk(&self, text: &str, range: Range<usize>, cuts: &mut Vec<usize>) {
        let mut at = range.start;
        while range.end - at > self.chunk {
            let mut cut = at + self.chunk;
            while !text.is_char_boundary(cut) {
                cut -= 1;
            }
            cuts.push(cut);
            at = cut;
        }
    }
}

/// The parts of `text` between `cuts` (offsets in order, on character boundaries).
pub(crate) fn parts<'t>(text: &'t str, cuts: &'t [usize]) -> impl Iterator<Item = &'t str> {
    let starts = std::iter::once(0).chain(cuts.iter().copied());
    let ends = cuts.iter().copied().chain(std::iter::once(text.len()));
    starts.zip(ends).map(|(start, end)| &text[start..end])
}

/// Whether `text` may hold a piece longer than `chunk` bytes, by a scan that is much
/// cheaper than the pattern. Both patterns end a piece with a letter at the letter when
/// whitespace follows, and put a digit only in a piece of at most three digits; so a piece
/// lies between two such breaks, and when no stretch between breaks is longer than the
/// chunk, neither is any piece.
///
/// The stretch after byte `i` is `i - b` plus 1 when the last break `b` was whitespace
/// (0 after a digit, or before any break, counting from `b = -1`). So rather than follow it
/// byte by byte (a tenth of a large count's time), the scan jumps to the first byte whose
/// stretch would pass the chunk and looks back from there for the last break: ordinary text
/// has one within a few bytes, so a chunk costs a few bytes' tests, and no byte is tested
/// twice.
fn may_hold_a_piece_over(text: &[u8], chunk: usize) -> bool {
    if text.len() <= chunk {
        return false;
    }
    let is_break = |j: usize| match text.get(j) {
        Some(b) if b.is_ascii_digit() => Some(0),
        Some(b) if b.is_ascii_whitespace() && j > 0 && text[j - 1].is_ascii_alphabetic() => Some(1),
        _ => None,
    };
    // Just past the last break, and the stretch at it (none yet: as if one were before the
    // text, with 0); the bytes before `tested` hold no later break.
    let (mut last, mut base, mut tested) = (0usize, 0usize, 0usize);
    loop {
        // The first byte whose stretch would be over the chunk, unless a break comes first.
        let over = last + chunk - base;
        if over >= text.len() {
            return false;
        }
        let from = tested.max(last);
        match (from..=over)
            .rev()
            .find_map(|j| is_break(j).map(|b| (j, b)))
        {
            None => return true,
            Some((at, at_base)) => (last, base, tested) = (at + 1, at_base, over + 1),
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    use crate::estimate::exact::{Encoding, ExactCounter};

    /// Both tokenizers.
    fn tokenizers() -> [ExactCounter; 2] {
        [Encoding::O200kBase, Encoding::Cl100kBase].map(|e| ExactCounter::new(e).unwrap())
    }

    /// o200k_base's split.
    fn o200k(text: &str, piece: &mut dyn FnMut(Range<usize>)) {
        tokenizers()[0].split(text, piece)
    }

    /// Pseudo-random text of `n` bytes drawn from `alphabet` (xorshift, fixed seed).
    fn random_text(alphabet: &[char], n: usize) -> String {
        let mut seed = 23u64;
        let mut text = String::with_capacity(n);
        while text.len() < n {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            text.push(alphabet[(seed % alphabet.len() as u64) as usize]);
        }
        text
    }

    fn cuts(chunk: usize, text: &str) -> Vec<usize> {
        Cutter::new(chunk).cuts(text, &o200k)
    }

    #[test]
    fn a_long_run_is_cut_every_chunk_on_character_boundaries() {
        let text = "a".repeat(10_000);
        assert_eq!(cuts(4096, &text), vec![4096, 8192]);
        // Three-byte characters: each cut falls back to the boundary before it.
        let text = "中".repeat(3_000);
        let cuts = cuts(4096, &text);
        assert_eq!(cuts, vec![4095, 8190]);
        assert!(cuts.iter().all(|&c| text.is_char_boundary(c)));
        let parts: Vec<&str> = parts(&text, &cuts).collect();
        assert_eq!(parts.concat(), text);
        assert!(parts.iter().all(|p| p.len() <= 4096));
    }

    #[test]
    fn only_the_long_pieces_are_cut() {
        let text = format!("hello world {} and then more words", "x".repeat(300));
        // The run starts after "world " (the space goes with it): cuts 100 bytes apart.
        let start = "hello world".len();
        assert_eq!(
            cuts(100, &text),
            vec![start + 100, start + 200, start + 300]
        );
        // Long texts with short pieces are not cut, whatever their length.
        let prose = "The quick brown fox jumps over the lazy dog. ".repeat(1_000);
        assert!(cuts(100, &prose).is_empty());
        let cjk = "中文字符，日本語のテキスト、".repeat(1_000);
        assert!(cuts(100, &cjk).is_empty());
    }

    /// The byte-by-byte scan the jumping one replaced: what it must answer.
    fn followed_byte_by_byte(text: &[u8], chunk: usize) -> bool {
        if text.len() <= chunk {
            return false;
        }
        let mut stretch = 0usize;
        let mut after_letter = false;
        for &byte in text {
            if byte.is_ascii_digit() {
                stretch = 0;
            } else if after_letter && byte.is_ascii_whitespace() {
                stretch = 1;
            } else {
                stretch += 1;
                if stretch > chunk {
                    return true;
                }
            }
            after_letter = byte.is_ascii_alphabetic();
        }
        false
    }

    proptest::proptest! {
        /// Texts of letters, digits, spaces and punctuation in runs of any length, and
        /// chunks around the runs' lengths: the jumps answer as the byte-by-byte scan.
        #[test]
        fn the_jumping_scan_answers_as_the_byte_by_byte_one(
            runs in proptest::collection::vec((0usize..5, 1usize..40), 0..60),
            chunk in 1usize..48,
        ) {
            let alphabet: [&[u8]; 5] = [b"ab", b"7", b" \n", b"!-", b"a b1"];
            let text: Vec<u8> = (runs.iter())
                .flat_map(|&(kind, len)| alphabet[kind].iter().copied().cycle().take(len))
                .collect();
            proptest::prop_assert_eq!(
                may_hold_a_piece_over(&text, chunk),
                followed_byte_by_byte(&text, chunk),
                "{:?}", String::from_utf8_lossy(&text)
            );
        }
    }

    #[test]
    fn the_scan_flags_every_stretch_the_pattern_could_make_one_piece() {
        assert!(!may_hold_a_piece_over(b"short", 100));
        assert!(!may_hold_a_piece_over("ab ".repeat(100).as_bytes(), 10));
        assert!(!may_hold_a_piece_over("a1".repeat(100).as_bytes(), 10));
        assert!(may_hold_a_piece_over("a".repeat(11).as_bytes(), 10));
        // A space before letters starts their piece; punctuation and whitespace runs are
        // pieces of their own.
        assert!(may_hold_a_piece_over(" aaaaaaaaa".as_bytes(), 9));
        assert!(may_hold_a_piece_over("!".repeat(11).as_bytes(), 10));
        assert!(may_hold_a_piece_over(" ".repeat(11).as_bytes(), 10));
    }

    /// Measured on 200 kB runs with 1 kB chunks (195 cuts): 0.10–0.25 tokens more per cut
    /// for random letters, DNA-like capitals and punctuation, none for repeated letters,
    /// CJK and whitespace, on both encodings; never more than one token per cut.
    #[test]
    fn a_cut_moves_the_count_by_less_than_a_token() {
        let letters: Vec<char> = ('a'..='z').collect();
        let kinds = [
            random_text(&letters, 20_000),
            random_text(&['A', 'C', 'G', 'T'], 20_000),
            random_text(&['=', '-', '*', '#', '~', '!'], 20_000),
            random_text(&['中', '文', '字', '符', '日', '本'], 20_000),
            "a".repeat(20_000),
        ];
        for counter in tokenizers() {
            let cutter = Cutter::new(1024);
            for text in &kinds {
                let cuts = cutter.cuts(text, &|t, f| counter.split(t, f));
                assert!(cuts.len() >= 19, "{} cuts", cuts.len());
                assert_eq!(parts(text, &cuts).collect::<String>(), *text);
                let exact = counter.count_whole(text) as i64;
                let counted: usize = parts(text, &cuts).map(|p| counter.count_whole(p)).sum();
                let counted = counted as i64;
                assert!(
                    (counted - exact).abs() <= cuts.len() as i64,
                    "{:?}…: {counted} counted in chunks, {exact} whole",
                    &text[..12]
                );
            }
        }
    }

    /// The scan skips the pattern only where no piece can be longer than the chunk: on
    /// every text of every fixture, with chunks small enough that some pieces are longer.
    #[test]
    fn the_scan_never_misses_a_piece_the_pattern_finds_on_the_fixtures() {
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../../fixtures/transcripts");
        let mut texts = Vec::new();
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.extension().is_some_and(|x| x == "json") {
                let bytes = std::fs::read(&path).unwrap();
                let conversation = crate::format::parse(&bytes, None).unwrap();
                texts.extend(conversation.messages.iter().map(|m| m.text_content()));
            }
        }
        assert!(texts.len() > 1_000, "{} texts", texts.len());
        let mut long_pieces = 0;
        for counter in tokenizers() {
            for chunk in [8, 32] {
                for text in &texts {
                    let mut longest = 0;
                    counter.split(text, &mut |p| longest = longest.max(p.len()));
                    if longest > chunk {
                        long_pieces += 1;
                        assert!(
                            may_hold_a_piece_over(text.as_bytes(), chunk),
                            "chunk {chunk}: missed a piece of {longest} bytes in {text:?}"
                        );
                    }
                }
            }
        }
        assert!(long_pieces > 100, "{long_pieces} texts with long pieces");
    }
}
