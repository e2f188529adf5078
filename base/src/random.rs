// SPDX-License-Identifier: Apache-2.0
//! Bytes from the kernel's random source (`getrandom(2)`, blocking only until the pool is
//! initialized at boot), for keys and identities.

/// `N` bytes from the kernel's random source.
pub fn random<const N: usize>() -> std::io::Result<[u8; N]> {
    let mut buf = [0u8; N];
    let mut filled = 0;
    while filled < N {
        let rest = buf.get_mut(filled..).unwrap_or_default();
        // SAFETY: the pointer and length describe `rest`, a live writable slice, for the whole
        // call; getrandom(2) writes at most `rest.len()` bytes into it.
        let n = unsafe { libc::getrandom(rest.as_mut_ptr().cast(), rest.len(), 0) };
        match usize::try_from(n) {
            Ok(n) => filled += n,
            Err(_) => {
                let e = std::io::Error::last_os_error();
                if e.kind() != std::io::ErrorKind::Interrupted {
                    return Err(e);
                }
            }
        }
    }
    Ok(buf)
}

#[cfg(test)]
mod tests {
    #[test]
    fn two_draws_differ() {
        let (a, b) = (super::random::<32>().unwrap(), super::random::<32>().unwrap());
        assert_ne!(a, b);
    }
}
