use super::*;

fn yes(status: Option<u16>, body: &str) -> Overflow {
    match classify(status, body) {
        Some(o) => o,
        None => panic!("expected an overflow: {body}"),
    }
}

fn no(status: Option<u16>, body: &str) {
    assert_eq!(classify(status, body), None, "expected no overflow: {body}");
}

#[test]
fn every_pattern_compiles() {
    assert_eq!(RULES.len(), RULE_SOURCES.len());
    assert_eq!(VETOES.len(), VETO_SOURCES.len());
    assert_eq!(normalize("A\\n  b\tC"), "a b c");
}

#[test]
fn anthropic_numbers_with_commas_and_spaces() {
    let o = yes(
        None,
        "Error: PROMPT is too long:   1,234,567 tokens >  1,000,000 maximum",
    );
    assert_eq!(o.observed_tokens, Some(1_234_567));
    assert_eq!(o.limit_tokens, Some(1_000_000));
    assert_eq!(o.provider, Some("anthropic"));
}

#[test]
fn anthropic_input_plus_max_tokens() {
    let o = yes(
        Some(400),
        "input length and `max_tokens` exceed context limit: 150000 + 60000 > 200000",
    );
    assert_eq!(
        (o.observed_tokens, o.limit_tokens),
        (Some(150_000), Some(200_000))
    );
}

#[test]
fn openai_messages_only() {
    let o = yes(
        Some(400),
        r#"{"error":{"message":"This model's maximum context length is 16385 tokens. However, your messages resulted in 17000 tokens.","code":"context_length_exceeded"}}"#,
    );
    assert_eq!(
        (o.observed_tokens, o.limit_tokens),
        (Some(17_000), Some(16_385))
    );
    assert_eq!(o.provider, Some("openai"));
}

#[test]
fn openai_breakdown_with_room_for_output() {
    let o = yes(
        None,
        "maximum context length is 16000 tokens. However, you requested 17000 tokens \
         (14000 in the messages, 1000 in the functions, and 2000 in the completion).",
    );
    assert_eq!(
        (o.observed_tokens, o.limit_tokens),
        (Some(15_000), Some(16_000))
    );
}

#[test]
fn completion_alone_filling_the_window_is_not_an_overflow() {
    no(
        Some(400),
        "This model's maximum context length is 32768 tokens. However, you requested \
         33000 tokens (232 in the messages, 32768 in the completion). code: context_length_exceeded",
    );
    no(
        None,
        "This endpoint's maximum context length is 65536 tokens. However, you requested \
         about 70000 tokens (4464 of text input, 65536 in the output).",
    );
}

#[test]
fn gemini_escaped_inside_json() {
    let o = yes(
        Some(400),
        r#"{"error":{"message":"{\n \"message\": \"The input token count (2000000) exceeds the maximum number of tokens allowed (1048576).\"\n}"}}"#,
    );
    assert_eq!(
        (o.observed_tokens, o.limit_tokens),
        (Some(2_000_000), Some(1_048_576))
    );
    assert_eq!(o.provider, Some("gemini"));
}

#[test]
fn llama_cpp_json_fields() {
    let o = yes(
        Some(400),
        r#"{"error":{"type":"exceed_context_size_error","n_ctx":4096,"n_prompt_tokens":5000}}"#,
    );
    assert_eq!(
        (o.observed_tokens, o.limit_tokens),
        (Some(5_000), Some(4_096))
    );
    assert_eq!(o.provider, Some("llama.cpp"));
}

#[test]
fn bedrock_and_ollama_and_tgi_paraphrases() {
    assert_eq!(
        yes(
            None,
            "ValidationException: Input is too long for requested model"
        )
        .provider,
        Some("bedrock")
    );
    yes(
        Some(400),
        r#"{"error":"the input length exceeds the context length"}"#,
    );
    let o = yes(
        Some(422),
        "Input validation error: `inputs` must have less than 2048 tokens. Given: 3000",
    );
    assert_eq!(
        (o.observed_tokens, o.limit_tokens),
        (Some(3_000), Some(2_048))
    );
}

#[test]
fn anthropic_413_request_too_large() {
    yes(
        Some(413),
        r#"{"error":{"type":"request_too_large","message":"Request exceeds the maximum size"}}"#,
    );
}

#[test]
fn string_above_max_length_only_about_the_conversation() {
    yes(
        Some(400),
        "Invalid 'messages[2].content': string too long. code: string_above_max_length",
    );
    no(
        Some(400),
        "Invalid 'tools[0].function.name': string too long. code: string_above_max_length",
    );
}

#[test]
fn rate_limits_are_not_overflows() {
    no(
        Some(413),
        "Request too large for model on tokens per minute (TPM): Limit 12000, Requested 20000.",
    );
    no(
        Some(429),
        "This model's maximum context length is 8192 tokens.",
    );
    no(
        None,
        "ThrottlingException: Too many tokens, please wait before trying again.",
    );
    no(
        Some(400),
        r#"{"error":{"code":"rate_limit_error","message":"exceeds 40,000 input tokens per minute; reduce the prompt length"}}"#,
    );
}

#[test]
fn quota_and_billing_are_not_overflows() {
    no(
        Some(429),
        r#"{"error":{"code":"insufficient_quota","message":"You ran out of quota."}}"#,
    );
    no(
        Some(402),
        "Insufficient credits: this request needs 9000 tokens, you can only afford 100.",
    );
    no(
        Some(403),
        "Billing hard limit reached for this organisation.",
    );
    no(
        None,
        "Prompt tokens limit exceeded: 50000 > 20000. Raise the monthly limit of your key.",
    );
}

#[test]
fn output_limit_errors_are_not_overflows() {
    no(
        Some(400),
        "max_tokens is too large: 100000. This model supports at most 16384 completion tokens.",
    );
    no(
        Some(400),
        "max_tokens: 200000 > 128000, which is the maximum allowed number of output tokens",
    );
    no(Some(400), "Range of max_tokens should be [1, 4096]");
    no(
        Some(400),
        "'max_tokens' or 'max_completion_tokens' is too large: 32000. This model's maximum context \
         length is 32768 tokens and your request has 1000 input tokens",
    );
}

#[test]
fn proxy_413_page_is_not_an_overflow() {
    no(
        Some(413),
        "<html><head><title>413 Request Entity Too Large</title></head><body>openresty</body></html>",
    );
    no(Some(413), "");
}

#[test]
fn limit_zero_means_not_entitled() {
    no(
        None,
        "prompt token count of 500 exceeds the limit of 0 (model_max_prompt_tokens_exceeded)",
    );
    let o = yes(
        None,
        "prompt token count of 130000 exceeds the limit of 64000",
    );
    assert_eq!(
        (o.observed_tokens, o.limit_tokens),
        (Some(130_000), Some(64_000))
    );
}

#[test]
fn generic_wordings() {
    yes(None, "Error: context window exceeded for this request");
    yes(
        None,
        "The input (50000 tokens) is longer than the model's context length (32768 tokens).",
    );
    assert_eq!(
        yes(None, "xAI: This model's maximum prompt length is 256000 but the request contains 300000 tokens.")
            .observed_tokens,
        Some(300_000)
    );
}

#[test]
fn a_prompt_token_limit_stated_as_cannot_exceed() {
    // Cohere's wording, copied by self-hosted servers (docs.cohere.com/reference/errors).
    let o = yes(
        Some(400),
        r#"{"message":"too many tokens: total number of tokens in the prompt cannot exceed 4081 - received 4292. Try using a shorter prompt, or enabling prompt truncating."}"#,
    );
    assert_eq!(
        (o.observed_tokens, o.limit_tokens),
        (Some(4_292), Some(4_081))
    );
    let bare = yes(
        None,
        "too many tokens: total number of tokens in the prompt cannot exceed 128000",
    );
    assert_eq!(
        (bare.observed_tokens, bare.limit_tokens),
        (None, Some(128_000))
    );
    // The family, not the literal: other subjects that count the prompt's tokens.
    let input = yes(
        Some(400),
        "The input tokens must not exceed 32,768 (received 40,000).",
    );
    assert_eq!(input.limit_tokens, Some(32_768));
    yes(
        Some(400),
        "Error: number of tokens in your messages can't exceed 8192",
    );
    yes(
        Some(400),
        "too many tokens: size limit exceeded by 11326 tokens. Try using shorter or fewer inputs, or setting prompt_truncation='AUTO'.",
    );
    yes(
        Some(400),
        "too many tokens: minimal context could not be added to prompt (size limit exceeded by 280 tokens)",
    );
}

#[test]
fn cannot_exceed_about_anything_but_the_prompts_tokens_is_not_an_overflow() {
    // The requested output (Cohere's own wording for it).
    no(
        Some(400),
        "too many tokens: max tokens must be less than or equal to 4096, the maximum output for this model - received 8192.",
    );
    no(Some(400), "max_tokens cannot exceed 4096 for this model");
    no(Some(400), "The completion tokens cannot exceed 16384.");
    // Counts of other things in the prompt.
    no(
        Some(400),
        "The number of images in the prompt cannot exceed 10.",
    );
    no(Some(400), "The number of tools cannot exceed 128.");
    no(
        Some(400),
        "invalid request: total number of texts must be at most 96 - received 104",
    );
    // A per-minute quota on prompt tokens is a wait, not a shrink.
    no(
        Some(400),
        "Input tokens per minute cannot exceed 30000 on your plan.",
    );
}
