// SPDX-License-Identifier: Apache-2.0
//! The node's identity, as Talos keeps it: 32 random bytes written base62 as the NodeID,
//! made once and kept in the state (`node-identity.yaml`, `nodeId: ...`), and
//! `/etc/machine-id` as the hex of the identity's first 16 bytes. With a state disk the
//! identity survives reboots; without one it is new at every boot.
//!
//! The base62 here is the plain big-number form (digits, then upper, then lower case); the
//! NodeID has Talos's size and alphabet, not necessarily the same text for the same bytes.

use std::path::Path;

/// The file in the state directory.
pub const FILE: &str = "node-identity.yaml";
/// Bytes of randomness in an identity.
pub const SIZE: usize = 32;
const ALPHABET: &[u8; 62] = b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
/// Longest NodeID text accepted (32 bytes take 43 digits).
const MAX_TEXT: usize = 64;

/// Big-endian bytes as base62 (leading zero bytes as leading `0` digits).
pub fn encode(bytes: &[u8]) -> String {
    let mut digits: Vec<u8> = Vec::new();
    let mut num = bytes.to_vec();
    while num.iter().any(|b| *b != 0) {
        let mut rem = 0u32;
        for b in &mut num {
            let cur = rem * 256 + u32::from(*b);
            *b = (cur / 62) as u8;
            rem = cur % 62;
        }
        digits.push(ALPHABET[rem as usize]);
    }
    digits.extend(bytes.iter().take_while(|b| **b == 0).map(|_| b'0'));
    digits.reverse();
    String::from_utf8_lossy(&digits).into_owned()
}

/// Base62 back to `SIZE` bytes; `None` for anything else.
pub fn decode(text: &str) -> Option<[u8; SIZE]> {
    if text.is_empty() || text.len() > MAX_TEXT {
        return None;
    }
    let mut out = [0u8; SIZE];
    for c in text.bytes() {
        let mut carry = ALPHABET.iter().position(|a| *a == c)? as u32;
        for b in out.iter_mut().rev() {
            let cur = u32::from(*b) * 62 + carry;
            *b = cur as u8;
            carry = cur >> 8;
        }
        if carry != 0 {
            return None;
        }
    }
    Some(out)
}

/// The `/etc/machine-id` line of an identity.
pub fn machine_id(raw: &[u8; SIZE]) -> String {
    raw[..16].iter().map(|b| format!("{b:02x}")).collect()
}

/// The identity in the file's text, if it holds a valid one.
pub fn parse(text: &str) -> Option<(String, [u8; SIZE])> {
    let id = text.lines().find_map(|l| l.trim().strip_prefix("nodeId:"))?.trim();
    let id = id.trim_matches('"');
    decode(id).map(|raw| (encode(&raw), raw))
}

/// The file's text for an identity.
pub fn render(node_id: &str) -> String {
    format!("nodeId: {node_id}\n")
}

/// Read the identity from `dir`, or make one and write it there; then write the machine ID
/// to `machine_id_path`. Returns the NodeID and whether it is new.
pub fn establish(dir: &Path, machine_id_path: &Path) -> std::io::Result<(String, bool)> {
    let file = dir.join(FILE);
    let existing = net::bounded::read_text(&file, 4096).ok().and_then(|t| parse(&t));
    let (id, raw, new) = match existing {
        Some((id, raw)) => (id, raw, false),
        None => {
            let raw = net::random::random::<SIZE>()?;
            let id = encode(&raw);
            super::files::write_file(&file, render(&id).as_bytes())?;
            (id, raw, true)
        }
    };
    if let Some(parent) = machine_id_path.parent() {
        std::fs::create_dir_all(parent)?;
    }
    std::fs::write(machine_id_path, format!("{}\n", machine_id(&raw)))?;
    Ok((id, new))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn base62_round_trips() {
        let mut raw = [0u8; SIZE];
        for (i, b) in raw.iter_mut().enumerate() {
            *b = (i as u8).wrapping_mul(97).wrapping_add(13);
        }
        let text = encode(&raw);
        assert!(text.len() <= 43 && text.bytes().all(|c| c.is_ascii_alphanumeric()));
        assert_eq!(decode(&text), Some(raw));
        assert_eq!(encode(&[0, 0, 1]), "001");
        assert_eq!(decode(&"z".repeat(44)), None, "overflows 32 bytes");
        assert_eq!(decode("ab-c"), None);
    }

    #[test]
    fn the_file_and_machine_id() {
        let raw = [0xABu8; SIZE];
        let text = render(&encode(&raw));
        assert_eq!(parse(&text), Some((encode(&raw), raw)));
        assert_eq!(parse("nodeId: \"x!\"\n"), None);
        assert_eq!(machine_id(&raw), "ab".repeat(16));
    }

    #[test]
    fn established_once_then_read_back() {
        let dir = std::env::temp_dir().join(format!("keelson-identity-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let mid = dir.join("etc/machine-id");
        let (first, new) = establish(&dir, &mid).unwrap();
        assert!(new);
        let (second, new) = establish(&dir, &mid).unwrap();
        assert!(!new);
        assert_eq!(first, second);
        let m = std::fs::read_to_string(&mid).unwrap();
        assert_eq!(m.trim().len(), 32);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
