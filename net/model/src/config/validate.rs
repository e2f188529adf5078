// SPDX-License-Identifier: Apache-2.0
//! Checks that need more than one value (run after a successful parse). Each failure names
//! a YAML path, which is then located in the text for its line.

use std::collections::BTreeSet;

use super::locate::YamlPath;
use super::machine::MachineConfig;
use super::network::Device;

/// The only document version there is.
pub(crate) const VERSION: &str = "v1alpha1";

/// The first problem found, in document order: its path and message.
pub(crate) fn check(cfg: &MachineConfig) -> Result<(), (YamlPath, String)> {
    if cfg.version != VERSION {
        return Err((
            YamlPath::keys("version"),
            format!("unsupported version {:?} (expected {VERSION})", cfg.version),
        ));
    }
    let devices = YamlPath::keys("machine.network.interfaces");
    for (i, device) in cfg.machine.network.interfaces.iter().enumerate() {
        check_device(device, &devices.index(i))?;
    }
    let peers = YamlPath::keys("machine.network.kubespan.peers");
    let mut keys = BTreeSet::new();
    for (i, peer) in cfg.machine.network.kubespan.peers.iter().enumerate() {
        if !keys.insert(peer.public_key.as_str()) {
            return Err((
                peers.index(i).key("publicKey"),
                format!("peer {} is listed twice", peer.public_key),
            ));
        }
    }
    Ok(())
}

/// KubeSpan settings that parse but cannot do what they say, one line each.
pub(crate) fn kubespan_warnings(cfg: &MachineConfig, yaml: &str) -> Vec<String> {
    let ks = &cfg.machine.network.kubespan;
    let at = |path: &'static str| match YamlPath::keys(path).locate(yaml) {
        Some(p) => format!("{path} (line {})", p.line),
        None => path.to_owned(),
    };
    let mut out = Vec::new();
    if ks.harvest_extra_endpoints {
        out.push(format!(
            "{}: needs a discovery service, which keelson does not have yet; ignored",
            at("machine.network.kubespan.harvestExtraEndpoints")
        ));
    }
    if ks.advertise_kubernetes_networks {
        out.push(format!(
            "{}: pod networks are advertised through discovery, which keelson does not have \
             yet; list them in peers[].addresses instead",
            at("machine.network.kubespan.advertiseKubernetesNetworks")
        ));
    }
    if !ks.filters.endpoints.is_empty() {
        out.push(format!(
            "{}: filters the addresses this node advertises, and keelson does not advertise any \
             yet (no discovery); no effect",
            at("machine.network.kubespan.filters.endpoints")
        ));
    }
    if ks.enabled && cfg.cluster.as_ref().and_then(|c| c.id.as_ref()).is_none() {
        out.push(format!(
            "{}: KubeSpan needs cluster.id for its address; it stays off until one is set",
            at("machine.network.kubespan.enabled")
        ));
    }
    out
}

fn check_device(device: &Device, at: &YamlPath) -> Result<(), (YamlPath, String)> {
    match (&device.interface, &device.device_selector) {
        (Some(_), Some(_)) => {
            return Err((
                at.key("deviceSelector"),
                "a device takes either interface or deviceSelector, not both".into(),
            ))
        }
        (None, None) => {
            return Err((at.clone(), "a device needs interface or deviceSelector".into()))
        }
        (Some(name), None) if name.is_empty() => {
            return Err((at.key("interface"), "empty interface name".into()))
        }
        (None, Some(sel)) if sel.is_empty() => {
            return Err((
                at.key("deviceSelector"),
                "deviceSelector needs at least one field".into(),
            ))
        }
        _ => {}
    }
    if device.bond.is_some() && device.bridge.is_some() {
        return Err((at.key("bridge"), "a device is either a bond or a bridge, not both".into()));
    }
    if let Some(bond) = &device.bond {
        if let Some(j) = bond.device_selectors.iter().position(|s| s.is_empty()) {
            return Err((
                at.key("bond").key("deviceSelectors").index(j),
                "deviceSelector needs at least one field".into(),
            ));
        }
    }
    let mut seen = BTreeSet::new();
    for (j, vlan) in device.vlans.iter().enumerate() {
        if !seen.insert(vlan.vlan_id) {
            return Err((
                at.key("vlans").index(j).key("vlanId"),
                format!("VLAN {} is defined twice on this device", vlan.vlan_id),
            ));
        }
    }
    Ok(())
}
