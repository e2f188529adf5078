// SPDX-License-Identifier: Apache-2.0
//! Plans the WireGuard part of a link spec (docs/talos.md: Applying specs "Wireguard"): the
//! smallest `WG_CMD_SET_DEVICE` that turns what the device reports into what the spec asks.
//!
//! Comparison rules, as Talos: peers by public key, allowed IPs as sorted sets (in the kernel's
//! form: host bits cleared), listen port 0 means "any", and a peer endpoint left empty in the spec
//! is not a difference, so WireGuard's roaming is kept (docs/talos.md: KubeSpan). Peers the spec
//! does not name are removed. Only the fields that differ are sent, and allowed IPs are replaced as
//! a whole (`WGPEER_F_REPLACE_ALLOWEDIPS`).
//!
//! An endpoint is a difference only when the spec asks for one that was not written already:
//! when the kernel moved away from the endpoint last written for a peer, WireGuard roamed (the
//! peer reached us from elsewhere), and writing the old one back would cut a working tunnel.
//!
//! One exception to "only what differs": a new endpoint for a peer with no usable session (no
//! handshake within [`REJECT_AFTER_TIME`]) re-creates the peer (removed and added again in the
//! same message). The kernel rate-limits handshake initiations per peer to one per
//! REKEY_TIMEOUT (5 s); a new peer starts with that limit expired and, with a persistent
//! keepalive, sends its first initiation as it is added. So the new endpoint is tried at once
//! instead of at WireGuard's next retransmission, up to 5 s later. A peer with a live session is
//! never re-created: its keys and counters stay.
//!
//! The same re-creation answers a raised `handshakeRetry` (a writer asking for a handshake
//! now, e.g. KubeSpan while an endpoint's first initiations went unanswered): the kernel would
//! not send another initiation for that peer before REKEY_TIMEOUT, whatever is sent to it.

use std::collections::BTreeMap;
use std::net::SocketAddr;

use ipnet::IpNet;

use crate::host::{WgDevice, WgPeer, WgPeerUpdate, WgUpdate, REJECT_AFTER_TIME};
use crate::resource::{WireguardPeer, WireguardSpec};
use crate::wireguard_keys::{Key, KeyError};

/// A public key in the spec that does not decode, with the field's path in the spec (private
/// and preshared keys are [`Key`]s already, checked when the spec was read).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {source}")]
pub struct WireguardSpecError {
    /// `wireguard.peers[2].publicKey`, ...
    pub field: String,
    /// What is wrong with it.
    #[source]
    pub source: KeyError,
}

fn decode(field: impl FnOnce() -> String, text: &str) -> Result<Key, WireguardSpecError> {
    Key::from_base64(text).map_err(|source| WireguardSpecError { field: field(), source })
}

/// Allowed IPs as the kernel keeps them: host bits cleared, sorted, no duplicates.
fn canonical_ips(ips: &[IpNet]) -> Vec<IpNet> {
    let mut v: Vec<IpNet> = ips.iter().map(IpNet::trunc).collect();
    crate::sort::by_key(&mut v, |n| (n.addr(), n.prefix_len()));
    v.dedup();
    v
}

/// Whether a peer had a handshake within [`REJECT_AFTER_TIME`] of `now_unix` (Unix seconds); a
/// peer without one has nothing to lose by being re-created.
fn has_session(peer: &WgPeer, now_unix: u64) -> bool {
    peer.last_handshake.is_some_and(|t| now_unix.saturating_sub(t) < REJECT_AFTER_TIME.as_secs())
}

/// The endpoints last written to a device's peers (the controller's memory).
pub type WrittenEndpoints = BTreeMap<Key, SocketAddr>;

/// The `handshakeRetry` each peer last had when its update was planned (the controller's
/// memory): a retry is answered once.
pub type SeenRetries = BTreeMap<Key, u32>;

/// The update that makes `have` match `want` at `now_unix` (Unix seconds, the clock the kernel
/// reports handshakes in), given the endpoints already `written` and the handshake retries
/// already `seen`; empty when they match.
pub fn plan_wireguard(
    want: &WireguardSpec,
    have: &WgDevice,
    written: &WrittenEndpoints,
    seen: &SeenRetries,
    now_unix: u64,
) -> Result<WgUpdate, WireguardSpecError> {
    let mut update = WgUpdate::default();
    if want.private_key.is_some() && have.private_key != want.private_key {
        update.private_key = want.private_key;
    }
    if want.listen_port != 0 && want.listen_port != have.listen_port {
        update.listen_port = Some(want.listen_port);
    }
    if want.firewall_mark != have.fwmark {
        update.fwmark = Some(want.firewall_mark);
    }

    let mut wanted: BTreeMap<Key, (&WireguardPeer, Option<Key>)> = BTreeMap::new();
    for (i, p) in want.peers.iter().enumerate() {
        let key = decode(|| format!("wireguard.peers[{i}].publicKey"), &p.public_key)?;
        let psk = p.preshared_key.filter(|k| !k.is_zero());
        // A repeated public key: the first one counts, as in the merge.
        wanted.entry(key).or_insert((p, psk));
    }
    let current: BTreeMap<Key, &WgPeer> =
        crate::sort::into_map(have.peers.iter().map(|p| (p.public_key, p)));

    for (key, (p, psk)) in &wanted {
        let ips = canonical_ips(&p.allowed_ips);
        let moved = |cur: &WgPeer| {
            p.endpoint.filter(|e| cur.endpoint != Some(*e) && written.get(key) != Some(e))
        };
        // A peer the kernel roamed away from what we wrote is reaching us (perhaps mid-handshake
        // as its responder): a retry would cut that short, so it is left to finish.
        let roamed =
            |cur: &WgPeer| written.get(key).is_some_and(|w| cur.endpoint.is_some_and(|e| e != *w));
        let retry = p.handshake_retry != 0 && seen.get(key) != Some(&p.handshake_retry);
        let retry = |cur: &WgPeer| retry && !roamed(cur);
        let change = match current.get(key) {
            None => full_peer(*key, p, *psk, ips),
            Some(cur) if (moved(cur).is_some() || retry(cur)) && !has_session(cur, now_unix) => {
                update.peers.push(WgPeerUpdate {
                    public_key: *key,
                    remove: true,
                    ..WgPeerUpdate::default()
                });
                // A retry with no endpoint in the spec keeps the one the kernel has.
                let mut added = full_peer(*key, p, *psk, ips);
                added.endpoint = added.endpoint.or(cur.endpoint);
                added
            }
            Some(cur) => WgPeerUpdate {
                public_key: *key,
                remove: false,
                // Clearing is sending the zero key.
                preshared_key: (cur.preshared_key != *psk).then(|| psk.unwrap_or(Key::ZERO)),
                endpoint: moved(cur),
                keepalive: Some(p.persistent_keepalive_interval).filter(|k| *k != cur.keepalive),
                allowed_ips: Some(ips).filter(|ips| *ips != canonical_ips(&cur.allowed_ips)),
            },
        };
        let unchanged = change.preshared_key.is_none()
            && change.endpoint.is_none()
            && change.keepalive.is_none()
            && change.allowed_ips.is_none()
            && current.contains_key(key);
        if !unchanged {
            update.peers.push(change);
        }
    }
    for key in current.keys().filter(|k| !wanted.contains_key(*k)) {
        update.peers.push(WgPeerUpdate {
            public_key: *key,
            remove: true,
            ..WgPeerUpdate::default()
        });
    }
    Ok(update)
}

/// A peer as it is added: every field of the spec.
fn full_peer(key: Key, p: &WireguardPeer, psk: Option<Key>, ips: Vec<IpNet>) -> WgPeerUpdate {
    WgPeerUpdate {
        public_key: key,
        remove: false,
        preshared_key: psk,
        endpoint: p.endpoint,
        keepalive: Some(p.persistent_keepalive_interval),
        allowed_ips: Some(ips),
    }
}

/// The device as a status: public keys in base64, peers sorted by public key, allowed IPs
/// sorted; no private or preshared keys.
pub fn wireguard_status(dev: &WgDevice) -> crate::resource::WireguardStatus {
    let mut peers: Vec<crate::resource::WireguardPeerStatus> = dev
        .peers
        .iter()
        .map(|p| crate::resource::WireguardPeerStatus {
            public_key: p.public_key.to_base64(),
            endpoint: p.endpoint,
            last_handshake: p.last_handshake,
            rx_bytes: p.rx_bytes,
            tx_bytes: p.tx_bytes,
            persistent_keepalive_interval: p.keepalive,
            allowed_ips: canonical_ips(&p.allowed_ips),
        })
        .collect();
    crate::sort::by(&mut peers, |a, b| a.public_key.cmp(&b.public_key));
    crate::resource::WireguardStatus {
        public_key: dev.public_key.map(|k| k.to_base64()).unwrap_or_default(),
        listen_port: dev.listen_port,
        firewall_mark: dev.fwmark,
        peers,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wireguard_keys::{generate_private_key, public_key};

    fn key(n: u8) -> Key {
        public_key(&generate_private_key([n; 32]))
    }

    /// The wall clock of the tests, in Unix seconds.
    const NOW: u64 = 1_800_000_000;

    fn ips(list: &[&str]) -> Vec<IpNet> {
        list.iter().map(|s| s.parse().unwrap()).collect()
    }

    fn spec_peer(n: u8, allowed: &[&str]) -> WireguardPeer {
        WireguardPeer {
            public_key: key(n).to_base64(),
            persistent_keepalive_interval: 25,
            allowed_ips: ips(allowed),
            ..WireguardPeer::default()
        }
    }

    fn dev_peer(n: u8, allowed: &[&str]) -> WgPeer {
        WgPeer { public_key: key(n), keepalive: 25, allowed_ips: ips(allowed), ..WgPeer::default() }
    }

    fn spec(peers: Vec<WireguardPeer>) -> WireguardSpec {
        WireguardSpec {
            private_key: Some(generate_private_key([9; 32])),
            listen_port: 51820,
            firewall_mark: 0x20,
            peers,
        }
    }

    fn device(peers: Vec<WgPeer>) -> WgDevice {
        let private = generate_private_key([9; 32]);
        WgDevice {
            private_key: Some(private),
            public_key: Some(public_key(&private)),
            listen_port: 51820,
            fwmark: 0x20,
            peers,
        }
    }

    #[test]
    fn new_device_gets_everything() {
        let want = spec(vec![spec_peer(1, &["10.0.0.1/32"])]);
        let u = plan_wireguard(
            &want,
            &WgDevice::default(),
            &WrittenEndpoints::new(),
            &SeenRetries::new(),
            NOW,
        )
        .unwrap();
        assert_eq!(u.private_key, Some(generate_private_key([9; 32])));
        assert_eq!((u.listen_port, u.fwmark), (Some(51820), Some(0x20)));
        assert_eq!(u.peers.len(), 1);
        assert_eq!(u.peers[0].allowed_ips, Some(ips(&["10.0.0.1/32"])));
        assert_eq!(u.peers[0].keepalive, Some(25));
        assert!(!u.peers[0].remove);
    }

    #[test]
    fn matching_device_needs_nothing_in_any_order() {
        let want = spec(vec![
            spec_peer(2, &["fd00::2/128", "10.0.0.2/32"]),
            spec_peer(1, &["10.0.0.1/32", "10.1.0.7/16"]),
        ]);
        // Kernel order differs and the kernel clears host bits.
        let have = device(vec![
            dev_peer(1, &["10.1.0.0/16", "10.0.0.1/32"]),
            dev_peer(2, &["10.0.0.2/32", "fd00::2/128"]),
        ]);
        let u = plan_wireguard(&want, &have, &WrittenEndpoints::new(), &SeenRetries::new(), NOW)
            .unwrap();
        assert!(u.is_empty(), "{u:?}");
    }

    #[test]
    fn changed_allowed_ips_only_touch_that_peer() {
        let want = spec(vec![
            spec_peer(1, &["10.0.0.1/32", "10.9.0.0/24"]),
            spec_peer(2, &["10.0.0.2/32"]),
        ]);
        let have = device(vec![dev_peer(1, &["10.0.0.1/32"]), dev_peer(2, &["10.0.0.2/32"])]);
        let u = plan_wireguard(&want, &have, &WrittenEndpoints::new(), &SeenRetries::new(), NOW)
            .unwrap();
        assert_eq!(u.private_key, None);
        assert_eq!(u.peers.len(), 1);
        let p = &u.peers[0];
        assert_eq!(p.public_key, key(1));
        assert_eq!(p.allowed_ips, Some(ips(&["10.0.0.1/32", "10.9.0.0/24"])));
        assert_eq!((p.keepalive, p.endpoint, p.preshared_key), (None, None, None));
    }

    #[test]
    fn peers_not_in_the_spec_are_removed() {
        let want = spec(vec![spec_peer(1, &["10.0.0.1/32"])]);
        let have = device(vec![dev_peer(1, &["10.0.0.1/32"]), dev_peer(3, &["10.0.0.3/32"])]);
        let u = plan_wireguard(&want, &have, &WrittenEndpoints::new(), &SeenRetries::new(), NOW)
            .unwrap();
        assert_eq!(
            u.peers,
            [WgPeerUpdate { public_key: key(3), remove: true, ..Default::default() }]
        );
    }

    #[test]
    fn empty_endpoint_keeps_roaming_and_a_set_one_repins() {
        let roamed: std::net::SocketAddr = "192.0.2.9:40000".parse().unwrap();
        let mut have = device(vec![dev_peer(1, &["10.0.0.1/32"])]);
        have.peers[0].endpoint = Some(roamed);
        // A live session: the endpoint alone is changed.
        have.peers[0].last_handshake = Some(NOW - 30);
        let mut want = spec(vec![spec_peer(1, &["10.0.0.1/32"])]);
        assert!(plan_wireguard(&want, &have, &WrittenEndpoints::new(), &SeenRetries::new(), NOW)
            .unwrap()
            .is_empty());
        let pinned = "192.0.2.1:51820".parse().unwrap();
        want.peers[0].endpoint = Some(pinned);
        let u = plan_wireguard(&want, &have, &WrittenEndpoints::new(), &SeenRetries::new(), NOW)
            .unwrap();
        assert_eq!(u.peers.len(), 1);
        assert_eq!(u.peers[0].endpoint, Some(pinned));
        assert_eq!(u.peers[0].allowed_ips, None);
        have.peers[0].endpoint = Some(pinned);
        assert!(plan_wireguard(&want, &have, &WrittenEndpoints::new(), &SeenRetries::new(), NOW)
            .unwrap()
            .is_empty());
    }

    #[test]
    fn a_raised_handshake_retry_recreates_a_peer_without_a_session_once() {
        let at = "192.0.2.1:51820".parse().unwrap();
        let mut want = spec(vec![spec_peer(1, &["10.0.0.1/32"]), spec_peer(2, &["10.0.0.2/32"])]);
        let mut have = device(vec![dev_peer(1, &["10.0.0.1/32"]), dev_peer(2, &["10.0.0.2/32"])]);
        for p in &mut have.peers {
            p.endpoint = Some(at);
        }
        // Peer 2 has a live session: a retry never costs it its keys.
        have.peers[1].last_handshake = Some(NOW - 10);
        let none = SeenRetries::new();
        assert!(plan_wireguard(&want, &have, &WrittenEndpoints::new(), &none, NOW)
            .unwrap()
            .is_empty());
        for p in &mut want.peers {
            p.handshake_retry = 1;
        }
        let u = plan_wireguard(&want, &have, &WrittenEndpoints::new(), &none, NOW).unwrap();
        assert_eq!(u.peers.len(), 2, "{u:?}");
        assert!(u.peers.iter().all(|p| p.public_key == key(1)), "{u:?}");
        assert!(u.peers[0].remove && !u.peers[1].remove, "{u:?}");
        // The spec names no endpoint: the re-created peer keeps the kernel's.
        assert_eq!((u.peers[1].endpoint, u.peers[1].keepalive), (Some(at), Some(25)));
        // Answered once: the same counter again asks for nothing.
        let seen = SeenRetries::from([(key(1), 1), (key(2), 1)]);
        assert!(plan_wireguard(&want, &have, &WrittenEndpoints::new(), &seen, NOW)
            .unwrap()
            .is_empty());
        // A peer the kernel roamed away from the endpoint written is left alone.
        let written = WrittenEndpoints::from([(key(1), "192.0.2.9:51820".parse().unwrap())]);
        assert!(plan_wireguard(&want, &have, &written, &none, NOW).unwrap().is_empty());
    }

    #[test]
    fn a_new_endpoint_for_a_peer_without_a_session_recreates_it() {
        let psk = key(7);
        let mut want = spec(vec![spec_peer(1, &["10.0.0.1/32"]), spec_peer(2, &["10.0.0.2/32"])]);
        let next = "192.0.2.2:51820".parse().unwrap();
        for p in &mut want.peers {
            p.endpoint = Some(next);
            p.preshared_key = Some(psk);
        }
        let mut have = device(vec![dev_peer(1, &["10.0.0.1/32"]), dev_peer(2, &["10.0.0.2/32"])]);
        for p in &mut have.peers {
            p.endpoint = Some("192.0.2.1:51820".parse().unwrap());
            p.preshared_key = Some(psk);
        }
        // Peer 1 never had a handshake; peer 2's last one is just past REJECT_AFTER_TIME.
        have.peers[1].last_handshake = Some(NOW - REJECT_AFTER_TIME.as_secs());
        let u = plan_wireguard(&want, &have, &WrittenEndpoints::new(), &SeenRetries::new(), NOW)
            .unwrap();
        for n in [1, 2] {
            let mine: Vec<_> = u.peers.iter().filter(|p| p.public_key == key(n)).collect();
            assert_eq!(mine.len(), 2, "peer {n}: {u:?}");
            assert!(mine[0].remove && !mine[1].remove, "removed first, then added: {mine:?}");
            assert_eq!(
                (mine[1].endpoint, mine[1].keepalive, mine[1].preshared_key),
                (Some(next), Some(25), Some(psk)),
            );
            assert_eq!(mine[1].allowed_ips, Some(ips(&[&format!("10.0.0.{n}/32")])));
        }
        // One second younger, the session is live: only the endpoint changes.
        have.peers[1].last_handshake = Some(NOW - REJECT_AFTER_TIME.as_secs() + 1);
        let u = plan_wireguard(&want, &have, &WrittenEndpoints::new(), &SeenRetries::new(), NOW)
            .unwrap();
        let two: Vec<_> = u.peers.iter().filter(|p| p.public_key == key(2)).collect();
        assert_eq!(two.len(), 1);
        assert_eq!((two[0].remove, two[0].endpoint, two[0].keepalive), (false, Some(next), None));
        // No endpoint change, no re-creation, session or not.
        have.peers[0].endpoint = Some(next);
        have.peers[1].endpoint = Some(next);
        assert!(plan_wireguard(&want, &have, &WrittenEndpoints::new(), &SeenRetries::new(), NOW)
            .unwrap()
            .is_empty());
    }

    #[test]
    fn an_endpoint_already_written_is_not_written_back_over_a_roam() {
        let set: SocketAddr = "192.0.2.1:51820".parse().unwrap();
        let roamed: SocketAddr = "192.0.2.9:40000".parse().unwrap();
        let mut want = spec(vec![spec_peer(1, &["10.0.0.1/32"])]);
        want.peers[0].endpoint = Some(set);
        let mut have = device(vec![dev_peer(1, &["10.0.0.1/32"])]);
        have.peers[0].endpoint = Some(roamed);
        let written = WrittenEndpoints::from([(key(1), set)]);
        // With a session or without one: the kernel left what was written, so the peer roamed.
        for hs in [Some(NOW - 5), None] {
            have.peers[0].last_handshake = hs;
            assert!(
                plan_wireguard(&want, &have, &written, &SeenRetries::new(), NOW)
                    .unwrap()
                    .is_empty(),
                "{hs:?}"
            );
        }
        // A spec that asks for another endpoint is a change again.
        let other: SocketAddr = "192.0.2.2:51820".parse().unwrap();
        want.peers[0].endpoint = Some(other);
        let u = plan_wireguard(&want, &have, &written, &SeenRetries::new(), NOW).unwrap();
        assert_eq!(u.peers.last().map(|p| p.endpoint), Some(Some(other)), "{u:?}");
    }

    #[test]
    fn port_zero_is_any_and_fwmark_and_key_changes_are_sent() {
        let mut want = spec(vec![]);
        want.listen_port = 0;
        want.firewall_mark = 0x30;
        let mut have = device(vec![]);
        have.listen_port = 43210;
        let u = plan_wireguard(&want, &have, &WrittenEndpoints::new(), &SeenRetries::new(), NOW)
            .unwrap();
        assert_eq!((u.listen_port, u.fwmark, u.private_key), (None, Some(0x30), None));
        want.private_key = Some(generate_private_key([1; 32]));
        let u = plan_wireguard(&want, &have, &WrittenEndpoints::new(), &SeenRetries::new(), NOW)
            .unwrap();
        assert_eq!(u.private_key, Some(generate_private_key([1; 32])));
    }

    #[test]
    fn preshared_key_set_and_cleared() {
        let psk = key(7);
        let mut want = spec(vec![spec_peer(1, &[])]);
        want.peers[0].preshared_key = Some(psk);
        let mut have = device(vec![dev_peer(1, &[])]);
        let u = plan_wireguard(&want, &have, &WrittenEndpoints::new(), &SeenRetries::new(), NOW)
            .unwrap();
        assert_eq!(u.peers[0].preshared_key, Some(psk));
        have.peers[0].preshared_key = Some(psk);
        assert!(plan_wireguard(&want, &have, &WrittenEndpoints::new(), &SeenRetries::new(), NOW)
            .unwrap()
            .is_empty());
        want.peers[0].preshared_key = None;
        let u = plan_wireguard(&want, &have, &WrittenEndpoints::new(), &SeenRetries::new(), NOW)
            .unwrap();
        assert_eq!(u.peers[0].preshared_key, Some(Key::ZERO));
    }

    #[test]
    fn bad_keys_name_their_field() {
        let mut want = spec(vec![spec_peer(1, &[]), spec_peer(2, &[])]);
        want.peers[1].public_key = "not a key".into();
        let e = plan_wireguard(
            &want,
            &WgDevice::default(),
            &WrittenEndpoints::new(),
            &SeenRetries::new(),
            NOW,
        )
        .unwrap_err();
        assert_eq!(e.field, "wireguard.peers[1].publicKey");
        assert!(e.to_string().starts_with("wireguard.peers[1].publicKey: "), "{e}");
        // A bad private or preshared key is refused when the spec is read, naming its field
        // (and not echoing the text).
        for (field, yaml) in [
            ("wireguard: privateKey: ", "wireguard:\n  privateKey: AAAA\n"),
            (
                "wireguard.peers[0]: presharedKey: ",
                "wireguard:\n  peers:\n    - publicKey: x\n      presharedKey: AAAA\n",
            ),
        ] {
            let e =
                serde_yaml::from_str::<crate::resource::LinkSpec>(&format!("name: wg0\n{yaml}"))
                    .unwrap_err()
                    .to_string();
            assert!(e.starts_with(field) && !e.contains("AAAA"), "{e}");
        }
    }

    #[test]
    fn link_spec_yaml_uses_talos_field_names() {
        let yaml = r#"
name: kubespan
logical: true
up: true
mtu: 1420
kind: wireguard
type: none
wireguard:
  privateKey: PRIVATE
  listenPort: 51820
  firewallMark: 32
  peers:
    - publicKey: PUBLIC
      endpoint: 192.0.2.1:51820
      persistentKeepaliveInterval: 25
      allowedIPs: [10.0.0.1/32, fd00::1/128]
layer: operator
"#
        .replace("PRIVATE", &generate_private_key([9; 32]).to_base64())
        .replace("PUBLIC", &key(1).to_base64());
        let spec: crate::resource::LinkSpec = serde_yaml::from_str(&yaml).unwrap();
        let wg = spec.wireguard.as_ref().unwrap();
        assert_eq!((wg.listen_port, wg.firewall_mark), (51820, 0x20));
        assert_eq!(wg.peers[0].endpoint, Some("192.0.2.1:51820".parse().unwrap()));
        assert_eq!(wg.peers[0].persistent_keepalive_interval, 25);
        assert_eq!(wg.peers[0].allowed_ips, ips(&["10.0.0.1/32", "fd00::1/128"]));
        // What `keelson get -o yaml` and the logs show carries no key; the rest round-trips.
        let shown = serde_yaml::to_string(&spec).unwrap();
        let private = generate_private_key([9; 32]).to_base64();
        assert_eq!(wg.private_key, Some(generate_private_key([9; 32])));
        assert!(!shown.contains(&private) && shown.contains("privateKey: <redacted>"));
        let back: crate::resource::LinkSpec = serde_yaml::from_str(&shown).unwrap();
        let back_wg = back.wireguard.as_ref().unwrap();
        assert_eq!(
            (back_wg.peers.clone(), back.mtu, back.layer),
            (wg.peers.clone(), spec.mtu, spec.layer)
        );
        assert!(!format!("{spec:?}").contains(&private));
    }

    #[test]
    fn status_hides_keys_and_sorts() {
        let mut have = device(vec![dev_peer(2, &["10.0.0.2/32"]), dev_peer(1, &["10.0.0.1/32"])]);
        have.peers[0].preshared_key = Some(key(7));
        have.peers[0].rx_bytes = 5;
        have.peers[0].last_handshake = Some(1_700_000_000);
        let s = wireguard_status(&have);
        assert_eq!(s.public_key, public_key(&generate_private_key([9; 32])).to_base64());
        let mut order = [key(1).to_base64(), key(2).to_base64()];
        order.sort();
        assert_eq!(s.peers.iter().map(|p| p.public_key.clone()).collect::<Vec<_>>(), order);
        let p2 = s.peers.iter().find(|p| p.public_key == key(2).to_base64()).unwrap();
        assert_eq!((p2.rx_bytes, p2.last_handshake), (5, Some(1_700_000_000)));
        let yaml = serde_yaml::to_string(&s).unwrap();
        assert!(!yaml.contains(&key(7).to_base64()), "{yaml}");
        assert!(yaml.contains("allowedIPs"), "{yaml}");
    }
}
