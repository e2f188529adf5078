// SPDX-License-Identifier: Apache-2.0
//! Hex text as configs write DUIDs and client identifiers (`00:03:00:01:...` or `000300...`).

/// Hex (with optional `:` separators) to bytes; `None` when it is not whole bytes of hex.
pub fn decode_hex(hex: &str) -> Option<Vec<u8>> {
    let hex: Vec<u8> = hex.bytes().filter(|b| *b != b':').collect();
    if !hex.len().is_multiple_of(2) {
        return None;
    }
    hex.chunks(2)
        .map(|pair| {
            let s = std::str::from_utf8(pair).ok()?;
            u8::from_str_radix(s, 16).ok()
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hex_with_and_without_colons() {
        assert_eq!(decode_hex("00:03:0a"), Some(vec![0, 3, 10]));
        assert_eq!(decode_hex("00030A"), Some(vec![0, 3, 10]));
        assert_eq!(decode_hex("0003a"), None);
        assert_eq!(decode_hex("zz"), None);
        assert_eq!(decode_hex(""), Some(vec![]));
    }
}
