// SPDX-License-Identifier: Apache-2.0
//! The URL forms `talos.config=` takes: `http://`, `https://` and `file://` (a plain path is a
//! file too). Parsed strictly, because the text comes from a command line anyone with the
//! boot loader may edit and from `Location` headers a server chooses: printable ASCII only, no
//! credentials, a bounded length. What is logged of a URL leaves its query out, where
//! provisioning servers put tokens.

use std::fmt;

/// The longest URL accepted, after variables are substituted (the kernel's command line is
/// shorter; a redirect may be longer).
pub const MAX_URL: usize = 8192;

/// Why a URL was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum UrlError {
    /// Longer than [`MAX_URL`].
    #[error("longer than {MAX_URL} bytes")]
    TooLong,
    /// A byte outside printable ASCII (a space, a control character, UTF-8).
    #[error("byte {0} is not printable ASCII (percent-encode it)")]
    Byte(usize),
    /// Neither an absolute path nor `scheme://...` (Talos's `metal-iso` label, a relative path).
    #[error("neither an absolute path nor an http://, https:// or file:// URL")]
    NotUrl,
    /// A scheme other than http, https or file.
    #[error("scheme {0:?} is not supported (http, https or file)")]
    Scheme(String),
    /// `user:password@` in the authority.
    #[error("credentials in the URL are not supported")]
    Credentials,
    /// No host, or one that is not a name or an address.
    #[error("invalid host")]
    Host,
    /// A port that is not a number in 1..=65535.
    #[error("invalid port")]
    Port,
    /// A relative redirect target that is not an absolute path.
    #[error("redirect target is neither an absolute URL nor an absolute path")]
    Relative,
}

/// How the config is reached.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scheme {
    /// Plain HTTP/1.1.
    Http,
    /// HTTP/1.1 over TLS 1.3.
    Https,
}

impl Scheme {
    fn default_port(self) -> u16 {
        match self {
            Self::Http => 80,
            Self::Https => 443,
        }
    }

    fn name(self) -> &'static str {
        match self {
            Self::Http => "http",
            Self::Https => "https",
        }
    }
}

/// A parsed `http(s)://` URL.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Url {
    /// http or https.
    pub scheme: Scheme,
    /// A name, or an address (IPv6 without its brackets).
    pub host: String,
    /// The port, the scheme's default when none was written.
    pub port: u16,
    /// Path and query as sent in the request line, starting with `/`; no fragment.
    pub target: String,
}

/// What `talos.config=` names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    /// A file in the image (a plain path or `file://`).
    File(String),
    /// A server.
    Http(Url),
}

/// Check the bytes every URL form shares: bounded, printable ASCII.
fn check_bytes(s: &str) -> Result<(), UrlError> {
    if s.len() > MAX_URL {
        return Err(UrlError::TooLong);
    }
    match s.bytes().position(|b| !(0x21..=0x7e).contains(&b)) {
        Some(i) => Err(UrlError::Byte(i)),
        None => Ok(()),
    }
}

/// Parse `talos.config=`'s value (after variables were substituted).
pub fn parse_source(s: &str) -> Result<Source, UrlError> {
    check_bytes(s)?;
    if s.starts_with('/') {
        return Ok(Source::File(s.to_owned()));
    }
    let (scheme, _) = s.split_once("://").ok_or(UrlError::NotUrl)?;
    if scheme.eq_ignore_ascii_case("file") {
        let rest = &s[scheme.len() + 3..];
        // file:///path (empty host) or file://localhost/path, as RFC 8089 allows.
        let path = rest.strip_prefix("localhost").unwrap_or(rest);
        if !path.starts_with('/') {
            return Err(UrlError::Host);
        }
        return Ok(Source::File(path.to_owned()));
    }
    Url::parse(s).map(Source::Http)
}

impl Url {
    /// Parse an absolute `http://` or `https://` URL.
    pub fn parse(s: &str) -> Result<Self, UrlError> {
        check_bytes(s)?;
        let (scheme, rest) = s.split_once("://").ok_or(UrlError::NotUrl)?;
        let scheme = match scheme.to_ascii_lowercase().as_str() {
            "http" => Scheme::Http,
            "https" => Scheme::Https,
            other => return Err(UrlError::Scheme(other.chars().take(16).collect())),
        };
        let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
        let (authority, tail) = rest.split_at(end);
        if authority.contains('@') {
            return Err(UrlError::Credentials);
        }
        let (host, port) = split_host_port(authority)?;
        let port = match port {
            None => scheme.default_port(),
            Some(p) => p,
        };
        // The fragment is the client's business, never sent.
        let tail = tail.split('#').next().unwrap_or_default();
        let target = if tail.starts_with('/') { tail.to_owned() } else { format!("/{tail}") };
        Ok(Self { scheme, host, port, target })
    }

    /// Where a redirect's `Location` points, relative to this URL: an absolute URL, or an
    /// absolute path on the same server.
    pub fn join(&self, location: &str) -> Result<Self, UrlError> {
        check_bytes(location)?;
        if location.contains("://") {
            return Self::parse(location);
        }
        if location.starts_with("//") || !location.starts_with('/') {
            return Err(UrlError::Relative);
        }
        let target = location.split('#').next().unwrap_or_default().to_owned();
        Ok(Self { target, ..self.clone() })
    }

    /// The `Host` header's value: the port only when it is not the scheme's default.
    pub fn host_header(&self) -> String {
        let host =
            if self.host.contains(':') { format!("[{}]", self.host) } else { self.host.clone() };
        if self.port == self.scheme.default_port() {
            host
        } else {
            format!("{host}:{}", self.port)
        }
    }

    /// The URL without its query, for logs: `https://host:port/path?…`.
    pub fn redacted(&self) -> String {
        let path = match self.target.split_once('?') {
            Some((p, _)) => format!("{p}?…"),
            None => self.target.clone(),
        };
        format!("{}://{}{path}", self.scheme.name(), self.host_header())
    }
}

impl fmt::Display for Url {
    /// The full URL; never logged (see [`Url::redacted`]).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}://{}{}", self.scheme.name(), self.host_header(), self.target)
    }
}

/// `host[:port]` or `[v6][:port]`.
fn split_host_port(authority: &str) -> Result<(String, Option<u16>), UrlError> {
    let (host, port) = if let Some(rest) = authority.strip_prefix('[') {
        let (v6, after) = rest.split_once(']').ok_or(UrlError::Host)?;
        if v6.parse::<std::net::Ipv6Addr>().is_err() {
            return Err(UrlError::Host);
        }
        let port = match after {
            "" => None,
            p => Some(p.strip_prefix(':').ok_or(UrlError::Port)?),
        };
        (v6.to_owned(), port)
    } else {
        match authority.rsplit_once(':') {
            Some((h, p)) => (h.to_owned(), Some(p)),
            None => (authority.to_owned(), None),
        }
    };
    // A bracketed host was checked as an IPv6 address above; anything else is a name or an
    // IPv4 address.
    let name_ok = authority.starts_with('[')
        || (!host.is_empty()
            && host.len() <= 253
            && host
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'.' || b == b'_'));
    if !name_ok {
        return Err(UrlError::Host);
    }
    let port = match port {
        None => None,
        Some(p) => match p.parse::<u16>() {
            Ok(n) if n > 0 && p.bytes().all(|b| b.is_ascii_digit()) => Some(n),
            _ => return Err(UrlError::Port),
        },
    };
    Ok((host, port))
}

/// The command line as logged: `talos.config=`'s query elided and `talos.config.inline=`
/// replaced by its length, since both may carry secrets. Also for any text that may quote
/// the command line (the kernel's `Command line:` record): the keys are found anywhere in a
/// word (after a quote, say).
pub fn redact_cmdline(cmdline: &str) -> String {
    const INLINE: &str = "talos.config.inline=";
    const URL: &str = "talos.config=";
    cmdline
        .split(' ')
        .map(|word| {
            if let Some((before, v)) = word.split_once(INLINE) {
                format!("{before}{INLINE}<{} bytes>", v.len())
            } else if let Some((before, v)) = word.split_once(URL) {
                match v.split_once('?') {
                    Some((url, _)) => format!("{before}{URL}{url}?…"),
                    None => word.to_owned(),
                }
            } else {
                word.to_owned()
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn url(s: &str) -> Url {
        Url::parse(s).unwrap_or_else(|e| unreachable!("{s}: {e}"))
    }

    #[test]
    fn forms() {
        let u = url("https://Config.example.org/m/a.yaml?uuid=1&t=secret#frag");
        assert_eq!(u.scheme, Scheme::Https);
        assert_eq!(u.host, "Config.example.org");
        assert_eq!(u.port, 443);
        assert_eq!(u.target, "/m/a.yaml?uuid=1&t=secret");
        assert_eq!(u.redacted(), "https://Config.example.org/m/a.yaml?…");
        assert_eq!(u.host_header(), "Config.example.org");
        let u = url("HTTP://10.0.2.2:8000");
        assert_eq!((u.scheme, u.port, u.target.as_str()), (Scheme::Http, 8000, "/"));
        assert_eq!(u.host_header(), "10.0.2.2:8000");
        let u = url("http://[fd00::1]:81?x=1");
        assert_eq!((u.host.as_str(), u.port, u.target.as_str()), ("fd00::1", 81, "/?x=1"));
        assert_eq!(u.host_header(), "[fd00::1]:81");
        assert_eq!(u.to_string(), "http://[fd00::1]:81/?x=1");
    }

    #[test]
    fn refusals() {
        for (s, e) in [
            ("ftp://x/y", UrlError::Scheme("ftp".into())),
            ("http://u:p@x/y", UrlError::Credentials),
            ("http://x:0/", UrlError::Port),
            ("http://x:99999/", UrlError::Port),
            ("http://x:+80/", UrlError::Port),
            ("http://x:/", UrlError::Port),
            ("http:///y", UrlError::Host),
            ("http://[zz]/", UrlError::Host),
            ("http://[::1]x/", UrlError::Port),
            ("http://::1/", UrlError::Host),
            ("http://a\u{7f}b/", UrlError::Byte(8)),
            ("http://x/a b", UrlError::Byte(10)),
            ("http://x/\u{e9}", UrlError::Byte(9)),
            ("x", UrlError::NotUrl),
        ] {
            assert_eq!(Url::parse(s).err(), Some(e), "{s}");
        }
        assert_eq!(
            Url::parse(&format!("http://x/{}", "a".repeat(MAX_URL))),
            Err(UrlError::TooLong)
        );
    }

    #[test]
    fn sources() {
        assert_eq!(
            parse_source("/etc/keelson/config.yaml"),
            Ok(Source::File("/etc/keelson/config.yaml".into()))
        );
        assert_eq!(parse_source("file:///etc/c.yaml"), Ok(Source::File("/etc/c.yaml".into())));
        assert_eq!(
            parse_source("file://localhost/etc/c.yaml"),
            Ok(Source::File("/etc/c.yaml".into()))
        );
        assert_eq!(parse_source("file://host/etc/c.yaml"), Err(UrlError::Host));
        assert!(matches!(parse_source("http://x/c"), Ok(Source::Http(_))));
        assert!(parse_source("c.yaml").is_err());
    }

    #[test]
    fn redirects() {
        let base = url("https://a.example:8443/x/y?q=1");
        assert_eq!(
            base.join("/z?r=2#f").map(|u| u.to_string()),
            Ok("https://a.example:8443/z?r=2".into())
        );
        assert_eq!(base.join("http://b/c").map(|u| u.to_string()), Ok("http://b/c".into()));
        assert_eq!(base.join("z"), Err(UrlError::Relative));
        assert_eq!(base.join("//evil/z"), Err(UrlError::Relative));
    }

    #[test]
    fn cmdline_is_redacted() {
        assert_eq!(
            redact_cmdline("console=ttyS0 talos.config=https://x/c?token=s3cret talos.config.inline=dmVyc2lvbg=="),
            "console=ttyS0 talos.config=https://x/c?… talos.config.inline=<12 bytes>"
        );
        assert_eq!(redact_cmdline("talos.config=/etc/c.yaml"), "talos.config=/etc/c.yaml");
        assert_eq!(
            redact_cmdline("params \"talos.config=http://x/c?t=s3cret\","),
            "params \"talos.config=http://x/c?…"
        );
    }
}
