//! The model's context window: discovered, learned from overflow errors, labelled, counted
//! by llama.cpp where it can; the calibration of the engine's estimate kept; and both
//! followed from other replicas through a shared store.

pub(crate) mod budget;
pub(crate) mod calibration;
pub(crate) mod discovery;
pub(crate) mod labels;
pub(crate) mod shared;
pub(crate) mod tokenize;
