//! # context_cascade
//!
//! Keeps a long LLM agent conversation inside the model's context window without losing
//! what matters. (The crate doc with the cascade diagram is completed with the engine.)

pub mod calibrate;
pub mod catalog;
pub mod config;
pub mod conversation;
pub mod error;
pub mod estimate;
pub mod format;
pub mod llm;
pub mod markers;
pub mod offline;
pub mod overflow;
pub mod remember;
pub mod report;
pub mod summarizer;
pub mod tool_names;

pub use conversation::{Block, Conversation, Format, Message, Role, Shape, ToolCall, ToolResult};
pub use error::{Error, ParseError};
