// SPDX-License-Identifier: Apache-2.0
//! The WireGuard generic netlink adapter against the kernel's `wireguard` module (Debian's
//! kernel only: `KEELSON_FULL_KERNEL=1`).

use std::process::Command;

use ipnet::IpNet;

use super::{link, with_sock};
use crate::host::{WgPeerUpdate, WgUpdate};
use crate::netlink::{LinkKind, NewLink, WireguardSocket};
use crate::resource::nethelpers::LinkType;
use crate::wireguard_keys::{generate_private_key, public_key, Key};
use testkit::require_full_kernel;

fn peer_key(i: u16) -> Key {
    // Bytes 1 and 2: clamping touches bytes 0 and 31 only.
    let mut seed = [7u8; 32];
    seed[1..3].copy_from_slice(&i.to_be_bytes());
    public_key(&generate_private_key(seed))
}

fn net(i: u32, bits: u8) -> IpNet {
    IpNet::new(std::net::Ipv4Addr::from(0x0a00_0000 + (i << 8)).into(), bits).unwrap()
}

/// `wg show <dev> <what>` when wireguard-tools is installed: an oracle independent of ours.
fn wg_show(dev: &str, what: &str) -> Option<String> {
    let out = Command::new("wg").args(["show", dev, what]).output().ok()?;
    assert!(out.status.success(), "wg show: {}", String::from_utf8_lossy(&out.stderr));
    Some(String::from_utf8_lossy(&out.stdout).into_owned())
}

#[test]
fn wireguard_set_and_get_many_peers() {
    if !require_full_kernel("wireguard_set_and_get_many_peers") {
        return;
    }
    with_sock(|sock| {
        sock.link_create(&NewLink::new("kwg0", LinkKind::Wireguard)).unwrap();
        let l = link(sock, "kwg0");
        assert_eq!((l.kind.as_str(), l.link_type), ("wireguard", LinkType::NONE));

        let mut wg = WireguardSocket::new().unwrap();
        let private = generate_private_key([3; 32]);
        // 600 peers with 3 prefixes each need several SET_DEVICE messages.
        let peers: Vec<WgPeerUpdate> = (1..=600u16)
            .map(|i| WgPeerUpdate {
                public_key: peer_key(i),
                keepalive: Some(25),
                endpoint: (i == 1).then(|| "192.0.2.1:51820".parse().unwrap()),
                allowed_ips: Some(vec![
                    net(u32::from(i), 32),
                    net(100_000 + u32::from(i), 24),
                    net(200_000 + u32::from(i), 32),
                ]),
                ..WgPeerUpdate::default()
            })
            .collect();
        let update = WgUpdate {
            private_key: Some(private),
            listen_port: Some(51999),
            fwmark: Some(0x20),
            peers,
        };
        assert!(
            crate::netlink::pack_set_device("kwg0", &update, crate::netlink::SET_DEVICE_BUDGET)
                .len()
                > 1
        );
        wg.set_device("kwg0", &update).unwrap();

        let dev = wg.get_device("kwg0").unwrap();
        assert_eq!(dev.private_key, Some(private));
        assert_eq!(dev.public_key, Some(public_key(&private)));
        assert_eq!((dev.listen_port, dev.fwmark), (51999, 0x20));
        assert_eq!(dev.peers.len(), 600);
        for want in &update.peers {
            let got = dev.peers.iter().find(|p| p.public_key == want.public_key).unwrap();
            let mut ips = got.allowed_ips.clone();
            ips.sort();
            let mut expect = want.allowed_ips.clone().unwrap();
            expect.sort();
            assert_eq!(ips, expect);
            assert_eq!(got.keepalive, 25);
            assert_eq!(got.endpoint, want.endpoint);
            assert_eq!(got.last_handshake, None);
            assert_eq!(got.preshared_key, None);
        }
        if let Some(out) = wg_show("kwg0", "peers") {
            assert_eq!(out.lines().count(), 600);
        }

        // Replace one peer's allowed IPs, set a preshared key, remove another peer.
        let psk = generate_private_key([5; 32]);
        wg.set_device(
            "kwg0",
            &WgUpdate {
                peers: vec![
                    WgPeerUpdate {
                        public_key: peer_key(2),
                        preshared_key: Some(psk),
                        allowed_ips: Some(vec![net(9, 32)]),
                        ..WgPeerUpdate::default()
                    },
                    WgPeerUpdate {
                        public_key: peer_key(3),
                        remove: true,
                        ..WgPeerUpdate::default()
                    },
                ],
                ..WgUpdate::default()
            },
        )
        .unwrap();
        let dev = wg.get_device("kwg0").unwrap();
        assert_eq!(dev.peers.len(), 599);
        assert!(dev.peers.iter().all(|p| p.public_key != peer_key(3)));
        let p2 = dev.peers.iter().find(|p| p.public_key == peer_key(2)).unwrap();
        assert_eq!(p2.allowed_ips, [net(9, 32)]);
        assert_eq!(p2.preshared_key, Some(psk));
        // Untouched peers keep their endpoint and prefixes.
        let p1 = dev.peers.iter().find(|p| p.public_key == peer_key(1)).unwrap();
        assert_eq!(p1.endpoint, Some("192.0.2.1:51820".parse().unwrap()));
        assert_eq!(p1.allowed_ips.len(), 3);
        if let Some(out) = wg_show("kwg0", "allowed-ips") {
            let line = out.lines().find(|l| l.starts_with(&peer_key(2).to_base64())).unwrap();
            assert!(line.ends_with("10.0.9.0/32"), "{line}");
        }

        // A device that does not exist is NotFound, not a decode error.
        let e = wg.get_device("nope0").unwrap_err();
        assert!(e.is_not_found(), "{e}");
    });
}
