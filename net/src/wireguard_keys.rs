// SPDX-License-Identifier: Apache-2.0
//! WireGuard key operations that need more than the pure model: private key generation from
//! the kernel's random source, and the public key of a private key (X25519 with the base point,
//! RFC 7748 §6.1). The key type and its base64 form are [`model::wgkey`].

pub use model::wgkey::{base64_decode, base64_encode, Key, KeyError, KEY_BASE64_LEN, KEY_LEN};

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
    base::random::random().map(generate_private_key)
}

/// The public key of a private key: X25519(private, 9).
pub fn public_key(private: &Key) -> Key {
    Key(x25519_dalek::x25519(private.0, x25519_dalek::X25519_BASEPOINT_BYTES))
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
}
