//! A client's request head and body → the proxy's router (route, body limits, tenant, fast
//! path or parse, preparation, the cascade, the engine's calls to a scripted upstream on
//! 127.0.0.1): never a panic, and the property of `fuzz/admission.rs` holds.
#![no_main]

use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;

#[path = "../admission.rs"]
mod admission;

/// The runtime and the scripted upstream, made once per process.
static HARNESS: OnceLock<admission::Harness> = OnceLock::new();

fuzz_target!(|data: &[u8]| {
    HARNESS.get_or_init(admission::Harness::new).check(data);
});
