// SPDX-License-Identifier: Apache-2.0
//! `machine.kubelet.healthz` (a keelson key): the plain-HTTP endpoint that says the kubelet
//! is healthy. Only `http://` to an IP literal or `localhost`, so probing it never needs a
//! name lookup (which would block) and never leaves the node by surprise.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};

use super::scalar::ScalarParser;

/// The kubelet's own default (`--healthz-bind-address` 127.0.0.1, `--healthz-port` 10248).
pub const DEFAULT_HEALTHZ: &str = "http://127.0.0.1:10248/healthz";

/// Longest path accepted (it goes into the request line as is).
const MAX_PATH: usize = 256;

/// Where and what to ask.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct HealthzTarget {
    /// The address to connect to.
    pub addr: SocketAddr,
    /// The `Host` header (`127.0.0.1:10248`).
    pub host: String,
    /// The request target (`/healthz`), printable ASCII without spaces.
    pub path: String,
}

impl HealthzTarget {
    /// `http://HOST[:PORT][/PATH]` with HOST an IPv4 address, `[IPv6]` or `localhost`.
    pub fn parse(url: &str) -> Result<Self, String> {
        let bad = |why: &str| format!("invalid health URL {url:?}: {why}");
        let rest = url.strip_prefix("http://").ok_or_else(|| bad("expected http://"))?;
        let (authority, path) = match rest.find('/') {
            Some(i) => rest.split_at(i),
            None => (rest, "/"),
        };
        if path.len() > MAX_PATH || !path.bytes().all(|b| b.is_ascii_graphic()) {
            return Err(bad("the path must be printable ASCII without spaces, at most 256 bytes"));
        }
        let (host, port) = split_port(authority).ok_or_else(|| bad("bad port"))?;
        let ip: IpAddr = match host {
            "localhost" => IpAddr::V4(Ipv4Addr::LOCALHOST),
            h => h
                .strip_prefix('[')
                .and_then(|h| h.strip_suffix(']'))
                .unwrap_or(h)
                .parse()
                .map_err(|_| bad("the host must be an IP address or localhost"))?,
        };
        Ok(Self { addr: SocketAddr::new(ip, port), host: authority.to_owned(), path: path.into() })
    }
}

/// `host[:port]`, with `[v6]:port`; port 80 when absent.
fn split_port(authority: &str) -> Option<(&str, u16)> {
    let colon = match authority.rfind(':') {
        // The colon of an IPv6 literal is no port separator.
        Some(i) if !authority[i..].contains(']') => Some(i),
        _ => None,
    };
    match colon {
        Some(i) => Some((&authority[..i], authority[i + 1..].parse().ok()?)),
        None => Some((authority, 80)),
    }
}

/// The config scalar: a valid target, kept as written.
pub(crate) struct HealthzUrl;
impl ScalarParser for HealthzUrl {
    type Out = String;
    const EXPECTING: &'static str = "an http:// URL";
    fn parse(s: &str) -> Result<String, String> {
        HealthzTarget::parse(s).map(|_| s.to_owned())
    }
}

/// `machine.kubelet.image`: an image reference as Talos writes it
/// (`ghcr.io/siderolabs/kubelet:v1.35.0`), kept as written. It reaches the kubelet's
/// environment, so only printable ASCII without spaces, at most 512 bytes.
pub(crate) struct KubeletImage;
impl ScalarParser for KubeletImage {
    type Out = String;
    const EXPECTING: &'static str = "an image reference";
    fn parse(s: &str) -> Result<String, String> {
        if s.is_empty() || s.len() > 512 || !s.bytes().all(|b| b.is_ascii_graphic()) {
            return Err("an image reference: 1 to 512 printable ASCII characters, no spaces".into());
        }
        Ok(s.to_owned())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn targets() {
        let t = HealthzTarget::parse(DEFAULT_HEALTHZ).unwrap_or_else(|e| unreachable!("{e}"));
        assert_eq!(t.addr, "127.0.0.1:10248".parse().unwrap_or_else(|e| unreachable!("{e}")));
        assert_eq!((t.host.as_str(), t.path.as_str()), ("127.0.0.1:10248", "/healthz"));
        let t = HealthzTarget::parse("http://[::1]:81").unwrap_or_else(|e| unreachable!("{e}"));
        assert_eq!((t.addr.port(), t.path.as_str()), (81, "/"));
        let t =
            HealthzTarget::parse("http://localhost/h?x=1").unwrap_or_else(|e| unreachable!("{e}"));
        assert_eq!((t.addr.port(), t.path.as_str()), (80, "/h?x=1"));
        for bad in [
            "https://127.0.0.1/",
            "http://kubelet.local:10248/healthz",
            "http://127.0.0.1:99999/",
            "http://127.0.0.1:1/a b",
            "http://127.0.0.1:1/\r\nX: y",
            "http://[::1/",
            "",
        ] {
            assert!(HealthzTarget::parse(bad).is_err(), "{bad:?}");
        }
    }
}
