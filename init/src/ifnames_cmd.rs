// SPDX-License-Identifier: Apache-2.0
//! `keelson ifnames [LINK...]`: the predictable names keelson computes for this machine's
//! links from sysfs, next to the candidates (`onboard`, `slot`, `path`), in the form of
//! `udevadm test-builtin net_id` so the two can be compared on the same hardware.

use std::path::Path;
use std::process::ExitCode;

use net::host::sysfs_net;
use net::ifnames::{candidates, predictable_name};

/// Entry point.
pub fn main(args: Vec<std::ffi::OsString>) -> ExitCode {
    let sys = Path::new("/sys");
    let mut names: Vec<String> = args.iter().map(|a| a.to_string_lossy().into_owned()).collect();
    if names.is_empty() {
        names = std::fs::read_dir(sys.join("class/net"))
            .map(|rd| rd.flatten().map(|e| e.file_name().to_string_lossy().into_owned()).collect())
            .unwrap_or_default();
        net::sort::ascending(&mut names);
    }
    for name in names {
        let shown = net::names::escape(&name, 32);
        let info = sysfs_net::device_info(sys, &name);
        let Some(facts) = sysfs_net::pci_facts(sys, &name) else {
            println!("{shown}: no predictable name (not Ethernet on PCI)");
            continue;
        };
        let c = candidates(&facts);
        println!(
            "{shown}: {} (bus {}, pci {}, driver {})",
            predictable_name(&facts).unwrap_or_else(|| "-".into()),
            info.bus_path,
            info.pci_id,
            info.driver
        );
        for (key, value) in [("ONBOARD", c.onboard), ("SLOT", c.slot), ("PATH", c.path)] {
            if let Some(v) = value {
                println!("  ID_NET_NAME_{key}={v}");
            }
        }
    }
    ExitCode::SUCCESS
}
