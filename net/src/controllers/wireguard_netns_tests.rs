// SPDX-License-Identifier: Apache-2.0
//! Two nodes, each the whole pipeline against the real kernel of its own network namespace,
//! joined by a veth pair; each gets a WireGuard LinkSpec at the operator layer naming the
//! other as its peer, as the KubeSpan manager will write it. Checked through our statuses and
//! through `wg show` where wireguard-tools is installed. Debian's kernel only
//! (`KEELSON_FULL_KERNEL=1`: the development kernel has no WireGuard).
#![allow(clippy::disallowed_methods)] // Tests wait for the kernel.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::{Duration, Instant, SystemTime};

use testkit::{in_netns, require_full_kernel, Netns};

use super::{pipeline, MIRRORED};
use crate::host::kernel::KernelHost;
use crate::host::SharedHost;
use crate::resource::{
    layered_id, AddressSpec, ConfigLayer, LinkSpec, LinkStatus, LinkType, Namespace, WireguardPeer,
    WireguardSpec,
};
use crate::runtime::Runtime;
use crate::wireguard_keys::{generate_private_key, public_key, Key};

/// One node: a namespace and the pipeline applying to its kernel.
struct Node {
    ns: Netns,
    rt: Runtime,
    root: PathBuf,
}

impl Node {
    /// The runtime's sockets are opened here, on this thread, inside `ns`.
    fn new(ns: Netns) -> Self {
        ns.enter();
        let root = std::env::temp_dir().join(format!("keelson-{}", ns.name));
        std::fs::create_dir_all(&root).unwrap();
        let host: SharedHost =
            std::rc::Rc::new(std::cell::RefCell::new(KernelHost::new(&root, false).unwrap()));
        let mut rt = Runtime::new();
        for c in pipeline(&host) {
            rt.register(c).unwrap();
        }
        Self { ns, rt, root }
    }

    fn put_wireguard(&mut self, private: Key, peers: Vec<WireguardPeer>, address: &str) {
        let link = LinkSpec {
            name: "wg0".into(),
            logical: true,
            up: true,
            mtu: 1420,
            kind: "wireguard".into(),
            link_type: LinkType::NONE,
            wireguard: Some(WireguardSpec {
                private_key: Some(private),
                listen_port: 51820,
                firewall_mark: 0x20,
                peers,
            }),
            layer: ConfigLayer::Operator,
            ..LinkSpec::default()
        };
        let id = layered_id(ConfigLayer::Operator, &link.id());
        self.rt.put_input("test", Namespace::NetworkConfig, &id, link).unwrap();
        let addr = AddressSpec::new("wg0", address.parse().unwrap(), ConfigLayer::Operator);
        let id = layered_id(ConfigLayer::Operator, &addr.id());
        self.rt.put_input("test", Namespace::NetworkConfig, &id, addr).unwrap();
    }

    /// Runs until quiet, with every mirrored kind marked dirty first: the netlink watcher's
    /// part, which this test does not run.
    fn settle(&mut self) {
        for kind in MIRRORED {
            self.rt.mark_dirty(kind);
        }
        let mut passes = 0;
        while self.rt.has_work() && passes < 50 {
            self.rt.run(Instant::now());
            passes += 1;
        }
    }

    fn wg0(&self) -> Option<LinkStatus> {
        self.rt.store().get_spec::<LinkStatus>(Namespace::Network, "wg0").cloned()
    }

    /// Settles until `check` holds for wg0's status, or fails after 20 s (TCG is slow).
    fn wait(&mut self, what: &str, check: impl Fn(&LinkStatus) -> bool) -> LinkStatus {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            self.settle();
            if let Some(s) = self.wg0().filter(|s| check(s)) {
                return s;
            }
            assert!(
                Instant::now() < deadline,
                "{}: timed out waiting for {what}: {:?}",
                self.ns.name,
                self.wg0()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    fn ping(&self, to: &str) -> bool {
        self.ns.exec(&["ping", "-c", "3", "-i", "0.2", "-W", "3", to]).status.success()
    }

    /// `wg show wg0 <what>` in this namespace, when wireguard-tools is installed.
    fn wg_show(&self, what: &str) -> Option<String> {
        let out = self.ns.exec(&["wg", "show", "wg0", what]);
        out.status.success().then(|| String::from_utf8_lossy(&out.stdout).into_owned())
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.root);
    }
}

fn peer(key: Key, endpoint: Option<&str>, allowed: &[&str]) -> WireguardPeer {
    WireguardPeer {
        public_key: key.to_base64(),
        preshared_key: None,
        endpoint: endpoint.map(|e| e.parse().unwrap()),
        persistent_keepalive_interval: 0,
        allowed_ips: allowed.iter().map(|a| a.parse().unwrap()).collect(),
        handshake_retry: 0,
    }
}

#[test]
fn wireguard_tunnel_between_two_pipelines() {
    if !require_full_kernel("wireguard_tunnel_between_two_pipelines") {
        return;
    }
    // in_netns: a thread of our own (setns moves it), and the root check with skip or fail.
    in_netns(|| {
        let (a_ns, b_ns) = (Netns::new(), Netns::new());
        a_ns.veth("kwa", &b_ns, "kwb");
        for (ns, dev, addr) in [(&a_ns, "kwa", "10.77.0.1/24"), (&b_ns, "kwb", "10.77.0.2/24")] {
            assert!(ns.exec(&["ip", "addr", "add", addr, "dev", dev]).status.success());
            assert!(ns.exec(&["ip", "link", "set", dev, "up"]).status.success());
        }
        let (ka, kb) = (generate_private_key([0xa1; 32]), generate_private_key([0xb2; 32]));
        let started = SystemTime::now().duration_since(SystemTime::UNIX_EPOCH).unwrap().as_secs();

        let mut a = Node::new(a_ns);
        let mut b = Node::new(b_ns);
        // A knows where B is; B does not know A's endpoint and learns it from the handshake
        // (an empty endpoint in the spec means "leave it to WireGuard").
        a.put_wireguard(
            ka,
            vec![peer(public_key(&kb), Some("10.77.0.2:51820"), &["10.200.0.2/32"])],
            "10.200.0.1/24",
        );
        b.put_wireguard(kb, vec![peer(public_key(&ka), None, &["10.200.0.1/32"])], "10.200.0.2/24");

        let sa =
            a.wait("wg0 configured", |s| s.wireguard.as_ref().is_some_and(|w| w.peers.len() == 1));
        let wa = sa.wireguard.unwrap();
        assert_eq!(wa.public_key, public_key(&ka).to_base64());
        assert_eq!((wa.listen_port, wa.firewall_mark, sa.mtu), (51820, 0x20, 1420));
        assert_eq!(wa.peers[0].public_key, public_key(&kb).to_base64());
        assert_eq!(wa.peers[0].endpoint, Some("10.77.0.2:51820".parse().unwrap()));
        b.wait("wg0 configured", |s| s.wireguard.as_ref().is_some_and(|w| w.peers.len() == 1));
        let index = sa.index;
        // While a WireGuard link exists, the status controller asks to be woken.
        assert!(a.rt.poll_at().is_some());

        assert!(a.ping("10.200.0.2"), "ping across the tunnel");
        let sa = a.wait("a handshake and traffic", |s| {
            s.wireguard.as_ref().is_some_and(|w| {
                w.peers[0].last_handshake.is_some_and(|t| t >= started)
                    && w.peers[0].rx_bytes > 0
                    && w.peers[0].tx_bytes > 0
            })
        });
        let first = sa.wireguard.unwrap().peers[0].clone();
        // B learned A's endpoint and keeps it: its spec leaves the endpoint empty.
        let roamed: SocketAddr = "10.77.0.1:51820".parse().unwrap();
        b.wait("the roamed endpoint", |s| {
            s.wireguard.as_ref().is_some_and(|w| w.peers[0].endpoint == Some(roamed))
        });

        assert!(a.ping("10.200.0.2"), "second ping");
        a.wait("counters growing", |s| {
            s.wireguard.as_ref().is_some_and(|w| {
                w.peers[0].rx_bytes > first.rx_bytes && w.peers[0].tx_bytes > first.tx_bytes
            })
        });

        // More allowed IPs for B on A: the device changes in place, the link stays.
        a.put_wireguard(
            ka,
            vec![peer(
                public_key(&kb),
                Some("10.77.0.2:51820"),
                &["10.200.0.2/32", "10.201.0.0/24"],
            )],
            "10.200.0.1/24",
        );
        let sa = a.wait("new allowed IPs", |s| {
            s.wireguard.as_ref().is_some_and(|w| w.peers[0].allowed_ips.len() == 2)
        });
        assert_eq!(sa.index, index, "the link was recreated");
        let ips: Vec<String> =
            sa.wireguard.unwrap().peers[0].allowed_ips.iter().map(|n| n.to_string()).collect();
        assert_eq!(ips, ["10.200.0.2/32", "10.201.0.0/24"]);
        if let Some(out) = a.wg_show("allowed-ips") {
            assert!(out.contains("10.201.0.0/24") && out.contains("10.200.0.2/32"), "{out}");
        }
        assert!(a.ping("10.200.0.2"), "ping after the change");
        // B's roamed endpoint survived B's own reconciles.
        b.settle();
        let wb = b.wg0().unwrap().wireguard.unwrap();
        assert_eq!(wb.peers[0].endpoint, Some(roamed));

        // Removing the peer from A's spec removes it from the device.
        a.put_wireguard(ka, vec![], "10.200.0.1/24");
        let sa =
            a.wait("peer removed", |s| s.wireguard.as_ref().is_some_and(|w| w.peers.is_empty()));
        assert_eq!(sa.index, index);
        if let Some(out) = a.wg_show("peers") {
            assert_eq!(out.trim(), "", "wg show still lists a peer");
        }
        assert!(!a.ping("10.200.0.2"), "ping went through without a peer");
        for n in [&a, &b] {
            let errors: Vec<_> =
                n.rt.controllers().into_iter().filter(|c| c.last_error.is_some()).collect();
            assert!(errors.is_empty(), "{}: {errors:?}", n.ns.name);
        }
    });
}
