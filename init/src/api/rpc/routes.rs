// SPDX-License-Identifier: Apache-2.0
//! Which handler serves which path: every service's method table, joined. A service is added
//! by writing its `METHODS` (see [`super::dispatch`]) and listing it here.

use super::dispatch::Method;

/// Every service the node serves.
pub const SERVICES: &[&[Method]] = &[
    super::machine::METHODS,
    super::etcd::METHODS,
    super::service_ops::METHODS,
    super::kubeconfig::METHODS,
    super::storage::METHODS,
    super::time::METHODS,
    super::cosi::METHODS,
    super::keelson::METHODS,
    super::trustd::METHODS,
];

/// The method at `path`.
pub fn route(path: &str) -> Option<&'static Method> {
    SERVICES.iter().flat_map(|s| s.iter()).find(|m| m.path == path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_path_is_routed_once_and_has_a_limit() {
        let all: Vec<&Method> = SERVICES.iter().flat_map(|s| s.iter()).collect();
        for m in &all {
            assert_eq!(all.iter().filter(|o| o.path == m.path).count(), 1, "{}", m.path);
            assert!(m.path.starts_with('/') && m.path[1..].contains('/'), "{}", m.path);
            assert!(m.max_request > 0, "{}", m.path);
            assert!(route(m.path).is_some());
        }
        assert!(route("/machine.MachineService/Version").is_some());
        assert!(route("/machine.MachineService/Nope").is_none());
        assert!(route("machine.MachineService/Version").is_none());
    }
}
