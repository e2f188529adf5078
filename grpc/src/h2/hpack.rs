// SPDX-License-Identifier: Apache-2.0
//! HPACK (RFC 7541): a decoder with the dynamic table and Huffman strings, and an encoder that
//! writes every field as a literal without indexing and without Huffman, which any peer accepts
//! and which keeps no encoder state in step with the peer.

use std::collections::VecDeque;

use super::huffman;

/// One header field: name and value as bytes (HPACK does not promise UTF-8).
pub type Field = (Vec<u8>, Vec<u8>);

/// Why a header block did not decode; always a connection error (COMPRESSION_ERROR).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HpackError {
    #[error("header block truncated")]
    Truncated,
    #[error("integer overflow")]
    Integer,
    #[error("index {0} is not in the tables")]
    Index(usize),
    #[error("table size update to {0} above the limit")]
    TableSize(usize),
    #[error("table size update after a field")]
    LateSizeUpdate,
    #[error("header list larger than {0} bytes")]
    ListTooLarge(usize),
    #[error(transparent)]
    Huffman(#[from] huffman::HuffmanError),
}

/// RFC 7541 Appendix A.
const STATIC: [(&str, &str); 61] = [
    (":authority", ""),
    (":method", "GET"),
    (":method", "POST"),
    (":path", "/"),
    (":path", "/index.html"),
    (":scheme", "http"),
    (":scheme", "https"),
    (":status", "200"),
    (":status", "204"),
    (":status", "206"),
    (":status", "304"),
    (":status", "400"),
    (":status", "404"),
    (":status", "500"),
    ("accept-charset", ""),
    ("accept-encoding", "gzip, deflate"),
    ("accept-language", ""),
    ("accept-ranges", ""),
    ("accept", ""),
    ("access-control-allow-origin", ""),
    ("age", ""),
    ("allow", ""),
    ("authorization", ""),
    ("cache-control", ""),
    ("content-disposition", ""),
    ("content-encoding", ""),
    ("content-language", ""),
    ("content-length", ""),
    ("content-location", ""),
    ("content-range", ""),
    ("content-type", ""),
    ("cookie", ""),
    ("date", ""),
    ("etag", ""),
    ("expect", ""),
    ("expires", ""),
    ("from", ""),
    ("host", ""),
    ("if-match", ""),
    ("if-modified-since", ""),
    ("if-none-match", ""),
    ("if-range", ""),
    ("if-unmodified-since", ""),
    ("last-modified", ""),
    ("link", ""),
    ("location", ""),
    ("max-forwards", ""),
    ("proxy-authenticate", ""),
    ("proxy-authorization", ""),
    ("range", ""),
    ("referer", ""),
    ("refresh", ""),
    ("retry-after", ""),
    ("server", ""),
    ("set-cookie", ""),
    ("strict-transport-security", ""),
    ("transfer-encoding", ""),
    ("user-agent", ""),
    ("vary", ""),
    ("via", ""),
    ("www-authenticate", ""),
];

/// Per-entry overhead in table size accounting.
const ENTRY_OVERHEAD: usize = 32;

/// The decoding side of one connection.
#[derive(Debug)]
pub struct Decoder {
    table: VecDeque<Field>,
    size: usize,
    max_size: usize,
    /// SETTINGS_HEADER_TABLE_SIZE as we advertised it: the most the peer may ask for.
    limit: usize,
}

impl Decoder {
    pub fn new(limit: usize) -> Self {
        Self { table: VecDeque::new(), size: 0, max_size: limit, limit }
    }

    /// The dynamic table's current size in RFC 7541 units.
    pub fn table_size(&self) -> usize {
        self.size
    }

    fn evict(&mut self) {
        while self.size > self.max_size {
            match self.table.pop_back() {
                Some((n, v)) => self.size -= n.len() + v.len() + ENTRY_OVERHEAD,
                None => break,
            }
        }
    }

    fn insert(&mut self, f: Field) {
        let sz = f.0.len() + f.1.len() + ENTRY_OVERHEAD;
        self.size += sz;
        self.table.push_front(f);
        // An entry larger than the table empties it and is not kept (RFC 7541 §4.4).
        self.evict();
    }

    fn get(&self, index: usize) -> Result<Field, HpackError> {
        match index {
            0 => Err(HpackError::Index(0)),
            1..=61 => {
                let (n, v) = STATIC[index - 1];
                Ok((n.as_bytes().to_vec(), v.as_bytes().to_vec()))
            }
            _ => self.table.get(index - 62).cloned().ok_or(HpackError::Index(index)),
        }
    }

    /// Decode one complete header block; the decoded list may not exceed `max_list` bytes
    /// (names + values + 32 per field, as SETTINGS_MAX_HEADER_LIST_SIZE counts).
    pub fn decode(&mut self, block: &[u8], max_list: usize) -> Result<Vec<Field>, HpackError> {
        let mut r = Cursor { buf: block, pos: 0 };
        let mut out = Vec::new();
        let mut list = 0usize;
        while let Some(&b) = r.buf.get(r.pos) {
            let field = if b & 0x80 != 0 {
                let i = r.int(7)?;
                self.get(i)?
            } else if b & 0xc0 == 0x40 {
                let f = self.literal(&mut r, 6)?;
                self.insert(f.clone());
                f
            } else if b & 0xe0 == 0x20 {
                if !out.is_empty() {
                    return Err(HpackError::LateSizeUpdate);
                }
                let n = r.int(5)?;
                if n > self.limit {
                    return Err(HpackError::TableSize(n));
                }
                self.max_size = n;
                self.evict();
                continue;
            } else {
                self.literal(&mut r, 4)?
            };
            list += field.0.len() + field.1.len() + ENTRY_OVERHEAD;
            if list > max_list {
                return Err(HpackError::ListTooLarge(max_list));
            }
            out.push(field);
        }
        Ok(out)
    }

    fn literal(&self, r: &mut Cursor<'_>, prefix: u8) -> Result<Field, HpackError> {
        let i = r.int(prefix)?;
        let name = if i == 0 { r.string()? } else { self.get(i)?.0 };
        Ok((name, r.string()?))
    }
}

struct Cursor<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl Cursor<'_> {
    fn byte(&mut self) -> Result<u8, HpackError> {
        let b = *self.buf.get(self.pos).ok_or(HpackError::Truncated)?;
        self.pos += 1;
        Ok(b)
    }

    /// An integer with an N-bit prefix (RFC 7541 §5.1), bounded to what fits 28 bits of
    /// continuation: far above any valid index, length or table size.
    fn int(&mut self, prefix: u8) -> Result<usize, HpackError> {
        let max = (1usize << prefix) - 1;
        let mut v = usize::from(self.byte()?) & max;
        if v < max {
            return Ok(v);
        }
        for shift in (0..28).step_by(7) {
            let b = self.byte()?;
            v += usize::from(b & 0x7f) << shift;
            if b & 0x80 == 0 {
                return Ok(v);
            }
        }
        Err(HpackError::Integer)
    }

    fn string(&mut self) -> Result<Vec<u8>, HpackError> {
        let huffman = self.buf.get(self.pos).ok_or(HpackError::Truncated)? & 0x80 != 0;
        let n = self.int(7)?;
        let end = self.pos.checked_add(n).ok_or(HpackError::Truncated)?;
        let s = self.buf.get(self.pos..end).ok_or(HpackError::Truncated)?;
        self.pos = end;
        if huffman {
            Ok(huffman::decode(s)?)
        } else {
            Ok(s.to_vec())
        }
    }
}

fn put_int(out: &mut Vec<u8>, first: u8, prefix: u8, mut v: usize) {
    let max = (1usize << prefix) - 1;
    if v < max {
        out.push(first | v as u8);
        return;
    }
    out.push(first | max as u8);
    v -= max;
    while v >= 0x80 {
        out.push((v as u8 & 0x7f) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// Encode fields as literals without indexing, names and values as plain strings.
pub fn encode<N: AsRef<[u8]>, V: AsRef<[u8]>>(fields: &[(N, V)]) -> Vec<u8> {
    let mut out = Vec::new();
    for (n, v) in fields {
        let (n, v) = (n.as_ref(), v.as_ref());
        out.push(0x00);
        put_int(&mut out, 0, 7, n.len());
        out.extend_from_slice(n);
        put_int(&mut out, 0, 7, v.len());
        out.extend_from_slice(v);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn unhex(s: &str) -> Vec<u8> {
        let s: String = s.chars().filter(|c| !c.is_whitespace()).collect();
        (0..s.len()).step_by(2).map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap()).collect()
    }

    fn strs(f: &[Field]) -> Vec<(String, String)> {
        f.iter()
            .map(|(n, v)| (String::from_utf8_lossy(n).into(), String::from_utf8_lossy(v).into()))
            .collect()
    }

    fn pairs(p: &[(&str, &str)]) -> Vec<(String, String)> {
        p.iter().map(|(n, v)| (n.to_string(), v.to_string())).collect()
    }

    /// RFC 7541 C.3 (plain) and C.4 (Huffman): three requests on one connection.
    fn requests(blocks: [&str; 3]) {
        let mut d = Decoder::new(4096);
        let first = [
            (":method", "GET"),
            (":scheme", "http"),
            (":path", "/"),
            (":authority", "www.example.com"),
        ];
        assert_eq!(strs(&d.decode(&unhex(blocks[0]), 1 << 16).unwrap()), pairs(&first));
        assert_eq!(d.table_size(), 57);
        let mut second = first.to_vec();
        second.push(("cache-control", "no-cache"));
        assert_eq!(strs(&d.decode(&unhex(blocks[1]), 1 << 16).unwrap()), pairs(&second));
        assert_eq!(d.table_size(), 110);
        let third = [
            (":method", "GET"),
            (":scheme", "https"),
            (":path", "/index.html"),
            (":authority", "www.example.com"),
            ("custom-key", "custom-value"),
        ];
        assert_eq!(strs(&d.decode(&unhex(blocks[2]), 1 << 16).unwrap()), pairs(&third));
        assert_eq!(d.table_size(), 164);
    }

    #[test]
    fn rfc7541_c3_without_huffman() {
        requests([
            "8286 8441 0f77 7777 2e65 7861 6d70 6c65 2e63 6f6d",
            "8286 84be 5808 6e6f 2d63 6163 6865",
            "8287 85bf 400a 6375 7374 6f6d 2d6b 6579 0c63 7573 746f 6d2d 7661 6c75 65",
        ]);
    }

    #[test]
    fn rfc7541_c4_with_huffman() {
        requests([
            "8286 8441 8cf1 e3c2 e5f2 3a6b a0ab 90f4 ff",
            "8286 84be 5886 a8eb 1064 9cbf",
            "8287 85bf 4088 25a8 49e9 5ba9 7d7f 8925 a849 e95b b8e8 b4bf",
        ]);
    }

    #[test]
    fn eviction_and_size_update() {
        let mut d = Decoder::new(64);
        // Literal with indexing, new name "a"="b" (34 bytes), twice: the second evicts the first.
        let block = unhex("4001 6101 62 4001 6301 64");
        d.decode(&block, 1 << 16).unwrap();
        assert_eq!(d.table_size(), 34);
        assert_eq!(strs(&d.decode(&[0xbe], 1 << 16).unwrap()), pairs(&[("c", "d")]));
        assert_eq!(d.decode(&[0xbf], 1 << 16), Err(HpackError::Index(63)));
        // Size update to 0 empties the table; above the limit or after a field is refused.
        d.decode(&[0x20], 1 << 16).unwrap();
        assert_eq!(d.table_size(), 0);
        assert_eq!(d.decode(&unhex("3f 22"), 1 << 16), Err(HpackError::TableSize(65)));
        assert_eq!(d.decode(&[0x82, 0x20], 1 << 16), Err(HpackError::LateSizeUpdate));
    }

    #[test]
    fn hostile_blocks() {
        let mut d = Decoder::new(4096);
        assert_eq!(d.decode(&[0x80], 100), Err(HpackError::Index(0)));
        assert_eq!(d.decode(&[0x00, 0x05, b'a'], 100), Err(HpackError::Truncated));
        assert_eq!(d.decode(&[0xff, 0xff, 0xff, 0xff, 0xff, 0x7f], 100), Err(HpackError::Integer));
        assert_eq!(d.decode(&[0x82, 0x82, 0x82], 100), Err(HpackError::ListTooLarge(100)));
        // A length far past the block.
        assert_eq!(d.decode(&[0x00, 0x7f, 0xff, 0xff, 0x7f], 100), Err(HpackError::Truncated));
    }

    #[test]
    fn encoder_round_trip() {
        let long = "x".repeat(300);
        let fields = [
            (":path", "/sidero.discovery.server.Cluster/Hello"),
            ("te", "trailers"),
            ("k", long.as_str()),
        ];
        let block = encode(&fields);
        assert_eq!(&block[..2], &[0x00, 0x05]);
        let mut d = Decoder::new(4096);
        assert_eq!(strs(&d.decode(&block, 1 << 16).unwrap()), pairs(&fields));
        assert_eq!(d.table_size(), 0);
    }
}
