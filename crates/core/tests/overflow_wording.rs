//! Issue 13, item 9: overflow wordings beyond the public vectors. `classify` recognises
//! families of phrasing (subject, verb, limit; a limit stated in other words), not a list
//! of literals, and still never fires on rate limits, quotas, billing or output limits.

#![allow(clippy::unwrap_used, clippy::expect_used, unreachable_pub)] // test code: a failure is a test failure

use context_cascade::classify;

/// An overflow body: (status, body, observed tokens, limit tokens).
type Case = (Option<u16>, &'static str, Option<u64>, Option<u64>);

/// Bodies that are overflows, with the numbers they quote.
#[rustfmt::skip]
const OVERFLOWS: &[Case] = &[
    (Some(400), "The input is 70000 tokens, but this model supports up to 65536.", Some(70_000), Some(65_536)),
    (Some(400), "Your request exceeds the model's context window of 8192 tokens.", None, Some(8_192)),
    (Some(400), "input length and max_tokens exceed context limit", None, None),
    (Some(400), "Prompt has 9000 tokens, which exceeds the model limit of 8192 tokens.", Some(9_000), Some(8_192)),
    (Some(400), "The prompt (131,072 tokens) exceeds the context window (128,000 tokens).", Some(131_072), Some(128_000)),
    (None, "Request too long: 40960 tokens exceeds the maximum context of 32768 tokens", Some(40_960), Some(32_768)),
    (Some(400), "This model's context length is 4096 tokens; your prompt has 5120 tokens.", Some(5_120), Some(4_096)),
    (Some(400), "Token limit exceeded: the conversation contains 210000 tokens, the model accepts at most 200000.", Some(210_000), Some(200_000)),
    (None, "error: input too long: 12000 tokens, max context 8192", Some(12_000), Some(8_192)),
    (Some(400), "The number of tokens in the prompt (33000) is greater than the model's context size (32768).", Some(33_000), Some(32_768)),
    (Some(500), "llama_decode: context size has been exceeded", None, None),
    (Some(400), "The request's input exceeds the model's maximum input length of 30720 tokens.", None, Some(30_720)),
    (Some(400), r#"{"error":{"message":"Input tokens (150000) exceed the max input tokens limit (128000)"}}"#, Some(150_000), Some(128_000)),
    (Some(400), "messages exceed the context window: 140000 > 131072", Some(140_000), Some(131_072)),
    (None, "error: prompt length 9000 is over the context limit 8192", Some(9_000), Some(8_192)),
    (Some(400), "Conversation is too long for this model's context window. Please start a new conversation.", None, None),
    (Some(400), "Maximum context length exceeded: 200513 tokens requested, 200000 allowed", Some(200_513), Some(200_000)),
    (Some(400), "This model supports a maximum context of 4096 tokens, but your prompt contains 6000 tokens.", Some(6_000), Some(4_096)),
    (Some(400), "The total length of your prompt (2,100,000 tokens) is over the 2,000,000 token limit for this model.", Some(2_100_000), Some(2_000_000)),
    (Some(400), r#"{"object":"error","message":"Requested input length 40000 exceeds maximum input length 32768","type":"BadRequestError"}"#, Some(40_000), Some(32_768)),
    (Some(400), "prompt exceeds max length: 5000 > 4096 tokens", Some(5_000), Some(4_096)),
    (Some(400), "too many input tokens: 70000 (max 65536)", Some(70_000), Some(65_536)),
    (Some(400), "Prompt is 9000 tokens long, which is more than the 8192 token context window.", Some(9_000), Some(8_192)),
    (Some(400), "Input of 5000 tokens is larger than this model's window of 4096 tokens", Some(5_000), Some(4_096)),
    (Some(500), r#"{"error":"prompt too long; exceeded max context length by 2312 tokens"}"#, None, None),
    (Some(400), "The decoder prompt (length 5000) is longer than the maximum model length of 4096. Make sure that `max_model_len` is no smaller than the number of text tokens.", Some(5_000), Some(4_096)),
    (Some(400), "Error: messages are too long for the model (context window exceeded)", None, None),
    (Some(400), "too many tokens in the prompt: the conversation uses 33,100 tokens and the limit is 32,000 tokens", Some(33_100), Some(32_000)),
    (Some(400), "The conversation exceeds the maximum context size of this model (16384 tokens).", None, Some(16_384)),
    (Some(413), "Request rejected: the input is longer than the model's context window (200k).", None, None),
    (Some(400), "BadRequestError: prompt length (70001) is greater than the context window (65536)", Some(70_001), Some(65_536)),
];

/// Bodies that mention limits, tokens or sizes but are not overflows.
#[rustfmt::skip]
const NOT_OVERFLOWS: &[(Option<u16>, &str)] = &[
    (Some(429), "Rate limit reached for gpt-4o in organization org-abc on tokens per min (TPM): Limit 30000, Used 29000, Requested 2000."),
    (Some(413), "Request too large for gpt-4o in organization org-abc on tokens per min (TPM): Limit 30000, Requested 45000."),
    (Some(400), "input tokens per minute limit exceeded for this deployment"),
    (Some(400), "Request exceeds the rate limit for input tokens per minute"),
    (Some(429), "You exceeded your current quota, please check your plan and billing details."),
    (Some(400), "Your credit balance is too low to access the Anthropic API."),
    (Some(403), "Your organization has exceeded its monthly token limit."),
    (Some(400), "Daily token limit exceeded for this API key."),
    (Some(400), "max_tokens is too large: 9000. This model supports at most 4096 completion tokens, whereas you provided 9000."),
    (Some(400), "max_tokens: 100000 exceeds the model's maximum output tokens (64000)."),
    (Some(400), "The requested max_tokens (8192) exceeds the model's limit (4096)."),
    (Some(400), "The output exceeds the maximum output length of 8192 tokens."),
    (Some(413), "<html><body><h1>413 Payload Too Large</h1></body></html>"),
    (Some(413), "Request Entity Too Large"),
    (Some(413), "Request body is too large (limit 10 MB)"),
    (Some(413), "Upstream 413: request entity too large; the proxy limit is 1 MB"),
    (Some(400), "The input image exceeds the maximum size of 20MB."),
    (Some(400), "Request was over the limit of 50 requests per second"),
    (Some(400), "The request exceeded the maximum number of tools (128)."),
    (None, "Post \"https://api.example.com/v1/chat/completions\": context deadline exceeded (Client.Timeout exceeded while awaiting headers)"),
    (Some(500), "Context: request failed with status 500 Internal Server Error"),
    (Some(404), "Conversation not found"),
    (Some(400), "messages: at least one message is required"),
    (Some(400), "The prompt was flagged by the content filter."),
    (Some(400), "Input should be a valid string"),
];

#[test]
fn overflow_families_are_recognised_with_their_numbers() {
    assert!(OVERFLOWS.len() >= 30);
    let mut failures = Vec::new();
    for &(status, body, observed, limit) in OVERFLOWS {
        match classify(status, body) {
            None => failures.push(format!("missed: {body}")),
            Some(o) if (o.observed_tokens, o.limit_tokens) != (observed, limit) => {
                failures.push(format!(
                    "numbers {:?}/{:?}, expected {observed:?}/{limit:?}: {body}",
                    o.observed_tokens, o.limit_tokens
                ))
            }
            Some(_) => {}
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn look_alikes_are_not_overflows() {
    let wrong: Vec<&str> = NOT_OVERFLOWS
        .iter()
        .filter(|(status, body)| classify(*status, body).is_some())
        .map(|(_, body)| *body)
        .collect();
    assert!(wrong.is_empty(), "false positives:\n{}", wrong.join("\n"));
}
