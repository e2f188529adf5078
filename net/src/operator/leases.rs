// SPDX-License-Identifier: Apache-2.0
//! DHCPv4 leases kept under the state directory, so the next start (a restart of keelson, or
//! a reboot when the state directory is on disk) asks for the same address in INIT-REBOOT
//! (RFC 2131 §3.2). A lease is tied to the MAC it was leased to: a different NIC under the
//! same name starts afresh.

use std::io;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::dhcp4::Lease;

#[derive(Serialize, Deserialize)]
struct Saved {
    mac: String,
    lease: Lease,
}

fn path(dir: &Path, link: &str) -> PathBuf {
    dir.join(format!("dhcp4-{link}.json"))
}

fn mac_text(mac: &[u8; 6]) -> String {
    mac.iter().map(|b| format!("{b:02x}")).collect::<Vec<_>>().join(":")
}

/// The lease saved for `link`, if one was saved for this `mac`. Unreadable files are logged
/// and ignored: the client then starts in INIT, which only costs a DISCOVER.
pub fn load(dir: &Path, link: &str, mac: &[u8; 6]) -> Option<Lease> {
    let file = path(dir, link);
    // A saved lease is a few hundred bytes; the bound keeps a FIFO or device put in its
    // place from blocking or filling memory.
    let text = match crate::bounded::read_text(&file, 64 << 10) {
        Ok(t) => t,
        Err(crate::bounded::ReadError::Io(e)) if e.kind() == io::ErrorKind::NotFound => {
            return None
        }
        Err(e) => {
            log::warn!(target: "dhcp4", "{}: {e}; starting without the saved lease", file.display());
            return None;
        }
    };
    match serde_json::from_str::<Saved>(&text) {
        Ok(saved) if saved.mac == mac_text(mac) => Some(saved.lease),
        Ok(saved) => {
            log::info!(target: "dhcp4", "{}: saved for {}, the link now has {}; not reused", file.display(), saved.mac, mac_text(mac));
            None
        }
        Err(e) => {
            log::warn!(target: "dhcp4", "{}: {e}; starting without the saved lease", file.display());
            None
        }
    }
}

/// Save `lease` for `link` (write to a temporary file, then rename, so a crash never leaves a
/// torn file).
pub fn save(dir: &Path, link: &str, mac: &[u8; 6], lease: &Lease) -> io::Result<()> {
    let saved = Saved { mac: mac_text(mac), lease: lease.clone() };
    let text = serde_json::to_string_pretty(&saved).map_err(io::Error::other)?;
    // A lease is a cache: losing the last one to a power cut costs one DHCP exchange.
    crate::atomic_file::write(
        &path(dir, link),
        text.as_bytes(),
        0o644,
        crate::atomic_file::Durability::Nothing,
    )
}

/// Forget the lease of `link` (it expired or was refused).
pub fn forget(dir: &Path, link: &str) -> io::Result<()> {
    match std::fs::remove_file(path(dir, link)) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => Err(e),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lease() -> Lease {
        Lease {
            address: "10.0.0.5".parse().unwrap(),
            prefix_len: 24,
            server_id: "10.0.0.1".parse().unwrap(),
            routers: vec!["10.0.0.1".parse().unwrap()],
            classless_routes: vec![],
            dns: vec![],
            domain: None,
            search: vec![],
            ntp: vec![],
            hostname: None,
            mtu: None,
            broadcast: None,
            lease_time: 600,
            t1: 300,
            t2: 525,
            acquired_at: None,
        }
    }

    #[test]
    fn saved_lease_comes_back_for_the_same_mac_only() {
        let dir = std::env::temp_dir().join(format!("keelson-leases-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let mac = [2, 0, 0, 0, 0, 1];
        assert_eq!(load(&dir, "eth0", &mac), None);
        save(&dir, "eth0", &mac, &lease()).unwrap();
        assert_eq!(load(&dir, "eth0", &mac), Some(lease()));
        assert_eq!(load(&dir, "eth0", &[2, 0, 0, 0, 0, 2]), None);
        assert_eq!(load(&dir, "eth1", &mac), None);
        std::fs::write(dir.join("dhcp4-eth1.json"), "{not json").unwrap();
        assert_eq!(load(&dir, "eth1", &mac), None);
        forget(&dir, "eth0").unwrap();
        forget(&dir, "eth0").unwrap();
        assert_eq!(load(&dir, "eth0", &mac), None);
        // A FIFO in the lease's place: refused at once, not waited on.
        let fifo = path(&dir, "eth2");
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
        assert_eq!(load(&dir, "eth2", &mac), None);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
