// SPDX-License-Identifier: Apache-2.0
//! The real [`Host`]: rtnetlink in the current network namespace, `sethostname(2)`, and files
//! under a root directory (`/` in init mode, anything in `run` mode).

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::net::IpAddr;
use std::path::{Path, PathBuf};

use ipnet::IpNet;

use super::{
    AddressChange, AddressOp, Host, HostError, HostErrorKind, LinkOp, RouteOp, RuleOp, WgDevice,
    WgUpdate,
};
use crate::netlink::{
    AddressChangeKind, KernelAddress, KernelLink, KernelRoute, KernelRule, NewLink, NlError,
    NlErrorKind, RouteSocket, WireguardSocket, BATCH_WINDOW, FOREVER,
};
use crate::resource::nethelpers::LinkFlags;
use crate::resource::{
    AddressStatus, Family, LinkStatus, RouteStatus, RoutingRuleStatus, RoutingTable,
};

/// The machine, over rtnetlink.
#[derive(Debug)]
pub struct KernelHost {
    sock: RouteSocket,
    root: PathBuf,
    manage_hostname: bool,
    /// Index → name, refreshed by every link dump (addresses and routes carry only indexes).
    names: BTreeMap<u32, String>,
    /// Opened with `sock`, so in the same namespace; the family is resolved on first use.
    wireguard: WireguardSocket,
    /// Rename physical links the kernel named to their predictable names (PID 1).
    predictable_names: bool,
    /// Links already considered for renaming, by index (each once, renamed or not).
    rename_seen: BTreeSet<u32>,
}

fn host_error(op: String, e: &NlError) -> HostError {
    let kind = match e.kind() {
        NlErrorKind::Transient | NlErrorKind::Bug => HostErrorKind::Transient,
        NlErrorKind::Invalid => HostErrorKind::Invalid,
        NlErrorKind::Unsupported => HostErrorKind::Unsupported,
        NlErrorKind::NotFound => HostErrorKind::NotFound,
        NlErrorKind::Exists => HostErrorKind::Exists,
    };
    HostError { op, message: e.to_string(), kind }
}

fn io_error(op: String, e: &std::io::Error) -> HostError {
    HostError { op, message: e.to_string(), kind: HostErrorKind::Transient }
}

impl KernelHost {
    /// A host in the current network namespace writing files under `root`. With
    /// `manage_hostname` false, `set_hostname` only records (for `run` mode on a workstation).
    pub fn new(root: &Path, manage_hostname: bool) -> Result<Self, HostError> {
        let sock =
            RouteSocket::new().map_err(|e| host_error("open rtnetlink socket".into(), &e))?;
        let wireguard = WireguardSocket::new()
            .map_err(|e| host_error("open generic netlink socket".into(), &e))?;
        Ok(Self {
            sock,
            root: root.to_owned(),
            manage_hostname,
            names: BTreeMap::new(),
            wireguard,
            predictable_names: false,
            rename_seen: BTreeSet::new(),
        })
    }

    /// Give physical links the kernel named (`eth0`) their predictable names, as
    /// systemd-udevd's `net_id` would (see [`crate::ifnames`]), before any status shows them.
    pub fn with_predictable_names(mut self, on: bool) -> Self {
        self.predictable_names = on;
        self
    }

    /// Rename the links not considered yet; whether any was renamed. A failure is one
    /// warning and the link keeps its kernel name.
    fn rename_new_links(&mut self, links: &[KernelLink]) -> bool {
        let sys = Path::new("/sys");
        let mut renamed = false;
        for l in links.iter().filter(|l| l.kind.is_empty()) {
            if !self.rename_seen.insert(l.index) {
                continue;
            }
            let Some(facts) = super::sysfs_net::rename_facts(sys, &l.name) else { continue };
            let Some(new) = crate::ifnames::predictable_name(&facts) else { continue };
            if new == l.name || links.iter().any(|o| o.name == new) {
                continue;
            }
            match self.rename(l, &new) {
                Ok(()) => {
                    log::info!(target: "run", "link {} renamed to {new} (kernel name kept as an altname)", l.name);
                    renamed = true;
                }
                Err(e) => {
                    log::warn!(target: "run", "link {}: cannot rename to {new}: {e}; it keeps its kernel name", l.name)
                }
            }
        }
        renamed
    }

    /// Down (the kernel renames only a down link), rename, the old name as an altname, up
    /// again if it was.
    fn rename(&mut self, l: &KernelLink, new: &str) -> Result<(), NlError> {
        if l.up {
            self.sock.link_set_up(l.index, false)?;
        }
        let result = self.sock.link_set_name(l.index, new);
        if result.is_ok() {
            if let Err(e) = self.sock.link_add_altname(l.index, &l.name) {
                log::warn!(target: "run", "link {new}: altname {}: {e}", l.name);
            }
        }
        if l.up {
            self.sock.link_set_up(l.index, true)?;
        }
        result
    }

    fn name_of(&self, index: u32) -> String {
        self.names.get(&index).cloned().unwrap_or_default()
    }
}

/// A kernel link as a status.
pub fn kernel_link_to_status(l: &KernelLink) -> LinkStatus {
    let dev = if l.kind.is_empty() {
        super::sysfs_net::device_info(Path::new("/sys"), &l.name)
    } else {
        super::sysfs_net::DeviceInfo::default()
    };
    LinkStatus {
        index: l.index,
        link_type: l.link_type,
        link_index: l.parent.unwrap_or(0),
        flags: LinkFlags(l.flags).to_string(),
        hardware_addr: l.mac.clone(),
        permanent_addr: l.perm_mac.clone(),
        broadcast_addr: l.broadcast.clone(),
        mtu: l.mtu,
        master_index: l.master.unwrap_or(0),
        operational_state: l.operstate.clone(),
        kind: l.kind.clone(),
        slave_kind: l.slave_kind.clone(),
        link_state: l.carrier,
        alias: l.alias.clone(),
        alt_names: l.alt_names.clone(),
        driver: dev.driver,
        bus_path: dev.bus_path,
        pci_id: dev.pci_id,
        vlan: l.vlan.clone(),
        bond_master: l.bond.clone(),
        bridge_master: l.bridge.clone(),
        vrf_master: l
            .vrf_table
            .map(|t| crate::resource::VrfMasterSpec { table: crate::resource::RoutingTable(t) }),
        // Filled from generic netlink by the status controller (`crate::host::Host::wireguard`).
        wireguard: None,
    }
}

fn kernel_address_to_status(a: &KernelAddress, link_name: String) -> AddressStatus {
    AddressStatus {
        address: a.net(),
        local: a.local,
        broadcast: a.broadcast.map(IpAddr::V4),
        anycast: None,
        multicast: None,
        link_index: a.index,
        link_name,
        family: a.family,
        scope: a.scope,
        flags: a.flags,
        priority: a.priority,
    }
}

fn address_to_kernel(c: &AddressChange) -> KernelAddress {
    let a = &c.address;
    let mut k = KernelAddress::new(a.link_index, a.address);
    k.local = a.local;
    k.broadcast = match a.broadcast {
        Some(IpAddr::V4(v4)) => Some(v4),
        _ => None,
    };
    k.scope = a.scope;
    k.flags = a.flags;
    k.priority = a.priority;
    k.valid_lft = c.valid_lifetime.unwrap_or(FOREVER);
    k.preferred_lft = c.preferred_lifetime.unwrap_or(FOREVER);
    k
}

fn status_address_to_kernel(a: &AddressStatus) -> KernelAddress {
    let mut k = KernelAddress::new(a.link_index, a.address);
    k.local = a.local;
    k.scope = a.scope;
    k
}

fn kernel_route_to_status(r: &KernelRoute, out_link_name: String) -> RouteStatus {
    RouteStatus {
        family: r.family,
        dst: r.dst,
        src: r.src,
        gateway: r.gateway,
        out_link_index: r.oif.unwrap_or(0),
        out_link_name,
        table: r.table,
        priority: r.priority,
        scope: r.scope,
        kind: r.kind,
        flags: r.flags,
        protocol: r.protocol,
        mtu: r.mtu,
    }
}

fn route_to_kernel(r: &RouteStatus) -> KernelRoute {
    let mut k = KernelRoute::new(r.family, r.dst.map(|d: IpNet| d.trunc()));
    k.src = r.src;
    k.gateway = r.gateway;
    k.oif = (r.out_link_index != 0).then_some(r.out_link_index);
    k.table = r.table;
    k.priority = r.priority;
    k.scope = r.scope;
    k.kind = r.kind;
    k.protocol = r.protocol;
    k.flags = r.flags;
    k.mtu = r.mtu;
    k
}

fn kernel_rule_to_status(r: &KernelRule) -> RoutingRuleStatus {
    RoutingRuleStatus {
        family: r.family,
        src: r.src,
        dst: r.dst,
        table: r.table,
        priority: r.priority,
        action: r.action,
        iif_name: r.iif.clone(),
        oif_name: r.oif.clone(),
        fw_mark: r.fw_mark,
        fw_mask: r.fw_mask,
        protocol: r.protocol,
    }
}

fn rule_to_kernel(r: &RoutingRuleStatus) -> KernelRule {
    let mut k = KernelRule::new(r.family, r.priority, r.table);
    k.action = r.action;
    k.fw_mark = r.fw_mark;
    k.fw_mask = r.fw_mask;
    k.src = r.src;
    k.dst = r.dst;
    k.iif = r.iif_name.clone();
    k.oif = r.oif_name.clone();
    k.protocol = r.protocol;
    k
}

impl Host for KernelHost {
    fn links(&mut self) -> Result<Vec<(String, LinkStatus)>, HostError> {
        let mut links = self.sock.dump_links().map_err(|e| host_error("dump links".into(), &e))?;
        if self.predictable_names && self.rename_new_links(&links) {
            links = self.sock.dump_links().map_err(|e| host_error("dump links".into(), &e))?;
        }
        self.names = crate::sort::into_map(links.iter().map(|l| (l.index, l.name.clone())));
        Ok(links.iter().map(|l| (l.name.clone(), kernel_link_to_status(l))).collect())
    }

    fn addresses(&mut self) -> Result<Vec<AddressStatus>, HostError> {
        if self.names.is_empty() {
            self.links()?;
        }
        let addrs =
            self.sock.dump_addresses().map_err(|e| host_error("dump addresses".into(), &e))?;
        Ok(addrs.iter().map(|a| kernel_address_to_status(a, self.name_of(a.index))).collect())
    }

    fn routes(&mut self) -> Result<Vec<RouteStatus>, HostError> {
        if self.names.is_empty() {
            self.links()?;
        }
        let routes = self.sock.dump_routes().map_err(|e| host_error("dump routes".into(), &e))?;
        Ok(routes
            .iter()
            .map(|r| kernel_route_to_status(r, r.oif.map(|i| self.name_of(i)).unwrap_or_default()))
            .collect())
    }

    fn routes_in(
        &mut self,
        tables: &[(Family, RoutingTable)],
    ) -> Result<Vec<RouteStatus>, HostError> {
        if self.names.is_empty() {
            self.links()?;
        }
        let mut out = Vec::new();
        for (family, table) in tables {
            let routes = self
                .sock
                .dump_routes_in(*family, *table)
                .map_err(|e| host_error("dump routes".into(), &e))?;
            out.extend(routes.iter().map(|r| {
                kernel_route_to_status(r, r.oif.map(|i| self.name_of(i)).unwrap_or_default())
            }));
        }
        Ok(out)
    }

    fn rules(&mut self) -> Result<Vec<RoutingRuleStatus>, HostError> {
        let rules = self.sock.dump_rules().map_err(|e| host_error("dump rules".into(), &e))?;
        Ok(rules.iter().map(kernel_rule_to_status).collect())
    }

    fn link(&mut self, op: &LinkOp) -> Result<(), HostError> {
        log::debug!(target: "host", "{op:?}");
        let s = &mut self.sock;
        let result = match op {
            LinkOp::Create { name, kind, mtu, mac } => {
                let mut link = NewLink::new(name, kind.clone());
                link.mtu = mtu.unwrap_or(0);
                link.mac = mac.clone();
                s.link_create(&link)
            }
            LinkOp::Delete { index, .. } => s.link_delete(*index),
            LinkOp::SetUp { index, up } => s.link_set_up(*index, *up),
            LinkOp::SetMtu { index, mtu } => s.link_set_mtu(*index, *mtu),
            LinkOp::SetMac { index, mac } => s.link_set_mac(*index, mac),
            LinkOp::SetMaster { index, master } => s.link_set_master(*index, *master),
            LinkOp::SetBond { index, bond } => s.link_set_bond(*index, bond),
            LinkOp::SetBridge { index, bridge } => s.link_set_bridge(*index, bridge),
        };
        result.map_err(|e| host_error(format!("{op:?}"), &e))
    }

    fn address(&mut self, op: &AddressOp) -> Result<(), HostError> {
        log::debug!(target: "host", "{op:?}");
        let (text, result) = match op {
            AddressOp::Add(c) => (
                format!("add address {}", c.address.id()),
                self.sock.address_add(&address_to_kernel(c)),
            ),
            AddressOp::Replace(c) => (
                format!("replace address {}", c.address.id()),
                self.sock.address_replace(&address_to_kernel(c)),
            ),
            AddressOp::Delete(a) => (
                format!("delete address {}", a.id()),
                self.sock.address_delete(&status_address_to_kernel(a)),
            ),
        };
        result.map_err(|e| host_error(text, &e))
    }

    fn addresses_apply(&mut self, ops: &[&AddressOp]) -> Vec<Result<(), HostError>> {
        for op in ops {
            log::debug!(target: "host", "{op:?}");
        }
        // A window at a time: thousands of operations are never all converted and encoded
        // at once.
        let mut results = Vec::with_capacity(ops.len());
        for chunk in ops.chunks(BATCH_WINDOW) {
            let changes: Vec<AddressChangeKind> = chunk
                .iter()
                .map(|op| match op {
                    AddressOp::Add(c) => AddressChangeKind::Add(address_to_kernel(c)),
                    AddressOp::Replace(c) => AddressChangeKind::Replace(address_to_kernel(c)),
                    AddressOp::Delete(a) => AddressChangeKind::Delete(status_address_to_kernel(a)),
                })
                .collect();
            results.extend(self.sock.address_batch(&changes));
        }
        ops.iter()
            .zip(results)
            .map(|(op, r)| {
                r.map_err(|e| {
                    let text = match op {
                        AddressOp::Add(c) => format!("add address {}", c.address.id()),
                        AddressOp::Replace(c) => format!("replace address {}", c.address.id()),
                        AddressOp::Delete(a) => format!("delete address {}", a.id()),
                    };
                    host_error(text, &e)
                })
            })
            .collect()
    }

    fn routes_apply(&mut self, ops: &[&RouteOp]) -> Vec<Result<(), HostError>> {
        for op in ops {
            log::debug!(target: "host", "{op:?}");
        }
        // A window at a time, as for addresses.
        let mut results = Vec::with_capacity(ops.len());
        for chunk in ops.chunks(BATCH_WINDOW) {
            let changes: Vec<(bool, KernelRoute)> = chunk
                .iter()
                .map(|op| match op {
                    RouteOp::Add(r) => (true, route_to_kernel(r)),
                    RouteOp::Delete(r) => (false, route_to_kernel(r)),
                })
                .collect();
            results.extend(self.sock.route_batch(&changes));
        }
        // The error text (with the route's ID) only for the operations that failed.
        ops.iter()
            .zip(results)
            .map(|(op, r)| {
                r.map_err(|e| {
                    let text = match op {
                        RouteOp::Add(r) => format!("add route {}", r.id()),
                        RouteOp::Delete(r) => format!("delete route {}", r.id()),
                    };
                    host_error(text, &e)
                })
            })
            .collect()
    }

    fn route(&mut self, op: &RouteOp) -> Result<(), HostError> {
        log::debug!(target: "host", "{op:?}");
        let (text, result) = match op {
            RouteOp::Add(r) => {
                (format!("add route {}", r.id()), self.sock.route_add(&route_to_kernel(r)))
            }
            RouteOp::Delete(r) => {
                (format!("delete route {}", r.id()), self.sock.route_delete(&route_to_kernel(r)))
            }
        };
        result.map_err(|e| host_error(text, &e))
    }

    fn rule(&mut self, op: &RuleOp) -> Result<(), HostError> {
        log::debug!(target: "host", "{op:?}");
        let (text, result) = match op {
            RuleOp::Add(r) => (
                format!("add rule {}/{}", r.family, r.priority),
                self.sock.rule_add(&rule_to_kernel(r)),
            ),
            RuleOp::Delete(r) => (
                format!("delete rule {}/{}", r.family, r.priority),
                self.sock.rule_delete(&rule_to_kernel(r)),
            ),
        };
        result.map_err(|e| host_error(text, &e))
    }

    fn wireguard(&mut self, name: &str) -> Result<WgDevice, HostError> {
        let op = format!("wireguard get {name}");
        self.wireguard.get_device(name).map_err(|e| host_error(op, &e))
    }

    fn wireguard_set(&mut self, name: &str, update: &WgUpdate) -> Result<(), HostError> {
        let op = format!("wireguard set {name}");
        log::debug!(target: "host", "{op}: {update:?}");
        self.wireguard.set_device(name, update).map_err(|e| host_error(op, &e))
    }

    fn set_hostname(&mut self, hostname: &str, domainname: &str) -> Result<(), HostError> {
        if !self.manage_hostname {
            return Ok(());
        }
        let op = || format!("sethostname {hostname}");
        nix::unistd::sethostname(hostname).map_err(|e| io_error(op(), &e.into()))?;
        // SAFETY: the pointer and length describe a live byte slice for the whole call, and
        // setdomainname(2) only reads it.
        let rc = unsafe { libc::setdomainname(domainname.as_ptr().cast(), domainname.len()) };
        if rc != 0 {
            return Err(io_error(
                format!("setdomainname {domainname}"),
                &std::io::Error::last_os_error(),
            ));
        }
        Ok(())
    }

    fn write_file(&mut self, path: &str, content: &str, mode: u32) -> Result<bool, HostError> {
        let full = self.root.join(path.trim_start_matches('/'));
        if fs::read_to_string(&full).is_ok_and(|old| old == content) {
            return Ok(false);
        }
        let op = || format!("write {}", full.display());
        if let Some(dir) = full.parent() {
            fs::create_dir_all(dir).map_err(|e| io_error(op(), &e))?;
        }
        // Write a sibling and rename over: readers never see a half-written resolv.conf.
        // No fsync: these files are rewritten from the resources at every boot.
        crate::atomic_file::write(
            &full,
            content.as_bytes(),
            mode,
            crate::atomic_file::Durability::Nothing,
        )
        .map_err(|e| io_error(op(), &e))?;
        Ok(true)
    }
}
