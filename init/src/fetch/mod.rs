// SPDX-License-Identifier: Apache-2.0
//! Where the machine configuration comes from at boot: `talos.config=` (a file in the image, or
//! an `http://`/`https://` URL fetched once the network is up) and `talos.config.inline=`
//! (the config itself, base64 on the command line). The pure parts are here: the URL forms
//! ([`url`]), the variables a URL may carry ([`vars`]), the HTTP/1.1 engine ([`http`]) and the
//! retry policy ([`retry`]); [`client`] is the blocking attempt a thread runs, and the node
//! loop drives it all (`node::config_url`).

pub mod client;
pub mod http;
pub mod retry;
pub mod url;
pub mod vars;

use base64::Engine as _;
use sha2::Digest as _;

/// What the command line says about the config.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Origin {
    /// No `talos.config=` (or `none`): maintenance mode.
    None,
    /// A file in the image.
    File(std::path::PathBuf),
    /// A URL to fetch, variables not yet substituted.
    Url(String),
    /// The config text itself, from `talos.config.inline=`.
    Inline(String),
    /// Something that cannot be used: why, one line.
    Refused(String),
}

/// Read the two parameters. `talos.config.inline=` wins, as in Talos, where a config from the
/// command line is applied after the platform's.
pub fn origin(config: Option<&str>, inline: Option<&str>) -> Origin {
    if let Some(b64) = inline {
        return match decode_inline(b64) {
            Ok(text) => Origin::Inline(text),
            Err(e) => Origin::Refused(format!("talos.config.inline: {e}")),
        };
    }
    let Some(value) = config.filter(|v| *v != "none") else {
        return Origin::None;
    };
    // Check the URL's shape now, with variables still in it, so a typo is one line at boot
    // rather than a wait for the network.
    if let Err(e) = vars::used(value) {
        return Origin::Refused(format!("talos.config: {e}"));
    }
    // A file path is taken as written (variables are a URL's); a URL is checked with its
    // variables standing in as plain letters.
    let probe = value.replace(['{', '}', '$'], "x");
    match url::parse_source(&probe) {
        Ok(url::Source::File(_)) => match url::parse_source(value) {
            Ok(url::Source::File(path)) => Origin::File(path.into()),
            Ok(url::Source::Http(_)) => Origin::Refused("talos.config: not a file path".into()),
            Err(e) => Origin::Refused(format!("talos.config: {e}")),
        },
        Ok(url::Source::Http(_)) => Origin::Url(value.to_owned()),
        Err(e) => Origin::Refused(format!("talos.config: {e}")),
    }
}

/// Why an inline config cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum InlineError {
    /// Not base64.
    #[error("not base64: {0}")]
    Base64(String),
    /// zstd or gzip: Talos's form, which keelson does not decompress.
    #[error("{0}-compressed configs are not supported (no decompressor in the image): pass base64 of the YAML itself")]
    Compressed(&'static str),
    /// Not UTF-8.
    #[error("not UTF-8 text")]
    NotUtf8,
}

/// Decode `talos.config.inline=`: standard base64 (padding optional) of the YAML.
pub fn decode_inline(b64: &str) -> Result<String, InlineError> {
    let bytes = base64::engine::general_purpose::STANDARD_NO_PAD
        .decode(b64.trim_end_matches('='))
        .map_err(|e| InlineError::Base64(e.to_string()))?;
    if bytes.starts_with(&[0x28, 0xb5, 0x2f, 0xfd]) {
        return Err(InlineError::Compressed("zstd"));
    }
    if bytes.starts_with(&[0x1f, 0x8b]) {
        return Err(InlineError::Compressed("gzip"));
    }
    String::from_utf8(bytes).map_err(|_| InlineError::NotUtf8)
}

/// The first bytes of a body, escaped, for a console line about a body that is not a config.
pub fn escaped_prefix(body: &[u8], n: usize) -> String {
    let mut out = String::new();
    for b in body.iter().take(n) {
        match b {
            b'\\' => out.push_str("\\\\"),
            b'"' => out.push_str("\\\""),
            0x20..=0x7e => out.push(char::from(*b)),
            b'\n' => out.push_str("\\n"),
            _ => out.push_str(&format!("\\x{b:02x}")),
        }
    }
    if body.len() > n {
        out.push('…');
    }
    out
}

/// The first 12 hex digits of the body's SHA-256, to tell configs apart on the console.
pub fn sha256_prefix(body: &[u8]) -> String {
    let digest = sha2::Sha256::digest(body);
    digest.iter().take(6).map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn origins() {
        assert_eq!(origin(None, None), Origin::None);
        assert_eq!(origin(Some("none"), None), Origin::None);
        assert_eq!(
            origin(Some("/etc/keelson/config.yaml"), None),
            Origin::File("/etc/keelson/config.yaml".into())
        );
        assert_eq!(origin(Some("file:///c.yaml"), None), Origin::File("/c.yaml".into()));
        assert_eq!(
            origin(Some("http://10.0.2.2:8000/${uuid}/${serial}/${mac}.yaml"), None),
            Origin::Url("http://10.0.2.2:8000/${uuid}/${serial}/${mac}.yaml".into())
        );
        assert!(
            matches!(origin(Some("http://x/?c=${code}"), None), Origin::Refused(e) if e.contains("META"))
        );
        assert!(matches!(origin(Some("ftp://x/c"), None), Origin::Refused(e) if e.contains("ftp")));
        assert_eq!(origin(Some("/c/${uuid}.yaml"), None), Origin::File("/c/${uuid}.yaml".into()));
        let inline = base64::engine::general_purpose::STANDARD.encode("version: v1alpha1\n");
        assert_eq!(
            origin(Some("http://x/c"), Some(&inline)),
            Origin::Inline("version: v1alpha1\n".into())
        );
    }

    #[test]
    fn inline_forms() {
        let b64 = |b: &[u8]| base64::engine::general_purpose::STANDARD.encode(b);
        assert_eq!(decode_inline(&b64(b"machine: {}\n")), Ok("machine: {}\n".into()));
        assert_eq!(decode_inline(b64(b"ab").trim_end_matches('=')), Ok("ab".into()));
        assert_eq!(
            decode_inline(&b64(&[0x28, 0xb5, 0x2f, 0xfd, 0])),
            Err(InlineError::Compressed("zstd"))
        );
        assert_eq!(decode_inline(&b64(&[0x1f, 0x8b, 8])), Err(InlineError::Compressed("gzip")));
        assert_eq!(decode_inline(&b64(&[0xff, 0xfe])), Err(InlineError::NotUtf8));
        assert!(matches!(decode_inline("not base64!"), Err(InlineError::Base64(_))));
    }

    #[test]
    fn console_line_pieces() {
        assert_eq!(escaped_prefix(b"<html>\x1b[2J\"\n", 64), "<html>\\x1b[2J\\\"\\n");
        assert_eq!(escaped_prefix(b"abcdef", 3), "abc…");
        assert_eq!(sha256_prefix(b""), "e3b0c44298fc");
    }
}
