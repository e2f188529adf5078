// SPDX-License-Identifier: Apache-2.0
//! The feature modules a machine config will need, asked of the loader threads as soon as the
//! config is known: without that, the first netlink request that needs one (creating a bond,
//! KubeSpan's first nftables message) makes the kernel run its modprobe helper and wait for
//! it, inside the node loop, while NIC drivers wait behind it.

use std::collections::BTreeSet;

use net::config::{to_specs, MachineConfig};
use net::resource::LinkView;

/// The module an rtnetlink link kind needs (Debian builds them all as modules).
pub fn for_link_kind(kind: &str) -> Option<&'static str> {
    Some(match kind {
        "bond" => "bonding",
        "vlan" => "8021q",
        "bridge" => "bridge",
        "dummy" => "dummy",
        "veth" => "veth",
        "vrf" => "vrf",
        "vxlan" => "vxlan",
        "wireguard" => "wireguard",
        _ => return None,
    })
}

/// The feature modules `cfg` needs: those of the links it creates (named ones; a link found
/// by a selector is not known before the hardware is), and WireGuard and nf_tables for
/// KubeSpan. Sorted, each once.
pub fn for_config(cfg: &MachineConfig) -> Vec<String> {
    let specs = to_specs(cfg, &LinkView::default());
    let mut out: BTreeSet<&'static str> =
        specs.links.iter().filter_map(|l| for_link_kind(&l.kind)).collect();
    if cfg.machine.network.kubespan.enabled {
        out.extend(["wireguard", "nf_tables"]);
    }
    out.into_iter().map(str::to_owned).collect()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn config(network: &str) -> MachineConfig {
        let text = format!("version: v1alpha1\nmachine:\n  network:\n{network}");
        let report = net::config::check(&text);
        assert!(report.kept, "{:?}", report.errors);
        report.config
    }

    #[test]
    fn links_the_config_creates_and_kubespan() {
        let cfg = config(
            "    interfaces:
      - interface: bond0
        bond: {mode: active-backup, interfaces: [eth1, eth2]}
        vlans: [{vlanId: 10, dhcp: true}]
      - interface: br0
        bridge: {interfaces: [eth3]}
    kubespan: {enabled: true}
",
        );
        assert_eq!(for_config(&cfg), ["8021q", "bonding", "bridge", "nf_tables", "wireguard"]);
    }

    #[test]
    fn a_plain_config_needs_none() {
        let cfg = config("    hostname: n1\n    interfaces: [{interface: eth0, dhcp: true}]\n");
        assert!(for_config(&cfg).is_empty());
        assert_eq!(for_link_kind("ether"), None);
        assert_eq!(for_link_kind("vrf"), Some("vrf"));
    }
}
