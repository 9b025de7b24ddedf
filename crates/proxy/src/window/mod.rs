//! The model's context window: discovered, learned from overflow errors, labelled, and
//! counted by llama.cpp where it can.

pub mod discovery;
pub mod labels;
pub(crate) mod tokenize;
