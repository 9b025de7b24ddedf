//! The process's allocator, a build choice of the `cascade` binary (never of a library: the
//! core crate and the proxy allocate through whatever the program that links them chose).
//! Measured side by side with `scripts/load.py`, 200 clients × 20 s of 430 kB bodies
//! (docs/benchmarks.md, "Hardening").
//!
//! - feature `jemalloc` (the default): jemalloc, freed pages given back at once by a
//!   background thread, two arenas (`JEMALLOC_CONF` below). Beside the tuned glibc, with the
//!   proxy's bounded queues: the same peak, a lower RSS after the load, more requests served.
//! - feature `mimalloc`: mimalloc, its defaults. Measured the highest peak (545 MB against
//!   366 MB) and after-load RSS (370 MB against 160 MB) of the three; kept to compare.
//! - neither: glibc's malloc, tuned at start ([`tune`]). By default glibc serves a large
//!   block (a 430 kB request body) from `mmap` only until the first such block is freed;
//!   then it raises its threshold up to 32 MiB and serves the next ones from its heaps,
//!   where they fragment and stay. It also makes up to 8 heaps ("arenas") per core, each
//!   keeping its own free memory. The three settings below took the after-load RSS from
//!   506 MB to 217 MB at the same throughput. An environment variable of the same name
//!   (`MALLOC_ARENA_MAX`, ...) set by the operator wins: it is left as it is.
//!
//! The `#[global_allocator]` item lives here, in the binary's own module tree: a library
//! (the core crate, the proxy, a Python module) never chooses the allocator.

#[cfg(all(feature = "mimalloc", feature = "jemalloc"))]
compile_error!("cascade-cli: choose one allocator, feature `mimalloc` or `jemalloc`");

#[cfg(feature = "mimalloc")]
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[cfg(all(feature = "jemalloc", not(feature = "mimalloc")))]
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

/// jemalloc's settings, read at its first allocation (the crate prefixes its symbols, hence
/// the name). Freed pages go back to the system after a second (`dirty_decay_ms:1000`; the
/// default 10 s would still hold the load's memory when the after-load figure is taken),
/// through a background thread that also purges idle arenas; two arenas, as `ARENA_MAX` for
/// glibc. Measured against the default decay and jemalloc's arenas per core: peak 360 →
/// 275 MB, after the load 86 → 74 MB, more requests served. The decay was 0 (given back at
/// once) until every request was seen to fault its pages in afresh: with 1 s, side by side
/// (`scripts/load.py`, 200 clients × 20 s, chat / responses) 18–21% more requests at 32–35%
/// less CPU each, the peak 185 → 215–224 MB, 10 s after the same 27 MB; one client's 490 kB
/// requests (issue 27) 0.8–1.1 ms added at p50 instead of 1.9–3.4. `_RJEM_MALLOC_CONF` in
/// the environment overrides any of them (`dirty_decay_ms:0` for the earlier behaviour).
#[cfg(all(feature = "jemalloc", not(feature = "mimalloc")))]
#[unsafe(export_name = "_rjem_malloc_conf")]
static JEMALLOC_CONF: &[u8; 70] =
    b"background_thread:true,dirty_decay_ms:1000,muzzy_decay_ms:0,narenas:2\0";

/// The settings of glibc's malloc, where it is the allocator.
#[cfg(all(
    target_os = "linux",
    target_env = "gnu",
    not(feature = "mimalloc"),
    not(feature = "jemalloc")
))]
mod glibc {
    /// Blocks from this size are mapped on their own and unmapped when freed (fixed: the
    /// dynamic threshold is what keeps the memory).
    const MMAP_THRESHOLD: libc::c_int = 128 * 1024;
    /// Free memory at the top of a heap past this is given back at once.
    const TRIM_THRESHOLD: libc::c_int = 128 * 1024;
    /// Heaps at most: two, whatever the number of cores (the proxy's heavy work runs one
    /// request per core at a time anyway).
    const ARENA_MAX: libc::c_int = 2;

    /// Applies the settings above, each unless the environment sets it.
    pub(super) fn tune() {
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
                // SAFETY: mallopt only sets a tunable of the allocator; it is called before
                // any other thread starts, and a value it rejects leaves the default
                // (returns 0).
                unsafe {
                    libc::mallopt(option, value);
                }
            }
        }
    }
}

/// Gives the calling thread's cached free blocks back to the allocator, which returns the
/// pages they leave empty to the system (jemalloc's thread cache; glibc and mimalloc keep
/// theirs). Run by each worker of the proxy's runtime when it runs out of work: jemalloc
/// trims a thread's cache only as that thread allocates, so a worker idle after a load kept
/// up to a few MB each (200 clients × 430 kB, docs/benchmarks.md, "Hardening"), pinning
/// partly used pages with them. An empty cache costs a little: the next allocations of the
/// thread refill it from its arena.
pub(crate) fn release_thread_cache() {
    #[cfg(all(feature = "jemalloc", not(feature = "mimalloc")))]
    // SAFETY: `thread.tcache.flush` reads and writes nothing (null pointers, length 0); it
    // acts on the calling thread's cache only, and fails harmlessly (an error code, ignored)
    // where the thread has none.
    unsafe {
        tikv_jemalloc_sys::mallctl(
            c"thread.tcache.flush".as_ptr(),
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            0,
        );
    }
}

/// For a command that ends when its one job is done (every command but `proxy`): nothing is
/// given back to the system before the exit, which returns it all. Purging freed pages, as
/// the proxy's settings above do, was ~10% of a one-shot `cascade compact`'s samples on a
/// 1.2 MB request (`madvise` and the page faults that follow, measured with a decay of 0).
/// Set here, after the background thread started: 23.0 → 21.2 ms (median of 21, same
/// binary, idle, docs/benchmarks.md §1's concat-1.3mb at 32K); the same settings in the
/// environment before start gave 24.2 → 19.8 ms. `_RJEM_MALLOC_CONF` set by the operator
/// wins.
pub(crate) fn keep_freed_pages() {
    #[cfg(all(feature = "jemalloc", not(feature = "mimalloc")))]
    if std::env::var_os("_RJEM_MALLOC_CONF").is_none() {
        let mut never: libc::ssize_t = -1;
        let mut off = false;
        for (name, value, size) in [
            (
                c"arena.4096.dirty_decay_ms",
                (&raw mut never).cast::<libc::c_void>(),
                std::mem::size_of::<libc::ssize_t>(),
            ),
            (
                c"arena.4096.muzzy_decay_ms",
                (&raw mut never).cast::<libc::c_void>(),
                std::mem::size_of::<libc::ssize_t>(),
            ),
            (
                c"background_thread",
                (&raw mut off).cast::<libc::c_void>(),
                std::mem::size_of::<bool>(),
            ),
        ] {
            // SAFETY: each name takes a value of exactly the type and size passed (jemalloc's
            // `ssize_t` decays, `bool` background_thread; arena 4096 is every arena); nothing
            // is read back (null old pointer). A setting jemalloc refuses returns an error
            // code, ignored: the defaults then stay.
            unsafe {
                tikv_jemalloc_sys::mallctl(
                    name.as_ptr(),
                    std::ptr::null_mut(),
                    std::ptr::null_mut(),
                    value,
                    size,
                );
            }
        }
    }
}

/// Applies the allocator's settings made at start (glibc's; jemalloc reads its own,
/// mimalloc keeps its defaults).
pub(crate) fn tune() {
    #[cfg(all(
        target_os = "linux",
        target_env = "gnu",
        not(feature = "mimalloc"),
        not(feature = "jemalloc")
    ))]
    glibc::tune();
}
