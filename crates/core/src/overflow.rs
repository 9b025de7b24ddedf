//! Recognising a context-window overflow in a provider's error answer.
//!
//! The retry loop compresses the conversation only when a provider says the request does
//! not fit its window. Getting this wrong is costly both ways: missing an overflow ends the
//! agent run, while calling a rate limit, a billing error or an oversized output `max_tokens`
//! an overflow makes the agent compress history for nothing, and loop forever when the
//! requested output alone fills the window. So [`classify`] answers "would shrinking the
//! input fix this request?", not "does the body mention a limit?".
//!
//! Bodies arrive as JSON, JSON escaped inside JSON, Python reprs, SDK error strings and
//! terminal-wrapped log lines, so matching runs on a normalised copy (unescaped,
//! lower-cased, whitespace collapsed) with regexes compiled once. Besides the providers'
//! own codes and phrases, families of wording catch what no vector lists: a subject
//! (context, prompt, input, messages), a verb (exceeds, is over, too long) and a context or
//! token limit within one sentence, or a size and a limit stated in other words ("the
//! input is N tokens, but this model supports up to M"), with their numbers.

use regex::{Captures, Regex};
use std::sync::LazyLock;

/// A context-window overflow recognised in a provider's error answer.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Overflow {
    /// Prompt tokens the provider counted, when the body quotes them.
    pub observed_tokens: Option<u64>,
    /// The context limit the provider applied, when the body quotes it.
    pub limit_tokens: Option<u64>,
    /// Best guess of the provider family ("openai", "anthropic", "gemini", "llama.cpp",
    /// "vllm", "ollama", ...), when recognisable.
    pub provider: Option<&'static str>,
}

/// A compiled row of [`RULE_SOURCES`].
struct Rule {
    /// Whether a match alone means "overflow" (otherwise the rule only extracts numbers).
    signal: bool,
    provider: Option<&'static str>,
    re: Regex,
}

/// Whether a table row is a detection signal or only extracts numbers.
const SIGNAL: bool = true;
const NUMBERS_ONLY: bool = false;

/// Detection rules, error codes first: a code is the provider's own verdict, and the
/// first matching rule names the provider when no stronger hint is in the body. Patterns
/// match the normalised body (see [`normalize`]). Placeholders, expanded by [`compile`]:
/// `OBS`, `LIM`, `OUT` and `FUN` capture the prompt tokens, the limit, the requested output
/// and the tool-definition tokens; `NUM` is an uncaptured number; a space matches zero or
/// one space (terminal wraps split words, e.g. Moonshot's "re quested").
#[rustfmt::skip]
const RULE_SOURCES: &[(bool, Option<&str>, &str)] = &[
    // Error codes.
    (SIGNAL, Some("openai"), r"context_length_exceeded"),
    (SIGNAL, None, r"model_context_window_exceeded|context_window_exceeded|contextwindowexceedederror"),
    (SIGNAL, Some("llama.cpp"), r"exceed_context_size_error"),
    (SIGNAL, Some("copilot"), r"model_max_prompt_tokens_exceeded"),
    (SIGNAL, Some("anthropic"), r"request_too_large"),
    // `string_above_max_length` also guards fields that have nothing to do with the
    // conversation; only a too-long message or input can be fixed by shrinking it.
    (SIGNAL, Some("openai"), r"string_above_max_length.{0,300}?(?:context|messages|input|prompt)"),
    (SIGNAL, Some("openai"), r"(?:context|messages|input|prompt).{0,300}?string_above_max_length"),
    // Provider phrases that quote numbers.
    (SIGNAL, Some("anthropic"), r"prompt is too long: OBS tokens > LIM maximum"),
    (SIGNAL, Some("anthropic"), r"input length and max_tokens exceed context limit: OBS \+ OUT > LIM"),
    (SIGNAL, Some("gemini"), r"input token count \(?OBS\)? exceeds the maximum number of tokens allowed \(?LIM"),
    (SIGNAL, Some("openrouter"), r"endpoint's maximum context length is LIM"),
    (SIGNAL, Some("fireworks"), r"prompt is too long: OBS, model maximum context length: LIM"),
    (SIGNAL, Some("openai"), r"maximum context length(?: is| of|:)? \(?LIM"),
    (SIGNAL, Some("vllm"), r"you passed OBS input tokens and requested OUT output tokens.{0,40}?context length is only LIM"),
    (SIGNAL, Some("azure"), r"input tokens exceed the configured limit of LIM tokens.{0,20}?messages resulted in OBS"),
    (SIGNAL, Some("xai"), r"maximum prompt length is LIM but the request contains OBS"),
    (SIGNAL, Some("moonshot"), r"exceeded model token limit: LIM \(re quested: OBS"),
    (SIGNAL, Some("copilot"), r"prompt token count of OBS exceeds the limit of LIM"),
    (SIGNAL, Some("cerebras"), r"current length is OBS while limit is LIM"),
    (SIGNAL, Some("tgi"), r"inputs tokens \+ max_new_tokens must be <= LIM. given: OBS inputs tokens and OUT max_new_tokens"),
    (SIGNAL, Some("tgi"), r"inputs must have less than LIM tokens. given: OBS"),
    // Cohere counts prompt and prediction together, so its number is not the prompt's.
    (SIGNAL, Some("cohere"), r"total number of tokens \(prompt and prediction\) cannot exceed LIM"),
    (SIGNAL, Some("llama.cpp"), r"requested tokens \(OBS\) exceed context window of LIM"),
    (SIGNAL, Some("lm studio"), r"keep the first OBS tokens when context the overflows.{0,80}?context length of only LIM"),
    (SIGNAL, Some("ollama"), r"input exceeds context length.{0,40}? prompt=OBS limit=LIM"),
    (SIGNAL, None, r"input length \(OBS\) exceeds (?:the )?model's maximum context length \(LIM"),
    (SIGNAL, Some("together"), r"input \(OBS tokens\) is longer than the model's context length \(LIM"),
    (SIGNAL, None, r"input length OBS exceeds the maximum allowed input length of LIM"),
    (SIGNAL, Some("mistral"), r"prompt contains OBS tokens.{0,40}?too large for model with LIM maximum context length"),
    (SIGNAL, Some("github models"), r"request body too large for .{0,80}?model. max size: LIM tokens"),
    // Provider phrases without numbers (or with sizes in bytes or characters).
    (SIGNAL, Some("anthropic"), r"request exceeds the maximum size|request size exceeds model context window"),
    (SIGNAL, Some("llama.cpp"), r"exceeds the available context size"),
    (SIGNAL, Some("ollama"), r"input length exceeds the context length"),
    (SIGNAL, Some("bedrock"), r"input is too long for (?:the )?requested model"),
    (SIGNAL, Some("bedrock"), r"malformed input request: expected maxlength: NUM, actual: NUM"),
    (SIGNAL, Some("bedrock"), r"value at 'body' failed to satisfy constraint: member must have length less than or equal to"),
    (SIGNAL, None, r"string value length \(NUM\) exceeds the maximum allowed"),
    (SIGNAL, Some("minimax"), r"context (?:window|length) exceeds (?:the )?limit"),
    (SIGNAL, Some("codex"), r"ran out of room in the model's context window"),
    (SIGNAL, Some("openai"), r"your input exceeds the context window of this model"),
    // openai-node's message for an empty 400/413 body: Cerebras answers overflows this way.
    (SIGNAL, Some("cerebras"), r"^(?:400|413) status code \(no body\)$"),
    // Generic wordings shared by many OpenAI-compatible servers.
    (SIGNAL, None, r"maximum context length"),
    (SIGNAL, None, r"exceed(?:s|ed)? (?:the |its )?(?:model'?s? )?(?:maximum |max |available )?context (?:length|window|size|limit)"),
    (SIGNAL, None, r"context (?:length|window|size|limit) (?:is |was |has been )?exceeded"),
    (SIGNAL, None, r"longer than (?:the )?(?:model'?s? )?(?:maximum )?context (?:length|window)"),
    (SIGNAL, None, r"exceeds the maximum allowed input length"),
    (SIGNAL, None, r"prompt (?:is )?too long"),
    (SIGNAL, None, r"reduce the length of the messages"),
    // Families of wording rather than literals. Subject, verb, limit within one sentence:
    // "the prompt (N tokens) is over the context window", "input exceeds the max input
    // tokens limit", "messages are too long for the model's context window". The limit
    // must be about context or tokens, so "the input image exceeds the maximum size" and
    // "the request was over the limit of 50 requests" stay out.
    (SIGNAL, None, r"\b(?:context|prompt|input|messages?|conversation|request)\b[^.;!?]{0,80}?\b(?:too long|too large|exceeds?|exceeded|exceeding|over|greater than|longer than|larger than|more than|above)\b[^.;!?]{0,60}?(?:\bcontext\b|\bwindow\b|\btokens? limit|\b(?:input|prompt) limit|\bmax(?:imum)? (?:input|prompt|context|model|sequence)\b|\bmax(?:imum)? length|\b(?:limit|maximum|max)\b[^.;!?]{0,20}?\bNUM -?tokens?\b)"),
    // A limit stated in other words, after the size: "the input is N tokens, but this
    // model supports up to M", "the conversation uses N tokens and the limit is M".
    (SIGNAL, None, r"\b(?:context|prompt|input|messages?|conversation)\b[^.;!?]{0,60}?\bNUM tokens?\b[^.!?]{0,80}?\b(?:supports?|accepts?|allows?|handles?|limit is|limit of|max(?:imum)? is|context (?:length|window|size) is)\b[^.;!?]{0,20}?NUM"),
    // ...or before it: "the context length is M tokens; your prompt has N tokens".
    (SIGNAL, None, r"\b(?:context (?:length|window|size)|max(?:imum)? context|supports?|accepts?)\b[^.!?]{0,40}?\bNUM tokens?\b[^.!?]{0,40}?\b(?:prompt|input|messages?|conversation|request)\b[^.!?]{0,20}?\b(?:has|contains|is|uses|resulted in)\b[^.!?]{0,15}?\bNUM tokens"),
    (SIGNAL, None, r"too many (?:input|prompt) tokens|too many tokens in (?:the )?(?:prompt|input|messages|conversation|context)"),
    // A limit on the prompt's tokens stated as a rule: "total number of tokens in the prompt
    // cannot exceed 4081 - received 4292" (Cohere, and servers that copy its wording). The
    // subject must count the prompt's tokens, so "the number of images in the prompt cannot
    // exceed 10" and "max tokens must be less than or equal to 4096" stay out.
    (SIGNAL, None, r"\b(?:tokens? (?:in|of) (?:the |your )?(?:prompt|input|messages?|conversation|context)|(?:prompt|input) (?:tokens?|token count|length in tokens))\b[^.;!?]{0,40}?\b(?:cannot|can ?not|can't|must not|may not|shall not|should not) exceed (?:the )?(?:limit of |maximum of )?LIM"),
    (SIGNAL, Some("cohere"), r"too many tokens: (?:size limit exceeded by NUM tokens|minimal context could not be added to (?:the )?prompt)"),
    // Number extraction only (llama.cpp JSON fields, OpenAI-style breakdowns).
    (NUMBERS_ONLY, None, r#"n_prompt_tokens['"]?: OBS"#),
    (NUMBERS_ONLY, None, r#"n_ctx['"]?: LIM"#),
    (NUMBERS_ONLY, None, r"OBS in (?:the|your) (?:messages|prompt)"),
    (NUMBERS_ONLY, None, r"OBS of text input"),
    (NUMBERS_ONLY, None, r"messages resulted in OBS"),
    (NUMBERS_ONLY, None, r"request has OBS input tokens"),
    (NUMBERS_ONLY, None, r"prompt contains at least OBS input tokens"),
    (NUMBERS_ONLY, None, r"FUN in the functions"),
    (NUMBERS_ONLY, None, r"OUT (?:in|for) the (?:completion|output)"),
    (NUMBERS_ONLY, None, r"requested OUT output tokens"),
    (NUMBERS_ONLY, None, r"exceed LIM (?:tokens )?[-,:;(]? ?received OBS\b"),
    // Numbers in the wording families, after every provider's own: "N > M" first (its
    // right side is the limit even after the word "context"), then the limit, then the size.
    (NUMBERS_ONLY, None, r"\bOBS (?:tokens )?> LIM\b"),
    (NUMBERS_ONLY, None, r"\bmax(?:imum)? context (?:length|window|size)[^.;!?\d]{0,20}?\(LIM tokens"),
    (NUMBERS_ONLY, None, r"\bmax(?:imum)? (?:allowed )?(?:input|prompt|model|sequence) (?:length|size|tokens?)(?: limit)?(?: is| of|:)? \(?LIM\b"),
    (NUMBERS_ONLY, None, r"(?:\bcontext(?: length| window| size| limit)?|\bwindow|\b(?:tokens?|input|prompt) limit)(?: is| of|:)?(?: only)? \(?LIM\b"),
    (NUMBERS_ONLY, None, r"\b(?:limit|maximum|max)(?: is| of|:)? \(?LIM -?tokens?\b"),
    (NUMBERS_ONLY, None, r"\b(?:supports?|accepts?|allows?|handles?) (?:up to |at most |a maximum of |only )?LIM\b"),
    (NUMBERS_ONLY, None, r"\bLIM -?tokens? (?:limit|context)"),
    (NUMBERS_ONLY, None, r"\bLIM (?:tokens )?allowed"),
    (NUMBERS_ONLY, None, r"\(max(?:imum)?:? LIM\)"),
    (NUMBERS_ONLY, None, r"\b(?:prompt|input|messages|conversation)(?: \(?(?:length|size|tokens?|token count))?(?: is| has| contains| was| uses| too long)?:? (?:about |at least )?\(?OBS\b"),
    (NUMBERS_ONLY, None, r"\b(?:prompt|input) of OBS tokens"),
    (NUMBERS_ONLY, None, r"\bOBS tokens? (?:requested|given|provided|submitted|long|exceeds?|is over|is greater than|is more than)\b"),
];

/// Look-alikes that must never count as overflows, whatever else the body says: waiting,
/// paying or lowering `max_tokens` fixes them, compressing the input does not.
const VETO_SOURCES: &[&str] = &[
    // Rate limits and throttling (per-minute/day token quotas included).
    r"rate[ _-]?limit",
    r"tokens per (?:min|minute|hour|day)\b",
    r"\btpm\b",
    r"too many requests",
    r"throttl",
    r"please wait before trying again",
    r"resource(?: |_)?exhausted",
    // Quota, billing, spending limits, account state.
    r"quota",
    r"billing",
    r"credits",
    r"can only afford",
    r"monthly limit",
    r"spending limit",
    r"token usage",
    // Output-limit validation: the requested completion is too large for the model.
    r"max_(?:completion_)?tokens'? (?:or 'max_completion_tokens' )?is too large",
    r"supports at most NUM completion tokens",
    r"maximum allowed number of output tokens",
    r"maximum tokens you requested exceeds",
    r"range of max_tokens",
    r"max_(?:completion_)?tokens must be less than or equal",
    r"max_completion_tokens specified in the request are not valid",
    // Embedding batch limits are not a conversation window.
    r"too many tokens in batch",
];

const NUMBER: &str = r"\d{1,3}(?:,\d{3})+|\d+";

/// Expands the placeholders of a table pattern and compiles it. The table is part of the
/// program: a pattern that does not compile is a bug, which the unit tests catch at once
/// (every table is compiled there), not a rule to drop silently.
#[allow(clippy::expect_used)]
fn compile(pattern: &str) -> Regex {
    let expanded = pattern
        .replace(' ', " ?")
        .replace("OBS", &format!("(?P<obs>{NUMBER})"))
        .replace("LIM", &format!("(?P<lim>{NUMBER})"))
        .replace("OUT", &format!("(?P<out>{NUMBER})"))
        .replace("FUN", &format!("(?P<fun>{NUMBER})"))
        .replace("NUM", &format!("(?:{NUMBER})"));
    Regex::new(&expanded).expect("overflow patterns are valid regexes")
}

static RULES: LazyLock<Vec<Rule>> = LazyLock::new(|| {
    RULE_SOURCES
        .iter()
        .map(|&(signal, provider, source)| Rule {
            signal,
            provider,
            re: compile(source),
        })
        .collect()
});

static VETOES: LazyLock<Vec<Regex>> =
    LazyLock::new(|| VETO_SOURCES.iter().map(|s| compile(s)).collect());

#[allow(clippy::expect_used)]
static ESCAPED_WHITESPACE: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"\\+[nrt]").expect("a valid regex"));
#[allow(clippy::expect_used)]
static WHITESPACE: LazyLock<Regex> = LazyLock::new(|| Regex::new(r"\s+").expect("a valid regex"));

/// Substrings that name the provider more reliably than the wording (wrappers such as
/// Bedrock or a proxy relay another family's message), checked in order.
#[rustfmt::skip]
const PROVIDER_HINTS: &[(&str, &str)] = &[
    ("bedrock", "bedrock"), ("validationexception", "bedrock"), ("invokemodel", "bedrock"),
    ("azure", "azure"), ("openrouter", "openrouter"), ("deepseek", "deepseek"), ("groq", "groq"),
    ("fireworks", "fireworks"), ("cerebras", "cerebras"), ("moonshot", "moonshot"),
    ("mistral", "mistral"), ("cohere", "cohere"), ("anthropic", "anthropic"), ("vllm", "vllm"),
    ("serving_chat", "vllm"), ("ollama", "ollama"), ("llama-server", "llama.cpp"),
];

/// Undoes the ways bodies get mangled on their way to us: JSON escaped inside JSON,
/// Python reprs (`\'`), markdown backticks, terminal line wraps, mixed case.
fn normalize(body: &str) -> String {
    let mut text = body.to_lowercase().replace(['\u{2019}', '\u{2018}'], "'");
    text = ESCAPED_WHITESPACE.replace_all(&text, " ").into_owned();
    text.retain(|c| c != '\\' && c != '`');
    text = WHITESPACE.replace_all(&text, " ").into_owned();
    text.trim().to_owned()
}

fn number(caps: &Captures<'_>, name: &str) -> Option<u64> {
    caps.name(name)?.as_str().replace(',', "").parse().ok()
}

/// Whether the window minus the requested output still leaves an input budget the cascade
/// can meet. When the output reservation alone (nearly) fills the window, compressing the
/// input cannot help and retrying as an overflow would loop forever; `limit / 8`, capped at
/// 1024 tokens, is the smallest budget that holds a system prompt and the latest turn.
fn output_leaves_room(limit: u64, output: u64) -> bool {
    let room = limit.saturating_sub(output);
    room > 0 && room >= (limit / 8).min(1024)
}

/// Recognises a context-window overflow in a provider's error answer.
///
/// Returns `Some` only when shrinking the input can fix the request: rate limits (429,
/// "tokens per minute"), quota and billing errors, an output `max_tokens` that is too
/// large, a proxy's 413 page, and "maximum context length" errors whose requested output
/// alone fills the window all give `None`. Numbers are taken from the body when quoted.
///
/// ```
/// use context_cascade::classify;
///
/// let body = r#"{"type":"error","error":{"type":"invalid_request_error",
///     "message":"prompt is too long: 201,337 tokens > 200000 maximum"}}"#;
/// let overflow = classify(Some(400), body).expect("an overflow");
/// assert_eq!(overflow.observed_tokens, Some(201_337));
/// assert_eq!(overflow.limit_tokens, Some(200_000));
/// assert_eq!(overflow.provider, Some("anthropic"));
///
/// let rate_limit = "Rate limit reached on tokens per min (TPM): Limit 30000, Requested 31000.";
/// assert!(classify(Some(429), rate_limit).is_none());
/// ```
pub fn classify(http_status: Option<u16>, body: &str) -> Option<Overflow> {
    // A 429 is always a "wait" answer, never a "shrink" one.
    if http_status == Some(429) {
        return None;
    }
    let text = normalize(body);
    if text.is_empty() || VETOES.iter().any(|re| re.is_match(&text)) {
        return None;
    }
    let mut detected: Option<Option<&'static str>> = None;
    let (mut obs, mut lim, mut out, mut fun) = (None, None, None, None);
    for rule in RULES.iter() {
        let Some(caps) = rule.re.captures(&text) else {
            continue;
        };
        if rule.signal && detected.is_none() {
            detected = Some(rule.provider);
        }
        obs = obs.or_else(|| number(&caps, "obs"));
        lim = lim.or_else(|| number(&caps, "lim"));
        out = out.or_else(|| number(&caps, "out"));
        fun = fun.or_else(|| number(&caps, "fun"));
    }
    let rule_provider = detected?;
    // A limit of 0 means the model is not enabled for the account: nothing fits.
    if lim == Some(0) {
        return None;
    }
    if lim.zip(out).is_some_and(|(l, o)| !output_leaves_room(l, o)) {
        return None;
    }
    let hinted = PROVIDER_HINTS
        .iter()
        .find(|(needle, _)| text.contains(needle))
        .map(|&(_, name)| name);
    Some(Overflow {
        observed_tokens: obs.map(|o| o.saturating_add(fun.unwrap_or(0))),
        limit_tokens: lim,
        provider: hinted.or(rule_provider),
    })
}

#[cfg(test)]
#[path = "overflow_tests.rs"]
mod tests;
