// SPDX-License-Identifier: Apache-2.0
//! The server API, package `sidero.discovery.server`: what travels in the clear between a
//! client and the service (cluster and affiliate IDs, opaque blobs).

use grpc::protobuf::{
    put_bytes, put_bytes_nz, put_message, put_uint_nz, Duration, Message, ProtoError, Reader,
};

/// A stored affiliate as List and Watch return it: `data` and `endpoints` are ciphertext.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ServerAffiliate {
    pub id: String,
    pub data: Vec<u8>,
    pub endpoints: Vec<Vec<u8>>,
}

impl Message for ServerAffiliate {
    fn encode_to(&self, out: &mut Vec<u8>) {
        put_bytes_nz(out, 1, self.id.as_bytes());
        put_bytes_nz(out, 2, &self.data);
        for e in &self.endpoints {
            put_bytes(out, 3, e);
        }
    }

    fn decode(buf: &[u8]) -> Result<Self, ProtoError> {
        let mut m = Self::default();
        let mut r = Reader::new(buf);
        while let Some((f, v)) = r.next_field()? {
            match f {
                1 => m.id = v.string(f)?,
                2 => m.data = v.bytes(f)?.to_vec(),
                3 => m.endpoints.push(v.bytes(f)?.to_vec()),
                _ => {}
            }
        }
        Ok(m)
    }
}

/// Messages whose fields are strings only, in field order.
macro_rules! string_message {
    ($(#[$doc:meta])* $name:ident { $($field:ident = $num:literal),* }) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Default, PartialEq, Eq)]
        pub struct $name {
            $(pub $field: String,)*
        }

        impl Message for $name {
            fn encode_to(&self, out: &mut Vec<u8>) {
                $(put_bytes_nz(out, $num, self.$field.as_bytes());)*
            }

            fn decode(buf: &[u8]) -> Result<Self, ProtoError> {
                let mut m = Self::default();
                let mut r = Reader::new(buf);
                while let Some((f, v)) = r.next_field()? {
                    match f {
                        $($num => m.$field = v.string(f)?,)*
                        _ => {}
                    }
                }
                Ok(m)
            }
        }
    };
}

string_message!(
    /// `Hello`'s request.
    HelloRequest { cluster_id = 1, client_version = 2 }
);
string_message!(
    /// Where a server sends its clients instead (`host:port`).
    RedirectMessage { endpoint = 1 }
);
string_message!(
    /// `AffiliateDelete`'s request.
    AffiliateDeleteRequest { cluster_id = 1, affiliate_id = 2 }
);
string_message!(
    /// `List`'s request.
    ListRequest { cluster_id = 1 }
);
string_message!(
    /// `Watch`'s request.
    WatchRequest { cluster_id = 1 }
);

/// An empty response (`AffiliateUpdateResponse`, `AffiliateDeleteResponse`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Empty;

impl Message for Empty {
    fn encode_to(&self, _: &mut Vec<u8>) {}

    fn decode(buf: &[u8]) -> Result<Self, ProtoError> {
        let mut r = Reader::new(buf);
        while r.next_field()?.is_some() {}
        Ok(Empty)
    }
}

/// `Hello`'s response.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HelloResponse {
    pub redirect: Option<RedirectMessage>,
    /// The caller's address as the server saw it: 4 or 16 bytes, or empty.
    pub client_ip: Vec<u8>,
}

impl Message for HelloResponse {
    fn encode_to(&self, out: &mut Vec<u8>) {
        if let Some(r) = &self.redirect {
            put_message(out, 1, r);
        }
        put_bytes_nz(out, 2, &self.client_ip);
    }

    fn decode(buf: &[u8]) -> Result<Self, ProtoError> {
        let mut m = Self::default();
        let mut r = Reader::new(buf);
        while let Some((f, v)) = r.next_field()? {
            match f {
                1 => m.redirect = Some(RedirectMessage::decode(v.bytes(f)?)?),
                2 => m.client_ip = v.bytes(f)?.to_vec(),
                _ => {}
            }
        }
        Ok(m)
    }
}

/// `AffiliateUpdate`'s request: new data (if any) and endpoints to merge, for `ttl`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AffiliateUpdateRequest {
    pub cluster_id: String,
    pub affiliate_id: String,
    /// proto3 `optional`: written whenever present, even empty.
    pub affiliate_data: Option<Vec<u8>>,
    pub affiliate_endpoints: Vec<Vec<u8>>,
    pub ttl: Option<Duration>,
}

impl Message for AffiliateUpdateRequest {
    fn encode_to(&self, out: &mut Vec<u8>) {
        put_bytes_nz(out, 1, self.cluster_id.as_bytes());
        put_bytes_nz(out, 2, self.affiliate_id.as_bytes());
        if let Some(d) = &self.affiliate_data {
            put_bytes(out, 3, d);
        }
        for e in &self.affiliate_endpoints {
            put_bytes(out, 4, e);
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
                1 => m.cluster_id = v.string(f)?,
                2 => m.affiliate_id = v.string(f)?,
                3 => m.affiliate_data = Some(v.bytes(f)?.to_vec()),
                4 => m.affiliate_endpoints.push(v.bytes(f)?.to_vec()),
                5 => m.ttl = Some(Duration::decode(v.bytes(f)?)?),
                _ => {}
            }
        }
        Ok(m)
    }
}

/// Affiliate lists: `ListResponse` (field 1) and `WatchResponse` (plus `deleted`, field 2).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WatchResponse {
    pub affiliates: Vec<ServerAffiliate>,
    /// Every affiliate in this message was removed (only `id` is set).
    pub deleted: bool,
}

/// `ListResponse` has the same field 1; its encoding is a WatchResponse with `deleted` false.
pub type ListResponse = WatchResponse;

impl Message for WatchResponse {
    fn encode_to(&self, out: &mut Vec<u8>) {
        for a in &self.affiliates {
            put_message(out, 1, a);
        }
        put_uint_nz(out, 2, u64::from(self.deleted));
    }

    fn decode(buf: &[u8]) -> Result<Self, ProtoError> {
        let mut m = Self::default();
        let mut r = Reader::new(buf);
        while let Some((f, v)) = r.next_field()? {
            match f {
                1 => m.affiliates.push(ServerAffiliate::decode(v.bytes(f)?)?),
                2 => m.deleted = v.varint(f)? != 0,
                _ => {}
            }
        }
        Ok(m)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hex(b: &[u8]) -> String {
        b.iter().map(|x| format!("{x:02x}")).collect()
    }

    #[test]
    fn hello_request_golden() {
        let m = HelloRequest { cluster_id: "abc".into(), client_version: "v1.12.4".into() };
        assert_eq!(hex(&m.encode()), "0a03616263120776312e31322e34");
        assert_eq!(HelloRequest::decode(&m.encode()).unwrap(), m);
    }

    #[test]
    fn update_request_presence() {
        let mut m = AffiliateUpdateRequest {
            cluster_id: "c".into(),
            affiliate_id: "a".into(),
            affiliate_data: Some(vec![]),
            affiliate_endpoints: vec![vec![1, 2]],
            ttl: Some(Duration { seconds: 1800, nanos: 0 }),
        };
        // An empty optional is still written; the Duration is a sub-message.
        assert_eq!(hex(&m.encode()), "0a01631201611a0022020102 2a0308880e".replace(' ', ""));
        assert_eq!(AffiliateUpdateRequest::decode(&m.encode()).unwrap(), m);
        m.affiliate_data = None;
        assert_eq!(hex(&m.encode()), "0a0163120161220201022a0308880e");
    }

    #[test]
    fn hello_response_and_watch() {
        let h = HelloResponse {
            redirect: Some(RedirectMessage { endpoint: "new.example.com:443".into() }),
            client_ip: vec![127, 0, 0, 1],
        };
        assert_eq!(HelloResponse::decode(&h.encode()).unwrap(), h);
        // An empty snapshot is a zero-length message.
        assert_eq!(WatchResponse::decode(&[]).unwrap(), WatchResponse::default());
        let w = WatchResponse {
            affiliates: vec![ServerAffiliate { id: "af1".into(), ..Default::default() }],
            deleted: true,
        };
        assert_eq!(hex(&w.encode()), "0a050a036166311001");
        assert_eq!(WatchResponse::decode(&w.encode()).unwrap(), w);
    }
}
