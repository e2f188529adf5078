// SPDX-License-Identifier: Apache-2.0
//! WireGuard keys: 32-byte Curve25519 keys in the base64 form `wg(8)` and Talos use, private
//! key generation from random bytes, and the public key of a private key (X25519 with the
//! base point, RFC 7748 §6.1).
//!
//! The base64 codec is ours (standard alphabet, padded, RFC 4648 §4): keys are always 32
//! bytes, 44 characters, so a general-purpose crate would add nothing.

use std::fmt;

/// Length of a WireGuard key in bytes.
pub const KEY_LEN: usize = 32;

/// Length of a key in base64 (32 bytes, padded).
pub const KEY_BASE64_LEN: usize = 44;

/// A 32-byte WireGuard key (private, public or preshared).
///
/// `Debug` never shows the bytes: a private or preshared key must not reach a log line.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Key(pub [u8; KEY_LEN]);

impl fmt::Debug for Key {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Key(..)")
    }
}

/// A key that is not 44 characters of padded base64 encoding 32 bytes.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KeyError {
    /// Wrong length.
    #[error("a key is {KEY_BASE64_LEN} base64 characters, this one has {0}")]
    Length(usize),
    /// A character outside the base64 alphabet, or misplaced padding.
    #[error("invalid base64 character at position {0}")]
    Character(usize),
}

impl Key {
    /// The all-zero key: what the kernel reports for "no preshared key", and what clears one.
    pub const ZERO: Key = Key([0; KEY_LEN]);

    /// Parse a base64 key.
    pub fn from_base64(s: &str) -> Result<Self, KeyError> {
        let bytes = base64_decode(s)?;
        let key: [u8; KEY_LEN] = bytes.try_into().map_err(|_| KeyError::Length(s.len()))?;
        Ok(Key(key))
    }

    /// The key in base64.
    pub fn to_base64(&self) -> String {
        base64_encode(&self.0)
    }

    /// True for the all-zero key.
    pub fn is_zero(&self) -> bool {
        self.0 == [0; KEY_LEN]
    }
}

/// A private key from 32 random bytes (from `getrandom(2)`), clamped as RFC 7748 §5 says so
/// that every tool derives the same public key from it (wg(8) stores keys clamped too).
pub fn generate_private_key(seed: [u8; KEY_LEN]) -> Key {
    let mut k = seed;
    k[0] &= 248;
    k[31] &= 127;
    k[31] |= 64;
    Key(k)
}

/// A new private key from the kernel's random source (`getrandom(2)`, blocking only until the
/// pool is initialized at boot).
pub fn random_private_key() -> std::io::Result<Key> {
    let mut seed = [0u8; KEY_LEN];
    let mut filled = 0;
    while filled < KEY_LEN {
        let rest = seed.get_mut(filled..).unwrap_or_default();
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
    Ok(generate_private_key(seed))
}

/// The public key of a private key: X25519(private, 9).
pub fn public_key(private: &Key) -> Key {
    Key(x25519_dalek::x25519(private.0, x25519_dalek::X25519_BASEPOINT_BYTES))
}

const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/// Standard base64 with padding (RFC 4648 §4).
pub fn base64_encode(data: &[u8]) -> String {
    let mut out = String::with_capacity(data.len().div_ceil(3) * 4);
    for chunk in data.chunks(3) {
        let b = [chunk.first(), chunk.get(1), chunk.get(2)].map(|b| b.copied().unwrap_or(0));
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for (i, shift) in [18u32, 12, 6, 0].into_iter().enumerate() {
            if i <= chunk.len() {
                let sextet = ((n >> shift) & 63) as usize;
                out.push(char::from(ALPHABET.get(sextet).copied().unwrap_or(b'=')));
            } else {
                out.push('=');
            }
        }
    }
    out
}

fn sextet(c: u8) -> Option<u32> {
    let v = match c {
        b'A'..=b'Z' => c - b'A',
        b'a'..=b'z' => c - b'a' + 26,
        b'0'..=b'9' => c - b'0' + 52,
        b'+' => 62,
        b'/' => 63,
        _ => return None,
    };
    Some(u32::from(v))
}

/// Decode standard padded base64 (RFC 4648 §4); the length must be a multiple of 4 and
/// padding may only end the input.
pub fn base64_decode(s: &str) -> Result<Vec<u8>, KeyError> {
    let bytes = s.as_bytes();
    if !bytes.len().is_multiple_of(4) {
        return Err(KeyError::Length(bytes.len()));
    }
    let mut out = Vec::with_capacity(bytes.len() / 4 * 3);
    for (q, quad) in bytes.chunks(4).enumerate() {
        let last = (q + 1) * 4 == bytes.len();
        let pad = quad.iter().rev().take_while(|&&c| c == b'=').count();
        if pad > 2 || (pad > 0 && !last) {
            return Err(KeyError::Character(q * 4 + 4 - pad));
        }
        let mut n = 0u32;
        for (i, &c) in quad.iter().enumerate() {
            let v =
                if i >= 4 - pad { 0 } else { sextet(c).ok_or(KeyError::Character(q * 4 + i))? };
            n = (n << 6) | v;
        }
        let decoded = [(n >> 16) as u8, (n >> 8) as u8, n as u8];
        out.extend_from_slice(decoded.get(..3 - pad).unwrap_or_default());
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hex(s: &str) -> [u8; 32] {
        let v: Vec<u8> = (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
            .collect();
        v.try_into().unwrap()
    }

    #[test]
    fn rfc7748_section_6_1_key_pairs() {
        // Alice's and Bob's private keys and public keys from RFC 7748 §6.1.
        for (private, public) in [
            (
                "77076d0a7318a57d3c16c17251b26645df4c2f87ebc0992ab177fba51db92c2a",
                "8520f0098930a754748b7ddcb43ef75a0dbf3a0d26381af4eba4a98eaa9b4e6a",
            ),
            (
                "5dab087e624a8a4b79e17f8b83800ee66f3bb1292618b6fd1c2f8b27ff88e0eb",
                "de9edb7d7b7dc1b4d35b61c2ece435373f8343c85b78674dadfc7e146f882b4f",
            ),
        ] {
            assert_eq!(public_key(&Key(hex(private))), Key(hex(public)));
        }
    }

    #[test]
    fn rfc7748_section_5_2_scalar_mult() {
        // The first test vector of RFC 7748 §5.2 (arbitrary u, not the base point).
        let k = hex("a546e36bf0527c9d3b16154b82465edd62144c0ac1fc5a18506a2244ba449ac4");
        let u = hex("e6db6867583030db3594c1a424b15f7c726624ec26b3353b10a903a6d0ab1c4c");
        let out = hex("c3da55379de9c6908e94ea4df28d084f32eccf03491c71f754b4075577a28552");
        assert_eq!(x25519_dalek::x25519(k, u), out);
    }

    #[test]
    fn generated_keys_are_clamped_and_round_trip() {
        let k = generate_private_key([0xff; 32]);
        assert_eq!(k.0[0] & 7, 0);
        assert_eq!(k.0[31] & 0xc0, 0x40);
        let text = k.to_base64();
        assert_eq!(text.len(), KEY_BASE64_LEN);
        assert_eq!(Key::from_base64(&text), Ok(k));
        // Clamping does not change the public key (X25519 clamps internally too).
        assert_eq!(public_key(&k), public_key(&Key([0xff; 32])));
        let r = random_private_key().unwrap();
        assert_ne!(r, random_private_key().unwrap());
    }

    #[test]
    fn known_wg_key_pair() {
        // Checked with `echo <private> | wg pubkey` (wireguard-tools).
        let private = Key::from_base64("QL6fbE1Z6Jsa7jc2sHm2wFTiVYiSc3B68ITZRdy8HmM=").unwrap();
        assert_eq!(
            public_key(&private).to_base64(),
            "3DRhoQZ2whUyOIJ8N0axCy3XufPYzG7vLKOpT2lxSx4="
        );
    }

    #[test]
    fn base64_rfc4648_vectors() {
        for (raw, enc) in [
            ("", ""),
            ("f", "Zg=="),
            ("fo", "Zm8="),
            ("foo", "Zm9v"),
            ("foob", "Zm9vYg=="),
            ("fooba", "Zm9vYmE="),
            ("foobar", "Zm9vYmFy"),
        ] {
            assert_eq!(base64_encode(raw.as_bytes()), enc);
            assert_eq!(base64_decode(enc).unwrap(), raw.as_bytes());
        }
        assert_eq!(base64_encode(&[0xfb, 0xff]), "+/8=");
    }

    #[test]
    fn bad_base64_is_reported_with_its_position() {
        assert_eq!(base64_decode("Zm9"), Err(KeyError::Length(3)));
        assert_eq!(base64_decode("Zm9v!g=="), Err(KeyError::Character(4)));
        assert_eq!(base64_decode("Zg==Zm9v"), Err(KeyError::Character(2)));
        assert_eq!(base64_decode("Z==="), Err(KeyError::Character(1)));
        assert_eq!(Key::from_base64("Zm9v"), Err(KeyError::Length(4)));
        assert!(format!("{:?}", Key([7; 32])).contains(".."));
    }
}
