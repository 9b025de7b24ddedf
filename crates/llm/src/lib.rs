//! HTTP clients and the LLM-backed summarizer (being written).
