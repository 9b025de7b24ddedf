//! How the process's allocator (glibc's malloc) keeps memory: tuned at start so that what
//! 200 heavy clients took is given back after them (docs/benchmarks.md, "Hardening").
//!
//! By default glibc serves a large block (a 430 kB request body) from `mmap` only until the
//! first such block is freed; then it raises its threshold up to 32 MiB and serves the
//! next ones from its heaps, where they fragment and stay. It also makes up to 8 heaps
//! ("arenas") per core, each keeping its own free memory. Measured with
//! `scripts/load.py`, 200 clients × 20 s: the after-load RSS fell from 506 MB to 217 MB
//! with the three settings below, at the same throughput. An environment variable of the
//! same name (`MALLOC_ARENA_MAX`, ...) set by the operator wins: it is left as it is.

/// Blocks from this size are mapped on their own and unmapped when freed (fixed: the
/// dynamic threshold is what keeps the memory).
#[cfg(all(target_os = "linux", target_env = "gnu"))]
const MMAP_THRESHOLD: libc::c_int = 128 * 1024;
/// Free memory at the top of a heap past this is given back at once.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
const TRIM_THRESHOLD: libc::c_int = 128 * 1024;
/// Heaps at most: two, whatever the number of cores (the proxy's heavy work runs one
/// request per core at a time anyway).
#[cfg(all(target_os = "linux", target_env = "gnu"))]
const ARENA_MAX: libc::c_int = 2;

/// Applies the settings above (glibc on Linux; elsewhere the allocator is left as it is).
pub(crate) fn tune() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    for (variable, option, value) in [
        (
            "MALLOC_MMAP_THRESHOLD_",
            libc::M_MMAP_THRESHOLD,
            MMAP_THRESHOLD,
        ),
        (
            "MALLOC_TRIM_THRESHOLD_",
            libc::M_TRIM_THRESHOLD,
            TRIM_THRESHOLD,
        ),
        ("MALLOC_ARENA_MAX", libc::M_ARENA_MAX, ARENA_MAX),
    ] {
        if std::env::var_os(variable).is_none() {
            // SAFETY: mallopt only sets a tunable of the allocator; it is called before any
            // other thread starts, and a value it rejects leaves the default (returns 0).
            unsafe {
                libc::mallopt(option, value);
            }
        }
    }
}
