// SPDX-License-Identifier: Apache-2.0
//! Machines the boot service knows from the operator's TalosMachine resources: a TalosMachine
//! with a `pxeClientSpec` boots its `version` with `kernelCmdlineArgs`. Its first boot has no
//! config from the boot service (it starts in maintenance mode, where the TalosMachine
//! controller applies its configuration); once a configuration was applied (`status.configHash`)
//! the service serves it at `/config/MAC` (rendered as the controller renders it, from the
//! sealed cluster secrets when the machine has no `config`), so a reboot into another version
//! comes up configured. [`Chain`] asks several tables in order, so an explicit `machine add` entry
//! wins over a TalosMachine of the same MAC.

use std::sync::{Arc, Mutex};

use super::mac::Mac;
use super::machines::{valid_cmdline, Machine, MachineTable, TableError};
use crate::kinds::{Body, MachineSpec, TM};
use crate::secrets::SecretsKey;
use crate::store::Store;

/// The TalosMachines of one namespace.
#[derive(Debug)]
pub struct TalosMachines {
    store: Mutex<Store>,
    namespace: String,
    key: Option<SecretsKey>,
}

impl TalosMachines {
    pub fn new(store: Store, namespace: &str) -> Self {
        Self { store: Mutex::new(store), namespace: namespace.into(), key: None }
    }

    /// Open generated cluster secrets with `key` (the one `serve` seals them with).
    pub fn with_secrets_key(mut self, key: SecretsKey) -> Self {
        self.key = Some(key);
        self
    }

    /// The TalosMachine booting `mac`.
    fn find(&self, mac: &Mac) -> Result<Option<(String, Body<MachineSpec>)>, TableError> {
        let mut s = self.store.lock().map_err(|_| TableError::Poisoned)?;
        // IDs are hashed into keys, so a MAC is found by listing (a cluster's machines).
        let (list, _) = s.list::<Body<MachineSpec>>(&self.namespace, TM)?;
        Ok(list
            .into_iter()
            .find(|r| machine_of(mac, &r.spec.spec).is_some())
            .map(|r| (r.metadata.id, r.spec)))
    }
}

/// What a TalosMachine says about booting `mac`, if it is that machine's (pure).
pub fn machine_of(mac: &Mac, spec: &MachineSpec) -> Option<Machine> {
    let pxe = spec.pxe_client_spec.as_ref()?;
    if Mac::parse(pxe.mac_address.trim()).ok()? != *mac {
        return None;
    }
    let cmdline = pxe.kernel_cmdline_args.join(" ");
    // Arguments the script could not carry safely are left out whole, with the machine still
    // booting (the resource's author sees the script without them).
    let cmdline = if valid_cmdline(&cmdline) { cmdline } else { String::new() };
    Some(Machine { mac: *mac, version: spec.version.clone(), cmdline, has_config: false })
}

impl MachineTable for TalosMachines {
    fn machine(&self, mac: &Mac) -> Result<Option<Machine>, TableError> {
        Ok(self.find(mac)?.and_then(|(_, body)| {
            let mut m = machine_of(mac, &body.spec)?;
            m.has_config = !body.status.config_hash.is_empty();
            Some(m)
        }))
    }

    fn config(&self, mac: &Mac) -> Result<Option<Vec<u8>>, TableError> {
        let Some((id, body)) = self.find(mac)? else { return Ok(None) };
        if body.status.config_hash.is_empty() {
            return Ok(None);
        }
        let mut s = self.store.lock().map_err(|_| TableError::Poisoned)?;
        // Never generates: only the leader's controller does, before it applies.
        let r = crate::secrets::machine_config(
            &mut s,
            &self.namespace,
            self.key.as_ref(),
            &id,
            &body.spec,
            false,
        )?;
        match r.config {
            Ok(c) => Ok(Some(c.into_bytes())),
            Err(e) => {
                log::warn!("TalosMachine {id}: no configuration to serve: {e}");
                Ok(None)
            }
        }
    }
}

/// Tables asked in order: the first that knows a MAC answers for it.
pub struct Chain(pub Vec<Arc<dyn MachineTable>>);

impl std::fmt::Debug for Chain {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Chain({} tables)", self.0.len())
    }
}

impl MachineTable for Chain {
    fn machine(&self, mac: &Mac) -> Result<Option<Machine>, TableError> {
        for t in &self.0 {
            if let Some(m) = t.machine(mac)? {
                return Ok(Some(m));
            }
        }
        Ok(None)
    }

    fn config(&self, mac: &Mac) -> Result<Option<Vec<u8>>, TableError> {
        for t in &self.0 {
            if t.machine(mac)?.is_some() {
                return t.config(mac);
            }
        }
        Ok(None)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kinds::PxeClientSpec;
    use crate::pxe::machines::{MachineSpec as Entry, MemTable};

    fn tm(mac: &str, args: &[&str]) -> MachineSpec {
        MachineSpec {
            endpoint: "10.0.0.5".into(),
            version: "v1.7.0".into(),
            pxe_client_spec: Some(PxeClientSpec {
                mac_address: mac.into(),
                cpu_architecture: "amd64".into(),
                kernel_cmdline_args: args.iter().map(|s| (*s).to_owned()).collect(),
            }),
            ..Default::default()
        }
    }

    #[test]
    fn a_talos_machine_boots_its_version_with_its_args() {
        let mac = Mac::parse("52:54:00:12:34:56").unwrap();
        let m =
            machine_of(&mac, &tm("52-54-00-12-34-56", &["console=ttyS0", "talos.platform=metal"]))
                .unwrap();
        assert_eq!(
            (m.version.as_str(), m.cmdline.as_str()),
            ("v1.7.0", "console=ttyS0 talos.platform=metal")
        );
        assert!(!m.has_config);
        assert!(machine_of(&mac, &tm("52:54:00:12:34:57", &[])).is_none());
        assert!(machine_of(&mac, &tm("not a mac", &[])).is_none());
        let hostile = machine_of(&mac, &tm("52:54:00:12:34:56", &["a=${x}"])).unwrap();
        assert_eq!(hostile.cmdline, "");
        assert!(machine_of(&mac, &MachineSpec::default()).is_none());
    }

    #[test]
    fn the_first_table_that_knows_a_mac_answers() {
        let mac = Mac::parse("52:54:00:12:34:56").unwrap();
        let mut a = MemTable::default();
        a.0.insert(
            mac,
            Entry { version: "a".into(), cmdline: String::new(), config: Some("c".into()) },
        );
        let mut b = MemTable::default();
        b.0.insert(mac, Entry { version: "b".into(), cmdline: String::new(), config: None });
        let other = Mac::parse("52:54:00:00:00:01").unwrap();
        b.0.insert(other, Entry { version: "b".into(), cmdline: String::new(), config: None });
        let chain = Chain(vec![Arc::new(a), Arc::new(b)]);
        assert_eq!(chain.machine(&mac).unwrap().unwrap().version, "a");
        assert_eq!(chain.config(&mac).unwrap(), Some(b"c".to_vec()));
        assert_eq!(chain.machine(&other).unwrap().unwrap().version, "b");
        assert_eq!(chain.config(&other).unwrap(), None);
        assert!(chain.machine(&Mac([0; 6])).unwrap().is_none());
    }
}
