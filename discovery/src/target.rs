// SPDX-License-Identifier: Apache-2.0
//! Where the service is: from Talos's endpoint URL, or from a redirect's `host:port`.

use std::net::Ipv6Addr;

/// Why an endpoint URL was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TargetError {
    #[error("scheme must be http://, https:// or grpc://")]
    Scheme,
    #[error("missing host")]
    NoHost,
    #[error("invalid host {0:?}")]
    Host(String),
    #[error("invalid port {0:?}")]
    Port(String),
    #[error("user information in the URL is not supported")]
    UserInfo,
}

/// A service endpoint and whether to use TLS.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    pub host: String,
    pub port: u16,
    pub tls: bool,
}

impl Target {
    /// `http://` is plaintext (port 80 by default); `https://` and `grpc://` use TLS (443).
    /// Talos's default is `https://discovery.talos.dev/`. The path is ignored.
    pub fn from_url(url: &str) -> Result<Target, TargetError> {
        let (scheme, rest) = url.split_once("://").ok_or(TargetError::Scheme)?;
        let tls = match scheme.to_ascii_lowercase().as_str() {
            "http" => false,
            "https" | "grpc" => true,
            _ => return Err(TargetError::Scheme),
        };
        let authority = rest.split(['/', '?', '#']).next().unwrap_or_default();
        if authority.contains('@') {
            return Err(TargetError::UserInfo);
        }
        Self::parse_authority(authority, if tls { 443 } else { 80 }, tls)
    }

    /// A redirect's `host:port` (port 443 when missing), keeping the TLS mode.
    pub fn from_endpoint(endpoint: &str, tls: bool) -> Result<Target, TargetError> {
        Self::parse_authority(endpoint, 443, tls)
    }

    fn parse_authority(a: &str, default_port: u16, tls: bool) -> Result<Target, TargetError> {
        if a.is_empty() {
            return Err(TargetError::NoHost);
        }
        let (host, port) = if let Some(rest) = a.strip_prefix('[') {
            let (h, after) = rest.split_once(']').ok_or_else(|| TargetError::Host(a.into()))?;
            if h.parse::<Ipv6Addr>().is_err() {
                return Err(TargetError::Host(h.into()));
            }
            match after {
                "" => (h, None),
                p => (h, Some(p.strip_prefix(':').ok_or_else(|| TargetError::Port(p.into()))?)),
            }
        } else {
            match a.split_once(':') {
                Some((h, p)) => (h, Some(p)),
                None => (a, None),
            }
        };
        if host.is_empty() {
            return Err(TargetError::NoHost);
        }
        let valid = |c: char| c.is_ascii_alphanumeric() || matches!(c, '-' | '.' | '_' | ':');
        if host.len() > 253 || !host.chars().all(valid) {
            return Err(TargetError::Host(host.into()));
        }
        let port = match port {
            None => default_port,
            Some(p) => match p.parse::<u16>() {
                Ok(n) if n > 0 => n,
                _ => return Err(TargetError::Port(p.into())),
            },
        };
        Ok(Target { host: host.to_ascii_lowercase(), port, tls })
    }

    /// `host:port`, brackets around an IPv6 address: the HTTP/2 `:authority`.
    pub fn authority(&self) -> String {
        if self.host.contains(':') {
            format!("[{}]:{}", self.host, self.port)
        } else {
            format!("{}:{}", self.host, self.port)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(host: &str, port: u16, tls: bool) -> Target {
        Target { host: host.into(), port, tls }
    }

    #[test]
    fn urls() {
        assert_eq!(
            Target::from_url("https://discovery.talos.dev/"),
            Ok(t("discovery.talos.dev", 443, true))
        );
        assert_eq!(Target::from_url("http://127.0.0.1:3000"), Ok(t("127.0.0.1", 3000, false)));
        assert_eq!(Target::from_url("http://example.com/x"), Ok(t("example.com", 80, false)));
        assert_eq!(Target::from_url("grpc://[fd00::1]:8443/"), Ok(t("fd00::1", 8443, true)));
        assert_eq!(Target::from_url("grpc://[fd00::1]").unwrap().authority(), "[fd00::1]:443");
        assert_eq!(Target::from_url("ftp://x"), Err(TargetError::Scheme));
        assert_eq!(Target::from_url("discovery.talos.dev"), Err(TargetError::Scheme));
        assert_eq!(Target::from_url("https://"), Err(TargetError::NoHost));
        assert_eq!(Target::from_url("https://a:0"), Err(TargetError::Port("0".into())));
        assert_eq!(Target::from_url("https://a:99999"), Err(TargetError::Port("99999".into())));
        assert_eq!(Target::from_url("https://u@a"), Err(TargetError::UserInfo));
        assert!(matches!(Target::from_url("https://a b"), Err(TargetError::Host(_))));
        assert!(matches!(Target::from_url("https://[zz]:1"), Err(TargetError::Host(_))));
    }

    #[test]
    fn redirects() {
        assert_eq!(
            Target::from_endpoint("new.example.com:443", true),
            Ok(t("new.example.com", 443, true))
        );
        assert_eq!(Target::from_endpoint("127.0.0.1:3001", false), Ok(t("127.0.0.1", 3001, false)));
        assert_eq!(Target::from_endpoint("h", false), Ok(t("h", 443, false)));
    }
}
