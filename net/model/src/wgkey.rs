// SPDX-License-Identifier: Apache-2.0
//! WireGuard keys: 32-byte Curve25519 keys in the base64 form `wg(8)` and Talos use. One type
//! for private, preshared and public keys; it never prints its bytes (`Debug` and `Serialize`
//! give `<redacted>`), so a private or preshared key cannot reach a log line or `keelson get`.
//! Public keys are kept as validated base64 strings where they are shown or used as resource
//! IDs, and converted to [`Key`] only at the netlink edge.
//!
//! The base64 is the `base64` crate's (already linked through `pem`), configured for the
//! form keys take: standard alphabet, padded (RFC 4648 §4), 32 bytes in 44 characters. Key generation and the
//! X25519 public key live in `net::wireguard_keys` (they need the kernel's random source and a
//! curve crate, which this pure crate does not take).

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// Length of a WireGuard key in bytes.
pub const KEY_LEN: usize = 32;

/// Length of a key in base64 (32 bytes, padded).
pub const KEY_BASE64_LEN: usize = 44;

/// A 32-byte WireGuard key (private, public or preshared).
///
/// `Debug` and `Serialize` never show the bytes: a private or preshared key must not reach a
/// log line or `keelson get` (which prints `<redacted>`, as Talos does). It deserializes from
/// base64.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Key(pub [u8; KEY_LEN]);

impl fmt::Debug for Key {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Key(<redacted>)")
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

impl FromStr for Key {
    type Err = KeyError;
    fn from_str(s: &str) -> Result<Self, KeyError> {
        Key::from_base64(s)
    }
}

impl Serialize for Key {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(REDACTED)
    }
}

impl<'de> Deserialize<'de> for Key {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        // The error names the position, never the text: it may be a secret.
        Key::from_base64(&s).map_err(serde::de::Error::custom)
    }
}

/// What a secret key serializes as.
pub const REDACTED: &str = "<redacted>";

/// Deserialize an optional key where `<redacted>` (what a shown resource carries in place of
/// the key) reads back as no key, so `keelson get -o yaml` output can be read back. A bad key
/// is reported with `field` (the YAML name) and never echoed.
pub fn opt_or_redacted<'de, D: Deserializer<'de>>(
    d: D,
    field: &str,
) -> Result<Option<Key>, D::Error> {
    match Option::<String>::deserialize(d)? {
        None => Ok(None),
        Some(s) if s == REDACTED => Ok(None),
        Some(s) => Key::from_base64(&s)
            .map(Some)
            .map_err(|e| serde::de::Error::custom(format!("{field}: {e}"))),
    }
}

/// Standard alphabet, padding written and required, and (as `wg(8)` does) the unused low bits
/// of the last character not checked.
const ENGINE: base64::engine::GeneralPurpose = base64::engine::GeneralPurpose::new(
    &base64::alphabet::STANDARD,
    base64::engine::GeneralPurposeConfig::new()
        .with_decode_padding_mode(base64::engine::DecodePaddingMode::RequireCanonical)
        .with_decode_allow_trailing_bits(true),
);

/// Standard base64 with padding (RFC 4648 §4).
pub fn base64_encode(data: &[u8]) -> String {
    use base64::Engine as _;
    ENGINE.encode(data)
}

/// Decode standard padded base64 (RFC 4648 §4); the length must be a multiple of 4 and
/// padding may only end the input.
pub fn base64_decode(s: &str) -> Result<Vec<u8>, KeyError> {
    use base64::Engine as _;
    if !s.len().is_multiple_of(4) {
        return Err(KeyError::Length(s.len()));
    }
    ENGINE.decode(s).map_err(|e| match e {
        base64::DecodeError::InvalidByte(at, _) => KeyError::Character(at),
        base64::DecodeError::InvalidLastSymbol { offset, .. } => KeyError::Character(offset),
        // Too much padding: the position of the first `=`.
        base64::DecodeError::InvalidLength(_) | base64::DecodeError::InvalidPadding => {
            KeyError::Character(s.find('=').unwrap_or(s.len()))
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

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
    fn keys_round_trip_and_never_serialize_in_clear() {
        let k = Key([0xab; 32]);
        let text = k.to_base64();
        assert_eq!(text.len(), KEY_BASE64_LEN);
        assert_eq!(text.parse::<Key>(), Ok(k));
        assert_eq!(serde_json::to_string(&k).unwrap(), "\"<redacted>\"");
        assert_eq!(serde_json::from_str::<Key>(&format!("{text:?}")).unwrap(), k);
        let err = serde_json::from_str::<Key>("\"Zm9v\"").unwrap_err().to_string();
        assert!(err.contains("44 base64 characters, this one has 4"), "{err}");
        assert!(Key::ZERO.is_zero() && !k.is_zero());
    }

    #[test]
    fn bad_base64_is_reported_with_its_position() {
        assert_eq!(base64_decode("Zm9"), Err(KeyError::Length(3)));
        assert_eq!(base64_decode("Zm9v!g=="), Err(KeyError::Character(4)));
        assert_eq!(base64_decode("Zg==Zm9v"), Err(KeyError::Character(2)));
        assert_eq!(base64_decode("Z==="), Err(KeyError::Character(1)));
        assert_eq!(Key::from_base64("Zm9v"), Err(KeyError::Length(4)));
        let shown = format!("{:?}", Key([7; 32]));
        assert!(shown.contains("<redacted>") && !shown.contains(&Key([7; 32]).to_base64()));
    }

    #[test]
    fn unused_low_bits_are_not_checked_as_wg_does() {
        // `Zh==`: `h` carries four bits no byte uses; wg(8) and the keys already written take it.
        assert_eq!(base64_decode("Zh==").unwrap(), b"f");
        let key = "B".repeat(43) + "=";
        assert!(Key::from_base64(&key).is_ok());
    }
}
