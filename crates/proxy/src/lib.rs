//! The transparent HTTP proxy (being written).
