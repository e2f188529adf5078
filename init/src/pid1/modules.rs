// SPDX-License-Identifier: Apache-2.0
//! Kernel module loading: a list baked into the image, dependencies from `modules.dep`.
//!
//! `modules.dep` lines read `path/to/mod.ko: dep1.ko dep2.ko`, where the dependencies are
//! listed so that the last one must be loaded first (as modprobe does).

use std::collections::{BTreeMap, BTreeSet};
use std::ffi::CString;
use std::fs::File;
use std::path::{Path, PathBuf};

use nix::kmod::{finit_module, ModuleInitFlags};

/// Why one module did not load.
#[derive(Debug, thiserror::Error)]
enum LoadError {
    /// The `.ko` file could not be opened.
    #[error(transparent)]
    Open(std::io::Error),
    /// The kernel refused it.
    #[error(transparent)]
    Init(nix::errno::Errno),
}

/// Module names treat `-` and `_` alike.
pub fn normalize(name: &str) -> String {
    name.replace('-', "_")
}

fn module_name(path: &str) -> String {
    let file = path.rsplit('/').next().unwrap_or(path);
    normalize(file.split(".ko").next().unwrap_or(file))
}

/// Parsed `modules.dep`: module name → (path, dependency paths).
pub fn parse_modules_dep(text: &str) -> BTreeMap<String, (String, Vec<String>)> {
    text.lines()
        .filter_map(|line| {
            let (path, deps) = line.split_once(':')?;
            let deps = deps.split_whitespace().map(str::to_owned).collect();
            Some((module_name(path), (path.trim().to_owned(), deps)))
        })
        .collect()
}

/// The load order for `wanted`: each module after its dependencies, each path once. Unknown
/// names are returned separately.
pub fn load_order(
    dep: &BTreeMap<String, (String, Vec<String>)>,
    wanted: &[String],
) -> (Vec<String>, Vec<String>) {
    let mut order = Vec::new();
    let mut seen = BTreeSet::new();
    let mut unknown = Vec::new();
    for name in wanted {
        let Some((path, deps)) = dep.get(&normalize(name)) else {
            unknown.push(name.clone());
            continue;
        };
        for d in deps.iter().rev().chain(std::iter::once(path)) {
            if seen.insert(d.clone()) {
                order.push(d.clone());
            }
        }
    }
    (order, unknown)
}

/// Load the modules listed in `list_path` from `/lib/modules/<release>`; logs each result.
pub fn load_listed(list_path: &Path) {
    let Ok(list) = std::fs::read_to_string(list_path) else {
        log::info!(target: "pid1", "no module list at {}", list_path.display());
        return;
    };
    let wanted: Vec<String> = list
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(str::to_owned)
        .collect();
    let release = nix::sys::utsname::uname()
        .map(|u| u.release().to_string_lossy().into_owned())
        .unwrap_or_default();
    let base = PathBuf::from("/lib/modules").join(&release);
    let dep = match std::fs::read_to_string(base.join("modules.dep")) {
        Ok(text) => parse_modules_dep(&text),
        Err(e) => {
            log::error!(target: "pid1", "{}: {e}; no modules loaded", base.join("modules.dep").display());
            return;
        }
    };
    let (order, unknown) = load_order(&dep, &wanted);
    for name in unknown {
        log::warn!(target: "pid1", "module {name}: not in modules.dep (built in, or not shipped)");
    }
    let params = CString::default();
    for path in order {
        let name = module_name(&path);
        let result = File::open(base.join(&path)).map_err(LoadError::Open).and_then(|f| {
            finit_module(&f, &params, ModuleInitFlags::empty()).map_err(LoadError::Init)
        });
        match result {
            Ok(()) => log::info!(target: "pid1", "module loaded: {name}"),
            Err(LoadError::Init(nix::errno::Errno::EEXIST)) => {
                log::debug!(target: "pid1", "module {name}: already loaded")
            }
            Err(e) => log::error!(target: "pid1", "module {name}: {e}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const DEP: &str = "kernel/drivers/net/virtio_net.ko: kernel/drivers/net/net_failover.ko kernel/net/core/failover.ko
kernel/drivers/net/net_failover.ko: kernel/net/core/failover.ko
kernel/net/core/failover.ko:
kernel/drivers/net/bonding/bonding.ko: kernel/net/tls/tls.ko
kernel/net/tls/tls.ko:
";

    #[test]
    fn dependencies_first_each_once() {
        let dep = parse_modules_dep(DEP);
        let (order, unknown) = load_order(
            &dep,
            &["virtio-net".into(), "net_failover".into(), "bonding".into(), "nope".into()],
        );
        assert_eq!(
            order,
            [
                "kernel/net/core/failover.ko",
                "kernel/drivers/net/net_failover.ko",
                "kernel/drivers/net/virtio_net.ko",
                "kernel/net/tls/tls.ko",
                "kernel/drivers/net/bonding/bonding.ko"
            ]
        );
        assert_eq!(unknown, ["nope"]);
    }
}
