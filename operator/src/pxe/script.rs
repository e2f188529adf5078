// SPDX-License-Identifier: Apache-2.0
//! The iPXE scripts the boot service hands out (pure). See
//! <https://ipxe.org/scripting> and <https://ipxe.org/cmd>.

use super::mac::Mac;
use super::machines::{valid_cmdline, Machine};

/// The script for a known machine: its version's kernel and initramfs from `base` (the
/// service's URL, no trailing slash), its kernel arguments, and `talos.config=` when the
/// operator holds a configuration for it (without one Talos starts in maintenance mode).
/// `initrd=initramfs` names the initrd for kernels booted through the EFI stub.
/// `BOOTIF=01-aa-bb-…` (pxelinux's and dracut's form) and `keelson.image=VERSION` let the node
/// report which NIC it booted from and what it was served, so the operator knows the machine
/// that answers is the one it booted (and at which version).
pub fn boot(base: &str, m: &Machine) -> String {
    let v = &m.version;
    let bootif = m.mac.to_string().replace(':', "-");
    let mut args = format!("BOOTIF=01-{bootif} keelson.image={v}");
    // The table only stores valid arguments; checked again because the table is a trait.
    if valid_cmdline(&m.cmdline) && !m.cmdline.trim().is_empty() {
        args.push(' ');
        args.push_str(m.cmdline.trim());
    }
    if m.has_config {
        args.push_str(&format!(" talos.config={base}/config/{}", m.mac));
    }
    format!(
        "#!ipxe\n\
         echo keelson-operator: {mac} boots {v}\n\
         kernel {base}/images/{v}/vmlinuz initrd=initramfs {args}\n\
         initrd --name initramfs {base}/images/{v}/initramfs\n\
         boot\n",
        mac = m.mac,
    )
}

/// The script for a MAC the service does not know (or cannot boot): say so and return to
/// the firmware, which tries its next boot device.
pub fn refuse(mac: Option<&Mac>, why: &str) -> String {
    let who = mac.map_or_else(|| "this machine".to_owned(), ToString::to_string);
    // `why` is ours, but keep the script one command per line whatever it holds.
    let why: String = why.chars().filter(|c| !c.is_control() && *c != '$').collect();
    format!("#!ipxe\necho keelson-operator: {who}: {why}\nexit\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(cmdline: &str, has_config: bool) -> Machine {
        Machine {
            mac: Mac::parse("52:54:00:12:34:56").unwrap(),
            version: "v1".into(),
            cmdline: cmdline.into(),
            has_config,
        }
    }

    #[test]
    fn a_known_machine_boots_its_version_with_its_args_and_config() {
        let s = boot("http://10.0.2.2:8080", &m("console=ttyS0", true));
        assert_eq!(
            s,
            "#!ipxe\n\
             echo keelson-operator: 52:54:00:12:34:56 boots v1\n\
             kernel http://10.0.2.2:8080/images/v1/vmlinuz initrd=initramfs \
             BOOTIF=01-52-54-00-12-34-56 keelson.image=v1 console=ttyS0 \
             talos.config=http://10.0.2.2:8080/config/52:54:00:12:34:56\n\
             initrd --name initramfs http://10.0.2.2:8080/images/v1/initramfs\n\
             boot\n"
        );
        let s = boot("http://h", &m("", false));
        assert!(
            s.contains(
                "kernel http://h/images/v1/vmlinuz initrd=initramfs \
                 BOOTIF=01-52-54-00-12-34-56 keelson.image=v1\n"
            ),
            "{s}"
        );
        assert!(!s.contains("talos.config"));
    }

    #[test]
    fn bad_args_are_left_out_and_refusals_exit() {
        let s = boot("http://h", &m("x\nshell", false));
        assert!(!s.contains("shell"), "{s}");
        let r = refuse(None, "unknown MAC\nshell ${x}");
        assert_eq!(r, "#!ipxe\necho keelson-operator: this machine: unknown MACshell {x}\nexit\n");
    }
}
