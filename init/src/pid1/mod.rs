// SPDX-License-Identifier: Apache-2.0
//! Init mode: what keelson does as PID 1 of an initramfs.
//!
//! Early mounts, logging to `/dev/kmsg`, kernel modules, then the node loop (network, kubelet
//! supervision, reaping). Ctrl-alt-del (SIGINT once the kernel's own handling is off), SIGTERM
//! and SIGPWR stop the services and power the machine off. PID 1 never exits: if the loop
//! itself fails, it is logged and started again; a panic is written to the console first.

pub mod alias;
pub mod drivers;
pub mod features;
pub mod kmsg;
pub mod kofile;
pub mod loader;
pub mod modules;
pub mod mounts;
pub mod uevent;

use std::path::{Path, PathBuf};
use std::time::Duration;

use nix::sys::reboot::{reboot, set_cad_enabled, RebootMode};
use nix::sys::signal::{kill, Signal};
use nix::unistd::{sync, Pid};

use crate::fetch::{self, Origin};
use crate::node::{self, Ending};

/// How long services get to stop at shutdown.
const STOP_GRACE: Duration = Duration::from_secs(10);
/// Where PID 1 keeps state (config, leases, keys, identity). The initramfs is tmpfs; with a
/// state disk, the state thread keeps this directory on it too (see `crate::state`).
const STATE_DIR: &str = "/var/lib/keelson";
/// How long a reboot or power off waits for the last state write.
const FLUSH_GRACE: Duration = Duration::from_secs(5);
/// How long a reset waits for the state partition to be zeroed (16 MiB).
const WIPE_GRACE: Duration = Duration::from_secs(30);

/// Where a config fetched by URL or given inline is kept, so a restart of the node loop (and
/// a state partition, when there is one) finds it.
const KEPT_CONFIG: &str = "/var/lib/keelson/config.yaml";

/// The config file the node reads, and the URL to fetch it from first, as the command line
/// says.
fn config_source(parsed: &net::cmdline::CmdlineNetwork) -> (Option<PathBuf>, Option<String>) {
    let maintenance =
        "maintenance mode: the node waits for a configuration (`keelson apply-config --insecure`)";
    match fetch::origin(parsed.config_url.as_deref(), parsed.config_inline.as_deref()) {
        Origin::None => {
            log::info!(
                target: "pid1",
                "maintenance mode: no talos.config= on the kernel command line; the network comes from the command line and default DHCP, and the node waits for a configuration"
            );
            (None, None)
        }
        Origin::File(path) if path.is_file() => (Some(path), None),
        Origin::File(path) => {
            log::error!(
                target: "pid1",
                "talos.config={}: no such file in the image; {maintenance}",
                path.display()
            );
            (None, None)
        }
        Origin::Url(url) => (Some(PathBuf::from(KEPT_CONFIG)), Some(url)),
        Origin::Inline(text) => {
            if parsed.config_url.is_some() {
                log::info!(target: "pid1", "talos.config.inline= given: talos.config= is not fetched");
            }
            log::info!(
                target: "pid1",
                "config from talos.config.inline=: {} bytes, sha256 {}…",
                text.len(),
                fetch::sha256_prefix(text.as_bytes())
            );
            let kept = Path::new(KEPT_CONFIG);
            match crate::api::trial::write_back(kept, &text) {
                Ok(()) => (Some(kept.to_owned()), None),
                Err(e) => {
                    log::error!(target: "pid1", "talos.config.inline=: {e}; {maintenance}");
                    (None, None)
                }
            }
        }
        Origin::Refused(why) => {
            log::error!(target: "pid1", "{why}; {maintenance}");
            (None, None)
        }
    }
}

/// The entry point when keelson is PID 1. Never returns.
pub fn main() -> ! {
    std::panic::set_hook(Box::new(|info| kmsg::emergency(&format!("panic: {info}"))));
    let mut mount_failures = mounts::early();
    // The kernel rate-limits /dev/kmsg writers to 10 lines per 5 s by default; PID 1 owns the
    // console, so it lifts that (its own repeated lines are throttled at the source instead).
    if let Err(e) = std::fs::write("/proc/sys/kernel/printk_devkmsg", "on\n") {
        mount_failures.push(format!("printk_devkmsg: {e}"));
    }
    let cmdline = std::fs::read_to_string("/proc/cmdline").unwrap_or_default().trim().to_owned();
    let debug =
        cmdline.split_whitespace().any(|p| p == "keelson.debug" || p.starts_with("keelson.debug="));
    kmsg::init(if debug { log::LevelFilter::Debug } else { log::LevelFilter::Info });
    log::info!(target: "pid1", "keelson {} starting as PID 1", crate::machine::version());
    for f in mount_failures {
        log::warn!(target: "pid1", "{f}");
    }
    // The config's URL may carry a token in its query and an inline config keys.
    log::info!(target: "pid1", "cmdline: {}", fetch::url::redact_cmdline(&cmdline));
    // Ctrl-alt-del becomes SIGINT to us instead of an immediate reboot.
    if let Err(e) = set_cad_enabled(false) {
        log::warn!(target: "pid1", "cannot take over ctrl-alt-del: {e}");
    }
    let parsed = net::cmdline::parse(&cmdline);
    let hotplug = drivers::start(parsed.modules.clone());
    if !parsed.predictable_names {
        log::info!(target: "pid1", "net.ifnames=0: links keep their kernel names");
    }
    if let Err(e) = std::fs::create_dir_all(STATE_DIR) {
        log::warn!(target: "pid1", "{STATE_DIR}: {e}; nothing will be kept across restarts");
    }
    // Before the node loop: the stored config, leases and keys must be in place when DHCP and
    // KubeSpan start. The disks are waited for only while a storage device has a driver coming.
    let tables = modules::Tables::load().ok();
    let can_load: crate::state::CanLoad = Box::new(move |modalias| {
        tables.as_ref().is_some_and(|t| !t.aliases.lookup(modalias).is_empty())
    });
    // A stored config is the node's (nothing is fetched); only without one does the command
    // line count.
    let (config, config_url) = match crate::state::start(Path::new(STATE_DIR), can_load) {
        Some(stored) => (Some(stored), None),
        None => {
            let (config, url) = config_source(&parsed);
            if let Some(path) = config.as_ref().filter(|p| !p.starts_with(STATE_DIR)) {
                crate::state::follow_config(path.clone());
            }
            (config, url)
        }
    };
    let opts = node::Options {
        // A config applied in maintenance mode goes to the state directory.
        keep_config: Some(config.clone().unwrap_or_else(|| PathBuf::from(KEPT_CONFIG))),
        config,
        config_url,
        config_roots: fetch::client::DEFAULT_ROOTS.iter().map(PathBuf::from).collect(),
        cmdline,
        root: PathBuf::from("/"),
        hostname: true,
        once: false,
        set_clock: true,
        nts_ca: None,
        stop_grace: STOP_GRACE,
        api_socket: Some(PathBuf::from(crate::api::DEFAULT_SOCKET)),
        // `[::]` takes IPv4 too (bindv6only is 0 by default).
        api_listen: vec![std::net::SocketAddr::from((
            std::net::Ipv6Addr::UNSPECIFIED,
            crate::api::remote::DEFAULT_PORT,
        ))],
        api_max_connections: crate::api::server::MAX_CONNECTIONS,
        trustd_listen: vec![std::net::SocketAddr::from((
            std::net::Ipv6Addr::UNSPECIFIED,
            crate::api::remote::TRUSTD_PORT,
        ))],
        // A year, as Talos's trustd signs.
        trustd_cert_lifetime: None,
        // PID 1 serves metrics only where machine.metrics says.
        metrics_listen: None,
        state: Some(PathBuf::from(STATE_DIR)),
        hotplug,
        predictable_names: parsed.predictable_names,
    };
    loop {
        match node::run(&opts) {
            Ok(Ending::Stopped(sig)) => power_off(sig),
            Ok(Ending::Shutdown) => power_off(Signal::SIGTERM),
            Ok(Ending::Reboot) => restart(),
            Ok(Ending::Reset(r)) => reset(r),
            Ok(Ending::Kexec) => kexec(),
            Ok(Ending::Settled) => {}
            Err(e) => {
                log::error!(target: "pid1", "the node loop failed: {e}; starting it again in 5 s");
                // The loop is gone, so nothing else runs meanwhile: reap, then wait.
                while nix::sys::wait::waitpid(
                    Pid::from_raw(-1),
                    Some(nix::sys::wait::WaitPidFlag::WNOHANG),
                )
                .is_ok_and(|s| s != nix::sys::wait::WaitStatus::StillAlive)
                {}
                #[allow(clippy::disallowed_methods)] // The loop has ended; nothing else runs.
                std::thread::sleep(Duration::from_secs(5));
            }
        }
    }
}

/// Stop what is left, flush disks, power off. Never returns.
fn power_off(reason: Signal) -> ! {
    log::info!(target: "pid1", "{reason}: services stopped; terminating remaining processes");
    finish_processes();
    log::info!(target: "pid1", "power off");
    let err = reboot(RebootMode::RB_POWER_OFF).err();
    // Only reached if the kernel refused: stay alive, PID 1 must not exit.
    log::error!(target: "pid1", "reboot(RB_POWER_OFF) failed: {err:?}; halting here");
    loop {
        #[allow(clippy::disallowed_methods)] // Halted: the loop is gone, PID 1 must not exit.
        std::thread::sleep(Duration::from_secs(3600));
    }
}

/// A reboot asked through the API: as a power off, then `RB_AUTOBOOT`. Never returns.
fn restart() -> ! {
    log::info!(target: "pid1", "reboot requested: services stopped; terminating remaining processes");
    finish_processes();
    log::info!(target: "pid1", "reboot");
    let err = reboot(RebootMode::RB_AUTOBOOT).err();
    log::error!(target: "pid1", "reboot(RB_AUTOBOOT) failed: {err:?}; halting here");
    loop {
        #[allow(clippy::disallowed_methods)] // Halted: the loop is gone, PID 1 must not exit.
        std::thread::sleep(Duration::from_secs(3600));
    }
}

/// A reset asked through the API, once services stopped: wipe what it names, then reboot or
/// power off. Never returns. The next boot finds no stored config: maintenance mode.
fn reset(r: crate::machine::Reset) -> ! {
    if r.wipe.state {
        match crate::state::wipe(WIPE_GRACE) {
            Ok(()) => log::warn!(target: "pid1", "reset: the node's state is wiped"),
            Err(e) => log::error!(target: "pid1", "reset: the state could not be wiped: {e}"),
        }
    }
    if r.wipe.ephemeral {
        // etcd's data lives in RAM under PID 1: the reboot or power off ends it; emptied now
        // so nothing still running reads it.
        let data = Path::new(crate::etcd::DATA_DIR);
        if let Err(e) = crate::state::empty_dir(data) {
            log::error!(target: "pid1", "reset: {}: {e}", data.display());
        }
    }
    if r.reboot {
        restart()
    }
    power_off(Signal::SIGTERM)
}

/// An upgrade's kernel and initramfs are loaded and services stopped: boot them. Never
/// returns; if the kernel refuses, the machine reboots as for `Reboot`.
fn kexec() -> ! {
    log::info!(target: "pid1", "upgrade: services stopped; terminating remaining processes");
    finish_processes();
    log::info!(target: "pid1", "upgrade: booting the new kernel (kexec)");
    let err = reboot(RebootMode::RB_KEXEC).err();
    log::error!(target: "pid1", "reboot(RB_KEXEC) failed: {err:?}; rebooting instead");
    let err = reboot(RebootMode::RB_AUTOBOOT).err();
    log::error!(target: "pid1", "reboot(RB_AUTOBOOT) failed: {err:?}; halting here");
    loop {
        #[allow(clippy::disallowed_methods)] // Halted: the loop is gone, PID 1 must not exit.
        std::thread::sleep(Duration::from_secs(3600));
    }
}

/// The last state write, SIGTERM to every process, SIGKILL half a second later, then flush
/// disks.
fn finish_processes() {
    crate::state::flush(FLUSH_GRACE);
    let _ = kill(Pid::from_raw(-1), Signal::SIGTERM);
    #[allow(clippy::disallowed_methods)] // Shutting down after the loop ended: the grace to exit.
    std::thread::sleep(Duration::from_millis(500));
    let _ = kill(Pid::from_raw(-1), Signal::SIGKILL);
    sync();
}
