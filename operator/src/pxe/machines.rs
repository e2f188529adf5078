// SPDX-License-Identifier: Apache-2.0
//! Which machines the boot service knows: a MAC, the image version it boots, its kernel
//! arguments and, optionally, its machine configuration. The service asks through
//! [`MachineTable`], so where the answers come from can change (today a per-machine resource
//! in the operator's store, written by `keelson-operator machine add`).

use std::collections::HashMap;
use std::sync::Mutex;

use serde::{Deserialize, Serialize};

use super::mac::Mac;
use crate::store::{Resource, Store, StoreError};

/// The store's namespace and type of the per-machine table.
pub const NAMESPACE: &str = "default";
pub const KIND: &str = "PxeMachines.keelson.dev";
/// Kernel arguments are kept short and plain: they are written into an iPXE script.
pub const MAX_CMDLINE: usize = 1024;
/// A machine configuration, at most (the store's value limit is 1 MiB).
pub const MAX_CONFIG: usize = 512 << 10;

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MachineSpec {
    pub version: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub cmdline: String,
    /// The machine configuration served at `/config/<mac>`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config: Option<String>,
}

/// What the boot service needs of a machine.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Machine {
    pub mac: Mac,
    pub version: String,
    pub cmdline: String,
    pub has_config: bool,
}

#[derive(Debug, thiserror::Error)]
pub enum TableError {
    #[error("machine table: {0}")]
    Store(#[from] StoreError),
    #[error("machine table: lock poisoned")]
    Poisoned,
}

/// Kernel arguments the script may carry: printable ASCII, no `$` (iPXE expands `${...}`),
/// at most [`MAX_CMDLINE`] bytes.
pub fn valid_cmdline(s: &str) -> bool {
    s.len() <= MAX_CMDLINE && s.bytes().all(|c| (b' '..=b'~').contains(&c) && c != b'$')
}

pub trait MachineTable: Send + Sync {
    fn machine(&self, mac: &Mac) -> Result<Option<Machine>, TableError>;
    fn config(&self, mac: &Mac) -> Result<Option<Vec<u8>>, TableError>;
}

fn machine_of(mac: &Mac, s: &MachineSpec) -> Machine {
    Machine {
        mac: *mac,
        version: s.version.clone(),
        cmdline: s.cmdline.clone(),
        has_config: s.config.is_some(),
    }
}

/// The table kept in the operator's store, one resource per MAC (its ID the MAC).
#[derive(Debug)]
pub struct StoreTable(Mutex<Store>);

impl StoreTable {
    pub fn new(store: Store) -> Self {
        Self(Mutex::new(store))
    }

    fn get(&self, mac: &Mac) -> Result<Option<MachineSpec>, TableError> {
        let mut s = self.0.lock().map_err(|_| TableError::Poisoned)?;
        Ok(s.get::<MachineSpec>(NAMESPACE, KIND, &mac.to_string())?.map(|r| r.spec))
    }

    /// Add or replace a machine.
    pub fn put(&self, mac: &Mac, spec: MachineSpec) -> Result<(), TableError> {
        let mut s = self.0.lock().map_err(|_| TableError::Poisoned)?;
        let id = mac.to_string();
        let mut r = Resource::new(NAMESPACE, KIND, &id, spec.clone());
        match s.create(&mut r) {
            Err(StoreError::AlreadyExists(_)) => {
                s.modify::<MachineSpec>(NAMESPACE, KIND, &id, |r| r.spec = spec.clone())?;
                Ok(())
            }
            other => Ok(other?),
        }
    }

    pub fn list(&self) -> Result<Vec<(String, MachineSpec)>, TableError> {
        let mut s = self.0.lock().map_err(|_| TableError::Poisoned)?;
        let (list, _) = s.list::<MachineSpec>(NAMESPACE, KIND)?;
        Ok(list.into_iter().map(|r| (r.metadata.id, r.spec)).collect())
    }
}

impl MachineTable for StoreTable {
    fn machine(&self, mac: &Mac) -> Result<Option<Machine>, TableError> {
        Ok(self.get(mac)?.map(|s| machine_of(mac, &s)))
    }

    fn config(&self, mac: &Mac) -> Result<Option<Vec<u8>>, TableError> {
        Ok(self.get(mac)?.and_then(|s| s.config).map(String::into_bytes))
    }
}

/// A table in memory (for tests and tools).
#[derive(Debug, Default)]
pub struct MemTable(pub HashMap<Mac, MachineSpec>);

impl MachineTable for MemTable {
    fn machine(&self, mac: &Mac) -> Result<Option<Machine>, TableError> {
        Ok(self.0.get(mac).map(|s| machine_of(mac, s)))
    }

    fn config(&self, mac: &Mac) -> Result<Option<Vec<u8>>, TableError> {
        Ok(self.0.get(mac).and_then(|s| s.config.clone()).map(String::into_bytes))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cmdlines_that_ipxe_would_expand_or_split_are_refused() {
        assert!(valid_cmdline("console=ttyS0 talos.platform=metal"));
        assert!(valid_cmdline(""));
        assert!(!valid_cmdline("a=${net0/ip}"));
        assert!(!valid_cmdline("a\nboot"));
        assert!(!valid_cmdline("caf\u{e9}"));
        assert!(!valid_cmdline(&"a".repeat(MAX_CMDLINE + 1)));
    }
}
