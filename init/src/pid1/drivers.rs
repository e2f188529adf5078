// SPDX-License-Identifier: Apache-2.0
//! Drivers at boot and after: what PID 1 starts before its loop, and the kernel's modprobe
//! helper.
//!
//! - Coldplug: every device present without a driver is matched through `modules.alias`.
//! - Hotplug: the uevent socket is opened first (so nothing appearing meanwhile is missed,
//!   the virtio devices `virtio_pci` creates included) and read by a thread of its own that
//!   feeds the loader; the node loop only holds the loader, for feature modules.
//! - The fixed list (`/etc/keelson/modules`) and `keelson.modules=` are loaded as well.
//! - Feature modules (bonding, 8021q, bridge, dummy, veth, wireguard, nf_tables) are loaded
//!   when first needed, by the kernel itself: creating a link of an unknown kind asks for
//!   `rtnl-link-<kind>`, a netfilter socket for `nfnetlink-subsys-<n>`, and the kernel runs
//!   its modprobe helper (`/proc/sys/kernel/modprobe`) and waits. keelson points that at
//!   itself: `/init -q -- NAME` resolves NAME like modprobe and loads it (see [`modprobe_main`]).

use std::path::Path;
use std::process::ExitCode;

use super::loader::{self, Loader, Request};
use super::modules::{parse_list, Tables};
use super::uevent::{Hotplug, Uevents};

/// The module list baked into the image.
pub const MODULE_LIST: &str = "/etc/keelson/modules";
/// Where the kernel finds its modprobe helper, and what keelson puts there.
const MODPROBE_SYSCTL: &str = "/proc/sys/kernel/modprobe";
const SELF: &str = "/init";
/// The module list is a short text file.
const LIST_LIMIT: u64 = 64 << 10;

/// Start loading drivers; the hotplug side for the node loop, if the tables could be read.
pub fn start(modules_from_cmdline: Vec<String>) -> Option<Hotplug> {
    let uevents = match Uevents::open() {
        Ok(u) => Some(u),
        Err(e) => {
            log::error!(target: "pid1", "uevent socket: {e}; devices that appear later get no driver");
            None
        }
    };
    let tables = match Tables::load() {
        Ok(t) => t,
        Err(e) => {
            log::error!(target: "pid1", "{e}; no modules loaded");
            return None;
        }
    };
    log::info!(target: "pid1", "module tables: {} aliases", tables.aliases.len());
    if Path::new(SELF).is_file() {
        if let Err(e) = std::fs::write(MODPROBE_SYSCTL, SELF) {
            log::warn!(target: "pid1", "{MODPROBE_SYSCTL}: {e}; the kernel cannot load feature modules on demand");
        }
    }
    let loader = Loader::start(tables, loader::THREADS);
    match net::bounded::read_text(Path::new(MODULE_LIST), LIST_LIMIT) {
        Ok(text) => loader.send(Request::Names(parse_list(&text), "fixed list")),
        Err(net::bounded::ReadError::Io(e)) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => log::warn!(target: "pid1", "{MODULE_LIST}: {e}"),
    }
    if !modules_from_cmdline.is_empty() {
        loader.send(Request::Names(modules_from_cmdline, "keelson.modules"));
    }
    loader.send(Request::Coldplug);
    if let Some(uevents) = uevents {
        if let Err(e) = uevents.spawn_reader(loader.clone()) {
            log::error!(target: "pid1", "uevent thread: {e}; devices that appear later get no driver");
        }
    }
    Some(Hotplug { loader })
}

/// Whether the arguments are the kernel's modprobe helper call: `-q -- NAME`.
pub fn is_modprobe_call(args: &[std::ffi::OsString]) -> bool {
    args.first().is_some_and(|a| a == "-q")
}

/// The kernel's modprobe helper: resolve each NAME (a module or an alias such as
/// `rtnl-link-bond`) and load it with its dependencies before returning, as the kernel waits.
/// Errors go to the kernel log, where the console shows them.
pub fn modprobe_main(args: &[std::ffi::OsString]) -> ExitCode {
    super::kmsg::init(log::LevelFilter::Info);
    let tables = match Tables::load() {
        Ok(t) => t,
        Err(e) => {
            log::error!(target: "modprobe", "{e}");
            return ExitCode::FAILURE;
        }
    };
    let mut ok = true;
    for name in args.iter().filter(|a| !a.to_string_lossy().starts_with('-')) {
        let name = name.to_string_lossy();
        let modules = tables.resolve(&name);
        if modules.is_empty() {
            // The kernel asks for many names nobody provides (a second netfilter family,
            // a crypto driver variant); that is not worth a console line.
            ok = false;
            continue;
        }
        for m in modules {
            if let Some(chain) = tables.chain(&m) {
                ok &= loader::load_now(&tables, &chain);
                log::info!(target: "modprobe", "{}: {m}", net::names::escape(&name, 80));
            }
        }
    }
    if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}
