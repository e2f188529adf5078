// SPDX-License-Identifier: Apache-2.0
//! Layer `configuration`: specs from the machine configuration (docs/talos.md: Merge).

use super::ids::MACHINE_CONFIG_ID;
use super::layer::{layered_outputs, sourced_key, LayerCache, SourceVersion, LINKS_INPUT};
use crate::config::{self, MachineConfig};
use crate::resource::{ConfigLayer, Kind, LayerSpecs, LinkDigest, Namespace};
use crate::runtime::{Controller, ControllerError, Ctx, Input, Next, Output};

/// Writes `configuration/…` specs from the `MachineConfig` resource.
#[derive(Debug, Default)]
pub struct MachineConfigController {
    /// The configuration's version and the links' identities the layer was written from
    /// (none and no links without a configuration: the layer is then empty whatever the links).
    cache: LayerCache<(Option<SourceVersion>, LinkDigest)>,
}

impl Controller for MachineConfigController {
    fn name(&self) -> &'static str {
        "network.MachineConfigController"
    }

    fn inputs(&self) -> Vec<Input> {
        vec![Input::strong(Namespace::Config, Kind::MachineConfig), LINKS_INPUT]
    }

    fn outputs(&self) -> Vec<Output> {
        layered_outputs()
    }

    fn reconcile(&mut self, ctx: &mut Ctx<'_>) -> Result<Next, ControllerError> {
        let (key, links) =
            sourced_key(ctx, Namespace::Config, Kind::MachineConfig, MACHINE_CONFIG_ID);
        if self.cache.is_current(&key) {
            return Ok(Next::Idle);
        }
        let specs = match ctx.get::<MachineConfig>(Namespace::Config, MACHINE_CONFIG_ID) {
            Some(cfg) => config::to_specs(cfg, &links.view()),
            None => LayerSpecs::default(),
        };
        self.cache.write(ctx, ConfigLayer::Configuration, key, specs)?;
        Ok(Next::Idle)
    }
}

#[cfg(test)]
mod tests {
    use std::cell::Cell;
    use std::rc::Rc;
    use std::time::{Duration, Instant};

    use super::*;
    use crate::resource::{layered_id, AddressSpec, LinkSpec, LinkStatus, LinkType};
    use crate::runtime::Runtime;

    /// `net0`, the link whose alias is `wan`, gets MTU 9000 and 10.0.0.5/24; the link that
    /// answers to `uplink` gets 10.0.1.5/24.
    const CONFIG: &str = "apiVersion: v1alpha1\nkind: LinkAliasConfig\nname: net0\n\
        selector:\n  match: link.alias == \"wan\"\n\
        ---\napiVersion: v1alpha1\nkind: LinkConfig\nname: net0\nmtu: 9000\n\
        addresses:\n  - address: 10.0.0.5/24\n\
        ---\napiVersion: v1alpha1\nkind: LinkConfig\nname: uplink\n\
        addresses:\n  - address: 10.0.1.5/24\n";

    fn ether(index: u32) -> LinkStatus {
        LinkStatus {
            index,
            link_type: LinkType::ETHER,
            flags: "BROADCAST,MULTICAST".into(),
            hardware_addr: format!("02:00:00:00:00:0{index}").parse().unwrap(),
            mtu: 1500,
            operational_state: "down".into(),
            driver: "virtio_net".into(),
            ..LinkStatus::default()
        }
    }

    fn runtime() -> (Runtime, Rc<Cell<u64>>) {
        let ctrl = MachineConfigController::default();
        let writes = ctrl.cache.writes.clone();
        let mut rt = Runtime::new();
        rt.register(Box::new(ctrl)).unwrap();
        rt.put_input("test", Namespace::Network, "eth0", ether(2)).unwrap();
        rt.put_input("test", Namespace::Network, "eth1", ether(3)).unwrap();
        (rt, writes)
    }

    fn address_id(link: &str, address: &str) -> String {
        let spec = AddressSpec::new(link, address.parse().unwrap(), ConfigLayer::Configuration);
        layered_id(ConfigLayer::Configuration, &spec.id())
    }

    fn has_address(rt: &Runtime, link: &str, address: &str) -> bool {
        let id = address_id(link, address);
        rt.store().get_spec::<AddressSpec>(Namespace::NetworkConfig, &id).is_some()
    }

    fn layer_changes(rt: &mut Runtime) -> usize {
        rt.take_changes().iter().filter(|c| c.namespace == Namespace::NetworkConfig).count()
    }

    #[test]
    fn link_state_changes_derive_nothing_identity_changes_derive_again() {
        let (mut rt, writes) = runtime();
        let now = Instant::now();
        let cfg = config::parse(CONFIG).unwrap();
        rt.put_input("test", Namespace::Config, MACHINE_CONFIG_ID, cfg).unwrap();
        rt.run(now);
        assert_eq!(writes.get(), 1);
        assert!(has_address(&rt, "net0", "10.0.0.5/24"));
        assert!(has_address(&rt, "uplink", "10.0.1.5/24"));
        assert!(layer_changes(&mut rt) > 0);
        let runs = rt.controllers()[0].runs;

        // The link comes up: woken, nothing derived, nothing written.
        let up = LinkStatus {
            flags: "UP,BROADCAST,RUNNING,MULTICAST,LOWER_UP".into(),
            operational_state: "up".into(),
            link_state: true,
            master_index: 7,
            ..ether(2)
        };
        rt.put_input("test", Namespace::Network, "eth0", up.clone()).unwrap();
        rt.run(now);
        assert_eq!(rt.controllers()[0].runs, runs + 1);
        assert_eq!(writes.get(), 1);
        assert_eq!(layer_changes(&mut rt), 0);

        // eth0 gets the alias `wan`: the alias selector matches it, so the layer is derived
        // again and `net0`'s settings land on eth0.
        rt.put_input("test", Namespace::Network, "eth0", LinkStatus { alias: "wan".into(), ..up })
            .unwrap();
        rt.run(now);
        assert_eq!(writes.get(), 2);
        assert!(
            has_address(&rt, "eth0", "10.0.0.5/24") && !has_address(&rt, "net0", "10.0.0.5/24")
        );
        let id = layered_id(ConfigLayer::Configuration, "eth0");
        let link = rt.store().get_spec::<LinkSpec>(Namespace::NetworkConfig, &id).unwrap();
        assert_eq!(link.mtu, 9000);

        // eth1 gets the altname `uplink`: the name resolves to it.
        let named = LinkStatus { alt_names: vec!["uplink".into()], ..ether(3) };
        rt.put_input("test", Namespace::Network, "eth1", named).unwrap();
        rt.run(now);
        assert_eq!(writes.get(), 3);
        assert!(
            has_address(&rt, "eth1", "10.0.1.5/24") && !has_address(&rt, "uplink", "10.0.1.5/24")
        );

        // A new configuration is derived again with the links unchanged.
        let cfg = config::parse(&CONFIG.replace("10.0.1.5", "10.0.1.6")).unwrap();
        rt.put_input("test", Namespace::Config, MACHINE_CONFIG_ID, cfg).unwrap();
        rt.run(now);
        assert_eq!(writes.get(), 4);
        assert!(
            has_address(&rt, "eth1", "10.0.1.6/24") && !has_address(&rt, "eth1", "10.0.1.5/24")
        );
        assert!(rt.controllers().iter().all(|c| c.last_error.is_none()));
    }

    #[test]
    fn a_failed_write_is_derived_again() {
        let (mut rt, writes) = runtime();
        let now = Instant::now();
        // Another owner holds an ID the layer writes: the write fails.
        let id = address_id("uplink", "10.0.1.5/24");
        let held = AddressSpec::new("uplink", "10.0.1.5/24".parse().unwrap(), ConfigLayer::Default);
        rt.put_input("intruder", Namespace::NetworkConfig, &id, held).unwrap();
        let cfg = config::parse(CONFIG).unwrap();
        rt.put_input("test", Namespace::Config, MACHINE_CONFIG_ID, cfg).unwrap();
        rt.run(now);
        assert_eq!(writes.get(), 1);
        assert!(rt.controllers()[0].last_error.is_some());

        // Once the ID is free, the retry (nothing else changed) derives and writes again.
        rt.remove_input("intruder", Namespace::NetworkConfig, Kind::AddressSpec, &id).unwrap();
        rt.run(now + Duration::from_secs(60));
        assert_eq!(writes.get(), 2);
        assert!(rt.controllers()[0].last_error.is_none());
        let owner = rt.store().get(Namespace::NetworkConfig, Kind::AddressSpec, &id).unwrap();
        assert_eq!(owner.metadata.owner, "network.MachineConfigController");
    }
}
