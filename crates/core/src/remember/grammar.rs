//! Whether one occurrence of a phrase is a request: at the start of a clause or after a
//! trigger ("please", "can you", ...), not in code, not in a question, not narrative ("I
//! remember when..."); for CJK phrases, not one of their narrative forms.

/// Words after which a phrase is a request wherever the clause started ("…, so could you
/// remember…", "I want you to remember…", "tu dois retenir", "kannst du dir merken").
/// Not here on purpose: "also", "always", "try to" ("I also remember", "I always remember",
/// "I try to remember" are narrative); they are accepted at the start of a clause instead.
#[rustfmt::skip]
const TRIGGERS: &[&str] = &[
    "please", "pls", "plz", "kindly", "can you", "could you", "would you", "will you",
    "you should", "you must", "you need to", "you have to", "you to", "and", "and also",
    "then", "and then",
    "peux-tu", "pourrais-tu", "pouvez-vous", "pourriez-vous", "tu peux", "tu pourrais",
    "vous pouvez", "tu dois", "vous devez", "il faut", "merci de", "stp", "svp",
    "s'il te plaît", "s'il te plait", "s'il vous plaît", "s'il vous plait", "veuillez", "et",
    "puis", "et puis",
    "bitte", "kannst du", "kannst du dir", "kannst du dir das", "könntest du",
    "könntest du dir", "können sie", "könnten sie", "können sie sich", "du musst",
    "du musst dir", "du solltest", "du solltest dir", "sie sollten", "sie müssen", "und",
    "dann", "und dann",
];

/// Words a request may start with before the phrase itself: politeness, connectives,
/// emphasis. They are stripped from the start of the clause only, so "I also remember"
/// still has its subject in front and stays narrative.
#[rustfmt::skip]
const LEAD_INS: &[&str] = &[
    "please", "pls", "plz", "kindly", "also", "and", "and also", "but", "so", "ok", "okay",
    "oh", "hey", "hi", "now", "then", "just", "really", "always", "absolutely", "definitely",
    "btw", "important", "try to", "make sure to", "make sure you", "be sure to",
    "et", "aussi", "alors", "donc", "mais", "bon", "puis", "enfin", "surtout", "bien",
    "toujours", "stp", "svp", "s'il te plaît", "s'il te plait", "s'il vous plaît",
    "s'il vous plait", "merci de", "essaie de", "essayez de", "veuillez",
    "und", "auch", "bitte", "aber", "also", "noch", "dann", "jetzt", "übrigens", "ach", "ja",
    "unbedingt", "immer",
];

/// A phrase that starts with one of these is a request wherever it stands.
#[rustfmt::skip]
pub(super) const SELF_MARKERS: &[&str] = &[
    "please", "pls", "plz", "kindly", "bitte", "merci de", "stp", "svp", "s'il te plaît",
    "s'il vous plaît", "veuillez",
];

/// Narrative forms of CJK phrases: `(phrase, rejected if preceded by, rejected if followed
/// by)`. "帮我记住" (help me remember) is a phrase of its own, so rejecting `我记住`
/// ("I have memorised") does not lose it; `覚えていて(ください)` is not rejected because
/// only the indicative continuations are listed.
#[rustfmt::skip]
pub(super) const CJK_NARRATIVE: &[(&str, &[&str], &[&str])] = &[
    ("记住", &["我", "没", "不"], &["了吗"]),
    ("覚えて", &[], &["いる", "います", "いた", "いな", "いません", "る", "た", "ます", "ない",
                     "おく", "おきます", "おいた", "おります"]),
    ("忘れないで", &[], &["いる", "います"]),
];

/// Characters that end a clause: a phrase right after one starts a new clause.
#[rustfmt::skip]
const CLAUSE_BOUNDARIES: &[char] = &[
    '\n', '.', '!', '?', ';', ':', ',', '(', ')', '[', ']', '"', '“', '”', '„', '«', '»', '—',
    '–', '…', '。', '！', '？', '；', '：', '，', '、', '「', '」', '『', '』', '（', '）',
];

/// Right before or after a phrase, these mean code (`obj.remember`, `remember(x)`,
/// `` `remember` ``), not prose.
const CODE_BEFORE: &[char] = &['.', '_', '/', '\\', '$', '@', '#', '`', '='];
const CODE_AFTER: &[char] = &['(', '_', '/', '\\', '`', '='];

/// How far back a clause is searched for its start: a phrase that far into a clause is
/// not at its start, and the trigger words sit right before it anyway.
const MAX_CLAUSE_CHARS: usize = 120;
/// How far ahead the end of the sentence is searched (for the question test).
const MAX_SENTENCE_CHARS: usize = 300;

pub(super) fn is_cjk(c: char) -> bool {
    matches!(c,
        '\u{3040}'..='\u{30FF}' // Hiragana, Katakana
        | '\u{3400}'..='\u{4DBF}' | '\u{4E00}'..='\u{9FFF}' | '\u{F900}'..='\u{FAFF}' // Han
        | '\u{AC00}'..='\u{D7AF}' // Hangul
        | '\u{FF66}'..='\u{FF9F}') // half-width Katakana
}

fn is_word_char(c: char) -> bool {
    (c.is_alphanumeric() && !is_cjk(c)) || c == '_'
}

pub(super) fn cjk_is_request(
    text: &str,
    start: usize,
    end: usize,
    narrative: Option<(&[&str], &[&str])>,
) -> bool {
    let Some((before, after)) = narrative else {
        return true;
    };
    let head = &text[..start];
    let tail = &text[end..];
    !(before.iter().any(|b| head.ends_with(b)) || after.iter().any(|a| tail.starts_with(a)))
}

pub(super) fn latin_is_request(text: &str, start: usize, end: usize, self_marked: bool) -> bool {
    let prev = text[..start].chars().next_back();
    let next = text[end..].chars().next();
    if prev.is_some_and(|c| is_word_char(c) || CODE_BEFORE.contains(&c))
        || next.is_some_and(|c| is_word_char(c) || CODE_AFTER.contains(&c))
    {
        return false;
    }
    if self_marked {
        return true;
    }
    let (clause, whole) = clause_before(text, start);
    let words = clause_words(clause);
    if TRIGGERS.iter().any(|t| ends_with_words(&words, t)) {
        return true;
    }
    whole && strip_lead_ins(&words).is_empty() && !is_question(&text[end..])
}

/// The text between the start of the clause and `start`, and whether the clause start was
/// found (false when the search gave up after [`MAX_CLAUSE_CHARS`]).
fn clause_before(text: &str, start: usize) -> (&str, bool) {
    let head = &text[..start];
    for (n, (i, c)) in head.char_indices().rev().enumerate() {
        if CLAUSE_BOUNDARIES.contains(&c) {
            return (&head[i + c.len_utf8()..], true);
        }
        if n >= MAX_CLAUSE_CHARS {
            return (&head[i..], false);
        }
    }
    (head, true)
}

/// The clause's words without edge punctuation (`**please**` is `please`). A token of
/// punctuation only (a bullet, a dash) starts the clause afresh.
pub(super) fn clause_words(clause: &str) -> Vec<&str> {
    let mut words = Vec::new();
    for raw in clause.split_whitespace() {
        let word = raw.trim_matches(|c: char| !c.is_alphanumeric());
        if word.is_empty() {
            words.clear();
        } else {
            words.push(word);
        }
    }
    words
}

pub(super) fn starts_with_words(words: &[&str], phrase: &str) -> bool {
    let n = phrase.split(' ').count();
    words.len() >= n && words.iter().zip(phrase.split(' ')).all(|(w, p)| *w == p)
}

fn ends_with_words(words: &[&str], phrase: &str) -> bool {
    let n = phrase.split(' ').count();
    words.len() >= n
        && words[words.len() - n..]
            .iter()
            .zip(phrase.split(' '))
            .all(|(w, p)| *w == p)
}

/// Removes lead-in words (and list numbering) from the start of the clause.
pub(super) fn strip_lead_ins<'a, 'b>(mut words: &'a [&'b str]) -> &'a [&'b str] {
    loop {
        if let Some(first) = words.first() {
            if !first.chars().any(char::is_alphabetic) {
                words = &words[1..];
                continue;
            }
        }
        let longest = LEAD_INS
            .iter()
            .filter(|l| starts_with_words(words, l))
            .map(|l| l.split(' ').count())
            .max();
        match longest {
            Some(n) => words = &words[n..],
            None => return words,
        }
    }
}

/// Whether the sentence that continues in `rest` ends with a question mark: "Remember
/// when we shipped on a Friday?" reminisces, it does not ask to remember.
pub(super) fn is_question(rest: &str) -> bool {
    for c in rest.chars().take(MAX_SENTENCE_CHARS) {
        match c {
            '?' | '？' => return true,
            '.' | '!' | '\n' | '。' | '！' => return false,
            _ => {}
        }
    }
    false
}
