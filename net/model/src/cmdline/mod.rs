// SPDX-License-Identifier: Apache-2.0
//! The kernel command line: what it asks of the network (docs/talos.md: Kernel command line), and
//! the layer-`cmdline` specs that follow from it.
//!
//! [`parse`] never fails. Every rejected entry becomes one [`CmdlineError`] with the column of the
//! offending field, and only that entry is skipped; Talos instead drops all cmdline networking on
//! the first bad entry (docs/talos.md: Kernel command line), which silently turns a typo into DHCP.
//! [`to_specs`] then turns the result into specs, resolving link names through a
//! [`LinkView`](crate::resource::LinkView).
//!
//! Parameters understood (anything else outside `talos.*`/`keelson.*` is ignored silently):
//!
//! | parameter | grammar |
//! |---|---|
//! | `ip=` (repeatable) | kernel nfsroot and dracut forms, see the `ip` module |
//! | `bond=` (repeatable) | `<name>[:<slaves>[:<options>[:<mtu>]]]`, see the `bond` module |
//! | `vlan=` (repeatable) | `<name>:<link>`, see the `vlan` module |
//! | `talos.hostname=` | FQDN; the first valid one wins over any `ip=` hostname |
//! | `talos.network.interface.ignore=` (repeatable) | a link name |
//! | `talos.config=` | config URL (first one) |
//! | `talos.platform=` | accepted and ignored here |
//! | `BOOTIF=` | `01-` and the MAC the firmware booted from (pxelinux, dracut); reported, not used for links |
//! | `keelson.image=` | the image name a network boot served (keelson-operator's version); reported |
//! | `keelson.debug` | flag (`=0`/`=1` style values also accepted) |
//! | `keelson.modules=` (repeatable) | comma-separated module names, loaded at boot |
//! | `net.ifnames=` | `0` keeps kernel link names (no predictable renaming) |
//!
//! Tokenizing follows the kernel (quotes, `--`), see the `tokenize` module.
//!
//! keelson choices, where Talos or the kernel left room:
//! * Bare `ip=off`/`ip=none` sets [`CmdlineNetwork::default_dhcp4`] to false: no default DHCP
//!   on unconfigured links (Talos fails the whole parse). Bare `ip=dhcp`/`on`/`any` is a
//!   no-op and does not undo an `ip=off`; bare `ip=dhcp6` sets
//!   [`CmdlineNetwork::default_dhcp6`]; bare `ip=auto6` is accepted and does nothing (the
//!   kernel does SLAAC); bare `ip=static` is an error (nothing to configure).
//! * `ip=<dev>:off`, `ip=<dev>:auto6` and autoconf lists (`dhcp,dhcp6`) are accepted.
//! * Several `bond=` and `vlan=` entries are allowed (Talos uses only the first of each).
//! * Several `ip=` entries may name one link; they share its LinkSpec and must agree on MTU
//!   and MAC. Routes get metrics 1024, 1025, ... by entry position.
//! * Validation is stricter than Talos: the server field must be an IP, gateway and netmask
//!   must match the client's family, masks must be contiguous, MTUs lie in 68..=65535,
//!   MACs are 6-octet unicast, hostnames contain no blanks, and bond option values must be
//!   known names or integers in range. Duplicate `talos.hostname=`/`talos.config=` give a
//!   warning and the first stays.
//! * A link may be a slave of one bond only, and a `bond=`/`vlan=` may not redefine a link an
//!   earlier one created; the later entry is the one rejected.
//! * Unknown `talos.*`/`keelson.*` keys and an unterminated quote are warnings, not errors.

mod bond;
mod field;
mod ip;
mod network;
mod parser;
mod specs;
mod tokenize;
mod vlan;

#[cfg(test)]
mod tests;

pub use network::{CmdlineError, CmdlineNetwork, LinkConfig};
pub use specs::to_specs;

/// Parse a whole kernel command line. Never fails: problems land in
/// [`CmdlineNetwork::errors`] (skipped entries) and [`CmdlineNetwork::warnings`].
pub fn parse(cmdline: &str) -> CmdlineNetwork {
    parser::Parser::run(cmdline)
}
