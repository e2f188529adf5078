// SPDX-License-Identifier: Apache-2.0
//! The node's KubeSpan identity (docs/talos.md: KubeSpan): a ULA /64 derived from the cluster ID,
//! the node's /128 in it derived from the first physical link's MAC, and a WireGuard key pair that
//! is configured, or generated once and kept in the state directory.
//!
//! The address is recomputed every time (never read back from the file), so a changed MAC or
//! cluster ID moves it; only the key persists.

use std::net::Ipv6Addr;
use std::path::{Path, PathBuf};

use ipnet::Ipv6Net;
use sha2::{Digest, Sha256};

use net::resource::HardwareAddr;
use net::wireguard_keys::{Key, KEY_BASE64_LEN};

/// ULA purpose byte for KubeSpan (bootstrap 0x01, SideroLink 0x03, ...).
pub const ULA_PURPOSE_KUBESPAN: u8 = 0x02;

/// The file in the state directory that keeps the generated private key.
pub const IDENTITY_FILE: &str = "kubespan-identity.yaml";

/// Why the identity could not be established.
#[derive(Debug, thiserror::Error)]
pub enum IdentityError {
    /// The MAC is not 6 bytes (EUI-64 needs an Ethernet MAC).
    #[error("MAC {0} is not a 6-byte Ethernet address")]
    BadMac(String),
    /// Reading or writing the key file failed.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The key file exists but holds no usable key.
    #[error("{path}: no privateKey line with a 44-character base64 key")]
    BadFile {
        /// The file.
        path: PathBuf,
    },
    /// Key generation failed.
    #[error("key: {0}")]
    Key(#[from] KeyOpsError),
}

/// Why a key could not be generated or derived.
#[derive(Debug, thiserror::Error)]
pub enum KeyOpsError {
    /// No random key (the kernel's random source failed).
    #[error(transparent)]
    Random(#[from] std::io::Error),
    /// The private key is not a valid key.
    #[error(transparent)]
    Invalid(#[from] net::wireguard_keys::KeyError),
}

/// `ULAPrefix(clusterID, purpose)`: bytes 16..32 of sha256(cluster ID text), byte 0 set to
/// 0xfd and byte 7 to the purpose, masked to /64.
pub fn ula_subnet(cluster_id: &str, purpose: u8) -> Ipv6Net {
    let digest = Sha256::digest(cluster_id.as_bytes());
    let mut bytes = [0u8; 16];
    for (dst, src) in bytes.iter_mut().zip(digest.iter().skip(16)) {
        *dst = *src;
    }
    bytes[0] = 0xfd;
    bytes[7] = purpose;
    bytes[8..].fill(0);
    // A /64 is always a valid IPv6 prefix length.
    Ipv6Net::new(Ipv6Addr::from(bytes), 64).unwrap_or_default()
}

/// The EUI-64 address of `mac` inside the /64 `subnet`: MAC bytes 0..3, `ff:fe`, bytes 3..6,
/// with the universal/local bit of byte 0 flipped.
pub fn eui64_address(subnet: Ipv6Net, mac: &HardwareAddr) -> Result<Ipv6Addr, IdentityError> {
    let m: [u8; 6] =
        mac.0.as_slice().try_into().map_err(|_| IdentityError::BadMac(mac.to_string()))?;
    let mut bytes = subnet.network().octets();
    bytes[8..].copy_from_slice(&[m[0] ^ 0x02, m[1], m[2], 0xff, 0xfe, m[3], m[4], m[5]]);
    Ok(Ipv6Addr::from(bytes))
}

/// The key operations identity needs, provided by the WireGuard layer.
pub trait KeyOps {
    /// A fresh private key.
    fn generate(&self) -> Result<Key, KeyOpsError>;
    /// The public key of a private key, in base64 (public keys name peers and are shown).
    fn public_of(&self, private: &Key) -> Result<String, KeyOpsError>;
}

/// Where the private key came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeySource {
    /// `machine.network.kubespan.privateKey`.
    Config,
    /// The state directory's file.
    StateFile,
    /// Generated now and saved.
    Generated,
}

/// The private key: the configured one, else the one in `state_dir`, else a new one written
/// there (mode 0600, temp file + rename so a crash never leaves half a key).
pub fn private_key(
    configured: Option<&Key>,
    state_dir: &Path,
    keys: &dyn KeyOps,
) -> Result<(Key, KeySource), IdentityError> {
    if let Some(k) = configured {
        return Ok((*k, KeySource::Config));
    }
    let path = state_dir.join(IDENTITY_FILE);
    // The key file is one short line; the bound keeps a FIFO or device put in its place from
    // blocking or filling memory.
    match net::bounded::read_text(&path, 64 << 10) {
        Ok(text) => {
            return parse_key_file(&text)
                .map(|k| (k, KeySource::StateFile))
                .ok_or(IdentityError::BadFile { path })
        }
        Err(net::bounded::ReadError::Io(e)) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(net::bounded::ReadError::Io(source)) => return Err(IdentityError::Io { path, source }),
        Err(e) => return Err(IdentityError::Io { path, source: std::io::Error::other(e) }),
    }
    let key = keys.generate()?;
    write_key_file(&path, &key)?;
    Ok((key, KeySource::Generated))
}

fn parse_key_file(text: &str) -> Option<Key> {
    text.lines()
        .filter_map(|l| l.trim().strip_prefix("privateKey:"))
        .map(|v| v.trim().trim_matches('"'))
        .find(|k| k.len() == KEY_BASE64_LEN)
        .and_then(|k| Key::from_base64(k).ok())
}

fn write_key_file(path: &Path, key: &Key) -> Result<(), IdentityError> {
    let text = format!("privateKey: {}\n", key.to_base64());
    net::atomic_file::write(path, text.as_bytes(), 0o600, net::atomic_file::Durability::File)
        .map_err(|source| IdentityError::Io { path: path.to_owned(), source })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::Cell;

    #[test]
    fn talos_vector() {
        // docs/talos.md: KubeSpan, from Talos's identity_test.go.
        let subnet =
            ula_subnet("8XuV9TZHW08DOk3bVxQjH9ih_TBKjnh-j44tsCLSBzo=", ULA_PURPOSE_KUBESPAN);
        assert_eq!(subnet.to_string(), "fd7f:175a:b97c:5602::/64");
        let mac: HardwareAddr = "2e:1a:b6:53:81:69".parse().unwrap();
        let addr = eui64_address(subnet, &mac).unwrap();
        assert_eq!(addr.to_string(), "fd7f:175a:b97c:5602:2c1a:b6ff:fe53:8169");
    }

    #[test]
    fn purpose_and_mac_change_the_result() {
        let a = ula_subnet("x", ULA_PURPOSE_KUBESPAN);
        assert_ne!(a, ula_subnet("x", 0x03));
        assert_ne!(a, ula_subnet("y", ULA_PURPOSE_KUBESPAN));
        let m1: HardwareAddr = "02:00:00:00:00:01".parse().unwrap();
        let m2: HardwareAddr = "02:00:00:00:00:02".parse().unwrap();
        assert_ne!(eui64_address(a, &m1).unwrap(), eui64_address(a, &m2).unwrap());
        let long: HardwareAddr = "00:11:22:33:44:55:66:77".parse().unwrap();
        assert!(matches!(eui64_address(a, &long), Err(IdentityError::BadMac(_))));
    }

    struct Fake {
        generated: Cell<u32>,
    }
    impl KeyOps for Fake {
        fn generate(&self) -> Result<Key, KeyOpsError> {
            self.generated.set(self.generated.get() + 1);
            Ok(Key::from_base64(&format!("{:A<43}=", self.generated.get()))?)
        }
        fn public_of(&self, private: &Key) -> Result<String, KeyOpsError> {
            Ok(private.to_base64().to_lowercase())
        }
    }

    #[test]
    fn key_is_generated_once_and_kept() {
        let dir = std::env::temp_dir().join(format!("ks-identity-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let keys = Fake { generated: Cell::new(0) };
        let (first, src) = private_key(None, &dir, &keys).unwrap();
        assert_eq!(src, KeySource::Generated);
        let (again, src) = private_key(None, &dir, &keys).unwrap();
        assert_eq!((again, src), (first, KeySource::StateFile));
        assert_eq!(keys.generated.get(), 1);
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(dir.join(IDENTITY_FILE)).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        let configured = Key::from_base64(&("c".repeat(43) + "=")).unwrap();
        let (k, src) = private_key(Some(&configured), &dir, &keys).unwrap();
        assert_eq!((k, src), (configured, KeySource::Config));
        std::fs::write(dir.join(IDENTITY_FILE), "garbage\n").unwrap();
        assert!(matches!(private_key(None, &dir, &keys), Err(IdentityError::BadFile { .. })));
        // A device in the key file's place is refused, not read until memory runs out.
        std::fs::remove_file(dir.join(IDENTITY_FILE)).unwrap();
        std::os::unix::fs::symlink("/dev/zero", dir.join(IDENTITY_FILE)).unwrap();
        assert!(matches!(private_key(None, &dir, &keys), Err(IdentityError::Io { .. })));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
