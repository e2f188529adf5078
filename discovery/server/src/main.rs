// SPDX-License-Identifier: Apache-2.0
//! keelson-discovery-server: see docs/discovery-server.md.

use std::alloc::{GlobalAlloc, Layout, System};
use std::process::ExitCode;

use discovery_server::config::{self, ConfigError};
use discovery_server::server::Server;

/// The system allocator, zeroing every block it frees (and the old block of a realloc that
/// moves). Responses pass through short-lived buffers (Hello's answer holds the caller's
/// address in the wire form an affiliate record would use); with this, freed copies do not
/// linger in the heap, and the server's memory holds its live state and little else, which is
/// what an audit (or a test that greps the process) can check.
struct ZeroOnFree;

/// Overwrite `len` bytes at `ptr` with volatile stores, which the optimizer keeps even right
/// before the block is freed.
///
/// # Safety
/// `ptr` must be valid for writes of `len` bytes.
unsafe fn zero(ptr: *mut u8, len: usize) {
    // Bytes up to an 8-byte boundary, then whole words, then the tail.
    let head = ptr.align_offset(8).min(len);
    let words = (len - head) / 8;
    for i in 0..head {
        // SAFETY: i < head <= len.
        unsafe { std::ptr::write_volatile(ptr.add(i), 0) };
    }
    for w in 0..words {
        // SAFETY: head + 8 * (w + 1) <= len, and ptr + head is 8-byte aligned.
        unsafe { std::ptr::write_volatile(ptr.add(head + 8 * w).cast::<u64>(), 0) };
    }
    for i in head + 8 * words..len {
        // SAFETY: i < len.
        unsafe { std::ptr::write_volatile(ptr.add(i), 0) };
    }
}

// SAFETY: every call is forwarded to the system allocator with the layout it was given; the
// only addition is zeroing a block this allocator handed out, before it is given back.
unsafe impl GlobalAlloc for ZeroOnFree {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller's contract for `alloc` is passed on unchanged.
        unsafe { System.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: as for `alloc`.
        unsafe { System.alloc_zeroed(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` is a live block of `layout.size()` bytes from this allocator.
        unsafe {
            zero(ptr, layout.size());
            System.dealloc(ptr, layout);
        }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // Moved by hand, so the old block is zeroed before it is freed.
        // SAFETY: the caller guarantees `new_size` is non-zero and, rounded up to the
        // alignment, does not overflow isize: the layout is valid. `ptr` holds
        // `layout.size()` bytes; the copy takes the smaller of the two sizes into a fresh block.
        unsafe {
            let new_layout = Layout::from_size_align_unchecked(new_size, layout.align());
            let new = System.alloc(new_layout);
            if !new.is_null() {
                std::ptr::copy_nonoverlapping(ptr, new, layout.size().min(new_size));
                self.dealloc(ptr, layout);
            }
            new
        }
    }
}

#[global_allocator]
static ALLOCATOR: ZeroOnFree = ZeroOnFree;

/// Many watchers mean many sockets: take the hard limit on descriptors.
fn raise_fd_limit() {
    use nix::sys::resource::{getrlimit, setrlimit, Resource};
    if let Ok((soft, hard)) = getrlimit(Resource::RLIMIT_NOFILE) {
        if soft < hard {
            let _ = setrlimit(Resource::RLIMIT_NOFILE, hard, hard);
        }
    }
}

fn main() -> ExitCode {
    base::stderr_log::init_from_env("KEELSON_LOG");
    let cfg = match config::parse(std::env::args_os().skip(1)) {
        Ok(c) => c,
        Err(ConfigError::Help) => {
            println!("{}", config::USAGE);
            return ExitCode::SUCCESS;
        }
        Err(e) => {
            eprintln!("keelson-discovery-server: {e}\n{}", config::USAGE);
            return ExitCode::from(2);
        }
    };
    raise_fd_limit();
    match Server::new(cfg).and_then(Server::run) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            log::error!("{e}");
            ExitCode::FAILURE
        }
    }
}
