use super::grammar::{clause_words, is_question, strip_lead_ins};
use super::prefilter::{BUILD_AFTER_BYTES, Prefilter};
use super::*;

/// A policy of `phrases` that has tested enough text to build its searchers.
fn warm(phrases: &[&str]) -> RememberPolicy {
    let policy = RememberPolicy::from_phrases(phrases);
    assert!(policy.searchers(BUILD_AFTER_BYTES).is_some());
    policy
}

/// The prefilter of a warm policy.
fn prefilter_of(policy: &RememberPolicy) -> &Prefilter {
    let searchers = policy.searchers(BUILD_AFTER_BYTES).unwrap();
    searchers.prefilter.as_ref().unwrap()
}

/// The verdicts of both ways a text is tested: by the full test alone, a search per phrase
/// (a policy that has tested little yet), and behind the prefilter with every phrase found
/// in one pass (one that has tested enough to build them).
fn verdicts(text: &str) -> (bool, bool) {
    let fresh = RememberPolicy::default();
    let warm = warm(DEFAULT_PHRASES);
    (
        fresh.is_remember_request(text),
        warm.is_remember_request(text),
    )
}

fn yes(text: &str) {
    assert_eq!(verdicts(text), (true, true), "should match: {text:?}");
}

fn no(text: &str) {
    assert_eq!(verdicts(text), (false, false), "should not match: {text:?}");
}

#[test]
fn the_prefilter_is_built_once_it_pays_and_shared_by_clones() {
    let policy = RememberPolicy::default();
    let clone = policy.clone();
    let line = "the build failed in module 3\n";
    assert!(!policy.is_remember_request(line));
    assert!(
        policy.prefilter.built.get().is_none(),
        "a short text gets the full test"
    );
    let long = line.repeat(BUILD_AFTER_BYTES / line.len());
    assert!(!clone.is_remember_request(&long));
    let built = policy.prefilter.built.get();
    assert!(built.is_some_and(|s| s.prefilter.is_some() && s.phrases.is_some()));
    assert!(policy.is_remember_request("Keep in mind: the port is 8080"));
}

#[test]
fn the_prefilter_never_hides_a_phrase() {
    let policy = warm(DEFAULT_PHRASES);
    let prefilter = prefilter_of(&policy);
    for phrase in policy.phrases() {
        let text = format!("so {} this", phrase.to_uppercase());
        assert!(prefilter.may_match(&text), "{phrase}");
    }
    assert!(matches!(prefilter, Prefilter::Ascii(_)));
    assert!(!prefilter.may_match("the build failed in module 3"));
    // The Kelvin sign lowercases to `k`: the full test reads "keep in mind".
    let kelvin = "\u{212A}eep in mind: the port is 8080";
    assert!(prefilter.may_match(kelvin) && policy.is_remember_request(kelvin));
    // The dotted capital I lowercases to `i` and a combining dot: a phrase whose needle
    // ends in `i` could match it, so the text gets the full test.
    assert!(prefilter.may_match("the build failed in \u{130}stanbul"));
}

/// A phrase in a cased script past ASCII is searched case-insensitively as Unicode folds
/// it, as the full test (which lowercases) finds it.
#[test]
fn a_phrase_in_a_cased_script_is_found_in_either_case() {
    let policy = warm(&["θυμήσου"]);
    let prefilter = prefilter_of(&policy);
    assert!(matches!(prefilter, Prefilter::Unicode(_)));
    assert!(policy.is_remember_request("ΘΥΜΉΣΟΥ: το port είναι 8080"));
    assert!(!prefilter.may_match("ξέχνα το"));
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

/// A search per phrase (`match_indices`) skips an occurrence that overlaps the phrase's
/// previous one; the one-pass search, which reports every occurrence, skips it too.
#[test]
fn an_overlapping_occurrence_is_skipped_both_ways() {
    let text = "xpls pls pls";
    // Found at 1 (after a letter: not a word) and at 5, overlapping the first.
    let fresh = RememberPolicy::from_phrases(["pls pls"]);
    assert!(!fresh.is_remember_request(text));
    assert!(!warm(&["pls pls"]).is_remember_request(text));
    // Alone, the second occurrence is a (self-marked) request.
    assert!(warm(&["pls pls"]).is_remember_request("x pls pls"));
}

/// Text pieces that exercise every rule: phrases in either case, triggers, lead-ins,
/// clause boundaries, code punctuation, questions, CJK narrative forms.
#[rustfmt::skip]
const PIECES: &[&str] = &[
    "remember", "Remember", "REMEMBER", "please", "please remember", "don't forget",
    "don\u{2019}t forget", "keep in mind", "note", "make a note", "take note", "never forget",
    "merk dir", "merken", "Merken Sie sich", "n'oublie pas", "retiens", "retenir", "记住",
    "我记住了", "覚えて", "覚えています", "忘れないで", "do you", "can you", "you should", "I",
    "we", "when", "the port", "is 8080", "x", "_", "/", "`", "=", "(", ")", ".", ",", ":", ";",
    "?", "!", "\n", " ", "  ", "\t", "\n\n", "—", "**", "- ", "pls", "\u{212A}eep",
];

proptest::proptest! {
    /// The one-pass search behind the prefilter gives the verdict of a search per phrase on
    /// every text built from [`PIECES`] (the default phrases, and phrases that overlap
    /// themselves).
    #[test]
    fn one_pass_and_per_phrase_searches_agree(
        picks in proptest::collection::vec(0..PIECES.len(), 0..24),
    ) {
        let text: String = picks.iter().map(|&i| PIECES[i]).collect();
        let (per_phrase, one_pass) = verdicts(&text);
        proptest::prop_assert_eq!(per_phrase, one_pass, "{:?}", text);
        let phrases = ["pls pls", "note note", "记住记住"];
        let fresh = RememberPolicy::from_phrases(phrases);
        proptest::prop_assert_eq!(
            fresh.is_remember_request(&text),
            warm(&phrases).is_remember_request(&text),
            "{:?}", text
        );
    }
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
