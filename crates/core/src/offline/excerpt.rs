//! Bounded text excerpts: what the offline summarizer keeps of a message, so that a 100 KB
//! tool output costs at most a few hundred characters of memory and every later rendering
//! (at any shortening level) is cheap and cut on character boundaries.

/// The whitespace-collapsed head and tail of a text, keeping at most `keep` characters of
/// each; `elided` says whether something in between was left out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Excerpt {
    head: String,
    tail: String,
    elided: bool,
}

/// The separator written where the middle of a text was left out.
const ELLIPSIS: &str = " … ";

impl Excerpt {
    /// Keeps at most `keep` characters of the head and of the tail of `text`, with runs of
    /// whitespace (newlines included) collapsed to one space. Linear in what it reads: the
    /// middle of a huge text is never looked at.
    pub(crate) fn new(text: &str, keep: usize) -> Excerpt {
        let text = text.trim();
        let (head, head_end) = collapse_prefix(text, keep);
        if head_end >= text.len() {
            return Excerpt {
                head,
                tail: String::new(),
                elided: false,
            };
        }
        let (tail, tail_start) = collapse_suffix(text, keep, head_end);
        if tail_start <= head_end {
            // Head and tail meet: the text was short enough to keep whole.
            let (whole, _) = collapse_prefix(text, usize::MAX);
            return Excerpt {
                head: whole,
                tail: String::new(),
                elided: false,
            };
        }
        Excerpt {
            head,
            tail,
            elided: true,
        }
    }

    /// The excerpt in at most `limit` characters (at least the ellipsis): the whole text
    /// when it fits, else two thirds of head, ` … `, one third of tail.
    pub(crate) fn render(&self, limit: usize) -> String {
        if self.elided {
            join_ends(&self.head, &self.tail, limit)
        } else {
            shorten(&self.head, limit)
        }
    }
}

/// Shortens an already collapsed one-line text to at most `limit` characters (head … tail).
/// Shortening a shortened text again with the same limit changes nothing, so that merging a
/// summary into the next one does not wear its lines down.
pub(crate) fn shorten(text: &str, limit: usize) -> String {
    if text.chars().count() <= limit {
        return text.to_owned();
    }
    join_ends(text, text, limit)
}

/// Two thirds of `limit` from the start of `head`, the ellipsis, the rest from the end of
/// `tail`.
fn join_ends(head: &str, tail: &str, limit: usize) -> String {
    let room = limit.saturating_sub(ELLIPSIS.chars().count());
    let head_chars = room * 2 / 3;
    let tail_chars = room - head_chars;
    let mut out = take_chars(head, head_chars).trim_end().to_owned();
    out.push_str(ELLIPSIS);
    out.push_str(last_chars(tail, tail_chars).trim_start());
    out
}

/// The first `n` characters of `text`.
fn take_chars(text: &str, n: usize) -> &str {
    match text.char_indices().nth(n) {
        Some((index, _)) => &text[..index],
        None => text,
    }
}

/// The last `n` characters of `text`.
fn last_chars(text: &str, n: usize) -> &str {
    if n == 0 {
        return "";
    }
    match text.char_indices().rev().nth(n - 1) {
        Some((index, _)) => &text[index..],
        None => text,
    }
}

/// Collapses whitespace from the start of `text` until `keep` characters are written.
/// Returns them and the byte offset where reading stopped.
fn collapse_prefix(text: &str, keep: usize) -> (String, usize) {
    let mut out = String::new();
    let mut written = 0usize;
    let mut pending_space = false;
    for (index, ch) in text.char_indices() {
        if ch.is_whitespace() {
            pending_space = written > 0;
            continue;
        }
        if written >= keep {
            return (out, index);
        }
        if pending_space {
            out.push(' ');
            written += 1;
            pending_space = false;
        }
        out.push(ch);
        written += 1;
    }
    (out, text.len())
}

/// Collapses whitespace from the end of `text` (not before byte `floor`) until `keep`
/// characters are gathered. Returns them in reading order and the byte offset where the
/// gathered text starts.
fn collapse_suffix(text: &str, keep: usize, floor: usize) -> (String, usize) {
    let mut reversed: Vec<char> = Vec::new();
    let mut pending_space = false;
    let mut start = text.len();
    for (index, ch) in text[floor..].char_indices().rev() {
        if ch.is_whitespace() {
            pending_space = !reversed.is_empty();
            continue;
        }
        if reversed.len() >= keep {
            return (reversed.iter().rev().collect(), start);
        }
        if pending_space {
            reversed.push(' ');
            pending_space = false;
        }
        reversed.push(ch);
        start = floor + index;
    }
    (reversed.iter().rev().collect(), floor)
}

/// A list that keeps its first `cap` and its last `cap` items (the start of a story and
/// where it ended matter most) and counts what it dropped in between, so that memory stays
/// bounded however long the conversation is.
#[derive(Debug, Clone)]
pub(crate) struct Bounded<T> {
    cap: usize,
    first: Vec<T>,
    last: std::collections::VecDeque<T>,
    dropped: usize,
}

impl<T> Bounded<T> {
    pub(crate) fn new(cap: usize) -> Self {
        Bounded {
            cap,
            first: Vec::new(),
            last: std::collections::VecDeque::new(),
            dropped: 0,
        }
    }

    pub(crate) fn push(&mut self, item: T) {
        if self.first.len() < self.cap {
            self.first.push(item);
            return;
        }
        self.last.push_back(item);
        if self.last.len() > self.cap {
            self.last.pop_front();
            self.dropped += 1;
        }
    }

    /// The kept items in order, and how many were dropped from the middle.
    pub(crate) fn into_parts(self) -> (Vec<T>, usize) {
        let mut items = self.first;
        items.extend(self.last);
        (items, self.dropped)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_text_is_kept_whole_and_collapsed() {
        let e = Excerpt::new("  hello \n\n  world  ", 100);
        assert_eq!(e.render(100), "hello world");
    }

    #[test]
    fn long_text_keeps_head_and_tail() {
        let text = format!("start {} end", "x ".repeat(10_000));
        let e = Excerpt::new(&text, 20);
        let r = e.render(20);
        assert!(r.starts_with("start"), "{r}");
        assert!(r.ends_with("end"), "{r}");
        assert!(r.contains('…'));
        assert!(r.chars().count() <= 20);
    }

    #[test]
    fn text_just_over_keep_is_not_elided() {
        let e = Excerpt::new("abcdefghij", 6);
        assert_eq!(e.render(100), "abcdefghij");
    }

    #[test]
    fn multibyte_text_is_cut_on_char_boundaries() {
        let text = "日本語のテキスト🎉".repeat(500);
        for keep in [1, 2, 7, 50] {
            let e = Excerpt::new(&text, keep);
            for limit in [0, 1, 3, 10, 40] {
                let r = e.render(limit);
                assert!(r.chars().all(|c| c != '\u{FFFD}'));
                assert!(r.chars().count() <= limit.max(3));
            }
        }
        assert_eq!(shorten("🎉🎉🎉🎉🎉🎉", 5), "🎉 … 🎉");
        let once = shorten(&"日本語 ".repeat(50), 31);
        assert_eq!(shorten(&once, 31), once, "shortening is stable");
    }

    #[test]
    fn bounded_keeps_both_ends() {
        let mut b = Bounded::new(2);
        (0..10).for_each(|i| b.push(i));
        assert_eq!(b.into_parts(), (vec![0, 1, 8, 9], 6));
    }
}
