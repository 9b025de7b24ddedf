//! Remember requests: user messages that ask the agent to keep something in mind.
//!
//! A user who writes "remember: the staging database is read-only" expects it to hold for
//! the rest of the session, and compaction is exactly what would make the agent forget it.
//! Such messages are pinned automatically (and the proxy keeps them in its memory store).
//! Pinning costs context for the rest of the conversation, so the detector only fires on a
//! *request*: "remember" at the start of a sentence or clause, or after "please", "can
//! you", "you should"... — not the narrative "I remember when we…" or the question "do you
//! remember…?". Latin-script phrases match whole words only ("remembered" and
//! "unforgettable" do not count); Chinese and Japanese phrases match as substrings, with a
//! few built-in exceptions for their narrative forms (`我记住了` "I have memorised it",
//! `覚えています` "I remember").
//!
//! ```
//! use context_cascade::RememberPolicy;
//!
//! let policy = RememberPolicy::default();
//! assert!(policy.is_remember_request("Please remember: staging is read-only."));
//! assert!(policy.is_remember_request("Et n'oublie pas de lancer les tests"));
//! assert!(policy.is_remember_request("记住：端口是 8080"));
//! assert!(!policy.is_remember_request("I remember when we fixed this last week."));
//! assert!(!policy.is_remember_request("Do you remember the port?"));
//! ```

/// The built-in phrases: the SPEC's list first, then variants that are requests in every
/// natural use. Left out on purpose: "note that" (ordinary task prose, pinning it would
/// defeat compaction), "from now on" (an instruction, not a request to remember, and often
/// narrative), "remind me" (mostly asks for information), Chinese `记得` (as often "I
/// recall" as "remember to"; the request forms `请记得`/`要记得` are listed).
#[rustfmt::skip]
const DEFAULT_PHRASES: &[&str] = &[
    // SPEC
    "remember", "please remember", "don't forget", "merci de retenir", "retiens",
    "bitte merken", "merk dir", "记住", "覚えて",
    // English
    "do not forget", "dont forget", "never forget", "keep in mind", "bear in mind",
    "memorize", "memorise", "make a note", "take note",
    // French
    "n'oublie pas", "n'oubliez pas", "retenez", "retenir", "souviens-toi", "souvenez-vous",
    "rappelle-toi", "rappelez-vous", "garde en tête", "gardez en tête", "garde à l'esprit",
    "gardez à l'esprit",
    // German
    "merke dir", "merken sie sich", "merken", "vergiss nicht", "vergesst nicht",
    "vergessen sie nicht", "denk daran", "denke daran", "denk dran", "denken sie daran",
    "behalte im hinterkopf",
    // Chinese
    "帮我记住", "请记得", "要记得", "别忘了", "别忘记", "不要忘记", "不要忘了", "请牢记",
    // Japanese
    "覚えといて", "忘れないで",
];

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
const SELF_MARKERS: &[&str] = &[
    "please", "pls", "plz", "kindly", "bitte", "merci de", "stp", "svp", "s'il te plaît",
    "s'il vous plaît", "veuillez",
];

/// Narrative forms of CJK phrases: `(phrase, rejected if preceded by, rejected if followed
/// by)`. "帮我记住" (help me remember) is a phrase of its own, so rejecting `我记住`
/// ("I have memorised") does not lose it; `覚えていて(ください)` is not rejected because
/// only the indicative continuations are listed.
#[rustfmt::skip]
const CJK_NARRATIVE: &[(&str, &[&str], &[&str])] = &[
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

/// Detects remember requests; the phrase list is configurable.
#[derive(Debug, Clone)]
pub struct RememberPolicy {
    phrases: Vec<String>,
    compiled: Vec<Phrase>,
    /// A cheap first test: every phrase's longest run of ASCII letters (or the whole phrase
    /// when it has none), searched case-insensitively in one pass. A text without any of
    /// them cannot match, so the full test, which normalizes the whole text, runs only on
    /// the few that might: on a long history it would otherwise dominate `prepare`.
    prefilter: Option<regex::Regex>,
}

#[derive(Debug, Clone)]
struct Phrase {
    /// Normalized like the text (lowercase, straight apostrophes, single spaces).
    text: String,
    cjk: bool,
    self_marked: bool,
    narrative: Option<(&'static [&'static str], &'static [&'static str])>,
}

impl Default for RememberPolicy {
    fn default() -> Self {
        RememberPolicy::from_phrases(DEFAULT_PHRASES)
    }
}

impl RememberPolicy {
    /// A policy for exactly these phrases (case-insensitive; empty and duplicate phrases
    /// are dropped). Phrases in any script work; the request rules (start of a clause, or
    /// after "please", "can you", ...) apply to Latin-script phrases, CJK phrases match
    /// anywhere.
    pub fn from_phrases(phrases: impl IntoIterator<Item = impl AsRef<str>>) -> Self {
        let mut policy = RememberPolicy {
            phrases: Vec::new(),
            compiled: Vec::new(),
            prefilter: None,
        };
        for phrase in phrases {
            let original = phrase.as_ref().trim();
            let text = normalize_text(original);
            let text = text.trim();
            if text.is_empty() || policy.compiled.iter().any(|p| p.text == text) {
                continue;
            }
            let cjk = text.chars().any(is_cjk);
            let words: Vec<&str> = text.split(' ').collect();
            let self_marked = !cjk && SELF_MARKERS.iter().any(|m| starts_with_words(&words, m));
            let narrative = CJK_NARRATIVE
                .iter()
                .find(|(p, _, _)| *p == text)
                .map(|&(_, before, after)| (before, after));
            policy.phrases.push(original.to_string());
            policy.compiled.push(Phrase {
                text: text.to_string(),
                cjk,
                self_marked,
                narrative,
            });
        }
        policy.prefilter = prefilter(&policy.phrases);
        policy
    }

    /// The phrases, as configured.
    pub fn phrases(&self) -> &[String] {
        &self.phrases
    }

    /// Whether `text` (a user message's text) asks to remember something.
    pub fn is_remember_request(&self, text: &str) -> bool {
        if self.compiled.is_empty() {
            return false;
        }
        if self.prefilter.as_ref().is_some_and(|re| !re.is_match(text)) {
            return false;
        }
        let text = normalize_text(text);
        self.compiled.iter().any(|phrase| {
            text.match_indices(phrase.text.as_str())
                .any(|(start, found)| {
                    let end = start + found.len();
                    if phrase.cjk {
                        cjk_is_request(&text, start, end, phrase.narrative)
                    } else {
                        latin_is_request(&text, start, end, phrase.self_marked)
                    }
                })
        })
    }
}

/// Lowercases, straightens typographic apostrophes and collapses whitespace runs (to a
/// newline when the run holds one, since a newline starts a new clause).
/// The needles of [`RememberPolicy::prefilter`]; `None` (no prefilter) when there is
/// nothing to search for or the pattern cannot be built.
fn prefilter(phrases: &[String]) -> Option<regex::Regex> {
    let needles: Vec<String> = phrases
        .iter()
        .map(|phrase| {
            let longest = (phrase.split(|c: char| !c.is_ascii_alphabetic()))
                .max_by_key(|run| run.len())
                .unwrap_or("");
            regex::escape(if longest.is_empty() { phrase } else { longest })
        })
        .filter(|needle| !needle.is_empty())
        .collect();
    if needles.is_empty() {
        return None;
    }
    (regex::RegexBuilder::new(&needles.join("|")).case_insensitive(true))
        .build()
        .ok()
}

fn normalize_text(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut pending: Option<char> = None;
    for c in text.chars() {
        if c.is_whitespace() {
            pending = Some(if c == '\n' || pending == Some('\n') {
                '\n'
            } else {
                ' '
            });
            continue;
        }
        if let Some(space) = pending.take() {
            out.push(space);
        }
        match c {
            '\u{2019}' | '\u{2018}' | '\u{02BC}' | '\u{FF07}' => out.push('\''),
            _ => out.extend(c.to_lowercase()),
        }
    }
    if let Some(space) = pending {
        out.push(space);
    }
    out
}

fn is_cjk(c: char) -> bool {
    matches!(c,
        '\u{3040}'..='\u{30FF}' // Hiragana, Katakana
        | '\u{3400}'..='\u{4DBF}' | '\u{4E00}'..='\u{9FFF}' | '\u{F900}'..='\u{FAFF}' // Han
        | '\u{AC00}'..='\u{D7AF}' // Hangul
        | '\u{FF66}'..='\u{FF9F}') // half-width Katakana
}

fn is_word_char(c: char) -> bool {
    (c.is_alphanumeric() && !is_cjk(c)) || c == '_'
}

fn cjk_is_request(
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

fn latin_is_request(text: &str, start: usize, end: usize, self_marked: bool) -> bool {
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
fn clause_words(clause: &str) -> Vec<&str> {
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

fn starts_with_words(words: &[&str], phrase: &str) -> bool {
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
fn strip_lead_ins<'a, 'b>(mut words: &'a [&'b str]) -> &'a [&'b str] {
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
fn is_question(rest: &str) -> bool {
    for c in rest.chars().take(MAX_SENTENCE_CHARS) {
        match c {
            '?' | '？' => return true,
            '.' | '!' | '\n' | '。' | '！' => return false,
            _ => {}
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    fn yes(text: &str) {
        assert!(
            RememberPolicy::default().is_remember_request(text),
            "should match: {text:?}"
        );
    }

    fn no(text: &str) {
        assert!(
            !RememberPolicy::default().is_remember_request(text),
            "should not match: {text:?}"
        );
    }

    #[test]
    fn the_prefilter_never_hides_a_phrase() {
        let policy = RememberPolicy::default();
        for phrase in policy.phrases() {
            let text = format!("so {} this", phrase.to_uppercase());
            let prefilter = policy.prefilter.as_ref().unwrap();
            assert!(prefilter.is_match(&text), "{phrase}");
        }
        assert!(
            !policy
                .prefilter
                .as_ref()
                .unwrap()
                .is_match("the build failed in module 3")
        );
    }

    #[test]
    fn english_requests() {
        yes("remember");
        yes("Remember: the API key lives in .env");
        yes("please remember that we use tabs");
        yes("Also, don't forget to update the changelog.");
        yes("Don’t forget the migration"); // typographic apostrophe
        yes("DO NOT FORGET to run clippy");
        yes("dont forget the tests");
        yes("Fix the parser. Remember to add a regression test!");
        yes("Can you remember that the server runs on port 8080?");
        yes("Could you please remember my name is Ana");
        yes("I want you to remember this: staging is read-only");
        yes("You should remember that the CI is slow");
        yes("Keep in mind that tests take ten minutes");
        yes("Ok so remember, no force pushes");
        yes("- remember to run the linter\n- and open a PR");
        yes("1) Remember the port\n2) deploy");
        yes("**Remember**: never commit secrets");
        yes("When you deploy, remember to run migrations");
        yes("Fix the bug and remember to add a test");
        yes("Please try to remember the style guide");
        yes("Memorize this: the build uses Bazel");
        yes("Just a note.\n\nRemember, YOU SHOULD ALWAYS INCLUDE EXACTLY ONE TOOL CALL");
    }

    #[test]
    fn english_narrative_and_non_words() {
        no("I remember when we fixed this last week.");
        no("Do you remember the port?");
        no("Yes, I remember.");
        no("I also remember that the tests were flaky");
        no("I always remember names");
        no("I try to remember everything");
        no("I remembered it this morning");
        no("an unforgettable day");
        no("We should keep it in mind"); // not the phrase "keep in mind"
        no("Remember when we shipped on a Friday?");
        no("I'll never forget that outage");
        no("call obj.remember(key) to cache it");
        no("remember(key) returns the cached value");
        no("the `remember` helper");
        no("the remember_me cookie");
        no("");
        no("nothing relevant here");
    }

    #[test]
    fn french_requests_and_narrative() {
        yes("Merci de retenir que le port est 8080");
        yes("Retiens bien : on utilise Postgres");
        yes("Et n'oublie pas de lancer les tests");
        yes("S'il te plaît, retiens ça");
        yes("N’oubliez pas la migration.");
        yes("Peux-tu retenir que la prod est en lecture seule ?");
        yes("Souviens-toi que la CI est lente");
        no("Je retiens surtout que ça marche");
        no("Tu te souviens de la réunion ?");
        no("Je n'oublie pas les tests");
        no("Il est difficile de retenir tout ça");
        no("Vous rappelez-vous la date ?");
    }

    #[test]
    fn german_requests_and_narrative() {
        yes("Bitte merken: Port 8080");
        yes("Merk dir, dass wir Tabs verwenden");
        yes("Vergiss nicht, die Tests laufen zu lassen");
        yes("Und denk daran: keine Force-Pushes");
        yes("Bitte unbedingt merken, dass staging nur lesbar ist");
        yes("Kannst du dir merken, dass der Server in Berlin steht?");
        yes("Vergessen Sie nicht die Migration");
        no("Ich denke daran, wie es früher war");
        no("Wir vergessen sie nicht");
        no("Ich kann mir das nicht merken");
        no("Sie merken schon, dass es langsam ist");
    }

    #[test]
    fn chinese_requests_and_narrative() {
        yes("记住：端口是 8080");
        yes("请记住我们用的是 PostgreSQL");
        yes("请帮我记住这个路径");
        yes("别忘了运行测试");
        yes("以后要记得先跑测试");
        no("我记住了你的名字");
        no("我还记得那天的事");
        no("你记住了吗？");
        no("没记住那个命令");
    }

    #[test]
    fn japanese_requests_and_narrative() {
        yes("ポートは8080だと覚えておいてください");
        yes("これを覚えて");
        yes("覚えていてください");
        yes("覚えといて、本番は読み取り専用");
        yes("テストを忘れないでね");
        no("昔のことをよく覚えています");
        no("あの日のこと覚えてる？");
        no("名前を覚えておきます");
        no("覚えてない");
    }

    #[test]
    fn configurable_phrases() {
        let policy = RememberPolicy::from_phrases(["Pin this", "  ", "pin this", "メモして"]);
        assert_eq!(policy.phrases(), ["Pin this", "メモして"]);
        assert!(policy.is_remember_request("Pin this: the token expires hourly"));
        assert!(policy.is_remember_request("please pin this"));
        assert!(!policy.is_remember_request("I pin this to the wall"));
        assert!(!policy.is_remember_request("remember the port"));
        assert!(policy.is_remember_request("これをメモして"));
        let none = RememberPolicy::from_phrases(Vec::<String>::new());
        assert!(none.phrases().is_empty());
        assert!(!none.is_remember_request("remember this"));
    }

    #[test]
    fn self_marked_phrases_match_anywhere() {
        let policy = RememberPolicy::from_phrases(["please remember"]);
        assert!(policy.is_remember_request("As we discussed please remember the port"));
        no("As we discussed, I know you remember the port");
    }

    #[test]
    fn default_phrases_are_listed() {
        let policy = RememberPolicy::default();
        for spec in [
            "remember",
            "please remember",
            "don't forget",
            "merci de retenir",
            "retiens",
            "bitte merken",
            "merk dir",
            "记住",
            "覚えて",
        ] {
            assert!(policy.phrases().iter().any(|p| p == spec), "{spec}");
            yes(spec);
        }
        assert_eq!(
            policy.phrases().len(),
            DEFAULT_PHRASES.len(),
            "no duplicates"
        );
    }

    #[test]
    fn long_clauses_only_match_after_triggers() {
        let filler = "word ".repeat(60);
        no(&format!("{filler}remember the port"));
        yes(&format!("{filler}can you remember the port"));
    }

    #[test]
    fn helpers() {
        assert_eq!(
            normalize_text("  Don’t\r\n  FORGET\t x "),
            " don't\nforget x "
        );
        assert_eq!(clause_words("** please - also"), ["also"]);
        assert!(is_question(" when we met?"));
        assert!(!is_question(" the port. ok?"));
        assert_eq!(
            strip_lead_ins(&["ok", "so", "2", "and", "also"]),
            [] as [&str; 0]
        );
        assert_eq!(strip_lead_ins(&["i", "also"]), ["i", "also"]);
    }
}
