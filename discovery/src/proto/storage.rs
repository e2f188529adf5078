// SPDX-License-Identifier: Apache-2.0
//! The server's snapshot file (`sidero.discovery.storage`): a whole state as one
//! `StateSnapshot`, so that a snapshot written by one server loads in another.

use grpc::protobuf::{put_bytes_nz, put_message, Duration, Message, ProtoError, Reader, Timestamp};

/// Every cluster.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StateSnapshot {
    pub clusters: Vec<ClusterSnapshot>,
}

/// One cluster and its affiliates.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ClusterSnapshot {
    pub id: String,
    pub affiliates: Vec<AffiliateSnapshot>,
}

/// One affiliate. `expiration` is the older absolute form; newer snapshots store `ttl`, the
/// time left.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AffiliateSnapshot {
    pub id: String,
    pub expiration: Option<Timestamp>,
    pub data: Vec<u8>,
    pub endpoints: Vec<EndpointSnapshot>,
    pub ttl: Option<Duration>,
}

/// One endpoint blob and its own lifetime.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EndpointSnapshot {
    pub expiration: Option<Timestamp>,
    pub data: Vec<u8>,
    pub ttl: Option<Duration>,
}

impl Message for StateSnapshot {
    fn encode_to(&self, out: &mut Vec<u8>) {
        for c in &self.clusters {
            put_message(out, 1, c);
        }
    }

    fn decode(buf: &[u8]) -> Result<Self, ProtoError> {
        let mut m = Self::default();
        let mut r = Reader::new(buf);
        while let Some((f, v)) = r.next_field()? {
            if f == 1 {
                m.clusters.push(ClusterSnapshot::decode(v.bytes(f)?)?);
            }
        }
        Ok(m)
    }
}

impl Message for ClusterSnapshot {
    fn encode_to(&self, out: &mut Vec<u8>) {
        put_bytes_nz(out, 1, self.id.as_bytes());
        for a in &self.affiliates {
            put_message(out, 2, a);
        }
    }

    fn decode(buf: &[u8]) -> Result<Self, ProtoError> {
        let mut m = Self::default();
        let mut r = Reader::new(buf);
        while let Some((f, v)) = r.next_field()? {
            match f {
                1 => m.id = v.string(f)?,
                2 => m.affiliates.push(AffiliateSnapshot::decode(v.bytes(f)?)?),
                _ => {}
            }
        }
        Ok(m)
    }
}

impl Message for AffiliateSnapshot {
    fn encode_to(&self, out: &mut Vec<u8>) {
        put_bytes_nz(out, 1, self.id.as_bytes());
        if let Some(t) = &self.expiration {
            put_message(out, 2, t);
        }
        put_bytes_nz(out, 3, &self.data);
        for e in &self.endpoints {
            put_message(out, 4, e);
        }
        if let Some(t) = &self.ttl {
            put_message(out, 5, t);
        }
    }

    fn decode(buf: &[u8]) -> Result<Self, ProtoError> {
        let mut m = Self::default();
        let mut r = Reader::new(buf);
        while let Some((f, v)) = r.next_field()? {
            match f {
                1 => m.id = v.string(f)?,
                2 => m.expiration = Some(Timestamp::decode(v.bytes(f)?)?),
                3 => m.data = v.bytes(f)?.to_vec(),
                4 => m.endpoints.push(EndpointSnapshot::decode(v.bytes(f)?)?),
                5 => m.ttl = Some(Duration::decode(v.bytes(f)?)?),
                _ => {}
            }
        }
        Ok(m)
    }
}

impl Message for EndpointSnapshot {
    fn encode_to(&self, out: &mut Vec<u8>) {
        if let Some(t) = &self.expiration {
            put_message(out, 1, t);
        }
        put_bytes_nz(out, 2, &self.data);
        if let Some(t) = &self.ttl {
            put_message(out, 3, t);
        }
    }

    fn decode(buf: &[u8]) -> Result<Self, ProtoError> {
        let mut m = Self::default();
        let mut r = Reader::new(buf);
        while let Some((f, v)) = r.next_field()? {
            match f {
                1 => m.expiration = Some(Timestamp::decode(v.bytes(f)?)?),
                2 => m.data = v.bytes(f)?.to_vec(),
                3 => m.ttl = Some(Duration::decode(v.bytes(f)?)?),
                _ => {}
            }
        }
        Ok(m)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip() {
        let s = StateSnapshot {
            clusters: vec![ClusterSnapshot {
                id: "c".into(),
                affiliates: vec![AffiliateSnapshot {
                    id: "a".into(),
                    expiration: None,
                    data: vec![1, 2, 3],
                    endpoints: vec![EndpointSnapshot {
                        expiration: Some(Timestamp { seconds: 5, nanos: 0 }),
                        data: vec![9; 16],
                        ttl: Some(Duration { seconds: 60, nanos: 0 }),
                    }],
                    ttl: Some(Duration { seconds: 1800, nanos: 0 }),
                }],
            }],
        };
        let b = s.encode();
        assert_eq!(StateSnapshot::decode(&b).unwrap(), s);
        // Field order is ascending: id(1), data(3), endpoints(4), ttl(5).
        let a = s.clusters[0].affiliates[0].encode();
        assert_eq!(&a[..2], &[0x0a, 0x01]);
        assert_eq!(a[3], 0x1a);
        assert_eq!(a[8], 0x22);
    }
}
