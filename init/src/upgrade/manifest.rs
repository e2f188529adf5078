// SPDX-License-Identifier: Apache-2.0
//! What an upgrade boots, as its manifest says: a JSON document at the URL `Upgrade`'s
//! `image` names, with the kernel's and the initramfs's URLs and SHA-256 digests, the version
//! they carry and, optionally, the kernel command line. Pure: parsing, the URL rule, the
//! digest check. docs/upgrade.md has the format.
//!
//! ```json
//! {"version": "v0.2.0",
//!  "kernel": {"url": "vmlinuz", "sha256": "<64 hex digits>"},
//!  "initramfs": {"url": "https://host/b/initramfs.cpio.zst", "sha256": "<64 hex digits>"},
//!  "cmdline": "console=ttyS0 ..."}
//! ```

use serde_json::Value;
use sha2::Digest as _;

use crate::fetch::url::{Scheme, Url};

/// The largest manifest taken.
pub const MAX_MANIFEST: usize = 64 << 10;
/// The largest kernel or initramfs taken.
pub const MAX_ARTIFACT: usize = 256 << 20;
/// The longest kernel command line taken (the kernel's own limit on x86 is 2048 bytes).
pub const MAX_CMDLINE: usize = 2048;
/// The longest version string taken.
const MAX_VERSION: usize = 64;

/// Why a manifest or a download is refused: one line each, a field path when it is the
/// manifest's.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ManifestError {
    #[error("the manifest is not JSON: {0}")]
    NotJson(String),
    #[error("manifest: {0}: missing")]
    Missing(&'static str),
    #[error("manifest: {field}: {why}")]
    Invalid { field: &'static str, why: String },
    #[error("{0}: http:// is taken only from a loopback host; use https://")]
    Plain(String),
    #[error("{what}: sha256 mismatch: the manifest says {want}, the download ({len} bytes) is {got}; nothing loaded, the node keeps running")]
    Mismatch { what: &'static str, want: String, got: String, len: usize },
}

/// One file to download.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Artifact {
    pub url: Url,
    pub sha256: [u8; 32],
}

/// What an upgrade boots.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Manifest {
    /// The version the new image reports (shown, not trusted for anything).
    pub version: String,
    pub kernel: Artifact,
    pub initramfs: Artifact,
    /// The new kernel's command line; `None`: the running one's.
    pub cmdline: Option<String>,
}

/// https, or http from a loopback host (a test, or a proxy on the node itself): the
/// artifacts' digests come from the manifest, so the manifest's own transport must be
/// authenticated.
pub fn check_url(url: &Url) -> Result<(), ManifestError> {
    let loopback = url.host.eq_ignore_ascii_case("localhost")
        || url.host.parse::<std::net::IpAddr>().is_ok_and(|ip| ip.is_loopback());
    if url.scheme == Scheme::Http && !loopback {
        return Err(ManifestError::Plain(url.redacted()));
    }
    Ok(())
}

/// Parse a manifest fetched from `base` (relative URLs are resolved against it).
pub fn parse(body: &[u8], base: &Url) -> Result<Manifest, ManifestError> {
    let v: Value =
        serde_json::from_slice(body).map_err(|e| ManifestError::NotJson(e.to_string()))?;
    if !v.is_object() {
        return Err(ManifestError::NotJson("not an object".into()));
    }
    let version = match v.get("version") {
        None => return Err(ManifestError::Missing("version")),
        Some(Value::String(s))
            if !s.is_empty()
                && s.len() <= MAX_VERSION
                && s.chars().all(|c| c.is_ascii_graphic()) =>
        {
            s.clone()
        }
        Some(_) => {
            return Err(ManifestError::Invalid {
                field: "version",
                why: format!("a string of 1 to {MAX_VERSION} printable ASCII characters"),
            })
        }
    };
    let cmdline = match v.get("cmdline") {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) if s.len() < MAX_CMDLINE && !s.chars().any(|c| c.is_control()) => {
            Some(s.clone())
        }
        Some(_) => {
            return Err(ManifestError::Invalid {
                field: "cmdline",
                why: format!(
                    "a string of less than {MAX_CMDLINE} bytes without control characters"
                ),
            })
        }
    };
    Ok(Manifest {
        version,
        kernel: artifact(&v, "kernel", ("kernel.url", "kernel.sha256"), base)?,
        initramfs: artifact(&v, "initramfs", ("initramfs.url", "initramfs.sha256"), base)?,
        cmdline,
    })
}

fn artifact(
    v: &Value,
    name: &'static str,
    (url_field, sha_field): (&'static str, &'static str),
    base: &Url,
) -> Result<Artifact, ManifestError> {
    let o = v.get(name).ok_or(ManifestError::Missing(name))?;
    let url = o.get("url").and_then(Value::as_str).ok_or(ManifestError::Missing(url_field))?;
    let url = base
        .join(url)
        .or_else(|_| base.join(&relative(&base.target, url)))
        .map_err(|e| ManifestError::Invalid { field: url_field, why: e.to_string() })?;
    check_url(&url)?;
    let hex = o.get("sha256").and_then(Value::as_str).ok_or(ManifestError::Missing(sha_field))?;
    let sha256 = parse_hex(hex).ok_or_else(|| ManifestError::Invalid {
        field: sha_field,
        why: "64 hexadecimal digits".into(),
    })?;
    Ok(Artifact { url, sha256 })
}

/// A path relative to the manifest's directory (`vmlinuz` next to `manifest.json`).
fn relative(target: &str, rel: &str) -> String {
    let path = target.split(['?', '#']).next().unwrap_or("/");
    let dir = path.rfind('/').map_or("/", |i| &path[..=i]);
    format!("{dir}{rel}")
}

fn parse_hex(s: &str) -> Option<[u8; 32]> {
    if s.len() != 64 || !s.is_ascii() {
        return None;
    }
    let mut out = [0u8; 32];
    for (i, b) in out.iter_mut().enumerate() {
        *b = u8::from_str_radix(s.get(2 * i..2 * i + 2)?, 16).ok()?;
    }
    Some(out)
}

pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The download matches its digest, or the one line that says it does not.
pub fn verify(what: &'static str, data: &[u8], want: &[u8; 32]) -> Result<(), ManifestError> {
    let got = sha2::Sha256::digest(data);
    if got.as_slice() == want {
        return Ok(());
    }
    Err(ManifestError::Mismatch { what, want: hex(want), got: hex(&got), len: data.len() })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn base() -> Url {
        Url::parse("https://10.0.2.2:8443/b/manifest.json?t=1").unwrap()
    }

    const A: &str = "ab";

    fn doc(kernel_url: &str, sha: &str) -> String {
        format!(
            r#"{{"version": "v0.2.0-b", "kernel": {{"url": "{kernel_url}", "sha256": "{sha}"}},
               "initramfs": {{"url": "/other/initrd.zst", "sha256": "{}"}}}}"#,
            A.repeat(32)
        )
    }

    #[test]
    fn a_manifest_with_relative_and_absolute_urls() {
        let m = parse(doc("vmlinuz", &"01".repeat(32)).as_bytes(), &base()).unwrap();
        assert_eq!(m.version, "v0.2.0-b");
        assert_eq!(m.kernel.url.to_string(), "https://10.0.2.2:8443/b/vmlinuz");
        assert_eq!(m.kernel.sha256, [1u8; 32]);
        assert_eq!(m.initramfs.url.to_string(), "https://10.0.2.2:8443/other/initrd.zst");
        assert_eq!(m.cmdline, None);
        let m = parse(doc("https://mirror.example/k", &"01".repeat(32)).as_bytes(), &base());
        assert_eq!(m.unwrap().kernel.url.host, "mirror.example");
    }

    #[test]
    fn refusals_name_the_field() {
        let e = |body: &str| parse(body.as_bytes(), &base()).unwrap_err().to_string();
        assert!(e("nope").starts_with("the manifest is not JSON"), "{}", e("nope"));
        assert_eq!(e(r#"{"kernel": {}}"#), "manifest: version: missing");
        assert_eq!(e(&doc("vmlinuz", "xyz")), "manifest: kernel.sha256: 64 hexadecimal digits");
        assert_eq!(
            e(&doc("http://10.0.2.2/vmlinuz", &"01".repeat(32))),
            "http://10.0.2.2/vmlinuz: http:// is taken only from a loopback host; use https://"
        );
        let no_url = r#"{"version": "v1", "kernel": {"sha256": "00"}}"#;
        assert_eq!(e(no_url), "manifest: kernel.url: missing");
        let bad_cmdline =
            doc("k", &"01".repeat(32)).replacen('{', "{\"cmdline\": \"a\\u0000b\", ", 1);
        assert!(e(&bad_cmdline).starts_with("manifest: cmdline:"), "{}", e(&bad_cmdline));
    }

    #[test]
    fn plain_http_only_from_loopback() {
        for ok in [
            "https://x.example/m",
            "http://127.0.0.1:8000/m",
            "http://[::1]/m",
            "http://localhost/m",
        ] {
            assert!(check_url(&Url::parse(ok).unwrap()).is_ok(), "{ok}");
        }
        assert!(check_url(&Url::parse("http://10.0.2.2/m").unwrap()).is_err());
    }

    #[test]
    fn a_digest_mismatch_is_one_line_with_both_digests() {
        let want = [0u8; 32];
        let e = verify("initramfs", b"hello", &want).unwrap_err().to_string();
        assert_eq!(
            e,
            format!("initramfs: sha256 mismatch: the manifest says {}, the download (5 bytes) is 2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824; nothing loaded, the node keeps running", "0".repeat(64))
        );
        let good: [u8; 32] = sha2::Sha256::digest(b"hello").into();
        assert!(verify("kernel", b"hello", &good).is_ok());
    }
}
