// SPDX-License-Identifier: Apache-2.0
//! Protobuf (proto3) wire primitives: the field reader, the writers, and `Duration`. Writers
//! put fields in the order called with minimal varints, so messages built on them in ascending
//! field order match Go's `proto.Marshal` byte for byte; the reader skips unknown fields
//! (groups to a bounded depth) and rejects truncated or malformed input. The caller bounds the
//! input size (the gRPC layer caps each message).

/// Why a message did not decode.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProtoError {
    #[error("truncated message")]
    Truncated,
    #[error("varint longer than 10 bytes")]
    VarintOverflow,
    #[error("field number 0")]
    FieldZero,
    #[error("invalid wire type {0}")]
    WireType(u8),
    #[error("field {0} has the wrong wire type")]
    FieldType(u32),
    #[error("groups nested too deep")]
    TooDeep,
    #[error("unmatched end of group")]
    EndGroup,
    #[error("field {0} is not UTF-8")]
    Utf8(u32),
}

/// How deep nested groups may go while skipping them.
const MAX_GROUP_DEPTH: usize = 32;

/// One decoded field value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Value<'a> {
    Varint(u64),
    Fixed64(u64),
    Bytes(&'a [u8]),
    Fixed32(u32),
}

impl<'a> Value<'a> {
    pub fn bytes(self, field: u32) -> Result<&'a [u8], ProtoError> {
        match self {
            Value::Bytes(b) => Ok(b),
            _ => Err(ProtoError::FieldType(field)),
        }
    }

    pub fn varint(self, field: u32) -> Result<u64, ProtoError> {
        match self {
            Value::Varint(v) => Ok(v),
            _ => Err(ProtoError::FieldType(field)),
        }
    }

    pub fn string(self, field: u32) -> Result<String, ProtoError> {
        let b = self.bytes(field)?;
        String::from_utf8(b.to_vec()).map_err(|_| ProtoError::Utf8(field))
    }
}

/// Iterates over the fields of one message, skipping groups.
#[derive(Debug)]
pub struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    pub fn new(buf: &'a [u8]) -> Self {
        Self { buf, pos: 0 }
    }

    fn varint(&mut self) -> Result<u64, ProtoError> {
        let mut v = 0u64;
        for i in 0..10 {
            let b = *self.buf.get(self.pos).ok_or(ProtoError::Truncated)?;
            self.pos += 1;
            v |= u64::from(b & 0x7f) << (7 * i);
            if b & 0x80 == 0 {
                return Ok(v);
            }
        }
        Err(ProtoError::VarintOverflow)
    }

    fn take(&mut self, n: usize) -> Result<&'a [u8], ProtoError> {
        let end = self.pos.checked_add(n).ok_or(ProtoError::Truncated)?;
        let s = self.buf.get(self.pos..end).ok_or(ProtoError::Truncated)?;
        self.pos = end;
        Ok(s)
    }

    fn key(&mut self) -> Result<(u32, u8), ProtoError> {
        let k = self.varint()?;
        let field = u32::try_from(k >> 3).map_err(|_| ProtoError::FieldZero)?;
        if field == 0 {
            return Err(ProtoError::FieldZero);
        }
        Ok((field, (k & 7) as u8))
    }

    fn value(&mut self, wire: u8) -> Result<Option<Value<'a>>, ProtoError> {
        Ok(Some(match wire {
            0 => Value::Varint(self.varint()?),
            1 => {
                let b = self.take(8)?;
                Value::Fixed64(u64::from_le_bytes(b.try_into().map_err(|_| ProtoError::Truncated)?))
            }
            2 => {
                let n = usize::try_from(self.varint()?).map_err(|_| ProtoError::Truncated)?;
                Value::Bytes(self.take(n)?)
            }
            5 => {
                let b = self.take(4)?;
                Value::Fixed32(u32::from_le_bytes(b.try_into().map_err(|_| ProtoError::Truncated)?))
            }
            3 | 4 => return Ok(None),
            w => return Err(ProtoError::WireType(w)),
        }))
    }

    /// Skip a group whose start key (field number `field`) was just read.
    fn skip_group(&mut self, field: u32) -> Result<(), ProtoError> {
        let mut open = vec![field];
        while let Some(&top) = open.last() {
            let (f, wire) = self.key()?;
            match wire {
                3 => {
                    if open.len() >= MAX_GROUP_DEPTH {
                        return Err(ProtoError::TooDeep);
                    }
                    open.push(f);
                }
                4 if f == top => {
                    open.pop();
                }
                4 => return Err(ProtoError::EndGroup),
                w => {
                    self.value(w)?;
                }
            }
        }
        Ok(())
    }

    /// The next (field number, value), or None at the end of the message. Groups are skipped.
    pub fn next_field(&mut self) -> Result<Option<(u32, Value<'a>)>, ProtoError> {
        loop {
            if self.pos >= self.buf.len() {
                return Ok(None);
            }
            let (field, wire) = self.key()?;
            match wire {
                3 => self.skip_group(field)?,
                4 => return Err(ProtoError::EndGroup),
                w => {
                    if let Some(v) = self.value(w)? {
                        return Ok(Some((field, v)));
                    }
                }
            }
        }
    }
}

/// Append a base-128 varint.
pub fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn put_key(out: &mut Vec<u8>, field: u32, wire: u8) {
    put_varint(out, (u64::from(field) << 3) | u64::from(wire));
}

/// A length-delimited field, written even when empty (repeated elements, present messages,
/// proto3 `optional` bytes).
pub fn put_bytes(out: &mut Vec<u8>, field: u32, b: &[u8]) {
    put_key(out, field, 2);
    put_varint(out, b.len() as u64);
    out.extend_from_slice(b);
}

/// A singular proto3 string/bytes field: omitted when empty.
pub fn put_bytes_nz(out: &mut Vec<u8>, field: u32, b: &[u8]) {
    if !b.is_empty() {
        put_bytes(out, field, b);
    }
}

/// A singular proto3 varint field (uint32, uint64, int64, bool): omitted when zero.
pub fn put_uint_nz(out: &mut Vec<u8>, field: u32, v: u64) {
    if v != 0 {
        put_key(out, field, 0);
        put_varint(out, v);
    }
}

/// A protobuf message this crate encodes and decodes.
pub trait Message: Sized {
    fn encode_to(&self, out: &mut Vec<u8>);
    fn decode(buf: &[u8]) -> Result<Self, ProtoError>;

    fn encode(&self) -> Vec<u8> {
        let mut out = Vec::new();
        self.encode_to(&mut out);
        out
    }
}

/// A sub-message field, always written when present.
pub fn put_message<M: Message>(out: &mut Vec<u8>, field: u32, m: &M) {
    put_bytes(out, field, &m.encode());
}

/// `google.protobuf.Duration` (also the shape of `google.protobuf.Timestamp`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Duration {
    pub seconds: i64,
    pub nanos: i32,
}

/// `google.protobuf.Timestamp`: the same fields as Duration.
pub type Timestamp = Duration;

impl Duration {
    pub fn from_std(d: std::time::Duration) -> Self {
        Self {
            seconds: i64::try_from(d.as_secs()).unwrap_or(i64::MAX),
            nanos: d.subsec_nanos() as i32,
        }
    }

    /// Negative durations become zero.
    pub fn to_std(self) -> std::time::Duration {
        if self.seconds < 0 || (self.seconds == 0 && self.nanos < 0) {
            return std::time::Duration::ZERO;
        }
        std::time::Duration::new(self.seconds as u64, self.nanos.clamp(0, 999_999_999) as u32)
    }
}

impl Message for Duration {
    fn encode_to(&self, out: &mut Vec<u8>) {
        // int64/int32 negatives are sign-extended to ten-byte varints, as Go writes them.
        put_uint_nz(out, 1, self.seconds as u64);
        put_uint_nz(out, 2, i64::from(self.nanos) as u64);
    }

    fn decode(buf: &[u8]) -> Result<Self, ProtoError> {
        let mut d = Duration::default();
        let mut r = Reader::new(buf);
        while let Some((f, v)) = r.next_field()? {
            match f {
                1 => d.seconds = v.varint(f)? as i64,
                2 => d.nanos = v.varint(f)? as i32,
                _ => {}
            }
        }
        Ok(d)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hex(b: &[u8]) -> String {
        b.iter().map(|x| format!("{x:02x}")).collect()
    }

    #[test]
    fn duration_golden() {
        assert_eq!(hex(&Duration { seconds: 1800, nanos: 0 }.encode()), "08880e");
        assert_eq!(Duration::decode(&[0x08, 0x88, 0x0e]).unwrap().seconds, 1800);
        let neg = Duration { seconds: -1, nanos: -5 };
        assert_eq!(neg.encode().len(), 22);
        assert_eq!(Duration::decode(&neg.encode()).unwrap(), neg);
    }

    #[test]
    fn skips_unknown_fields_and_groups() {
        // field 9 varint, field 10 fixed32, field 11 group holding field 12 group, then field 1.
        let mut b = vec![0x48, 0x01, 0x55, 1, 2, 3, 4, 0x5b, 0x63, 0x08, 0x05, 0x64, 0x5c];
        b.extend_from_slice(&[0x08, 0x05]);
        assert_eq!(Duration::decode(&b).unwrap().seconds, 5);
    }

    #[test]
    fn rejects_malformed() {
        assert_eq!(Duration::decode(&[0x08]), Err(ProtoError::Truncated));
        assert_eq!(Duration::decode(&[0x0a, 0x05, 1]), Err(ProtoError::Truncated));
        assert_eq!(Duration::decode(&[0x00, 0x00]), Err(ProtoError::FieldZero));
        assert_eq!(Duration::decode(&[0x0f]), Err(ProtoError::WireType(7)));
        assert_eq!(Duration::decode(&[0x5b, 0x6c]), Err(ProtoError::EndGroup));
        assert_eq!(Duration::decode(&[0x0c]), Err(ProtoError::EndGroup));
        assert_eq!(Duration::decode(&[0xff; 11]), Err(ProtoError::VarintOverflow));
        // An unterminated group and a nest deeper than the bound.
        assert_eq!(Duration::decode(&[0x5b]), Err(ProtoError::Truncated));
        assert_eq!(Duration::decode(&[0x5b; 40]), Err(ProtoError::TooDeep));
        assert_eq!(Duration::decode(&[0x0a, 0x00]), Err(ProtoError::FieldType(1)));
    }
}
