// SPDX-License-Identifier: Apache-2.0
//! `memcmp` eight bytes at a time, for the static musl binary.
//!
//! musl's `memcmp` compares one byte per loop turn. Every `str` ordering and slice equality in
//! Rust ends in `memcmp` (or `bcmp`, which musl forwards to it), and keelson orders resource IDs
//! that share long prefixes (`static/inet4/10.100.0.1/32/...`) in its store's maps and in every
//! merge: on an apply of 12,000 objects, `memcmp` was a fifth of the process's instructions.
//!
//! On a musl target this crate defines the C symbol `memcmp`; a static link takes it instead
//! of the member of `libc.a`, which is pulled in only for symbols still undefined. Elsewhere
//! (glibc, whose `memcmp` is vectorised) nothing is exported and [`compare`] is only a function.
//! `no_builtins` keeps LLVM from recognising the loop below as a `memcmp` and calling itself.
#![cfg_attr(not(test), no_std)]
#![no_builtins]

/// Compare `n` bytes at `a` and `b` as unsigned bytes, in order: negative, zero or positive
/// as `memcmp(3)`.
///
/// # Safety
/// `a` and `b` must each be valid for reads of `n` bytes.
#[inline]
pub unsafe fn compare(a: *const u8, b: *const u8, n: usize) -> i32 {
    const WORD: usize = core::mem::size_of::<u64>();
    let mut i = 0;
    while n - i >= WORD {
        // SAFETY: i + WORD <= n, and the caller vouches for n bytes at each pointer; unaligned
        // reads need no alignment.
        let (x, y) = unsafe {
            (
                core::ptr::read_unaligned(a.add(i).cast::<u64>()),
                core::ptr::read_unaligned(b.add(i).cast::<u64>()),
            )
        };
        if x != y {
            // Big-endian order makes the first differing byte the most significant.
            return if u64::from_be(x) < u64::from_be(y) { -1 } else { 1 };
        }
        i += WORD;
    }
    while i < n {
        // SAFETY: i < n, within the bytes the caller vouches for.
        let (x, y) = unsafe { (*a.add(i), *b.add(i)) };
        if x != y {
            return i32::from(x) - i32::from(y);
        }
        i += 1;
    }
    0
}

/// The C library's `memcmp`, for the static musl binary.
///
/// # Safety
/// As `memcmp(3)`: `a` and `b` valid for reads of `n` bytes.
#[cfg(all(target_env = "musl", not(test)))]
#[no_mangle]
pub unsafe extern "C" fn memcmp(a: *const u8, b: *const u8, n: usize) -> i32 {
    // SAFETY: the caller's contract is memcmp's, which is compare's.
    unsafe { compare(a, b, n) }
}

#[cfg(test)]
mod tests {
    use super::compare;

    fn cmp(a: &[u8], b: &[u8]) -> i32 {
        assert_eq!(a.len(), b.len());
        // SAFETY: both slices hold len bytes.
        unsafe { compare(a.as_ptr(), b.as_ptr(), a.len()) }
    }

    /// Every length up to three words, a difference at every position, bytes on both sides
    /// of 0x80 (unsigned order), at every alignment: the sign always agrees with slice order.
    #[test]
    fn agrees_with_slice_order() {
        let mut buf_a = [0u8; 64];
        let mut buf_b = [0u8; 64];
        for len in 0..=24 {
            for offset in 0..8 {
                for at in 0..len {
                    for (x, y) in [(0x00, 0x01), (0x7f, 0x80), (0x80, 0xff), (0x41, 0x41)] {
                        for (k, (p, q)) in buf_a.iter_mut().zip(buf_b.iter_mut()).enumerate() {
                            let v = (k as u8).wrapping_mul(37);
                            (*p, *q) = (v, v);
                        }
                        buf_a[offset + at] = x;
                        buf_b[offset + at] = y;
                        let (a, b) = (&buf_a[offset..offset + len], &buf_b[offset..offset + len]);
                        let want = a.cmp(b) as i32;
                        assert_eq!(cmp(a, b).signum(), want, "len {len} offset {offset} at {at}");
                        assert_eq!(cmp(b, a).signum(), -want, "len {len} offset {offset} at {at}");
                    }
                }
            }
        }
        assert_eq!(cmp(&[], &[]), 0);
    }

    /// The first difference decides, whatever follows it.
    #[test]
    fn the_first_difference_decides() {
        let a = b"static/inet4/10.100.0.1/32/zzzzzzzz";
        let b = b"static/inet4/10.100.0.2/32/aaaaaaaa";
        assert!(cmp(a, b) < 0 && cmp(b, a) > 0);
        assert_eq!(cmp(a, a), 0);
    }
}
