// SPDX-License-Identifier: Apache-2.0
//! The static binary's allocator: mimalloc instead of musl's `malloc`, which takes a lock and
//! walks its metadata on every call (docs/memory.md has the profile and the fork review).

use std::ffi::{c_int, c_long};

use mimalloc::MiMalloc;

#[global_allocator]
static GLOBAL: MiMalloc = MiMalloc;

// Option numbers of the bundled mimalloc 2 (`mi_option_e` in its `include/mimalloc.h`; the
// crate versions are pinned in Cargo.toml because these are positions in that enum).
const ARENA_EAGER_COMMIT: c_int = 4;
const PURGE_DELAY: c_int = 15;

extern "C" {
    fn mi_option_set(option: c_int, value: c_long);
}

/// Commit arena memory as it is used, and return freed pages at once: by default mimalloc
/// commits whole arenas up front, which transparent huge pages set to `always` turn into
/// resident 2 MiB pages. Runs before `main`, ahead of the first allocation that reserves an
/// arena.
extern "C" fn set_options() {
    // SAFETY: plain setters of mimalloc's option table; no allocation, any thread.
    unsafe {
        mi_option_set(ARENA_EAGER_COMMIT, 0);
        mi_option_set(PURGE_DELAY, 0);
    }
}

#[used]
#[link_section = ".init_array"]
static SET_OPTIONS: extern "C" fn() = set_options;
