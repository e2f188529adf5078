// SPDX-License-Identifier: Apache-2.0
//! The encrypted payload types, package `sidero.discovery.client`: the plaintext of the
//! affiliate `data` blob and of each endpoint blob. Addresses travel in Go's `netip` binary
//! form: 4 bytes for IPv4, 16 for IPv6 (an IPv4-mapped IPv6 address stays 16 bytes).

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

use ipnet::IpNet;

use grpc::protobuf::{
    put_bytes, put_bytes_nz, put_message, put_uint_nz, Message, ProtoError, Reader,
};

/// What a node says about itself.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Affiliate {
    pub node_id: String,
    pub addresses: Vec<IpAddr>,
    pub hostname: String,
    pub nodename: String,
    pub machine_type: String,
    pub operating_system: String,
    pub kubespan: Option<KubeSpan>,
    pub control_plane: Option<ControlPlane>,
}

/// A node's KubeSpan identity and what it routes.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct KubeSpan {
    /// WireGuard public key, standard base64.
    pub public_key: String,
    pub address: Option<Ipv6Addr>,
    pub additional_addresses: Vec<IpNet>,
    /// Field 4: the number this field is assumed to have (see docs/discovery.md).
    pub exclude_advertised_addresses: Vec<IpNet>,
}

/// A control-plane node's API server port.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ControlPlane {
    pub api_server_port: u32,
}

/// `netip` binary form.
pub fn ip_bytes(ip: &IpAddr) -> Vec<u8> {
    match ip {
        IpAddr::V4(a) => a.octets().to_vec(),
        IpAddr::V6(a) => a.octets().to_vec(),
    }
}

/// Parse `netip` binary form; anything but 4 or 16 bytes (zoned or empty addresses) is None.
pub fn ip_from_bytes(b: &[u8]) -> Option<IpAddr> {
    if let Ok(a) = <[u8; 4]>::try_from(b) {
        return Some(IpAddr::V4(Ipv4Addr::from(a)));
    }
    <[u8; 16]>::try_from(b).ok().map(|a| IpAddr::V6(Ipv6Addr::from(a)))
}

fn encode_prefix(p: &IpNet) -> Vec<u8> {
    let mut out = Vec::new();
    put_bytes_nz(&mut out, 1, &ip_bytes(&p.addr()));
    put_uint_nz(&mut out, 2, u64::from(p.prefix_len()));
    out
}

/// An `IPPrefix`; None when the address or length is invalid (the reader skips it).
fn decode_prefix(buf: &[u8]) -> Result<Option<IpNet>, ProtoError> {
    let (mut ip, mut bits) = (None, 0u64);
    let mut r = Reader::new(buf);
    while let Some((f, v)) = r.next_field()? {
        match f {
            1 => ip = ip_from_bytes(v.bytes(f)?),
            2 => bits = v.varint(f)?,
            _ => {}
        }
    }
    Ok(ip.and_then(|ip| IpNet::new(ip, u8::try_from(bits).ok()?).ok()))
}

/// The plaintext of one endpoint blob (`Endpoint{ip, port}`).
pub fn encode_endpoint(ep: &SocketAddr) -> Vec<u8> {
    let mut out = Vec::new();
    put_bytes_nz(&mut out, 1, &ip_bytes(&ep.ip()));
    put_uint_nz(&mut out, 2, u64::from(ep.port()));
    out
}

/// Decode an `Endpoint`; None when its address or port is invalid.
pub fn decode_endpoint(buf: &[u8]) -> Result<Option<SocketAddr>, ProtoError> {
    let (mut ip, mut port) = (None, 0u64);
    let mut r = Reader::new(buf);
    while let Some((f, v)) = r.next_field()? {
        match f {
            1 => ip = ip_from_bytes(v.bytes(f)?),
            2 => port = v.varint(f)?,
            _ => {}
        }
    }
    Ok(ip.and_then(|ip| Some(SocketAddr::new(ip, u16::try_from(port).ok()?))))
}

impl Message for KubeSpan {
    fn encode_to(&self, out: &mut Vec<u8>) {
        put_bytes_nz(out, 1, self.public_key.as_bytes());
        if let Some(a) = &self.address {
            put_bytes(out, 2, &a.octets());
        }
        for p in &self.additional_addresses {
            put_bytes(out, 3, &encode_prefix(p));
        }
        for p in &self.exclude_advertised_addresses {
            put_bytes(out, 4, &encode_prefix(p));
        }
    }

    fn decode(buf: &[u8]) -> Result<Self, ProtoError> {
        let mut m = Self::default();
        let mut r = Reader::new(buf);
        while let Some((f, v)) = r.next_field()? {
            match f {
                1 => m.public_key = v.string(f)?,
                2 => m.address = <[u8; 16]>::try_from(v.bytes(f)?).ok().map(Ipv6Addr::from),
                3 => m.additional_addresses.extend(decode_prefix(v.bytes(f)?)?),
                4 => m.exclude_advertised_addresses.extend(decode_prefix(v.bytes(f)?)?),
                _ => {}
            }
        }
        Ok(m)
    }
}

impl Message for ControlPlane {
    fn encode_to(&self, out: &mut Vec<u8>) {
        put_uint_nz(out, 1, u64::from(self.api_server_port));
    }

    fn decode(buf: &[u8]) -> Result<Self, ProtoError> {
        let mut m = Self::default();
        let mut r = Reader::new(buf);
        while let Some((f, v)) = r.next_field()? {
            if f == 1 {
                // uint32 fields are truncated to 32 bits on decode, as Go does.
                m.api_server_port = v.varint(f)? as u32;
            }
        }
        Ok(m)
    }
}

impl Message for Affiliate {
    fn encode_to(&self, out: &mut Vec<u8>) {
        put_bytes_nz(out, 1, self.node_id.as_bytes());
        for a in &self.addresses {
            put_bytes(out, 2, &ip_bytes(a));
        }
        put_bytes_nz(out, 3, self.hostname.as_bytes());
        put_bytes_nz(out, 4, self.nodename.as_bytes());
        put_bytes_nz(out, 5, self.machine_type.as_bytes());
        put_bytes_nz(out, 6, self.operating_system.as_bytes());
        if let Some(k) = &self.kubespan {
            put_message(out, 7, k);
        }
        if let Some(c) = &self.control_plane {
            put_message(out, 8, c);
        }
    }

    fn decode(buf: &[u8]) -> Result<Self, ProtoError> {
        let mut m = Self::default();
        let mut r = Reader::new(buf);
        while let Some((f, v)) = r.next_field()? {
            match f {
                1 => m.node_id = v.string(f)?,
                // An address that does not parse is dropped, not the whole affiliate.
                2 => m.addresses.extend(ip_from_bytes(v.bytes(f)?)),
                3 => m.hostname = v.string(f)?,
                4 => m.nodename = v.string(f)?,
                5 => m.machine_type = v.string(f)?,
                6 => m.operating_system = v.string(f)?,
                7 => m.kubespan = Some(KubeSpan::decode(v.bytes(f)?)?),
                8 => m.control_plane = Some(ControlPlane::decode(v.bytes(f)?)?),
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
    fn endpoint_golden() {
        let ep: SocketAddr = "10.0.0.2:51820".parse().unwrap();
        assert_eq!(hex(&encode_endpoint(&ep)), "0a040a00000210ec9403");
        assert_eq!(decode_endpoint(&encode_endpoint(&ep)).unwrap(), Some(ep));
        // IPv4-mapped stays 16 bytes; port 0 is omitted.
        let mapped: SocketAddr = "[::ffff:10.0.0.2]:0".parse().unwrap();
        assert_eq!(hex(&encode_endpoint(&mapped)), "0a1000000000000000000000ffff0a000002");
        assert_eq!(decode_endpoint(&[0x0a, 0x03, 1, 2, 3, 0x10, 1]).unwrap(), None);
        assert_eq!(
            decode_endpoint(&[0x0a, 0x04, 1, 2, 3, 4, 0x10, 0x80, 0x80, 0x04]).unwrap(),
            None
        );
    }

    #[test]
    fn affiliate_golden() {
        let a = Affiliate {
            node_id: "n1".into(),
            hostname: "h".into(),
            machine_type: "worker".into(),
            ..Default::default()
        };
        assert_eq!(hex(&a.encode()), "0a026e311a01682a06776f726b6572");
    }

    #[test]
    fn affiliate_round_trip_and_bad_items() {
        let a = Affiliate {
            node_id: "n".into(),
            addresses: vec!["10.0.0.1".parse().unwrap(), "fd00::1".parse().unwrap()],
            hostname: "h.example".into(),
            nodename: "h".into(),
            machine_type: "controlplane".into(),
            operating_system: "keelson (v0.1.0)".into(),
            kubespan: Some(KubeSpan {
                public_key: "k".into(),
                address: Some("fd50::1".parse().unwrap()),
                additional_addresses: vec!["10.244.1.1/24".parse().unwrap()],
                exclude_advertised_addresses: vec!["0.0.0.0/0".parse().unwrap()],
            }),
            control_plane: Some(ControlPlane { api_server_port: 6443 }),
        };
        let b = a.encode();
        assert_eq!(Affiliate::decode(&b).unwrap(), a);
        // An address of 5 bytes and a /33 IPv4 prefix are dropped, the rest kept.
        let mut bad = b.clone();
        bad.extend_from_slice(&[0x12, 0x05, 1, 2, 3, 4, 5]);
        assert_eq!(Affiliate::decode(&bad).unwrap().addresses, a.addresses);
        let k = KubeSpan::decode(&[0x1a, 0x08, 0x0a, 0x04, 1, 2, 3, 4, 0x10, 33]).unwrap();
        assert!(k.additional_addresses.is_empty());
    }
}
