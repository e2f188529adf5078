// SPDX-License-Identifier: Apache-2.0
//! An in-memory [`Host`] for unit tests of controller sequencing. It models what the planners
//! depend on (indexes, EEXIST on duplicate adds, links taking their addresses and routes with
//! them) and logs every operation, so tests can assert "no address was deleted". The real
//! kernel is tested by the namespace suites; this is never the only test of a feature.

use std::collections::BTreeMap;

use super::{
    AddressOp, Host, HostError, HostErrorKind, LinkOp, NewLinkKind, RouteOp, RuleOp, WgDevice,
    WgPeer, WgUpdate,
};
use crate::resource::{
    AddressStatus, HardwareAddr, LinkStatus, LinkType, RouteStatus, RoutingRuleStatus,
};

/// A pretend kernel.
#[derive(Debug, Default)]
pub struct FakeHost {
    /// Links by name.
    pub links: BTreeMap<String, LinkStatus>,
    /// Addresses.
    pub addresses: Vec<AddressStatus>,
    /// Routes.
    pub routes: Vec<RouteStatus>,
    /// Rules.
    pub rules: Vec<RoutingRuleStatus>,
    /// `(hostname, domainname)`.
    pub hostname: (String, String),
    /// Files by path.
    pub files: BTreeMap<String, String>,
    /// Every mutating operation, in order (`add address eth0/10.0.0.1/24`, ...).
    pub log: Vec<String>,
    /// Route adds through these gateways fail as the kernel does for unreachable gateways.
    pub unreachable_gateways: Vec<std::net::IpAddr>,
    /// Store every added route with this protocol instead: a kernel that does not keep what
    /// it is asked, so the diff never settles.
    pub rewrite_route_protocol: Option<crate::resource::RouteProtocol>,
    /// Every MTU change lands as this instead: a link whose MTU something else puts back at
    /// once (or a kernel that does not keep it).
    pub mtu_reverts_to: Option<u32>,
    /// MTUs above this are refused as the kernel refuses them above a device's maximum.
    pub max_mtu: Option<u32>,
    /// Writes to these paths fail (a read-only or full file system).
    pub unwritable: Vec<String>,
    /// WireGuard devices by link name.
    pub wireguard: BTreeMap<String, WgDevice>,
    next_index: u32,
}

fn err(op: String, kind: HostErrorKind, message: &str) -> HostError {
    HostError { op, message: message.to_owned(), kind }
}

impl FakeHost {
    /// A host with `lo` only.
    pub fn new() -> Self {
        let mut h = Self { next_index: 1, ..Self::default() };
        h.add_link("lo", LinkType::LOOPBACK, "");
        h
    }

    /// Add a link (physical when `kind` is empty), up with carrier; returns its index.
    pub fn add_link(&mut self, name: &str, link_type: LinkType, kind: &str) -> u32 {
        let index = self.next_index.max(1);
        self.next_index = index + 1;
        let idx = index.to_be_bytes();
        self.links.insert(
            name.to_owned(),
            LinkStatus {
                index,
                link_type,
                kind: kind.to_owned(),
                mtu: 1500,
                hardware_addr: HardwareAddr(vec![2, 0, idx[0], idx[1], idx[2], idx[3]]),
                operational_state: "down".into(),
                ..LinkStatus::default()
            },
        );
        index
    }

    fn name_of(&self, index: u32) -> Option<String> {
        self.links.iter().find(|(_, l)| l.index == index).map(|(n, _)| n.clone())
    }

    fn link_mut(&mut self, index: u32, op: &str) -> Result<&mut LinkStatus, HostError> {
        self.links
            .values_mut()
            .find(|l| l.index == index)
            .ok_or_else(|| err(op.to_owned(), HostErrorKind::NotFound, "no such device"))
    }

    fn address_pos(&self, a: &AddressStatus) -> Option<usize> {
        self.addresses.iter().position(|x| x.link_index == a.link_index && x.address == a.address)
    }

    fn route_pos(&self, r: &RouteStatus) -> Option<usize> {
        self.routes.iter().position(|x| {
            (x.family, x.table, x.dst, x.priority, x.gateway)
                == (r.family, r.table, r.dst, r.priority, r.gateway)
        })
    }
}

impl Host for FakeHost {
    fn links(&mut self) -> Result<Vec<(String, LinkStatus)>, HostError> {
        Ok(self.links.iter().map(|(n, l)| (n.clone(), l.clone())).collect())
    }

    fn addresses(&mut self) -> Result<Vec<AddressStatus>, HostError> {
        Ok(self.addresses.clone())
    }

    fn routes(&mut self) -> Result<Vec<RouteStatus>, HostError> {
        Ok(self.routes.clone())
    }

    fn rules(&mut self) -> Result<Vec<RoutingRuleStatus>, HostError> {
        Ok(self.rules.clone())
    }

    fn link(&mut self, op: &LinkOp) -> Result<(), HostError> {
        let text = format!("{op:?}");
        self.log.push(text.clone());
        match op {
            LinkOp::Create { name, kind, mtu, mac } => {
                if self.links.contains_key(name) {
                    return Err(err(text, HostErrorKind::Exists, "file exists"));
                }
                let (kind_name, link_index) = match kind {
                    NewLinkKind::Dummy => ("dummy", 0),
                    NewLinkKind::Veth { .. } => ("veth", 0),
                    NewLinkKind::Vlan { parent, .. } => ("vlan", *parent),
                    NewLinkKind::Bond(_) => ("bond", 0),
                    NewLinkKind::Bridge(_) => ("bridge", 0),
                    NewLinkKind::Wireguard => ("wireguard", 0),
                    NewLinkKind::Vrf { .. } => ("vrf", 0),
                };
                let link_type = match kind {
                    NewLinkKind::Wireguard => LinkType::NONE,
                    _ => LinkType::ETHER,
                };
                let index = self.add_link(name, link_type, kind_name);
                let link = self.link_mut(index, &text)?;
                link.link_index = link_index;
                if let Some(m) = mtu {
                    link.mtu = *m;
                }
                if let Some(m) = mac {
                    link.hardware_addr = m.clone();
                }
                match kind {
                    NewLinkKind::Vlan { vlan, .. } => link.vlan = Some(vlan.clone()),
                    NewLinkKind::Bond(b) => link.bond_master = Some(b.clone()),
                    NewLinkKind::Bridge(b) => link.bridge_master = Some(b.clone()),
                    NewLinkKind::Dummy => {}
                    NewLinkKind::Vrf { table } => {
                        link.vrf_master = Some(crate::resource::VrfMasterSpec {
                            table: crate::resource::RoutingTable(*table),
                        });
                    }
                    NewLinkKind::Wireguard => {
                        self.wireguard.insert(name.clone(), WgDevice::default());
                    }
                    NewLinkKind::Veth { peer } => {
                        // Both ends exist at once; each one's IFLA_LINK is the other.
                        let peer_index = self.add_link(peer, LinkType::ETHER, "veth");
                        self.link_mut(peer_index, &text)?.link_index = index;
                        self.link_mut(index, &text)?.link_index = peer_index;
                    }
                }
            }
            LinkOp::Delete { index, .. } => {
                let name = self
                    .name_of(*index)
                    .ok_or_else(|| err(text, HostErrorKind::NotFound, "no such device"))?;
                let gone = self.links.remove(&name);
                self.wireguard.remove(&name);
                // The kernel takes a veth's peer and the VLANs on a link with it, and releases
                // a master's ports.
                let peer = gone.filter(|l| l.kind == "veth").map_or(0, |l| l.link_index);
                self.links.retain(|_, l| {
                    l.index != peer && !(l.kind == "vlan" && l.link_index == *index)
                });
                for l in self.links.values_mut().filter(|l| l.master_index == *index) {
                    l.master_index = 0;
                }
                self.addresses.retain(|a| a.link_index != *index);
                self.routes.retain(|r| r.out_link_index != *index);
            }
            LinkOp::SetUp { index, up } => {
                let l = self.link_mut(*index, &text)?;
                l.operational_state = if *up { "up" } else { "down" }.into();
                l.link_state = *up;
                l.flags = if *up { "UP".into() } else { String::new() };
            }
            LinkOp::SetMtu { mtu, .. } if self.max_mtu.is_some_and(|m| *mtu > m) => {
                return Err(err(text, HostErrorKind::Invalid, "mtu greater than device maximum"));
            }
            LinkOp::SetMtu { index, mtu } => {
                let kept = self.mtu_reverts_to.unwrap_or(*mtu);
                self.link_mut(*index, &text)?.mtu = kept;
            }
            LinkOp::SetMac { index, mac } => {
                self.link_mut(*index, &text)?.hardware_addr = mac.clone()
            }
            LinkOp::SetMaster { index, master } => {
                self.link_mut(*index, &text)?.master_index = master.unwrap_or(0)
            }
            LinkOp::SetBond { index, bond } => {
                self.link_mut(*index, &text)?.bond_master = Some(bond.clone())
            }
            LinkOp::SetBridge { index, bridge } => {
                self.link_mut(*index, &text)?.bridge_master = Some(bridge.clone())
            }
        }
        Ok(())
    }

    fn address(&mut self, op: &AddressOp) -> Result<(), HostError> {
        match op {
            AddressOp::Add(c) => {
                let text = format!("add address {}", c.address.id());
                self.log.push(text.clone());
                if self.address_pos(&c.address).is_some() {
                    return Err(err(text, HostErrorKind::Exists, "file exists"));
                }
                self.addresses.push(c.address.clone());
            }
            AddressOp::Replace(c) => {
                self.log.push(format!("replace address {}", c.address.id()));
                match self.address_pos(&c.address) {
                    Some(i) => self.addresses[i] = c.address.clone(),
                    None => self.addresses.push(c.address.clone()),
                }
            }
            AddressOp::Delete(a) => {
                let text = format!("delete address {}", a.id());
                self.log.push(text.clone());
                let i = self
                    .address_pos(a)
                    .ok_or_else(|| err(text, HostErrorKind::NotFound, "cannot assign"))?;
                self.addresses.remove(i);
            }
        }
        Ok(())
    }

    fn route(&mut self, op: &RouteOp) -> Result<(), HostError> {
        match op {
            RouteOp::Add(r) => {
                let text = format!("add route {}", r.id());
                self.log.push(text.clone());
                if r.gateway.is_some_and(|g| self.unreachable_gateways.contains(&g)) {
                    return Err(err(text, HostErrorKind::Invalid, "Nexthop has invalid gateway"));
                }
                if self.route_pos(r).is_some() {
                    return Err(err(text, HostErrorKind::Exists, "file exists"));
                }
                let mut stored = r.clone();
                if let Some(p) = self.rewrite_route_protocol {
                    stored.protocol = p;
                }
                self.routes.push(stored);
            }
            RouteOp::Delete(r) => {
                let text = format!("delete route {}", r.id());
                self.log.push(text.clone());
                let i = self
                    .route_pos(r)
                    .ok_or_else(|| err(text, HostErrorKind::NotFound, "no such process"))?;
                self.routes.remove(i);
            }
        }
        Ok(())
    }

    fn rule(&mut self, op: &RuleOp) -> Result<(), HostError> {
        match op {
            RuleOp::Add(r) => {
                self.log.push(format!("add rule {}/{}", r.family, r.priority));
                self.rules.push(r.clone());
            }
            RuleOp::Delete(r) => {
                self.log.push(format!("delete rule {}/{}", r.family, r.priority));
                self.rules.retain(|x| x != r);
            }
        }
        Ok(())
    }

    fn set_hostname(&mut self, hostname: &str, domainname: &str) -> Result<(), HostError> {
        self.log.push(format!("sethostname {hostname} {domainname}"));
        // As the kernel: each name at most __NEW_UTS_LEN bytes, the hostname set first.
        if hostname.len() > 64 {
            return Err(err(format!("sethostname {hostname}"), HostErrorKind::Invalid, "EINVAL"));
        }
        self.hostname.0 = hostname.to_owned();
        if domainname.len() > 64 {
            let op = format!("setdomainname {domainname}");
            return Err(err(op, HostErrorKind::Invalid, "EINVAL"));
        }
        self.hostname.1 = domainname.to_owned();
        Ok(())
    }

    fn wireguard(&mut self, name: &str) -> Result<WgDevice, HostError> {
        self.wireguard.get(name).cloned().ok_or_else(|| {
            err(format!("wireguard get {name}"), HostErrorKind::NotFound, "no such device")
        })
    }

    fn wireguard_set(&mut self, name: &str, update: &WgUpdate) -> Result<(), HostError> {
        let text = format!("wireguard set {name}");
        let dev = self
            .wireguard
            .get_mut(name)
            .ok_or_else(|| err(text.clone(), HostErrorKind::NotFound, "no such device"))?;
        let mut changes = Vec::new();
        if let Some(k) = update.private_key {
            dev.private_key = Some(k);
            dev.public_key = Some(crate::wireguard_keys::public_key(&k));
            changes.push("private key".to_owned());
        }
        if let Some(p) = update.listen_port {
            dev.listen_port = p;
            changes.push(format!("port {p}"));
        }
        if let Some(m) = update.fwmark {
            dev.fwmark = m;
            changes.push(format!("fwmark {m:#x}"));
        }
        for u in &update.peers {
            let key = u.public_key.to_base64();
            let pos = dev.peers.iter().position(|p| p.public_key == u.public_key);
            if u.remove {
                changes.push(format!("remove {key}"));
                if let Some(i) = pos {
                    dev.peers.remove(i);
                }
                continue;
            }
            changes.push(format!("peer {key}"));
            let i = pos.unwrap_or_else(|| {
                dev.peers.push(WgPeer { public_key: u.public_key, ..WgPeer::default() });
                dev.peers.len() - 1
            });
            let Some(p) = dev.peers.get_mut(i) else { continue };
            if let Some(k) = u.preshared_key {
                p.preshared_key = (!k.is_zero()).then_some(k);
            }
            if let Some(e) = u.endpoint {
                p.endpoint = Some(e);
            }
            if let Some(k) = u.keepalive {
                p.keepalive = k;
            }
            if let Some(ips) = &u.allowed_ips {
                p.allowed_ips.clone_from(ips);
            }
        }
        self.log.push(format!("{text}: {}", changes.join(", ")));
        Ok(())
    }

    fn write_file(&mut self, path: &str, content: &str, _mode: u32) -> Result<bool, HostError> {
        if self.files.get(path).is_some_and(|c| c == content) {
            return Ok(false);
        }
        self.log.push(format!("write {path}"));
        if self.unwritable.iter().any(|p| p == path) {
            return Err(err(
                format!("write {path}"),
                HostErrorKind::Invalid,
                "read-only file system",
            ));
        }
        self.files.insert(path.to_owned(), content.to_owned());
        Ok(true)
    }
}
