// SPDX-License-Identifier: Apache-2.0
//! NTP extension fields (RFC 7822 §3) and the four NTS uses them (RFC 8915 §5): a 16-bit type,
//! a 16-bit length counting the 4-byte head and the padding to a 4-byte boundary, the value.

/// Unique Identifier (RFC 8915 §5.3).
pub const UNIQUE_ID: u16 = 0x0104;
/// NTS Cookie (§5.4).
pub const COOKIE: u16 = 0x0204;
/// NTS Cookie Placeholder (§5.5).
pub const PLACEHOLDER: u16 = 0x0304;
/// NTS Authenticator and Encrypted Extension Fields (§5.6).
pub const AUTHENTICATOR: u16 = 0x0404;

fn padded(len: usize) -> usize {
    len.div_ceil(4) * 4
}

/// Append a field with `value`, zero-padded to a word boundary.
pub fn push(out: &mut Vec<u8>, kind: u16, value: &[u8]) {
    let total = 4 + padded(value.len());
    out.extend_from_slice(&kind.to_be_bytes());
    // Values keelson writes are cookies (bounded by `MAX_COOKIE_LEN`) and a few dozen bytes.
    out.extend_from_slice(&(total.min(usize::from(u16::MAX)) as u16).to_be_bytes());
    out.extend_from_slice(value);
    out.resize(out.len() + padded(value.len()) - value.len(), 0);
}

/// Append a placeholder as long as a cookie of `len` bytes: zeros (§5.5).
pub fn push_zeros(out: &mut Vec<u8>, kind: u16, len: usize) {
    let total = 4 + padded(len);
    out.extend_from_slice(&kind.to_be_bytes());
    out.extend_from_slice(&(total.min(usize::from(u16::MAX)) as u16).to_be_bytes());
    out.resize(out.len() + padded(len), 0);
}

/// One field: where it starts in the packet, its type and its value (padding included).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct Field<'a> {
    /// The offset of its head.
    pub at: usize,
    /// Its type.
    pub kind: u16,
    /// Its value with any padding.
    pub value: &'a [u8],
}

/// The fields of `bytes` (from `start`), in order; stops at the first one whose length is
/// not a word multiple of at least 4 or runs past the end (the rest is not read).
pub fn iter(bytes: &[u8], start: usize) -> impl Iterator<Item = Field<'_>> {
    let mut at = start;
    std::iter::from_fn(move || {
        let head = bytes.get(at..at + 4)?;
        let kind = u16::from_be_bytes([head[0], head[1]]);
        let len = usize::from(u16::from_be_bytes([head[2], head[3]]));
        if len < 4 || len % 4 != 0 {
            return None;
        }
        let value = bytes.get(at + 4..at + len)?;
        let field = Field { at, kind, value };
        at += len;
        Some(field)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_pad_to_words_and_read_back() {
        let mut out = Vec::new();
        push(&mut out, UNIQUE_ID, &[7; 32]);
        push(&mut out, COOKIE, &[1, 2, 3, 4, 5]);
        push_zeros(&mut out, PLACEHOLDER, 5);
        assert_eq!(out[..4], [0x01, 0x04, 0x00, 36]);
        assert_eq!(out[36..48], [0x02, 0x04, 0x00, 12, 1, 2, 3, 4, 5, 0, 0, 0]);
        assert_eq!(out[48..], [0x03, 0x04, 0x00, 12, 0, 0, 0, 0, 0, 0, 0, 0]);
        let fields: Vec<_> = iter(&out, 0).collect();
        assert_eq!(fields.len(), 3);
        assert_eq!((fields[1].at, fields[1].kind, fields[1].value.len()), (36, COOKIE, 8));
        // A length that is not a word multiple, or runs past the end, stops the walk.
        let mut bad = out.clone();
        bad[3] = 37;
        assert_eq!(iter(&bad, 0).count(), 0);
        assert_eq!(iter(&out[..50], 0).count(), 2);
    }
}
